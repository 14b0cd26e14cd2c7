/**
 * Attempt budgets that hold under concurrency: an attempt is *reserved* before the work it
 * guards (a bcrypt verification, a key check) and only then evaluated, so at most `max`
 * attempts per key and window are ever evaluated, however many arrive at once. A
 * reservation may be released afterwards (a successful login gives its attempt back), so
 * the budget counts failures only.
 *
 * `AttemptStore` is the seam for a shared store: the in-memory store below serves one
 * process; src/plugins/redis-attempts.ts keeps the counts in Redis for several (REDIS_URL).
 * A store that fails (Redis down) fails closed: the budget answers 503 with Retry-After.
 */
import { ServiceUnavailable } from './problem.js'

/** What a budget throws when its store does not answer (seconds a client should wait). */
export const STORE_RETRY_AFTER_S = 5

export interface Reservation {
  key: string
  /** Start of the window the attempt was counted in (ms since the epoch). */
  windowStart: number
}

export type ReserveResult =
  | { allowed: true, reservation: Reservation }
  | { allowed: false, /** ms until the window ends */ retryAfterMs: number }

/**
 * A shared store answers with promises; the in-memory one answers at once, so that a
 * check between its `reserve` and `release` (the admin key's) leaves no gap in which
 * concurrent requests could see each other's reservations.
 */
export interface AttemptStore {
  /** Counts one attempt for `key` if fewer than `max` are counted in its current window; atomic. */
  reserve: (key: string, max: number, windowMs: number) => ReserveResult | Promise<ReserveResult>
  /** Gives a reserved attempt back (a no-op once its window has ended). */
  release: (reservation: Reservation) => void | Promise<void>
}

interface Window { start: number, end: number, count: number }

/**
 * One process's store: a Map of windows, bounded to `maxKeys` entries; when full, the
 * windows that end first are dropped (an attacker who floods more names than that can
 * make a counter forget; the per-client limits make that slow). Use one store per window
 * length.
 */
export class MemoryAttemptStore implements AttemptStore {
  private readonly windows = new Map<string, Window>()

  constructor (private readonly maxKeys = 50_000, private readonly now: () => number = Date.now) {}

  reserve (key: string, max: number, windowMs: number): ReserveResult {
    // Synchronous: check and count happen in one step.
    const now = this.now()
    let window = this.windows.get(key)
    if (window === undefined || window.end <= now) {
      if (window !== undefined) this.windows.delete(key)
      window = { start: now, end: now + windowMs, count: 0 }
      this.makeRoom()
      this.windows.set(key, window)
    }
    if (window.count >= max) return { allowed: false, retryAfterMs: window.end - now }
    window.count++
    return { allowed: true, reservation: { key, windowStart: window.start } }
  }

  release (reservation: Reservation): void {
    const window = this.windows.get(reservation.key)
    if (window !== undefined && window.start === reservation.windowStart && window.count > 0) window.count--
  }

  /** Live keys (for tests and metrics). */
  get size (): number {
    return this.windows.size
  }

  private makeRoom (): void {
    // Map iteration is in insertion order, and a window is (re)inserted when it starts: with
    // one window length per store, the first entries are the ones that end first (ended
    // ones, then the oldest live ones).
    for (const key of this.windows.keys()) {
      if (this.windows.size < this.maxKeys) break
      this.windows.delete(key)
    }
  }
}

export interface BudgetOptions {
  /** Attempts per key and window. */
  max: number
  /** The window, in ms. */
  timeWindow: number
  /** The 429 to throw when a key's budget is used up, given the seconds until it renews. */
  refusal: (retryAfterSeconds: number) => Error
  store?: AttemptStore
}

/** A budget of attempts per key, over an AttemptStore, that answers 429 with Retry-After when used up. */
export interface Budget {
  /** Reserves one attempt for this key, or throws the refusal (and sets Retry-After) when none is left. */
  spend: (key: string, reply: { header: (name: string, value: string) => unknown }) => Promise<Reservation>
  /** Gives an attempt back (it succeeded, and only failures should count). */
  release: (reservation: Reservation) => Promise<void>
}

export function budget (options: BudgetOptions): Budget {
  const store = options.store ?? new MemoryAttemptStore()
  return {
    async spend (key, reply) {
      let result: ReserveResult
      try {
        result = await store.reserve(key, options.max, options.timeWindow)
      } catch {
        throw storeUnavailable(reply)
      }
      if (result.allowed) return result.reservation
      const seconds = Math.max(1, Math.ceil(result.retryAfterMs / 1000))
      reply.header('retry-after', String(seconds))
      throw options.refusal(seconds)
    },
    async release (reservation) {
      // A failed release (the store went down meanwhile) leaves the attempt counted: the
      // budget errs towards refusing, and the request that succeeded still succeeds.
      try {
        await store.release(reservation)
      } catch {}
    }
  }
}

/**
 * The 503 a budget answers when its store fails: limits that cannot be counted are not
 * skipped (a brute-force attempt must not get through while Redis is down).
 */
export function storeUnavailable (reply: { header: (name: string, value: string) => unknown }): Error {
  reply.header('retry-after', String(STORE_RETRY_AFTER_S))
  // No `cause`: a socket error there would read as "the database is down" to the error
  // handler. The Redis client logs its own failures (src/plugins/redis.ts).
  return new ServiceUnavailable('The limits store is unavailable; retry later')
}
