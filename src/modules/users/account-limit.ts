/**
 * Per-account limit on password guesses, on top of the per-client limit of the auth
 * routes: at most `loginFailuresMax` guesses at one account's password are *evaluated* per
 * `loginFailuresWindowMs`, whichever clients send them and however many arrive at once; past that, 429 with
 * Retry-After until the window ends, even for the right password. A guess is reserved
 * atomically before its bcrypt work (src/lib/attempts.ts) and given back when it is right,
 * so only failures use the budget: a user who logs in often is never limited.
 *
 * One account, one counter: the key is the account's id, whichever spelling of its
 * username or e-mail was sent (citext compares under the database's collation, where `İ`
 * may fold to `i`); a name that names no account is keyed on the database's folding of it
 * (`lower(name::text)`), so all its spellings share one counter too, and unknown names are
 * limited exactly like real ones. Login (POST /api/auth/login) and the current-password
 * checks of PATCH and DELETE /api/user/:id take guesses from the same budget.
 * Trade-offs (docs/reliability.md, "Brute force"): anyone can lock an account out for one
 * window by failing its logins on purpose; the counters live in this process's memory
 * unless another AttemptStore is given.
 */
import createError from '@fastify/error'
import type { FastifyReply } from 'fastify'
import { budget, type AttemptStore, type Reservation } from '../../lib/attempts.js'

export interface AccountLimitOptions {
  /** Password guesses evaluated per account and window (failures; a right guess is given back): LOGIN_FAILURES_MAX. */
  loginFailuresMax: number
  /** The window, in ms (LOGIN_FAILURES_WINDOW_MS). */
  loginFailuresWindowMs: number
}

const TooManyFailedLogins = createError('RATE_LIMITED', 'Too many failed logins for this account; retry in %d s', 429)

/** The counter key of a login: the account when there is one, else the folded name. */
export function accountKey (account: { folded: string, credentials: { id: number } | null }): string {
  return account.credentials === null ? `name:${account.folded}` : `user:${account.credentials.id}`
}

export interface AccountLimiter {
  /** Reserves one guess for this key, or throws a 429 (and sets Retry-After) when none is left. */
  reserve: (key: string, reply: FastifyReply) => Promise<Reservation>
  /** Gives a guess back: it was right. */
  release: (reservation: Reservation) => Promise<void>
}

export function accountLimiter (options: AccountLimitOptions, store?: AttemptStore): AccountLimiter {
  const guesses = budget({ max: options.loginFailuresMax, timeWindow: options.loginFailuresWindowMs, store, refusal: (seconds) => new TooManyFailedLogins(seconds) })
  return { reserve: guesses.spend, release: guesses.release }
}
