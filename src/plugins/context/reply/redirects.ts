/**
 * Redirects: SPEC.md RedirectToRoute and RedirectBack. Redirect itself is Fastify's
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
     * SPEC.md RedirectToRoute: redirects to the named route's URL (the routing plugin's
     * `getRouteURL`), with `params.queries` as the query string. Status 302 unless given.
     */
    redirectToRoute: (name: string, params?: RedirectToRouteParams, status?: number) => FastifyReply
    /**
     * SPEC.md RedirectBack: redirects to the Referer when it is same-origin (see the module
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

/** The part of a same-origin Referer to redirect to, or undefined when it must not be followed. */
export function refererTarget (referer: string | undefined, ownOrigin: string, trusted: ReadonlySet<string>): string | undefined {
  if (referer === undefined || referer === '') return undefined
  let url: URL
  try { url = new URL(referer) } catch { return undefined }
  if (url.origin !== ownOrigin && !trusted.has(url.origin)) return undefined
  if (url.origin !== ownOrigin) return url.href
  // Only path and query: the host stays ours. `//x` (from `http://host//x`) would be protocol-relative.
  return url.pathname.replace(/^\/+/, '/') + url.search
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
    let location = getRouteURL.call(this.server, name, routeParams as Record<string, RouteParamValue | undefined>)
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
