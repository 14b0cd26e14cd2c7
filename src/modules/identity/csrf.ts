/**
 * CSRF defence for cookie-authenticated requests: an Origin and Fetch Metadata check (the
 * OWASP "verifying origin with standard headers" defence), no token to thread through forms.
 *
 * Browsers send `Origin` on every request whose method is not GET or HEAD, and modern ones
 * `Sec-Fetch-Site` on every request; neither can be forged by a page. So a change that
 * authenticates by cookie is refused (403 CSRF_REJECTED) when
 * - `Sec-Fetch-Site: cross-site` and `Origin` is not one of CORS_ORIGINS (a front-end on
 *   another site, listed, may use cookies when they are SameSite=None: COOKIE_SAMESITE), or
 * - `Origin` is missing (with `requireOrigin`: cookie-authenticated changes), or
 * - `Origin` is neither the service's own origin (scheme and Host of the request, as
 *   Fastify sees them: behind a TLS proxy set TRUST_PROXY) nor one of CORS_ORIGINS.
 *
 * `Origin: null` passes only with `Sec-Fetch-Site: same-origin`. A browser sends `null` for
 * a same-origin form post when the page's referrer policy is `no-referrer` (the Fetch
 * standard, "append a request `Origin` header"), and the service's own pages (/docs, or any a
 * proxy serves under another policy) must be able to post; `Sec-Fetch-Site` then says where
 * the request really comes from, and a page cannot set it. Everywhere else `null` is an
 * opaque origin (a sandboxed frame, a `data:` page, a redirect across origins), and those
 * are `cross-site` or `same-site`, or, from browsers without Fetch Metadata, carry no
 * `Sec-Fetch-Site` at all: refused. The service's pages send `Referrer-Policy:
 * strict-origin-when-cross-origin` (src/plugins/security-headers.ts), so browsers send
 * their real origin and this case is the fallback, not the rule.
 * Requests with an `Authorization` header are not checked: a browser never adds that
 * header on its own, so a forged request cannot carry it.
 */
import createError from '@fastify/error'
import type { FastifyRequest } from 'fastify'

/** A cookie-authenticated change from a page of another origin, or one that does not say where it comes from. */
export const CsrfRejected = createError('CSRF_REJECTED', '%s', 403)

export interface OriginCheckOptions {
  /** Origins besides the service's own, e.g. `https://app.example.com` (CORS_ORIGINS). */
  csrfTrustedOrigins: readonly string[]
}

export type OriginCheck = (request: FastifyRequest, options: { requireOrigin: boolean }) => void

export function originCheck (options: OriginCheckOptions): OriginCheck {
  const trusted = new Set(options.csrfTrustedOrigins)
  return (request, { requireOrigin }) => {
    if (request.headers['sec-fetch-site'] === 'cross-site' && !trusted.has(request.headers.origin ?? '')) {
      throw new CsrfRejected('Refused: a cross-site request (Sec-Fetch-Site: cross-site) from an origin not listed in CORS_ORIGINS may not use the session cookies')
    }
    const origin = request.headers.origin
    if (origin === undefined) {
      if (requireOrigin) throw new CsrfRejected('Refused: a change authenticated by cookie must carry an Origin header (browsers send one)')
      return
    }
    if (origin === 'null' && request.headers['sec-fetch-site'] === 'same-origin') return
    if (origin !== `${request.protocol}://${request.host}` && !trusted.has(origin)) {
      throw new CsrfRejected(`Refused: requests from origin ${JSON.stringify(origin.slice(0, 200))} may not use the session cookies`)
    }
  }
}

/** Methods that change nothing, which the check lets through. */
export function isSafeMethod (method: string): boolean {
  return method === 'GET' || method === 'HEAD' || method === 'OPTIONS'
}
