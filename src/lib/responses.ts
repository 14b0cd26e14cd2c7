/**
 * Response-schema helpers: every route declares the problem details it can answer, each
 * as `application/problem+json` with the one `Problem` component (src/lib/problem.ts).
 */
import { Type } from 'typebox'
import { PROBLEM_MEDIA_TYPE } from './problem.js'

/** What each status means on this service's routes (the OpenAPI response descriptions). */
const MEANINGS: Record<number, string> = {
  400: 'The request is malformed or fails validation (`VALIDATION_FAILED`, `MALFORMED_JSON`, `BAD_REQUEST`)',
  401: 'No valid credentials: the token or key is missing, malformed, expired or revoked (`WWW-Authenticate` says which scheme)',
  403: 'Authenticated, but not allowed (`FORBIDDEN`, `WRONG_PASSWORD`)',
  404: 'No such resource (`NOT_FOUND`)',
  406: 'None of the representations the route offers is acceptable to the Accept header (`NOT_ACCEPTABLE`)',
  408: 'The body arrived below the minimum rate (`SLOW_CLIENT_MIN_BYTES_PER_S` over a `SLOW_CLIENT_WINDOW_MS` window): `BODY_TOO_SLOW`, and the connection is closed',
  409: 'The request conflicts with what exists: the username or e-mail address is taken (`CONFLICT`), or you hold as many products or image bytes as one user may (`PRODUCT_QUOTA_EXCEEDED`, `IMAGE_QUOTA_EXCEEDED`: delete some first)',
  413: 'The body (or the uploaded image) is larger than the limit (`PAYLOAD_TOO_LARGE`)',
  415: 'The body is not JSON (an image upload: not multipart, or not a PNG, JPEG or WebP by its bytes), or is compressed (`UNSUPPORTED_MEDIA_TYPE`, `UNSUPPORTED_IMAGE_TYPE`)',
  416: 'The Range header selects nothing of the resource; `Content-Range: bytes */size` gives its size (`RANGE_NOT_SATISFIABLE`)',
  429: 'Too many attempts or refreshes of one session (`RATE_LIMITED`), or this client already has its share of requests in progress (`TOO_MANY_IN_PROGRESS`, before routing); `Retry-After` says when to try again',
  500: 'An unexpected error; it is logged with the request id (`INTERNAL`)',
  503: 'The database is unavailable or the service is overloaded; `Retry-After` says when to try again (`SERVICE_UNAVAILABLE`, `OVERLOADED`)'
}

/**
 * Every route that uses `problems` may answer a client over its share of requests in progress
 * (429, before routing: src/lib/admission.ts), fail unexpectedly (500), and is shed under load
 * or needs the database (503).
 */
const ALWAYS = [429, 500, 503]

/** The response of one error status: its meaning and the `Problem` component as `application/problem+json`. */
export function problem (status: number) {
  const description = MEANINGS[status]
  if (description === undefined) throw new Error(`No description for status ${status}: add it to MEANINGS`)
  return { description, content: { [PROBLEM_MEDIA_TYPE]: { schema: Type.Ref('Problem') } } }
}

/**
 * The responses for the given error statuses, plus 429, 500 and 503, which every route can
 * answer; a route that reads a body (it lists 413) can also receive it too slowly: 408.
 */
export function problems (...statuses: number[]) {
  const body = statuses.includes(413) ? [408] : []
  return Object.fromEntries([...new Set([...statuses, ...body, ...ALWAYS])].sort((a, b) => a - b).map((status) => [status, problem(status)]))
}

/** The bearer-token security requirement of protected routes, for the OpenAPI document. */
export const bearerAuth = [{ bearerAuth: [] }]

/**
 * Routes that take the access token from the `Authorization` header or, for browsers, from
 * the access-token cookie (either one; the header wins when both are sent).
 */
export const sessionAuth: Array<Record<string, string[]>> = [{ bearerAuth: [] }, { cookieAuth: [] }]
