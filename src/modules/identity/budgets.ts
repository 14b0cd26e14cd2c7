/**
 * The budgets of sign-in, on AttemptStores (src/lib/attempts.ts): the account's budget of
 * password and code guesses (`accountLimiter`) and the client's budgets (`clientBudget`).
 *
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
import { normalizeIP } from '@fastify/rate-limit'
import type { FastifyReply, FastifyRequest } from 'fastify'
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

/**
 * The per-client budgets, each its own count a minute per client address (the key as
 * @fastify/rate-limit forms it: IPv6 grouped by /64):
 * - `authBudget`, RATE_LIMIT_AUTH_MAX: the requests that cost a bcrypt computation:
 *   registration (POST /api/user and POST /api/auth/register), login, the password reset's
 *   two routes, and the changes that check the current password (PATCH /api/user/:id with
 *   `currentPassword`, DELETE /api/user/:id, the factor changes that need it). One count for
 *   all of them: the README's "20 a minute" is the total, not 20 per route.
 * - `secondStepBudget`, RATE_LIMIT_SECOND_STEP_MAX: the attempts that complete a sign-in
 *   without a password (a code or a passkey after the password, a passkey alone). Their
 *   own count, so that a user's tries at a code never use up their logins; a wrong code
 *   also spends a guess of the account's budget (`accountLimiter`).
 * The passkey options (the challenges a page asks for when it loads) spend neither: each
 * live challenge is bounded per client address where it is stored (challenges.ts,
 * CHALLENGES_PER_CLIENT), so a page that asks on every visit never locks its user out.
 *
 * On an AttemptStore (src/lib/attempts.ts) rather than @fastify/rate-limit's route limits:
 * those keep one store per route, and its in-memory store hands every concurrent request
 * the same mutable counter, read after an await, so requests sent at once all see the
 * last count (four at once with three left: four 429s).
 */
/** The window of the budgets, in ms: a budget per minute reads as a rate ("20 a minute"). */
export const AUTH_WINDOW_MS = 60_000

export interface ClientBudgetOptions {
  /** Requests per client address per AUTH_WINDOW_MS. */
  max: number
  store?: AttemptStore
}

const TooManyRequests = createError('RATE_LIMITED', 'Too many requests; retry in %d s', 429)

/** Spends one request of the client's budget, or throws 429 (with Retry-After) when it is used up. */
export type AuthBudget = (request: FastifyRequest, reply: FastifyReply) => Promise<void>

export function clientBudget (options: ClientBudgetOptions): AuthBudget {
  const requests = budget({ max: options.max, timeWindow: AUTH_WINDOW_MS, store: options.store, refusal: (seconds) => new TooManyRequests(seconds) })
  return async (request, reply) => { await requests.spend(`client:${normalizeIP(request.ip)}`, reply) }
}
