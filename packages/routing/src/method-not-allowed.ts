/**
 * 405 Method Not Allowed (RFC 9110 15.5.6): a request whose path exists only for other
 * methods is answered 405 with an `Allow` header listing them, not 404; an OPTIONS request
 * on such a path is answered 204 with `Allow` (RFC 9110 9.3.7). On by default
 * (`methodNotAllowed: false` keeps Fastify's 404).
 *
 * Fastify's router does not say whether a path exists for other methods, so the plugin keeps
 * a second find-my-way router with the same options, fed from the same onRoute hook (after
 * the pattern rewriting, so compiled patterns match there as they do in the real router),
 * and asks it when a request ends in the not-found handler. The check is a preParsing hook
 * of the not-found context: onRequest hooks that guard every request (key-auth, rate limits)
 * have run first, as for a 404, so a client that may not pass learns nothing about which
 * paths exist; the body is not parsed yet, so a malformed one does not hide the 405.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, RequestPayload, RouteOptions } from 'fastify'
import FindMyWay from 'find-my-way'
import { RouteMethodNotAllowedError } from './errors.js'
import { normalizeNativeParams, pathOf, type Pattern } from './pattern.js'

type Strategy = Parameters<ReturnType<typeof FindMyWay>['addConstraintStrategy']>[0]

const ROUTER_OPTIONS = ['ignoreTrailingSlash', 'ignoreDuplicateSlashes', 'caseSensitive', 'maxParamLength', 'allowUnsafeRegex', 'useSemicolonDelimiter'] as const

/** The real router's matching options, read from the app's initial config. */
function routerOptionsOf (app: FastifyInstance): Record<string, unknown> {
  const config = app.initialConfig as Record<string, unknown> & { routerOptions?: Record<string, unknown> }
  const options: Record<string, unknown> = {}
  for (const key of ROUTER_OPTIONS) {
    const value = config.routerOptions?.[key] ?? config[key]
    if (value !== undefined) options[key] = value
  }
  return options
}

function noop (): void {}

/**
 * @param strategies the routing plugin's constraint strategies (compiled patterns, prefix roots), for the second router
 * @param patternOf the pattern (README.md "Path patterns") a (rewritten) route carries, for the empty-parameter rule
 */
export function registerMethodNotAllowed (app: FastifyInstance, strategies: Strategy[], patternOf: (route: RouteOptions) => Pattern | undefined): void {
  const shadow = FindMyWay({ ...routerOptionsOf(app), constraints: Object.fromEntries(strategies.map((strategy) => [strategy.name, strategy])) })
  const methods = new Set<string>()

  app.addHook('onRoute', function recordForAllow (route) {
    const pattern = patternOf(route)
    for (const method of Array.isArray(route.method) ? route.method : [route.method]) {
      try {
        shadow.on(method as never, route.url, { constraints: route.constraints ?? {} }, noop, pattern === undefined ? undefined : { pattern })
        methods.add(method)
      } catch {
        // A route find-my-way refuses here (a duplicate, an unknown constraint) is refused or
        // handled by Fastify's own router; it only goes missing from `Allow`.
      }
    }
  })

  /** The methods whose routes match this request's path, sorted. */
  function allowedMethods (request: FastifyRequest): string[] {
    const url = request.raw.url ?? '/'
    const derived: Record<string, string> = {}
    for (const strategy of strategies) derived[strategy.name] = strategy.deriveConstraint(request.raw, {}) as string
    const { host } = request.headers
    const version = request.headers['accept-version']
    if (typeof host === 'string') derived.host = host
    if (typeof version === 'string') derived.version = version
    const allowed: string[] = []
    for (const method of methods) {
      const found = shadow.find(method as never, url, derived)
      if (found === null) continue
      const store = found.store as { pattern?: Pattern } | undefined
      if (store?.pattern !== undefined && !normalizeNativeParams(store.pattern, { ...found.params })) continue
      allowed.push(method)
    }
    return allowed.sort()
  }

  app.addHook('preParsing', function answerMethodNotAllowed (request: FastifyRequest, reply: FastifyReply, payload: RequestPayload, done: (error?: Error | null, payload?: RequestPayload) => void) {
    if (!request.is404) {
      done(null, payload)
      return
    }
    const allowed = allowedMethods(request)
    // The path exists only when a method other than OPTIONS matches (a CORS plugin's
    // `OPTIONS *` route matches every path), and not for this request's own method.
    if (!allowed.some((method) => method !== 'OPTIONS') || allowed.includes(request.method)) {
      done(null, payload)
      return
    }
    if (!allowed.includes('OPTIONS')) allowed.push('OPTIONS')
    allowed.sort()
    reply.header('allow', allowed.join(', '))
    if (request.method === 'OPTIONS') {
      reply.code(204).send()
      return
    }
    done(new RouteMethodNotAllowedError(request.method, pathOf(request.url), allowed.join(', ')))
  })
}
