/**
 * Redirects: RedirectToRoute and RedirectBack. Redirect itself is Fastify's
 * `reply.redirect(url, status = 302)`.
 *
 * Open redirects: `redirectBack` follows the Referer only when it has the request's own
 * origin (or one listed in the `redirectBackOrigins` option or the call's `allowedOrigins`),
 * and then redirects to its path and query only, with leading slashes collapsed so
 * `//evil.example` cannot become a protocol-relative URL. Anything else goes to `fallback`,
 * which is the caller's own choice.
 */
import type { FastifyInstance, FastifyReply } from 'fastify'
import { ContextArgumentError, RoutingPluginMissingError } from './errors.js'
import { encodeUrl } from './headers.js'

export type RouteParamValue = string | number | boolean
/** Params of `redirectToRoute`: route parameters, and `queries` for the query string. */
export interface RedirectToRouteParams {
  [param: string]: RouteParamValue | Readonly<Record<string, RouteParamValue>> | undefined
  queries?: Readonly<Record<string, RouteParamValue>>
}

export interface RedirectBackOptions {
  /** Origins (`https://app.example.com`) whose Referer is also followed for this call. */
  allowedOrigins?: readonly string[]
}

declare module 'fastify' {
  interface FastifyReply {
    /**
     * RedirectToRoute: redirects to the named route's URL (the routing plugin's
     * `getRouteURL`), with `params.queries` as the query string. Status 302 unless given.
     */
    redirectToRoute: (name: string, params?: RedirectToRouteParams, status?: number) => FastifyReply
    /**
     * RedirectBack: redirects to the Referer when it is same-origin (see the module
     * notes), else to `fallback`. Status 302 unless given.
     */
    redirectBack: (fallback: string, status?: number, options?: RedirectBackOptions) => FastifyReply
  }
}

/** `app.getRouteURL`, which the routing plugin declares; absent without it. */
type GetRouteURL = (name: string, params?: Readonly<Record<string, RouteParamValue | undefined>>) => string

const REDIRECT_STATUSES = new Set([300, 301, 302, 303, 304, 305, 307, 308])

function checkStatus (status: number, operation: string): void {
  if (!REDIRECT_STATUSES.has(status)) throw new ContextArgumentError(`reply.${operation}: ${status} is not a redirect status`)
}

function httpOrigin (value: string): string {
  let url: URL | undefined
  try { url = new URL(value) } catch {}
  if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    throw new ContextArgumentError(`reply.redirectBack: "${value}" is not an http(s) origin`)
  }
  return url.origin
}

function isQueryMap (value: unknown): value is Readonly<Record<string, RouteParamValue>> {
  return value !== null && typeof value === 'object'
}

// Control characters (CR, LF, tab, ...) never belong in a Referer; the URL parser would drop
// tabs and newlines silently, so such a value is refused rather than read.
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\u0000-\u001f\u007f]/

/**
 * The part of a same-origin Referer to redirect to, or undefined when it must not be followed.
 * An absolute Referer is followed when its origin is ours or trusted. A path-only Referer
 * (`/back`, RFC 9110 10.1.3 allows a partial URI) is ours when it is a path-absolute
 * reference: it is resolved against our origin, so `//evil`, `/\\evil` (read as `//evil`)
 * and schemes give another origin and are refused like any cross-origin Referer.
 */
export function refererTarget (referer: string | undefined, ownOrigin: string, trusted: ReadonlySet<string>): string | undefined {
  if (referer === undefined || referer === '' || CONTROL.test(referer)) return undefined
  let url: URL
  try {
    url = referer.startsWith('/') ? new URL(referer, ownOrigin) : new URL(referer)
  } catch { return undefined }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined
  if (url.origin !== ownOrigin && !trusted.has(url.origin)) return undefined
  if (url.origin !== ownOrigin) return url.href
  // Only path and query: the host stays ours. `//x` (from `http://host//x`) would be protocol-relative.
  return url.pathname.replace(/^\/+/, '/') + url.search
}

/**
 * A route URL as a Location that cannot leave the site: a parameter value starting with `/`
 * on a root wildcard (`/*` with `/evil.example`) gives `//evil.example`, which a browser
 * reads as another host. The second character is percent-encoded (`/%2Fevil.example`), which
 * the router decodes back to the same parameter value.
 */
function siteLocal (url: string): string {
  if (url.startsWith('/') && (url[1] === '/' || url[1] === '\\')) return `/${encodeURIComponent(url[1] as string)}${url.slice(2)}`
  return url
}

/** Routing (the routing package's README, "Path patterns"): `+` names the first unnamed parameter (as `*` and `*1` do), `+2` the second. */
function unnamedKeys (params: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(params)) {
    const plus = /^\+(\d*)$/.exec(key)
    if (plus === null) {
      out[key] = value
      continue
    }
    const target = `*${plus[1] === '' ? '1' : plus[1] as string}`
    if (params[target] === undefined && !(target === '*1' && params['*'] !== undefined)) out[target] = value
  }
  return out
}

export function registerRedirectDecorators (app: FastifyInstance, redirectBackOrigins: ReadonlySet<string>): void {
  function redirectToRoute (this: FastifyReply, name: string, params: RedirectToRouteParams = {}, status = 302): FastifyReply {
    checkStatus(status, 'redirectToRoute')
    const getRouteURL = (this.server as { getRouteURL?: GetRouteURL }).getRouteURL
    if (typeof getRouteURL !== 'function') throw new RoutingPluginMissingError()
    const { queries, ...routeParams } = params
    for (const value of Object.values(routeParams)) {
      if (isQueryMap(value)) throw new ContextArgumentError('reply.redirectToRoute: only "queries" may hold an object')
    }
    let location = siteLocal(getRouteURL.call(this.server, name, unnamedKeys(routeParams) as Record<string, RouteParamValue | undefined>))
    if (queries !== undefined) {
      if (!isQueryMap(queries)) throw new ContextArgumentError('reply.redirectToRoute: queries must be an object')
      const search = new URLSearchParams(Object.entries(queries).map(([key, value]): [string, string] => [key, String(value)])).toString()
      if (search !== '') location += `?${search}`
    }
    return this.redirect(location, status)
  }

  function redirectBack (this: FastifyReply, fallback: string, status = 302, options: RedirectBackOptions = {}): FastifyReply {
    if (typeof fallback !== 'string' || fallback === '') throw new ContextArgumentError('reply.redirectBack needs a fallback URL')
    checkStatus(status, 'redirectBack')
    let trusted = redirectBackOrigins
    if (options.allowedOrigins !== undefined && options.allowedOrigins.length > 0) {
      trusted = new Set([...redirectBackOrigins, ...options.allowedOrigins.map(httpOrigin)])
    }
    const request = this.request
    let ownOrigin = ''
    try { ownOrigin = new URL(`${request.protocol}://${request.host}`).origin } catch {}
    const target = refererTarget(request.headers.referer, ownOrigin, trusted) ?? fallback
    return this.redirect(encodeUrl(target), status)
  }

  app.decorateReply('redirectToRoute', redirectToRoute)
  app.decorateReply('redirectBack', redirectBack)
}
