/**
 * CORS (the Fetch standard's CORS protocol) through @fastify/cors, for the front-ends listed
 * in CORS_ORIGINS, and for them only (docs/api.md, "Browser clients: other origins").
 *
 * - A listed `Origin` gets `Access-Control-Allow-Origin: <that origin>` (never `*`) with
 *   `Access-Control-Allow-Credentials: true`, so a page may send the session cookies
 *   (`credentials: 'include'`) and read the answer, errors included, and the headers of
 *   EXPOSED_HEADERS.
 * - Any other origin, and a request without `Origin`, gets no CORS header at all: its page
 *   cannot read the answer. Every answer carries `Vary: Origin`, since it depends on it.
 * - A preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`) from a listed
 *   origin is answered 204 on any path, in onRequest, before authentication: browsers send
 *   preflights without credentials. The answer allows METHODS and ALLOWED_HEADERS whatever
 *   the path serves (an unknown path then answers its own 404, which the page can read), and
 *   may be cached MAX_AGE_SECONDS. A preflight from an unlisted origin is 403
 *   `CORS_ORIGIN_REFUSED` (no CORS headers, so the browser fails it; the developer's network
 *   panel says why). Any other OPTIONS request is answered as a method the path does not
 *   serve (405 with Allow, or 404: src/plugins/error-handler.ts).
 *
 * Admission's refusals, written before Fastify sees the request, carry the same headers
 * (corsHeadersOutsideFastify). The origin check of cookie-authenticated changes
 * (src/modules/identity/csrf.ts) trusts the same list.
 */
import fastifyCors, { type FastifyCorsOptions } from '@fastify/cors'
import createError from '@fastify/error'
import type { FastifyInstance } from 'fastify'
import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http'
import fp from 'fastify-plugin'

/** A CORS preflight from an origin not listed in CORS_ORIGINS. */
export const CorsOriginRefused = createError('CORS_ORIGIN_REFUSED', '%s', 403)

/** Methods a listed origin may send (every method a route of the service serves). */
export const METHODS = ['GET', 'HEAD', 'POST', 'PATCH', 'DELETE']

/**
 * Request headers a listed origin may send beyond the CORS-safelisted ones: credentials,
 * JSON and multipart bodies (a JSON `Content-Type` is not safelisted), conditional and ranged
 * image reads, the request id, and W3C trace context from browser tracing.
 */
export const ALLOWED_HEADERS = [
  'Authorization', 'Content-Type', 'If-None-Match', 'If-Modified-Since', 'If-Range', 'Range',
  'X-Request-Id', 'X-Requested-With', 'Traceparent', 'Tracestate'
]

/**
 * Response headers a page may read beyond the CORS-safelisted ones (Cache-Control,
 * Content-Language, Content-Length, Content-Type, Expires, Last-Modified, Pragma): where a
 * created resource is, pagination links, when to retry (429, 503), the request id to quote
 * in a report, CSV and image file names, validators and ranges, the authentication
 * challenge of a 401, the methods a 405 names, and that a URL is deprecated and when it goes.
 */
export const EXPOSED_HEADERS = [
  'Location', 'Link', 'Retry-After', 'X-Request-Id', 'Content-Disposition', 'ETag',
  'Content-Range', 'Accept-Ranges', 'WWW-Authenticate', 'Allow', 'Deprecation', 'Sunset'
]

/**
 * How long (s) a browser may reuse a preflight's answer: 2 hours, Chromium's cap (Firefox
 * allows 24 h). The allowed methods and headers are constants, so only an origin removed
 * from CORS_ORIGINS could be out of date, and its requests' answers still carry no CORS
 * header, nor pass the origin check of cookie changes.
 */
export const MAX_AGE_SECONDS = 7200

/**
 * The CORS headers of an answer written outside Fastify (admission's 503 and 429,
 * src/plugins/admission.ts), the same as the plugin gives a non-preflight request.
 */
export function corsHeadersOutsideFastify (origins: readonly string[]): (request: IncomingMessage) => OutgoingHttpHeaders {
  const listed = new Set(origins)
  const vary = { vary: 'Origin' }
  const exposed = EXPOSED_HEADERS.join(', ')
  return (request) => {
    const origin = request.headers.origin
    if (origin === undefined || !listed.has(origin)) return vary
    return { ...vary, 'access-control-allow-origin': origin, 'access-control-allow-credentials': 'true', 'access-control-expose-headers': exposed }
  }
}

export interface CorsOptions {
  /** CORS_ORIGINS, parsed (exact origins, no `*`). */
  origins: readonly string[]
}

async function cors (app: FastifyInstance, options: CorsOptions): Promise<void> {
  const listed = new Set(options.origins)
  const allowed: FastifyCorsOptions = {
    // A listed Origin is reflected; for any other (or none) the plugin sets no CORS header
    // but `Vary: Origin`, not even Access-Control-Allow-Credentials or the expose list. A
    // function rather than a per-request options delegator: the options are normalised once,
    // not on every request (2% of the CPU of GET /api/user/:id, bench/README.md, "The floor").
    origin: (origin, callback) => { callback(null, origin !== undefined && listed.has(origin)) },
    credentials: true,
    methods: METHODS,
    allowedHeaders: ALLOWED_HEADERS,
    exposedHeaders: EXPOSED_HEADERS,
    maxAge: MAX_AGE_SECONDS,
    // An OPTIONS without Access-Control-Request-Method from a listed origin is answered as a
    // preflight rather than with @fastify/cors's plain-text 400.
    strictPreflight: false
  }
  await app.register(fastifyCors, allowed)
  app.addHook('onRequest', (request, _reply, done) => {
    // @fastify/cors answered a listed origin's preflight already; what reaches here with the
    // preflight's headers comes from an origin that is not listed.
    if (request.method === 'OPTIONS' && request.headers.origin !== undefined && request.headers['access-control-request-method'] !== undefined) {
      done(new CorsOriginRefused(`Refused: origin ${JSON.stringify(request.headers.origin.slice(0, 200))} is not listed in CORS_ORIGINS`))
      return
    }
    done()
  })
}

export default fp(cors, { name: 'cors', fastify: '5.x' })
