/**
 * Security headers (helmet) on every answer, errors and 404s included.
 *
 * helmet's middleware is built once, here, and run on each request's raw response: the same
 * headers as @fastify/helmet, which this replaces because it rebuilds the middleware (and
 * re-parses the Content-Security-Policy) on every request, in two async hooks: about 5% of the
 * CPU of GET /api/user/:id (bench/README.md, "GET /api/user/:id before and after"). What it
 * offered beyond that (per-route options, CSP nonces) the service does not use.
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import helmet from 'helmet'

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
  app.addHook('onRequest', (request, reply, done) => {
    const url = request.url
    const headers = url === DOCS_PREFIX || url.startsWith(DOCS_PREFIX + '/') || url.startsWith(DOCS_PREFIX + '?') ? docs : middleware
    headers(request.raw, reply.raw, (error?: unknown) => { done(error as Error | undefined) })
  })
}

export default fp(securityHeaders, { name: 'security-headers', fastify: '5.x' })
