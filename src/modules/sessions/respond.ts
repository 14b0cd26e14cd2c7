/** How a new session reaches the client: in the body (token mode) or in cookies (cookie mode). */
import type { FastifyReply } from 'fastify'
import type { SessionCookies } from './cookies.js'
import type { SessionModeValue, SessionResultBody } from './schemas.js'
import type { IssuedSession } from './service.js'

export function deliverSession (reply: FastifyReply, cookies: SessionCookies, issued: IssuedSession, mode: SessionModeValue, expiresIn: string): SessionResultBody {
  const common = { mode, expiresIn, expiresAt: issued.accessExpiresAt, userId: issued.userId, refreshTokenExpiresAt: issued.refreshExpiresAt }
  if (mode === 'cookie') {
    cookies.set(reply, issued)
    return common
  }
  return { ...common, token: issued.accessToken, tokenType: 'Bearer', refreshToken: issued.refreshToken }
}
