/**
 * Response-schema helpers: every route declares the problem details it can answer, each
 * as `application/problem+json` with the one `Problem` component (src/lib/problem.ts).
 */
import { STATUS_CODES } from 'node:http'
import { Type, type TSchema } from 'typebox'
import { PROBLEM_MEDIA_TYPE } from './problem.js'

/** What each status means on this service's routes (the OpenAPI response descriptions). */
const MEANINGS: Record<number, string> = {
  400: 'The request is malformed or fails validation (`VALIDATION_FAILED`, `MALFORMED_JSON`, `BAD_REQUEST`; an image upload without exactly one file: `IMAGE_MISSING`, `TOO_MANY_FILES`)',
  401: 'No valid credentials: the token or key is missing, malformed, expired or revoked (`WWW-Authenticate` says which scheme)',
  403: 'Authenticated, but not allowed (`FORBIDDEN`, `WRONG_PASSWORD`), or a browser request that authenticates by cookie (or logs in, or refreshes by cookie) from an origin that is not trusted (`CSRF_REJECTED`)',
  404: 'No such resource (`NOT_FOUND`)',
  406: 'None of the representations the route offers is acceptable to the Accept header (`NOT_ACCEPTABLE`)',
  408: 'The body arrived below the minimum rate (`SLOW_CLIENT_MIN_BYTES_PER_S` over a `SLOW_CLIENT_WINDOW_MS` window): `BODY_TOO_SLOW`, and the connection is closed',
  409: 'The request conflicts with what exists: the username or e-mail address is taken (`CONFLICT`), or you hold as many products, image bytes or passkeys as one user may (`PRODUCT_QUOTA_EXCEEDED`, `IMAGE_QUOTA_EXCEEDED`, `PASSKEY_QUOTA_EXCEEDED`: delete some first)',
  413: 'The body (or the uploaded image) is larger than the limit (`PAYLOAD_TOO_LARGE`)',
  415: 'The body is not JSON (an image upload: not multipart, or not a PNG, JPEG or WebP by its bytes), or is compressed (`UNSUPPORTED_MEDIA_TYPE`, `UNSUPPORTED_IMAGE_TYPE`)',
  416: 'The Range header selects nothing of the resource; `Content-Range: bytes */size` gives its size (`RANGE_NOT_SATISFIABLE`)',
  429: 'Too many attempts or refreshes of one session, or passkey challenges pending for this client (`RATE_LIMITED`), or this client already has its share of requests in progress (`TOO_MANY_IN_PROGRESS`, before routing); `Retry-After` says when to try again',
  500: 'An unexpected error; it is logged with the request id (`INTERNAL`)',
  503: 'The database (or Redis) is unavailable, the service is overloaded, or too many passkey challenges or second steps are pending; `Retry-After` says when to try again (`SERVICE_UNAVAILABLE`, `OVERLOADED`)'
}

/**
 * Every route that uses `problems` may answer a client over its share of requests in progress
 * (429, before routing: src/plugins/admission.ts), fail unexpectedly (500), and is shed under load
 * or needs the database (503).
 */
const ALWAYS = [429, 500, 503]

/**
 * One example per code a status stands for (the `/docs` page shows them beside the status),
 * each a whole problem body as the service answers it.
 */
