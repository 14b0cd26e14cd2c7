/** Errors of the session routes (docs/api.md, "Errors"). */
import createError from '@fastify/error'

/** Unknown, malformed, expired refresh token, or one of an ended session. */
export const InvalidRefreshToken = createError('INVALID_REFRESH_TOKEN', '%s', 401)
/** A refresh token presented a second time: the whole session has been revoked. */
export const RefreshTokenReused = createError('REFRESH_TOKEN_REUSED', 'This refresh token was already used; the session has been revoked (log in again)', 401)
/** A refresh sooner than REFRESH_MIN_INTERVAL_MS after the session's previous one (or its login); `Retry-After` says when. */
export const RefreshTooSoon = createError<[number]>('RATE_LIMITED', 'This session refreshed too recently; retry in %d s (the refresh token is still valid)', 429)
