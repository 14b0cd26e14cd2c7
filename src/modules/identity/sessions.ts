/**
 * Sessions: a login starts one (an access token carrying its id, `sid`, and a refresh
 * token); a refresh rotates the refresh token and issues a new access token; logout or a
 * reused refresh token revokes it. The access token is checked against the session on
 * every request (authenticate.ts), so revocation is immediate. Access tokens are signed here
 * with the claims authenticate.ts checks: `sub` (the user), `ver` (their token version) and
 * `sid` (the session).
 */
import createError from '@fastify/error'
import type { JWT } from '@fastify/jwt'
import { Unauthorized } from '../../lib/problem.js'
import type { SecurityActivity } from './activity.js'
import type { Device, SessionsRepository } from './repository.js'
import { hashRefreshToken, isRefreshTokenShaped, newRefreshToken } from './tokens.js'

/** Unknown, malformed, expired refresh token, or one of an ended session. */
const InvalidRefreshToken = createError('INVALID_REFRESH_TOKEN', '%s', 401)
/** A refresh token presented a second time: the whole session has been revoked. */
const RefreshTokenReused = createError('REFRESH_TOKEN_REUSED', 'This refresh token was already used; the session has been revoked (log in again)', 401)
/** A refresh sooner than REFRESH_MIN_INTERVAL_MS after the session's previous one (or its login); `Retry-After` says when. */
const RefreshTooSoon = createError<[number]>('RATE_LIMITED', 'This session refreshed too recently; retry in %d s (the refresh token is still valid)', 429)

/** How a session was signed in, as `sessions.methods` stores it (the API's names: `apiMethods`, factors.ts). */
export type SignInMethod = 'password' | 'totp' | 'recovery-code' | 'passkey'

/** A stored method as the API's newer answers name it (sessions and activity: no former name to keep). */
export const methodName = (method: string): string => method === 'recovery-code' ? 'recoveryCode' : method

/** The longest User-Agent kept with a session: real ones are a few hundred characters. */
const USER_AGENT_MAX = 512

/** Where a request comes from, as a session keeps it. */
export function deviceOf (request: { headers: { 'user-agent'?: string }, ip: string }): Device {
  return { userAgent: request.headers['user-agent']?.slice(0, USER_AGENT_MAX) ?? null, ip: request.ip }
}

export interface IssuedSession {
  sessionId: string
  userId: number
  accessToken: string
  accessExpiresAt: Date
  /** The access token's lifetime, s. */
  accessExpiresIn: number
  refreshToken: string
  refreshExpiresAt: Date
}

export interface SessionsServiceDependencies {
  sessions: SessionsRepository
  /** @fastify/jwt's signer, HS256 with ACCESS_TOKEN_TTL (plugin.ts). */
  jwt: Pick<JWT, 'sign' | 'decode'>
  /** Lifetime of a refresh token, in ms. */
  refreshTtlMs: number
  /** The account's security activity: a session started is a sign-in, or the one a new password hands out. */
  activity: Pick<SecurityActivity, 'record'>
}

const REFUSALS = {
  unknown: 'The refresh token is not one this service issued',
  expired: 'The refresh token has expired; log in again',
  ended: 'The session has ended (logout or password change); log in again'
} as const

export function sessionsService (options: SessionsServiceDependencies) {
  const { sessions, jwt } = options

  async function issue (sessionId: string, user: { id: number, tokenVersion: number }, refresh: { token: string }, refreshExpiresAt: Date): Promise<IssuedSession> {
    const accessToken = jwt.sign({ sub: String(user.id), ver: user.tokenVersion, sid: sessionId })
    const { exp, iat } = jwt.decode<{ exp: number, iat: number }>(accessToken)!
    return { sessionId, userId: user.id, accessToken, accessExpiresAt: new Date(exp * 1000), accessExpiresIn: exp - iat, refreshToken: refresh.token, refreshExpiresAt }
  }

  return {
    /** A new session for a user who has just signed in with `methods` (or changed their password: `kind`), from `device`. */
    async start (user: { id: number, tokenVersion: number }, methods: SignInMethod[], device: Device, kind: 'sign-in' | 'password-changed' = 'sign-in'): Promise<IssuedSession> {
      const refresh = newRefreshToken()
      const expiresAt = new Date(Date.now() + options.refreshTtlMs)
      const sessionId = await sessions.create(user, refresh.hash, expiresAt, methods, device)
      // The account was deleted while its password was being checked.
      if (sessionId === undefined) throw new Unauthorized('The user no longer exists')
      await options.activity.record(user.id, kind, device, kind === 'sign-in' ? methods.map(methodName).join('+') : null)
      return await issue(sessionId, user, refresh, expiresAt)
    },

    /**
     * Rotates a refresh token: new access and refresh tokens, the old one used up. A token
     * presented twice revokes its session (both holders must log in again): 401. A session
     * that rotated less than REFRESH_MIN_INTERVAL_MS ago: 429, the token still valid.
     */
    async refresh (token: string): Promise<IssuedSession> {
      if (!isRefreshTokenShaped(token)) throw new InvalidRefreshToken(REFUSALS.unknown)
      const next = newRefreshToken()
      const expiresAt = new Date(Date.now() + options.refreshTtlMs)
      const result = await sessions.rotate(hashRefreshToken(token), next.hash, expiresAt)
      if (result === 'reused') throw new RefreshTokenReused()
      if (typeof result === 'string') throw new InvalidRefreshToken(REFUSALS[result])
      if ('tooSoon' in result) throw Object.assign(new RefreshTooSoon(result.tooSoon), { retryAfterSeconds: result.tooSoon })
      return await issue(result.sessionId, { id: result.userId, tokenVersion: result.tokenVersion }, next, expiresAt)
    },

    /** Ends a session: its access token and refresh tokens stop working at once. */
    async logout (sessionId: string): Promise<void> {
      await sessions.revoke(sessionId)
    },

    list: sessions.list,
    endOwn: sessions.endOwn,
    endOthers: sessions.endOthers
  }
}

export type SessionsService = ReturnType<typeof sessionsService>
