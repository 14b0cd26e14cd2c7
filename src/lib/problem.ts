/**
 * The one error shape of the service: RFC 9457 problem details
 * (`application/problem+json`), with a stable machine-readable `code`, the request id,
 * and field errors for validation failures. See docs/api.md, "Errors".
 */
import { STATUS_CODES } from 'node:http'
import createError from '@fastify/error'
import { Type, type Static } from 'typebox'

export const PROBLEM_MEDIA_TYPE = 'application/problem+json'
export const PROBLEM_CONTENT_TYPE = `${PROBLEM_MEDIA_TYPE}; charset=utf-8`

export const FieldError = Type.Object({
  /** The part of the request: `body`, `params`, `querystring` or `headers`. */
  in: Type.String(),
  /** JSON pointer of the offending field within that part, e.g. `/email`; empty for the whole part. */
  field: Type.String(),
  message: Type.String()
})

/**
 * Every code a problem can carry: its one status, when it is answered (docs/api.md's errors
 * table, generated from here), and the detail of its example in the OpenAPI document. A route
 * lists the codes it answers (`problems(...)`, src/lib/responses.ts); the codes marked
 * `anywhere` belong to no operation: they are answered before a request reaches one, or
 * to requests no operation serves, so the document lists them once, on the `Problem` component.
 */
