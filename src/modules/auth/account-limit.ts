/**
 * Per-account limit on failed logins, on top of the per-client limit of the login route:
 * after `max` failed logins for one login name within `timeWindow` ms, further logins
 * for that name answer 429 with Retry-After until the window ends, whichever client
 * sends them and whatever the password. Only failures count, so a user who logs in often
 * is never limited. Built on @fastify/rate-limit's manual limiter (its bounded LRU store,
 * peeked without consuming: `{ increment: false }`).
 *
 * The key is the login name as sent, lower-cased (usernames and e-mails are
 * case-insensitive); unknown names are limited exactly like real ones, so the limit does
 * not tell whether an account exists. Trade-offs (docs/reliability.md): anyone can lock
 * an account out for one window by failing its logins on purpose; the username and the
 * e-mail of one account are two keys; the counters live in this process's memory.
 */
import '@fastify/rate-limit'
import createError from '@fastify/error'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'

export interface AccountLimitOptions {
  /** Failed logins allowed per login name and window. */
  max: number
  /** The window, in ms. */
  timeWindow: number
}

export const DEFAULT_ACCOUNT_LIMIT: AccountLimitOptions = { max: 10, timeWindow: 15 * 60_000 }

export const TooManyFailedLogins = createError('RATE_LIMITED', 'Too many failed logins for this account; retry in %d s', 429)

/** The login name a login request names (its body has been validated). */
function loginName (request: FastifyRequest): string {
  const body = request.body as { username?: string, identity?: string }
  return `login:${(body.username ?? body.identity ?? '').toLowerCase()}`
}

export function accountLimiter (app: FastifyInstance, options: AccountLimitOptions) {
  const limiter = app.createRateLimit({ max: options.max, timeWindow: options.timeWindow, keyGenerator: loginName })
  return {
    /** Throws a 429 (and sets Retry-After) when this login name has used up its failures. */
    async check (request: FastifyRequest, reply: FastifyReply): Promise<void> {
      const status = await limiter(request, { increment: false })
      if (!status.isAllowed && status.remaining === 0 && status.ttl > 0) {
        reply.header('retry-after', String(status.ttlInSeconds))
        throw new TooManyFailedLogins(status.ttlInSeconds)
      }
    },
    /** Counts one failed login for this login name. */
    async recordFailure (request: FastifyRequest): Promise<void> {
      await limiter(request)
    }
  }
}
