/**
 * The headers every answer carries, errors and 404s included, set in the app's first hook
 * (src/app.ts registers this plugin before any hook that can refuse a request):
 * - helmet's security headers;
 * - `X-Request-Id`, the request's id (src/lib/request-id.ts);
 * - `Cache-Control: no-store` on the API (`/api/`, the catalogue's `/api/product` aside): its
 *   answers carry personal data (user records, sessions, tokens, factors) or say something of
 *   an account, so no cache, shared or the browser's, keeps one unless its route says
 *   otherwise (a route's own `Cache-Control` replaces it; the catalogue's are public and set
 *   their own).
 *
 * helmet's headers do not change from one request to the next: its middleware runs once, at
 * start, against a recorder, and each request gets the recorded set through Fastify's own
 * headers. So Node writes every header of an answer in one pass, where setting them on the
 * raw response sent each through Node's header checks twice (bench/README.md, "Node and the
 * start command"). @fastify/helmet, which this replaces, rebuilt the middleware and re-parsed
 * the Content-Security-Policy on every request, in two async hooks; what it offered beyond
 * that (per-route options, CSP nonces) the service does not use.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import helmet from 'helmet'
import { REQUEST_ID_HEADER } from '../lib/request-id.js'

/** Swagger UI applies inline styles (Chromium reports them under `style-src 'self'`). */
const DOCS_STYLE = ["'self'", "'unsafe-inline'"]

export interface SecurityHeadersOptions {
  /** True when the service is reached over HTTPS only: HSTS on, no upgrade-insecure-requests. */
  httpsOnly: boolean
}

/** Where the OpenAPI page (Swagger UI, src/plugins/openapi.ts) and its files are served. */
export const DOCS_PREFIX = '/docs'

async function securityHeaders (app: FastifyInstance, options: SecurityHeadersOptions): Promise<void> {
  const common = {
    // helmet's default, `no-referrer`, makes browsers send `Origin: null` on every form post
    // (the Fetch standard, "append a request `Origin` header"), which hides where the post
    // comes from and so defeats the origin check of cookie requests (src/modules/identity/csrf.ts).
    // `strict-origin-when-cross-origin` (browsers' own default) sends the origin with
    // every post, same-origin or to a trusted origin, and never a path across origins nor
    // anything from HTTPS to HTTP. `same-origin` would send `null` again from a page of one
    // origin to an API of another listed in CORS_ORIGINS.
    referrerPolicy: { policy: 'strict-origin-when-cross-origin' as const },
    // HSTS only where HTTPS is the only way in.
    strictTransportSecurity: options.httpsOnly ? { maxAge: 31_536_000, includeSubDomains: true } : false as const
  }
  // helmet's default asks browsers to fetch every subresource over HTTPS: over plain HTTP
  // (compose on a LAN address) the page's own scripts then fail and it is blank.
  const upgrade = { 'upgrade-insecure-requests': options.httpsOnly ? [] : null }
  // The web app and every other answer: styles from the service's own files only (web/app.css);
  // helmet's default also allows any https: style sheet and inline styles, which the app
  // never uses and which would let injected markup restyle (or overlay) the page.
  const middleware = helmet({
    contentSecurityPolicy: { directives: { 'style-src': ["'self'"], ...upgrade } },
    ...common
  })
  // The OpenAPI page: its scripts and styles come from /docs/static, plus Swagger UI's inline
  // styles; the validator badge is an image of validator.swagger.io.
  const docs = helmet({
    contentSecurityPolicy: { directives: { 'img-src': ["'self'", 'data:', 'validator.swagger.io'], 'style-src': DOCS_STYLE, ...upgrade } },
    ...common
  })
  const other = recorded(middleware)
  const api = { ...other, 'cache-control': 'no-store' }
  const docsHeaders = recorded(docs)
  const fixedFor = (url: string): Record<string, string> => {
    if (url.startsWith('/api/')) return url.startsWith('/api/product') ? other : api
    return url === DOCS_PREFIX || url.startsWith(DOCS_PREFIX + '/') || url.startsWith(DOCS_PREFIX + '?') ? docsHeaders : other
  }
  app.addHook('onRequest', (request, reply, done) => {
    reply.headers(fixedFor(request.url)).header(REQUEST_ID_HEADER, request.id)
    done()
  })
}

/** The headers a helmet middleware sets (it sets the same ones on every request). */
function recorded (middleware: ReturnType<typeof helmet>): Record<string, string> {
  const headers: Record<string, string> = {}
  const recorder = {
    setHeader (name: string, value: string) { headers[name.toLowerCase()] = value },
    removeHeader (name: string) { Reflect.deleteProperty(headers, name.toLowerCase()) }
  }
  middleware({} as IncomingMessage, recorder as unknown as ServerResponse, (error?: unknown) => { if (error !== undefined) throw new Error('helmet refused its options', { cause: error }) })
  return headers
}

export default fp(securityHeaders, { name: 'security-headers', fastify: '5.x' })