export const CODES = {
  VALIDATION_FAILED: [400, 'a body, param or query value fails its schema; any string holding NUL (U+0000) or an unpaired UTF-16 surrogate is refused in every field, passwords included (`must not contain NUL (U+0000) or unpaired surrogates`)', 'Invalid request body: /email must match format "email"'],
  MALFORMED_JSON: [400, 'the body is not JSON, is empty, or carries `__proto__` / `constructor.prototype` keys', 'Body is not valid JSON but content-type is set to \'application/json\''],
  BAD_REQUEST: [400, 'other bad input: a password past 72 bytes, both or neither of `username`/`identity`, a refresh with no token at all; and, before any operation, a request that is not valid HTTP or whose URL does not decode', 'Send exactly one of `username` and `identity`', 'anywhere'],
  PASSWORD_TOO_COMMON: [400, 'a new password (registration, a password change, a reset) that is one of the most common passwords, compared case-insensitively ("Passwords"); `errors` names the field', 'This password is one of the 17,950 most common passwords, which are tried first by anyone guessing: choose another'],
  IMAGE_MISSING: [400, 'an image upload whose form has no file part', 'The form has no file part: send the image as one file'],
  TOO_MANY_FILES: [400, 'an image upload with more than one file part', 'Send exactly one file'],
  TOO_MANY_PARTS: [400, 'an image upload whose form has more parts than a file and a few fields', 'The form has too many parts: send one file'],
  RESET_TOKEN_INVALID: [400, 'a reset token that is unknown, used, expired, or made unusable by another reset of the same user ("Password reset")', 'The reset link is invalid, used or expired: ask for a new one'],
  VERIFICATION_TOKEN_INVALID: [400, 'a verification token that is unknown, used, expired, or sent to an address the user has since left or no longer asks for ("E-mail verification")', 'The verification link is invalid, used or expired, or the address has changed since: ask for a new one'],
  INSECURE_COOKIE_CONTEXT: [400, 'a cookie sign-in (form or `"mode": "cookie"`) over plain HTTP to a host that is not loopback while `COOKIE_SECURE=true`: the browser would drop the `Secure` cookies ("Browser clients"); serve HTTPS, set `TRUST_PROXY` behind a TLS proxy, or `COOKIE_SECURE=false` for local plain HTTP', 'Browsers drop Secure (__Secure-) cookies sent over plain HTTP to a host other than localhost, so this cookie login would silently fail: serve the service over HTTPS, or behind a TLS proxy set TRUST_PROXY so the service sees X-Forwarded-Proto: https, or for plain-HTTP local development set COOKIE_SECURE=false (or use token mode)'],
  TOTP_CODE_INVALID: [400, 'confirming a TOTP enrolment, or turning TOTP off, with a wrong or expired code', 'The code is wrong or expired: use the code your app shows now'],
  PASSKEY_NOT_REGISTERED: [400, 'a passkey registration whose response does not verify (challenge unknown, used, expired or another user\'s; wrong origin or RP id; a cross-origin frame; no user verification), or whose authenticator data holds a credential id over 1,023 bytes or other than its `id`, or a public key over 1,024 bytes; the detail says which', 'The passkey could not be registered: Unexpected registration response origin "https://elsewhere.example", expected "https://shop.example.com"'],
  UNAUTHORIZED: [401, 'missing or bad token, wrong credentials', 'The Authorization header (or the session cookie) is missing'],
  API_KEY_MISSING: [401, 'an admin route (`/api/admin`, `/metrics`) without a key: no `Authorization` header, or one without the `Bearer` scheme ([keyauth.md](keyauth.md))', 'missing or malformed API Key'],
  API_KEY_INVALID: [401, 'an admin route with a key that is not one of `ADMIN_API_KEYS` (a JWT included), or any key while `ADMIN_API_KEYS` is empty', 'Invalid or expired API Key'],
  INVALID_REFRESH_TOKEN: [401, 'a refresh token that is unknown, malformed, expired, or of an ended session', 'The refresh token is invalid or expired'],
  REFRESH_TOKEN_REUSED: [401, 'a refresh token used a second time: its session has been revoked', 'This refresh token was already used; the session has been revoked (log in again)'],
  MFA_TOKEN_INVALID: [401, 'a second step whose `mfaToken` is unknown, expired (5 min) or completed already ("Second factors and passkeys")', 'The second step has expired or was completed already: log in again'],
  MFA_CODE_INVALID: [401, 'a second step with a wrong, expired or used TOTP code or recovery code; counted with the account\'s wrong passwords', 'The code is wrong, expired or used already'],
  PASSKEY_REFUSED: [401, 'a passkey sign-in (alone or as second step) refused: unknown or deleted passkey, wrong origin or RP id, made in a cross-origin frame, a signature counter that did not go up, a used or expired challenge, no user verification; the detail says which', 'The passkey was refused: its signature counter did not go up: a copy of the authenticator, or the same assertion twice'],
  FORBIDDEN: [403, 'another user\'s record or product', 'You can only access your own user record'],
  CSRF_REJECTED: [403, 'a cookie-authenticated change (or refresh, or a sign-in) from another origin not in `CORS_ORIGINS`, or without `Origin`', 'Refused: requests from origin "https://elsewhere.example" may not use the session cookies'],
  CORS_ORIGIN_REFUSED: [403, 'a CORS preflight (`OPTIONS`) from an origin not in `CORS_ORIGINS`', 'Refused: origin "https://elsewhere.example" is not listed in CORS_ORIGINS', 'anywhere'],
  EMAIL_NOT_VERIFIED: [403, 'login with the right password while `REQUIRE_VERIFIED_EMAIL=true` and the account\'s address is not verified, or adding a second factor before the address is verified ("E-mail verification")', 'Verify your e-mail address first: follow the link of the verification e-mail'],
  RECENT_SIGN_IN_REQUIRED: [403, 'with `RECENT_SIGN_IN_MAX_AGE` set: a sensitive change (password, e-mail, second factors, passkeys, account deletion) from a session older than that, or one without the second factor of an account that has one', 'This change needs a sign-in of the last 15 min: log in again, then retry'],
  WRONG_PASSWORD: [403, 'the current password of a change (`currentPassword`, or `password` of a deletion or of turning TOTP off) is not the user\'s password', 'The current password is wrong'],
  NOT_FOUND: [404, 'unknown id; before any operation, unknown path', 'Product 7 does not exist', 'anywhere'],
  METHOD_NOT_ALLOWED: [405, 'a known path asked with a method it does not serve (`PUT /api/user/1`); `Allow` lists the methods it does', 'PUT is not allowed on /api/user/1; allowed: DELETE, GET, HEAD, PATCH', 'anywhere'],
  NOT_ACCEPTABLE: [406, '`GET /api/product` whose `Accept` allows neither `application/json` nor `text/csv`', 'The product list is served as application/json or text/csv; the Accept header allows neither'],
  BODY_TOO_SLOW: [408, 'a request body that arrives below `SLOW_CLIENT_MIN_BYTES_PER_S` over a `SLOW_CLIENT_WINDOW_MS` window (1024 bytes/s over 5 s by default); the connection is closed', 'The request body arrived too slowly'],
  REQUEST_TIMEOUT: [408, 'headers not received within 10 s, or the whole request within 120 s; the connection is closed', 'The request was not received in time', 'anywhere'],
  CONFLICT: [409, 'the username or e-mail is taken (also when two registrations race: the unique index decides), or the pending address of a change was taken before its link was followed, or the passkey is registered already', 'The username or e-mail address is already taken'],
  PRODUCT_QUOTA_EXCEEDED: [409, 'the user already holds `PRODUCTS_MAX_PER_USER` products ("Quotas")', 'You hold 1000 products, as many as one user may: delete one first'],
  IMAGE_QUOTA_EXCEEDED: [409, 'the image would take the user\'s images past `IMAGE_BYTES_MAX_PER_USER` ("Quotas")', 'Your images would take more than 104857600 bytes: delete some first'],
  TOTP_ENABLED: [409, 'starting a TOTP enrolment while TOTP is on', 'TOTP is on already: turn it off first to enrol a new authenticator'],
  TOTP_NOT_PENDING: [409, 'confirming a TOTP enrolment that was never started (or was replaced meanwhile)', 'No TOTP enrolment is pending: start one first (POST /api/security/totp)'],
  TOTP_NOT_ENABLED: [409, 'new recovery codes, or turning TOTP off by code, while TOTP is off', 'TOTP is off'],
  PASSKEY_QUOTA_EXCEEDED: [409, 'registration options or a registration while the user holds 20 passkeys ("Second factors and passkeys")', 'You hold 20 passkeys, as many as one user may: delete one to add another'],
  PAYLOAD_TOO_LARGE: [413, 'the body (or the uploaded image) is over its limit (`BODY_LIMIT`, `IMAGE_MAX_BYTES`; checked while reading, before any work)', 'Request body is too large'],
  UNSUPPORTED_MEDIA_TYPE: [415, 'a body that is not `application/json` (login, refresh and logout also take a form; an image upload takes `multipart/form-data` only), or any `Content-Encoding` but identity (nothing is ever decompressed)', 'Unsupported Media Type: text/plain'],
  UNSUPPORTED_IMAGE_TYPE: [415, 'an uploaded file that is not a PNG, JPEG or WebP by its bytes (its name and `Content-Type` are not believed)', 'The file is not a PNG, JPEG or WebP image (judged by its content, not its name or Content-Type)'],
  RANGE_NOT_SATISFIABLE: [416, 'an image asked with a `Range` past its end; `Content-Range: bytes */<size>` gives the size', 'The range is past the end of the image (2048 bytes)'],
  RATE_LIMITED: [429, 'the client\'s auth budget is used up, the account has too many wrong password guesses, the user too many changes of their record or verification e-mails, the client too many wrong admin keys, the client holds 50 live passkey challenges, or a session refreshes again sooner than `REFRESH_MIN_INTERVAL_MS` (and `Retry-After`)', 'Too many requests; retry in 60 s'],
  TOO_MANY_IN_PROGRESS: [429, 'before routing: this client (its address, or the one a trusted proxy forwards) already has `LOAD_SHED_MAX_IN_FLIGHT_PER_CLIENT` requests in progress (and `Retry-After`; [operations.md](operations.md#slow-and-greedy-clients))', 'This client already has 8 requests in progress; retry in 2 s'],
  HEADERS_TOO_LARGE: [431, 'the request headers are over 16 KB; the connection is closed', 'The request headers are too large', 'anywhere'],
  CLIENT_CLOSED_REQUEST: [499, 'never received: only logged (at info), for a client that closed its connection before its request was read and answered', 'The client closed the connection before the request was received and answered', 'anywhere'],
  INTERNAL: [500, 'a bug; logged with the request id', 'An unexpected error occurred; it has been logged with this request id.'],
  SERVICE_UNAVAILABLE: [503, 'the database cannot be reached, does not exist or refuses the configured role (SQLSTATE 3D000, 28xxx), did not answer in time (`DB_STATEMENT_TIMEOUT_MS`, `DB_CONNECT_TIMEOUT_MS`), or its schema is not migrated yet; or, with `REDIS_URL`, Redis (where the limits count) does not answer: login, registration, password checks and admin keys then fail closed (and `Retry-After`); or, in memory mode, 100,000 passkey challenges or second steps are pending (and `Retry-After`)', 'The database is unavailable'],
  OVERLOADED: [503, 'the service sheds load, before routing: `LOAD_SHED_MAX_IN_FLIGHT` requests in progress, or its event loop lags past `MAX_EVENT_LOOP_DELAY_MS` (with `Retry-After`; [operations.md](operations.md))', 'The service is overloaded (64 requests in progress); retry in 2 s']
} as const satisfies Record<string, readonly [status: number, when: string, example: string, anywhere?: 'anywhere']>

