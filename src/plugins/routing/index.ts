/**
 * routing: the routing model of SPEC.md on Fastify's router. docs/routing.md.
 *
 * Register it before the routes it should see (it works through an onRoute hook):
 * - path patterns: `:name` must not be empty, `:name?` reads '' when absent, `*` also reads
 *   as `*1`, and patterns find-my-way cannot route (`+`, inner or several `*`, inner
 *   `:name?`) are compiled;
 * - named routes: `config: { name: 'user' }` on a route, `app.getRouteURL(name, params)`;
 * - static files: `app.static(prefix, root, options?)`;
 * - handler chains: `chain(h1, h2, h3)` (exported), `next()` passes on;
 * - `reply.restartRouting()`, with a loop guard (`maxRestarts`).
 */
import type { FastifyInstance, onRequestHookHandler, RouteOptions } from 'fastify'
import fp from 'fastify-plugin'
import { RoutingOptionError } from './errors.js'
import { NamedRoutes } from './named-routes.js'
import {
  compilePattern, matchCompiled, normalizeNativeParams, parsePattern, pathOf,
  type CompiledPattern, type Pattern, type URLParamValue
} from './pattern.js'
import { registerRestart } from './restart.js'
import { registerStatic } from './static-files.js'

export * from './errors.js'
export { chain, type ChainedRoute, type ChainHandler, type Next } from './chain.js'
export { buildURL, compilePattern, matchCompiled, parsePattern, type CompiledPattern, type Pattern, type Token, type URLParamValue } from './pattern.js'
export type { StaticOptions } from './static-files.js'

export interface RoutingOptions {
  /** Restarts of one request before `restartRouting` throws RestartLimitError. @default 10 */
  maxRestarts?: number
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route's name for `app.getRouteURL` / `reply.redirectToRoute` (routing plugin). */
    name?: string
  }
  interface FastifyInstance {
    /**
     * SPEC.md GetRouteURL: the relative URL of the route named `name`, parameters
     * percent-encoded. RouteNameNotFoundError / RouteParamMissingError otherwise.
     */
    getRouteURL: (name: string, params?: Readonly<Record<string, URLParamValue | undefined>>) => string
  }
}

/** The find-my-way constraint that lets a compiled pattern's wildcard route match. */
export const PATTERN_CONSTRAINT = 'routingPattern'

const compiledBySource = new Map<string, CompiledPattern>()

function compiledOf (source: string): CompiledPattern {
  let compiled = compiledBySource.get(source)
  if (compiled === undefined) {
    compiled = compilePattern(parsePattern(source))
    compiledBySource.set(source, compiled)
  }
  return compiled
}

/**
 * Constraint storage of one router node: find-my-way stores a value per constraint value
 * (here the pattern source) and asks for the one of the request's value (here its path).
 * A path gets the union of the values of every pattern it matches.
 */
function patternStorage (): { get: (value: string) => unknown, set: (value: string, store: unknown) => void } {
  const stores = new Map<string, unknown>()
  return {
    get (value) {
      if (stores.has(value)) return stores.get(value)
      let found: unknown = null
      for (const [source, store] of stores) {
        if (!compiledOf(source).regex.test(value)) continue
        found = typeof found === 'number' && typeof store === 'number' ? found | store : found ?? store
      }
      return found
    },
    set (value, store) {
      compiledOf(value)
      stores.set(value, store)
    }
  }
}

function prependOnRequest (route: RouteOptions, hook: onRequestHookHandler): void {
  const existing = route.onRequest
  route.onRequest = [hook, ...(existing === undefined ? [] : Array.isArray(existing) ? existing : [existing])]
}

function nativeParamsHook (pattern: Pattern): onRequestHookHandler {
  return function readParamsAsSpec (request, reply, done) {
    if (normalizeNativeParams(pattern, request.params as Record<string, string | undefined>)) done()
    else reply.callNotFound()
  }
}

function compiledParamsHook (pattern: CompiledPattern): onRequestHookHandler {
  return function readCompiledParams (request, _reply, done) {
    try {
      request.params = matchCompiled(pattern, pathOf(request.raw.url ?? '/')) ?? {}
    } catch (error) {
      done(error as Error)
      return
    }
    done()
  }
}

function resolveOptions (options: RoutingOptions): Required<RoutingOptions> {
  const maxRestarts = options.maxRestarts ?? 10
  if (!Number.isInteger(maxRestarts) || maxRestarts < 0) throw new RoutingOptionError('maxRestarts must be a whole number >= 0')
  return { maxRestarts }
}

async function routing (app: FastifyInstance, options: RoutingOptions): Promise<void> {
  const { maxRestarts } = resolveOptions(options)
  const named = new NamedRoutes()

  if (!app.hasConstraintStrategy(PATTERN_CONSTRAINT)) {
    app.addConstraintStrategy({
      name: PATTERN_CONSTRAINT,
      // find-my-way types the stored value as its handler; it is opaque to this storage.
      storage: patternStorage as unknown as Parameters<FastifyInstance['addConstraintStrategy']>[0]['storage'],
      deriveConstraint: (req: { url?: string }) => pathOf(req.url ?? '/'),
      mustMatchWhenDerived: false
    })
  }

  app.addHook('onRoute', function applyRoutingModel (route) {
    const pattern = parsePattern(route.url)
    const name = route.config?.name
    if (name !== undefined) {
      if (typeof name !== 'string' || name === '') throw new RoutingOptionError(`route ${route.url}: config.name must be a non-empty string`)
      named.add(name, pattern)
    }
    if (pattern.native) {
      if (pattern.tokens.some((token) => token.kind !== 'literal')) prependOnRequest(route, nativeParamsHook(pattern))
      return
    }
    const compiled = compiledOf(pattern.source)
    route.url = compiled.routerUrl
    route.path = compiled.routerUrl
    route.constraints = { ...route.constraints, [PATTERN_CONSTRAINT]: pattern.source }
    prependOnRequest(route, compiledParamsHook(compiled))
  })

  app.decorate('getRouteURL', function getRouteURL (name: string, params?: Readonly<Record<string, URLParamValue | undefined>>) {
    return named.url(name, params)
  })
  registerStatic(app)
  registerRestart(app, maxRestarts)
}

export default fp(routing, { name: 'routing', fastify: '5.x' })
