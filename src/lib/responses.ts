/** Response-schema helpers: every route declares the problem details it can answer. */
import { Problem } from './problem.js'

/** `{ 400: Problem, 401: Problem, ... }` for the given statuses. */
export function problems (...statuses: number[]): Record<number, typeof Problem> {
  return Object.fromEntries(statuses.map((status) => [status, Problem]))
}

/** The bearer-token security requirement of protected routes, for the OpenAPI document. */
export const bearerAuth = [{ bearerAuth: [] }]