export type ProblemCode = keyof typeof CODES

/** The codes of no operation, as the `Problem` component's description lists them. */
const ANYWHERE = Object.entries(CODES).filter(([, entry]) => entry[3] === 'anywhere').map(([code, [status]]) => `${status} \`${code}\``)

export const Problem = Type.Object({
  type: Type.String({ description: '`about:blank`: the status code and `code` say it all' }),
  title: Type.String({ description: 'the HTTP status phrase' }),
  status: Type.Integer(),
  detail: Type.String({ description: 'what went wrong with this request, for people' }),
  code: Type.String({ description: 'stable error code, for programs' }),
  instance: Type.String({ description: 'the request path' }),
  requestId: Type.String(),
  errors: Type.Optional(Type.Array(FieldError))
}, {
  // Registered once (src/app.ts): routes refer to it, the OpenAPI document has it as one component.
  $id: 'Problem',
  description: `RFC 9457 problem details. Each operation lists the codes it answers; any request may also be answered, before it reaches an operation or when none serves it: ${ANYWHERE.join(', ')}.`,
  examples: [{
    type: 'about:blank',
    title: 'Bad Request',
    status: 400,
    detail: 'Invalid request body: /email must match format "email"',
    code: 'VALIDATION_FAILED',
    instance: '/api/user',
    requestId: '8f14e45f-ceea-467f-a0b6-2a3d5c6e7f80',
    errors: [{ in: 'body', field: '/email', message: 'must match format "email"' }]
  }]
})

export type ProblemBody = Static<typeof Problem>

export function problemBody (status: number, code: string, detail: string, instance: string, requestId: string, errors?: Static<typeof FieldError>[]): ProblemBody {
  const body: ProblemBody = {
    type: 'about:blank',
    title: STATUS_CODES[status] ?? 'Error',
    status,
    detail,
    code,
    instance,
    requestId
  }
  if (errors) body.errors = errors
  return body
}

/** A client error about one field of the body: answered with that field in `errors`, as a validation failure is. */
export function atField<E extends Error> (error: E, field: string, message: string): E & { fieldErrors: Static<typeof FieldError>[] } {
  return Object.assign(error, { fieldErrors: [{ in: 'body', field, message }] })
}

// Errors the service's own code throws; the error handler turns them into problem details.
export const Unauthorized = createError('UNAUTHORIZED', '%s', 401)
export const Forbidden = createError('FORBIDDEN', '%s', 403)
export const NotFound = createError('NOT_FOUND', '%s', 404)
export const BadRequest = createError('BAD_REQUEST', '%s', 400)
export const ServiceUnavailable = createError('SERVICE_UNAVAILABLE', '%s', 503)
