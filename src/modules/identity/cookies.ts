/**
 * The session cookies of browser clients (docs/api.md, "Browser clients"), set through
 * @fastify/cookie.
 *
 * - `HttpOnly`: page scripts never see the tokens (an XSS cannot carry them away).
 * - `Secure` unless COOKIE_SECURE=false (local plain HTTP), and then the `__Secure-` name
 *   prefix, which browsers honour only for Secure cookies set over HTTPS. `__Host-` would be
 *   stronger (no Domain, so a sibling subdomain cannot plant one) but requires `Path=/`,
 *   and each cookie here is scoped to a narrower path on purpose.
 * - `SameSite=Strict`: the cookies serve the API called by the service's own pages (or a
 *   front-end of the same site, listed in CORS_ORIGINS), never a top-level navigation arriving
 *   from another site, so Lax's one allowance (cross-site top-level GETs) buys nothing.
 *   SameSite counts sibling subdomains as the same site, which is why unsafe methods are also
 *   checked by origin (csrf.ts). `SameSite=None` (COOKIE_SAMESITE=none, always with Secure)
 *   only for a front-end on another site: the origin check, which then lets a listed
 *   cross-site origin through, is the one CSRF defence left.
 * - Paths: the access token goes to `/api` only (not to /docs or /health), the refresh token
 *   to `/api/auth/refresh-token` only, so no other route ever receives it.
 * - Every answer that sets or clears them is `Cache-Control: no-store`: a cache must not keep
 *   (or replay) a Set-Cookie. `no-store` alone: `Pragma: no-cache` speaks to HTTP/1.0 caches
 *   only, and HTTP caching (RFC 9111) has deprecated it.
 */
import createError from '@fastify/error'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { SessionModeValue, SessionResultBody } from '../../lib/session-schemas.js'
import type { IssuedSession } from './sessions.js'

export const ACCESS_COOKIE_PATH = '/api'
export const REFRESH_COOKIE_PATH = '/api/auth/refresh-token'
/** The Cache-Control of every answer that carries a token or sets a session cookie. */
export const NO_STORE = 'no-store'

export interface SessionCookieNames {
  access: string
  refresh: string
}

export function sessionCookieNames (secure: boolean): SessionCookieNames {
  return secure
    ? { access: '__Secure-access_token', refresh: '__Secure-refresh_token' }
    : { access: 'access_token', refresh: 'refresh_token' }
}

export interface SessionCookies {
  names: SessionCookieNames
  /**
   * Throws INSECURE_COOKIE_CONTEXT when a browser would drop the cookies this request is
   * answered with: `Secure` cookies over plain HTTP to a host that is not loopback.
   */
  assertBrowserKeeps: (request: FastifyRequest) => void
  /** Sets both cookies; each lives as long as its token. */
  set: (reply: FastifyReply, tokens: { accessToken: string, accessExpiresAt: Date, refreshToken: string, refreshExpiresAt: Date }) => void
  /** Expires both cookies (same name, path and attributes, or browsers keep them). */
  clear: (reply: FastifyReply) => void
  /** The access token's cookie, if the request carries one. */
  access: (request: FastifyRequest) => string | undefined
  /** The refresh token's cookie, if the request carries one. */
  refresh: (request: FastifyRequest) => string | undefined
}

/**
 * Browsers keep a `Secure` cookie (and honour the `__Secure-` prefix) only from a secure
 * context: HTTPS, or a loopback host, which they treat as potentially trustworthy (W3C
 * Secure Contexts; RFC 6265bis "Secure" attribute): `localhost`, `*.localhost`,
 * 127.0.0.0/8 and `[::1]`. From any other host over plain HTTP, Chromium drops both
 * session cookies without a word (InvalidPrefix) and the login would look successful.
 */
export function isLoopback (hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/\.$/, '')
  return host === 'localhost' || host.endsWith('.localhost') || /^127(\.\d{1,3}){3}$/.test(host) || host === '[::1]' || host === '::1'
}

/** A cookie login the browser would silently drop (docs/api.md, "Browser clients"). */
export const InsecureCookieContext = createError('INSECURE_COOKIE_CONTEXT',
  'Browsers drop Secure (__Secure-) cookies sent over plain HTTP to a host other than localhost, so this cookie login would silently fail: ' +
  'serve the service over HTTPS, or behind a TLS proxy set TRUST_PROXY so the service sees X-Forwarded-Proto: https, ' +
  'or for plain-HTTP local development set COOKIE_SECURE=false (or use token mode)', 400)

export function sessionCookies (options: { secure: boolean, sameSite: 'strict' | 'none' }): SessionCookies {
  const names = sessionCookieNames(options.secure)
  const attributes = { httpOnly: true, secure: options.secure, sameSite: options.sameSite }
  const seconds = (until: Date) => Math.max(0, Math.floor((until.getTime() - Date.now()) / 1000))
  const read = (request: FastifyRequest, name: string) => {
    const value = request.cookies?.[name]
    return value === undefined || value === '' ? undefined : value
  }
  return {
    names,
    assertBrowserKeeps (request) {
      if (!options.secure || request.protocol === 'https' || isLoopback(request.hostname)) return
      throw new InsecureCookieContext()
    },
    set (reply, tokens) {
      reply.header('cache-control', NO_STORE)
      reply.setCookie(names.access, tokens.accessToken, { ...attributes, path: ACCESS_COOKIE_PATH, maxAge: seconds(tokens.accessExpiresAt) })
      reply.setCookie(names.refresh, tokens.refreshToken, { ...attributes, path: REFRESH_COOKIE_PATH, maxAge: seconds(tokens.refreshExpiresAt) })
    },
    clear (reply) {
      reply.header('cache-control', NO_STORE)
      reply.clearCookie(names.access, { ...attributes, path: ACCESS_COOKIE_PATH })
      reply.clearCookie(names.refresh, { ...attributes, path: REFRESH_COOKIE_PATH })
    },
    access: (request) => read(request, names.access),
    refresh: (request) => read(request, names.refresh)
  }
}

/**
 * How a new session reaches the client: in the body (token mode) or in cookies (cookie mode).
 * Either way the answer carries credentials: `Cache-Control: no-store` (set by the cookies in
 * cookie mode) keeps it out of every cache, shared or the browser's own.
 */
export function deliverSession (reply: FastifyReply, cookies: SessionCookies, issued: IssuedSession, mode: SessionModeValue): SessionResultBody {
  const common = { expiresIn: issued.accessExpiresIn, expiresAt: issued.accessExpiresAt, userId: issued.userId, refreshTokenExpiresAt: issued.refreshExpiresAt }
  if (mode === 'cookie') {
    cookies.set(reply, issued)
    return { mode, ...common }
  }
  reply.header('cache-control', NO_STORE)
  return { mode, token: issued.accessToken, tokenType: 'Bearer', ...common, refreshToken: issued.refreshToken }
}
