/**
 * Response-schema helpers: every route declares the problem codes it can answer (CODES,
 * src/lib/problem.ts), each as `application/problem+json` with the one `Problem` component.
 */
import { STATUS_CODES } from 'node:http'
import { Type, type TSchema } from 'typebox'
import { CODES, PROBLEM_MEDIA_TYPE, type ProblemCode } from './problem.js'

/** A response header in the document (`@fastify/swagger` moves the description beside the schema). */
export function header (description: string, schema: Record<string, unknown> = { type: 'string' }) {
  return { ...schema, description }
}

/** Headers that several responses carry. */
export const HEADERS = {
  retryAfter: { 'Retry-After': header('seconds to wait before trying again', { type: 'integer', minimum: 0 }) },
  wwwAuthenticate: { 'WWW-Authenticate': header('the scheme to authenticate with (`Bearer`)') },
  setCookie: { 'Set-Cookie': header('cookie mode: the session cookies (`__Secure-access_token` on `/api`, `__Secure-refresh_token` on `/api/auth/refresh-token`), HttpOnly, SameSite=Strict; not sent in token mode') },
  clearCookie: { 'Set-Cookie': header('the session cookies, cleared (`Max-Age=0`)') },
  noStore: { 'Cache-Control': header('`no-store`: the answer carries (or clears) credentials') }
} as const

/** Per-status headers of the problems. */
const PROBLEM_HEADERS: Record<number, Record<string, unknown>> = {
  401: HEADERS.wwwAuthenticate,
  416: { 'Content-Range': header('`bytes */<size>`: the size of the image') },
  429: HEADERS.retryAfter,
  503: HEADERS.retryAfter
}

/**
 * The response of one error status: the `Problem` component as `application/problem+json`,
 * with an example per code, each a whole problem body as the service answers it.
 */
function problem (status: number, codes: readonly ProblemCode[]) {
  const examples = Object.fromEntries(codes.map((code) => {
    const [, when, detail] = CODES[code]
    return [code, {
      summary: code,
      description: when,
      value: { type: 'about:blank', title: STATUS_CODES[status], status, detail, code, instance: '/api/product/7', requestId: '8f14e45f-ceea-467f-a0b6-2a3d5c6e7f80' }
    }]
  }))
  const headers = PROBLEM_HEADERS[status]
  return {
    description: `${STATUS_CODES[status] ?? 'Error'}: ${codes.map((code) => `\`${code}\``).join(', ')}`,
    ...(headers === undefined ? {} : { headers }),
    content: { [PROBLEM_MEDIA_TYPE]: { schema: Type.Ref('Problem'), examples } }
  }
}

/**
 * A JSON answer, as a response keyed by media type so that it can carry headers and its
 * description; the schema's first example becomes the media example (the `/docs` page's).
 */
export function json (schema: TSchema, options: { description?: string, headers?: Record<string, unknown> } = {}) {
  const example = (schema as { examples?: unknown[] }).examples?.[0]
  return {
    description: options.description ?? (schema as { description?: string }).description ?? 'the answer',
    ...(options.headers === undefined ? {} : { headers: options.headers }),
    content: { 'application/json': { schema, ...(example === undefined ? {} : { example }) } }
  }
}

/** An answer without a body (204, 304), with the headers it carries. */
export function empty (description: string, headers?: Record<string, unknown>) {
  return { type: 'null', description, ...(headers === undefined ? {} : { headers }) } as const
}

/**
 * Codes every operation can answer for reasons outside it: a client over its share of
 * requests in progress and load shedding (both before routing, src/plugins/admission.ts), a
 * compressed body (a GET's too: src/plugins/content-coding.ts), a bug, the database (or Redis)
 * unavailable. Each is produced against every operation by test/openapi.test.ts.
 */
const ALWAYS: readonly ProblemCode[] = ['TOO_MANY_IN_PROGRESS', 'UNSUPPORTED_MEDIA_TYPE', 'INTERNAL', 'SERVICE_UNAVAILABLE', 'OVERLOADED']

/**
 * What any operation that accepts a request body can answer about reading it (a DELETE too:
 * Fastify reads its body); a body of a type it does not read is every operation's 415 (ALWAYS).
 */
export const BODY = ['MALFORMED_JSON', 'PAYLOAD_TOO_LARGE', 'BODY_TOO_SLOW'] as const satisfies readonly ProblemCode[]
/** A signed-in read: no valid session. */
export const SESSION = ['UNAUTHORIZED'] as const satisfies readonly ProblemCode[]
/** A signed-in change: no valid session, or the session cookie sent from an untrusted origin. */
export const SESSION_CHANGE = ['UNAUTHORIZED', 'CSRF_REJECTED'] as const satisfies readonly ProblemCode[]

/**
 * The error responses of an operation that answers exactly these codes, grouped by their
 * status. Codes are declared per route, not per status, so that a generated client learns
 * what this operation answers, not what any operation might (docs/api.md, "Errors").
 */
export function problemsExactly (...codes: readonly ProblemCode[]) {
  const byStatus = new Map<number, ProblemCode[]>()
  for (const code of new Set(codes)) {
    const status = CODES[code][0]
    byStatus.set(status, [...(byStatus.get(status) ?? []), code])
  }
  return Object.fromEntries([...byStatus].sort(([a], [b]) => a - b).map(([status, list]) => [status, problem(status, list)]))
}

/** The error responses of an operation: its own codes, and those every operation can answer (ALWAYS). */
export function problems (...codes: readonly ProblemCode[]) {
  return problemsExactly(...codes, ...ALWAYS)
}

/**
 * Routes that take the access token from the `Authorization` header or, for browsers, from
 * the access-token cookie (either one; the header wins when both are sent).
 */
export const sessionAuth: Array<Record<string, string[]>> = [{ bearerAuth: [] }, { cookieAuth: [] }]
