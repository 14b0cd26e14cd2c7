/**
 * How a new session reaches the client: in the body (token mode) or in cookies (cookie mode).
 * Either way the answer carries credentials: `Cache-Control: no-store` (set by the cookies in
 * cookie mode) keeps it out of every cache, shared or the browser's own.
 */
import type { FastifyReply } from 'fastify'
import { NO_STORE, type SessionCookies } from './cookies.js'
import type { SessionModeValue, SessionResultBody } from './schemas.js'
import type { IssuedSession } from './service.js'

export function deliverSession (reply: FastifyReply, cookies: SessionCookies, issued: IssuedSession, mode: SessionModeValue, expiresIn: string): SessionResultBody {
  const common = { expiresIn, expiresAt: issued.accessExpiresAt, userId: issued.userId, refreshTokenExpiresAt: issued.refreshExpiresAt }
  if (mode === 'cookie') {
    cookies.set(reply, issued)
    return { mode, ...common }
  }
  reply.header('cache-control', NO_STORE)
  return { mode, token: issued.accessToken, tokenType: 'Bearer', ...common, refreshToken: issued.refreshToken }
}
