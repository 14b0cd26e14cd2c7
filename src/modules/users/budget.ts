/**
 * The per-client budget of requests that cost a bcrypt computation (RATE_LIMIT_AUTH_MAX a
 * minute per client address): registration (POST /api/user and
 * POST /api/auth/register), login, and the changes of the own record that check a password
 * (PATCH /api/user/:id with `password`, DELETE /api/user/:id). One store and one count for
 * all of them: the README's "20 a minute" is the total, not 20 per route.
 *
 * On an AttemptStore (src/lib/attempts.ts) rather than @fastify/rate-limit's route limits:
 * those keep one store per route, and its in-memory store hands every concurrent request
 * the same mutable counter, read after an await, so requests sent at once all saw the
 * last count (four at once with three left: four 429s). The key is the client address as
 * @fastify/rate-limit forms it (IPv6 grouped by /64).
 */
import createError from '@fastify/error'
import { normalizeIP } from '@fastify/rate-limit'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { budget, type AttemptStore } from '../../lib/attempts.js'

/** The window of the budget, in ms: a budget per minute reads as a rate ("20 a minute"). */
export const AUTH_WINDOW_MS = 60_000

export interface AuthBudgetOptions {
  /** Requests per client address per AUTH_WINDOW_MS (RATE_LIMIT_AUTH_MAX). */
  authMax: number
  store?: AttemptStore
}

const TooManyRequests = createError('RATE_LIMITED', 'Too many requests; retry in %d s', 429)

/** Spends one request of the client's budget, or throws 429 (with Retry-After) when it is used up. */
export type AuthBudget = (request: FastifyRequest, reply: FastifyReply) => Promise<void>

export function authBudget (options: AuthBudgetOptions): AuthBudget {
  const requests = budget({ max: options.authMax, timeWindow: AUTH_WINDOW_MS, store: options.store, refusal: (seconds) => new TooManyRequests(seconds) })
  return async (request, reply) => { await requests.spend(`client:${normalizeIP(request.ip)}`, reply) }
}