const EXAMPLES: Record<number, Array<[code: string, detail: string]>> = {
  400: [['VALIDATION_FAILED', 'Invalid request body: /email must match format "email"'], ['MALFORMED_JSON', 'Body is not valid JSON but content-type is set to \'application/json\''], ['BAD_REQUEST', 'Send exactly one of `username` and `identity`'], ['IMAGE_MISSING', 'The form has no file part: send the image as one file'], ['TOO_MANY_FILES', 'Send exactly one file'], ['RESET_TOKEN_INVALID', 'The reset link is invalid, used or expired: ask for a new one'], ['VERIFICATION_TOKEN_INVALID', 'The verification link is invalid, used or expired, or the address has changed since: ask for a new one'], ['TOTP_CODE_INVALID', 'The code is wrong or expired: use the code your app shows now'], ['PASSKEY_NOT_REGISTERED', 'The passkey could not be registered: Unexpected registration response origin "https://elsewhere.example", expected "https://shop.example.com"']],
  401: [['UNAUTHORIZED', 'The Authorization header (or the session cookie) is missing'], ['INVALID_REFRESH_TOKEN', 'The refresh token is invalid or expired'], ['REFRESH_TOKEN_REUSED', 'This refresh token was already used: the session has been revoked'], ['MFA_TOKEN_INVALID', 'The second step has expired or was completed already: log in again'], ['MFA_CODE_INVALID', 'The code is wrong, expired or used already'], ['PASSKEY_REFUSED', 'The passkey was refused: its signature counter did not go up: a copy of the authenticator, or the same assertion twice']],
  403: [['FORBIDDEN', 'You can only access your own user record'], ['WRONG_PASSWORD', 'The current password is wrong'], ['CSRF_REJECTED', 'Refused: requests from origin "https://elsewhere.example" may not use the session cookies'], ['EMAIL_NOT_VERIFIED', 'Verify your e-mail address first: follow the link of the verification e-mail'], ['RECENT_SIGN_IN_REQUIRED', 'This change needs a sign-in of the last 15 min: log in again, then retry']],
  404: [['NOT_FOUND', 'Product 7 does not exist']],
  406: [['NOT_ACCEPTABLE', 'The product list is served as application/json or text/csv; the Accept header allows neither']],
  408: [['BODY_TOO_SLOW', 'The request body arrived too slowly']],
  409: [['CONFLICT', 'The username or e-mail address is already taken'], ['PRODUCT_QUOTA_EXCEEDED', 'You hold 1000 products, as many as one user may: delete one first'], ['IMAGE_QUOTA_EXCEEDED', 'Your images would take more than 104857600 bytes: delete some first'], ['TOTP_ENABLED', 'TOTP is on already: turn it off first to enrol a new authenticator'], ['TOTP_NOT_PENDING', 'No TOTP enrolment is pending: start one first (POST /api/security/totp)'], ['TOTP_NOT_ENABLED', 'TOTP is off'], ['PASSKEY_QUOTA_EXCEEDED', 'You hold 20 passkeys, as many as one user may: delete one to add another']],
  413: [['PAYLOAD_TOO_LARGE', 'Request body is too large']],
  415: [['UNSUPPORTED_MEDIA_TYPE', 'Unsupported Media Type: text/plain'], ['UNSUPPORTED_IMAGE_TYPE', 'The file is not a PNG, JPEG or WebP image (judged by its content, not its name or Content-Type)']],
  416: [['RANGE_NOT_SATISFIABLE', 'The range is past the end of the image (2048 bytes)']],
  429: [['RATE_LIMITED', 'Too many requests; retry in 60 s'], ['TOO_MANY_IN_PROGRESS', 'This client already has requests in progress; retry in 1 s']],
  500: [['INTERNAL', 'An unexpected error occurred; it has been logged with this request id.']],
  503: [['SERVICE_UNAVAILABLE', 'The database is unavailable'], ['OVERLOADED', 'The service is overloaded; retry in 1 s']]
}

/** The codes each error status stands for in the document (test/openapi.test.ts holds docs/api.md to them). */
export const PROBLEM_CODES: Readonly<Record<number, readonly string[]>> = Object.fromEntries(Object.entries(EXAMPLES).map(([status, examples]) => [status, examples.map(([code]) => code)]))

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
 * The response of one error status: its meaning, the `Problem` component as `application/problem+json`,
 * an example per code: the status's codes, or `examples` for a route whose answers have codes of their own.
 */
export function problem (status: number, examples: ReadonlyArray<readonly [code: string, detail: string]> | undefined = EXAMPLES[status]) {
  const description = MEANINGS[status]
  if (description === undefined || examples === undefined) throw new Error(`No description or example for status ${status}: add them to MEANINGS and EXAMPLES`)
  const values = Object.fromEntries(examples.map(([code, detail]) => [code, {
    summary: code,
    value: { type: 'about:blank', title: STATUS_CODES[status], status, detail, code, instance: '/api/product/7', requestId: '8f14e45f-ceea-467f-a0b6-2a3d5c6e7f80' }
  }]))
  const headers = PROBLEM_HEADERS[status]
  return { description, ...(headers === undefined ? {} : { headers }), content: { [PROBLEM_MEDIA_TYPE]: { schema: Type.Ref('Problem'), examples: values } } }
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
 * The responses for the given error statuses, plus 429, 500 and 503, which every route can
 * answer; a route that reads a body (it lists 413) can also receive it too slowly: 408.
 */
export function problems (...statuses: number[]) {
  const body = statuses.includes(413) ? [408] : []
  return Object.fromEntries([...new Set([...statuses, ...body, ...ALWAYS])].sort((a, b) => a - b).map((status) => [status, problem(status)]))
}

/**
 * Routes that take the access token from the `Authorization` header or, for browsers, from
 * the access-token cookie (either one; the header wins when both are sent).
 */
export const sessionAuth: Array<Record<string, string[]>> = [{ bearerAuth: [] }, { cookieAuth: [] }]
