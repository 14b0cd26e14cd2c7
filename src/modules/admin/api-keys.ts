/**
 * The admin API keys (ADMIN_API_KEYS) and the key-auth options that check them. Keys are
 * sent as `Authorization: Bearer <key>`; every configured key is valid, so a key can be
 * rotated without downtime (add the new one, move clients over, remove the old one).
 * Refusals leave as problem details like every other error of the service, with the
 * key-auth's texts (packages/key-auth/README.md, "Errors") as their detail.
 */
import createError from '@fastify/error'
import { normalizeIP } from '@fastify/rate-limit'
import { parseApiKeys } from '../../lib/api-keys.js'
import { MemoryAttemptStore, STORE_RETRY_AFTER_S, type AttemptStore, type ReserveResult } from '../../lib/attempts.js'
import { ServiceUnavailable, type ProblemCode } from '../../lib/problem.js'
import {
  createKeySet,
  KeyAuthInvalidKeyError,
  KeyAuthMissingOrMalformedError,
  type KeyAuthPluginOptions
} from '@user-product-service/key-auth'

const TooManyWrongKeys = createError('RATE_LIMITED', 'Too many wrong API keys from this client; retry in %d s', 429)

/** The OpenAPI security scheme of the admin routes, and the requirement they declare. */
export const adminApiKeyScheme = {
  type: 'http',
  scheme: 'bearer',
  description: 'An admin API key, one of ADMIN_API_KEYS: `Authorization: Bearer <key>`'
} as const
export const adminApiKey = [{ adminApiKey: [] }]

/**
 * What an admin route answers of its key: none (API_KEY_MISSING), a wrong one (API_KEY_INVALID),
 * too many wrong ones from this client (RATE_LIMITED). The client codes of key-auth's refusals
 * come from the error handler's map (KNOWN_CODES in src/plugins/error-handler.ts).
 */
export const ADMIN_KEY = ['API_KEY_MISSING', 'API_KEY_INVALID', 'RATE_LIMITED'] as const satisfies readonly ProblemCode[]

/**
 * Wrong keys per client address per window; past that, 429 with Retry-After. An operator
 * pastes a key, a script holds one: ten mistakes in a quarter of an hour is never a person,
 * while a guesser gets 40 guesses an hour at a key of 128 bits.
 */
export const KEY_FAILURES_MAX = 10
/** The window of KEY_FAILURES_MAX, in ms. */
export const KEY_FAILURES_WINDOW_MS = 15 * 60_000

export interface KeyFailureLimit {
  /** KEY_FAILURES_MAX unless a test sets it. */
  max?: number
  /** KEY_FAILURES_WINDOW_MS unless a test sets it. */
  timeWindow?: number
  store?: AttemptStore
}

/**
 * Key-auth options for the admin routes and /metrics. With no keys configured, every request
 * is refused (adminRoutes warns of it once, as these options are built once per guarded scope).
 * Wrong keys are limited per client: each key check first reserves an attempt on the
 * client's budget (`failures`), and a right key gives it back at once, so only wrong keys
 * use it, at most `max` keys are ever checked per window however concurrent, and a right
 * key costs nothing more. Past the budget every request from that client is a 429 with
 * Retry-After until the window ends, also with the right key (otherwise the 200 would
 * still tell a right guess). A missing key is not a guess and is not counted.
 */
export function adminKeyAuthOptions (adminApiKeys: string, failures: KeyFailureLimit): KeyAuthPluginOptions {
  const keys = parseApiKeys(adminApiKeys)
  const keySet = keys.length === 0 ? undefined : createKeySet(keys)
  const store = failures.store ?? new MemoryAttemptStore()
  const max = failures.max ?? KEY_FAILURES_MAX
  const timeWindow = failures.timeWindow ?? KEY_FAILURES_WINDOW_MS
  return {
    keyLookup: 'header:Authorization',
    authScheme: 'Bearer',
    validator: async (request, key) => {
      let result: ReserveResult
      try {
        const reserved = store.reserve(`client:${normalizeIP(request.ip)}`, max, timeWindow)
        result = reserved instanceof Promise ? await reserved : reserved
      } catch {
        // The shared store is down: fail closed (no key is checked uncounted).
        throw Object.assign(new ServiceUnavailable('The limits store is unavailable; retry later'), { retryAfterSeconds: STORE_RETRY_AFTER_S })
      }
      if (!result.allowed) {
        const seconds = Math.max(1, Math.ceil(result.retryAfterMs / 1000))
        throw Object.assign(new TooManyWrongKeys(seconds), { retryAfterSeconds: seconds })
      }
      // The in-memory store answered at once: reserve, check and release are one step.
      const valid = keySet?.has(key) === true
      // A failed release leaves the attempt counted; the right key is still accepted.
      if (valid) await Promise.resolve(store.release(result.reservation)).catch(() => {})
      return valid
    },
    // Throwing hands the error to the service's error handler: problem details.
    errorHandler: (_request, reply, error) => {
      if (error instanceof TooManyWrongKeys || error instanceof ServiceUnavailable) {
        reply.header('retry-after', String((error as unknown as { retryAfterSeconds: number }).retryAfterSeconds))
        throw error
      }
      // The error handler answers key-auth's refusals as API_KEY_MISSING and API_KEY_INVALID.
      if (error instanceof KeyAuthMissingOrMalformedError || error instanceof KeyAuthInvalidKeyError) reply.header('www-authenticate', 'Bearer realm="admin"')
      throw error
    }
  }
}
