/**
 * routing: the routing model of README.md on Fastify's router.
 *
 * Register it before the routes it should see (it works through an onRoute hook), and
 * before plugins whose hooks read params (it sets them in an app-wide onRequest hook):
 * - path patterns: `:name` must not be empty, `:name?` reads '' when absent, `/prefix/*` also
 *   answers `/prefix` (a route added at the bare path), `*` also reads
 *   as `*1`, and patterns find-my-way cannot route as README.md "Path patterns" reads them (`+`, inner or
 *   several `*`, inner `:name?`, several parameters in one segment, a literal colon next to
 *   a parameter) are compiled; patterns that could never match are refused;
 * - 405 with `Allow` when the path exists only for other methods (`methodNotAllowed`);
 * - named routes: `config: { name: 'user' }` on a route, `app.getRouteURL(name, params)`;
 * - static files: `app.static(prefix, root, options?)`;
 * - handler chains: `chain(h1, h2, h3)` (exported), `next()` passes on;
 * - `reply.restartRouting()`, with a loop guard (`maxRestarts`).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction, onRouteHookHandler } from 'fastify'
import fp from 'fastify-plugin'
import { RoutingOptionError } from './errors.js'
import { NamedRoutes } from './named-routes.js'
import {
  compilePattern, matchCompiled, normalizeNativeParams, normalizePath, parsePattern, pathOf,
  type CompiledPattern, type PathOptions, type Pattern, type URLParamValue
} from './pattern.js'
import { registerMethodNotAllowed } from './method-not-allowed.js'
import { registerRestart } from './restart.js'
import { registerStatic } from './static-files.js'
// Their decorators' types (`declare module 'fastify'`), imported for that alone so that
// dist/index.d.ts imports them too (a declaration file drops imports used only at run time).
import './restart.js'
import './static-files.js'

export * from './errors.js'
export { chain, type ChainedRoute, type ChainHandler, type Next } from './chain.js'
export { buildURL, compilePattern, matchCompiled, parsePattern, type CompiledPattern, type Pattern, type Token, type URLParamValue } from './pattern.js'
export type { StaticOptions } from './static-files.js'

export interface RoutingOptions {
  /** Restarts of one request before `restartRouting` throws RestartLimitError. @default 10 */
  maxRestarts?: number
  /**
   * A path that exists only for other methods answers 405 with `Allow` (RouteMethodNotAllowedError,
   * through the app's error handler) and OPTIONS on it 204 with `Allow`; false keeps 404. @default true
   */
  methodNotAllowed?: boolean
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route's name for `app.getRouteURL` / `reply.redirectToRoute` (routing plugin). */
    name?: string
  }
  interface FastifyInstance {
    /**
     * GetRouteURL: the relative URL of the route named `name`, parameters
     * percent-encoded. RouteNameNotFoundError / RouteParamMissingError otherwise.
     */
    getRouteURL: (name: string, params?: Readonly<Record<string, URLParamValue | undefined>>) => string
  }
}

/** The find-my-way constraint that lets a compiled pattern's wildcard route match. */
export const PATTERN_CONSTRAINT = 'routingPattern'

/** The find-my-way constraint that keeps a route `/` under a prefix to the prefix alone. */
const TRAILING_SLASH_CONSTRAINT = 'routingTrailingSlashes'

/** How many slashes end the path (after the router options' normalization): `/foo` 0, `/foo/` 1. */
function trailingSlashes (path: string): string {
  return String(path.length - path.replace(/\/+$/, '').length)
}

/** Constraint storage keyed by exact value (find-my-way wants one per node). */
function exactStorage (): { get: (value: string) => unknown, set: (value: string, store: unknown) => void } {
  const stores = new Map<string, unknown>()
  return { get: (value) => stores.get(value) ?? null, set: (value, store) => { stores.set(value, store) } }
}

/** What an onRoute hook is given. */
type HookedRoute = Parameters<onRouteHookHandler>[0]

/**
 * Fastify registers a route `/` under a prefix at both `/prefix` and `/prefix/` (its
 * `prefixTrailingSlash: 'both'` default), the second without running onRoute hooks. Exact by
 * default (README.md): a route `/` (or `''`) under a prefix answers the prefix as written
 * alone, as `prefixTrailingSlash: 'no-slash'` would, unless the route chose a
 * `prefixTrailingSlash` itself or the router ignores trailing slashes (then both, as for
 * every route). Both registrations share the route's constraints: this one lets only paths
 * ending in as many slashes as the prefix reach them, so `/prefix/` falls through to the
 * prefix's other routes (a `/*`) or 404. HEAD routes skip Fastify's doubling and come as `/`:
 * they are moved to the prefix.
 */
function exactPrefixRoot (route: HookedRoute, options: PathOptions): void {
  const prefix = route.prefix ?? ''
  if (prefix === '' || route.prefixTrailingSlash !== undefined || options.ignoreTrailingSlash === true) return
  if (route.routePath === '/' && route.method === 'HEAD' && !prefix.endsWith('/')) {
    route.url = prefix
    route.path = prefix
  } else if (route.routePath !== '') {
    return
  }
  route.constraints = { ...route.constraints, [TRAILING_SLASH_CONSTRAINT]: trailingSlashes(prefix) }
}

const compiledByKey = new Map<string, CompiledPattern>()

function compiledOf (source: string, options: PathOptions): CompiledPattern {
  const key = options.caseSensitive === false ? `i ${source}` : `  ${source}`
  let compiled = compiledByKey.get(key)
  if (compiled === undefined) {
    compiled = compilePattern(parsePattern(source), options)
    compiledByKey.set(key, compiled)
  }
  return compiled
}

/** The options of Fastify's router that change how a path matches, from the app's initial config. */
function pathOptionsOf (app: FastifyInstance): PathOptions {
  const config = app.initialConfig as Record<string, unknown> & { routerOptions?: Record<string, unknown> }
  const read = (key: keyof PathOptions): boolean | undefined => {
    const value = config.routerOptions?.[key] ?? config[key]
    return typeof value === 'boolean' ? value : undefined
  }
  return { caseSensitive: read('caseSensitive'), ignoreTrailingSlash: read('ignoreTrailingSlash'), ignoreDuplicateSlashes: read('ignoreDuplicateSlashes') }
}

/**
 * Constraint storage of one router node: find-my-way stores a value per constraint value
 * (here the pattern source) and asks for the one of the request's value (here its path).
 * A path gets the union of the values of every pattern it matches.
 */
function patternStorage (options: PathOptions): () => { get: (value: string) => unknown, set: (value: string, store: unknown) => void } {
  return function storage () {
    const stores = new Map<string, unknown>()
    return {
      get (value) {
        if (stores.has(value)) return stores.get(value)
        let found: unknown = null
        for (const [source, store] of stores) {
          if (!compiledOf(source, options).regex.test(value)) continue
          found = typeof found === 'number' && typeof store === 'number' ? found | store : found ?? store
        }
        return found
      },
      set (value, store) {
        compiledOf(value, options)
        stores.set(value, store)
      }
    }
  }
}

/** Where a route's pattern travels in its config, from onRoute to the request hook. */
const kPattern = Symbol('routing.pattern')
/** Marks the route the plugin adds at the bare path of a `/prefix/*` route. */
const kBare = Symbol('routing.bare')

interface PatternConfig { [kPattern]?: Pattern | CompiledPattern, [kBare]?: true }

/**
 * `/files/*` -> `/files`: the path a native pattern ending in `/*` also matches with an empty
 * rest (find-my-way needs the slash). Undefined for other patterns and for `/*`.
 */
function bareOfWildcard (pattern: Pattern): string | undefined {
  const last = pattern.tokens[pattern.tokens.length - 1]
  if (!pattern.native || last?.kind !== 'wildcard' || last.plus || !pattern.source.endsWith('/*')) return undefined
  const bare = pattern.source.slice(0, -2)
  return bare === '' ? undefined : bare
}

function withPattern<Config> (config: Config, pattern: Pattern | CompiledPattern): Config {
  const carried: PatternConfig = { ...config, [kPattern]: pattern }
  return carried as Config
}

/**
 * The parameters of the matched route as README.md "Path patterns" names them. One app-wide onRequest hook, added when the plugin
 * is registered, rather than a hook on each route: Fastify runs app-wide hooks before a
 * route's own, and a hook registered after this plugin (key-auth with a `param:` source,
 * for one) must see the params of compiled patterns, not find-my-way's `*`.
 */
function paramsHook (options: PathOptions) {
  return function readParamsAsSpec (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
    const pattern = (request.routeOptions.config as PatternConfig)[kPattern]
    if (pattern === undefined) {
      done()
      return
    }
    if ('regex' in pattern) {
      try {
        request.params = matchCompiled(pattern, normalizePath(pathOf(request.raw.url ?? '/'), options)) ?? {}
      } catch (error) {
        done(error as Error)
        return
      }
      done()
      return
    }
    if (normalizeNativeParams(pattern, request.params as Record<string, string | undefined>)) done()
    else reply.callNotFound()
  }
}

function resolveOptions (options: RoutingOptions): Required<RoutingOptions> {
  const maxRestarts = options.maxRestarts ?? 10
  if (!Number.isInteger(maxRestarts) || maxRestarts < 0) throw new RoutingOptionError('maxRestarts must be a whole number >= 0')
  const methodNotAllowed = options.methodNotAllowed ?? true
  if (typeof methodNotAllowed !== 'boolean') throw new RoutingOptionError('methodNotAllowed must be a boolean')
  return { maxRestarts, methodNotAllowed }
}

async function routing (app: FastifyInstance, options: RoutingOptions): Promise<void> {
  const { maxRestarts, methodNotAllowed } = resolveOptions(options)
  const named = new NamedRoutes()

  const pathOptions = pathOptionsOf(app)
  const patternStrategy = {
    name: PATTERN_CONSTRAINT,
    // find-my-way types the stored value as its handler; it is opaque to this storage.
    storage: patternStorage(pathOptions) as unknown as Parameters<FastifyInstance['addConstraintStrategy']>[0]['storage'],
    deriveConstraint: (req: { url?: string }) => normalizePath(pathOf(req.url ?? '/'), pathOptions),
    mustMatchWhenDerived: false
  }
  if (!app.hasConstraintStrategy(PATTERN_CONSTRAINT)) app.addConstraintStrategy(patternStrategy)
  const trailingSlashStrategy = {
    name: TRAILING_SLASH_CONSTRAINT,
    storage: exactStorage as unknown as Parameters<FastifyInstance['addConstraintStrategy']>[0]['storage'],
    deriveConstraint: (req: { url?: string }) => trailingSlashes(normalizePath(pathOf(req.url ?? '/'), pathOptions)),
    mustMatchWhenDerived: false
  }
  if (!app.hasConstraintStrategy(TRAILING_SLASH_CONSTRAINT)) app.addConstraintStrategy(trailingSlashStrategy)

  /** `METHOD url` of each route added at the bare path of a `/prefix/*` route. */
  const bareRoutes = new Set<string>()
  /** Wildcard URLs of `app.static` folders, which get no bare route. */
  const staticWildcards = new Set<string>()

  app.addHook('onRoute', function applyRoutingModel (this: FastifyInstance, route) {
    if ((route.config as PatternConfig | undefined)?.[kBare] === true) return
    const methods = Array.isArray(route.method) ? route.method : [route.method]
    // An app's own route at a bare path the plugin took first: one more constraint (one that
    // every path reaching that node meets) makes it no duplicate, and the router prefers it.
    if (methods.some((method) => bareRoutes.has(`${method} ${route.url}`))) {
      route.constraints = { ...route.constraints, [TRAILING_SLASH_CONSTRAINT]: trailingSlashes(normalizePath(route.url, pathOptions)) }
    }
    const pattern = parsePattern(route.url)
    const name = route.config?.name
    if (name !== undefined) {
      if (typeof name !== 'string' || name === '') throw new RoutingOptionError(`route ${route.url}: config.name must be a non-empty string`)
      named.add(name, pattern)
    }
    if (pattern.native) {
      if (pattern.tokens.some((token) => token.kind !== 'literal')) route.config = withPattern(route.config, pattern)
      exactPrefixRoot(route, pathOptions)
      addBareRoute(this, route, pattern, methods)
      return
    }
    const compiled = compiledOf(pattern.source, pathOptions)
    route.url = compiled.routerUrl
    route.path = compiled.routerUrl
    route.constraints = { ...route.constraints, [PATTERN_CONSTRAINT]: pattern.source }
    route.config = withPattern(route.config, compiled)
  })
  /**
   * `/prefix/*` also answers `/prefix`, the rest read under `*` being empty (README.md "Path
   * patterns"): the same route (handler, hooks, schema) is added at the bare path, in the
   * same scope, carrying the wildcard's pattern so its params read `*` = `*1` = ''. Not when a
   * route of the app holds that path and method already (it keeps it; one added later wins
   * through the constraint above), nor for a bare path outside the scope's prefix (`/*` under
   * prefix `/foo/`), nor for `app.static` folders: @fastify/static's handler reads the prefix
   * from the URL of the route that first called it, so a second route breaks one of the two.
   */
  function addBareRoute (scope: FastifyInstance, route: HookedRoute, pattern: Pattern, methods: string[]): void {
    const bare = bareOfWildcard(pattern)
    const prefix = route.prefix ?? ''
    if (bare === undefined || !bare.startsWith(prefix) || staticWildcards.has(route.url)) return
    const free = methods.filter((method) => !bareRoutes.has(`${method} ${bare}`) && !scope.hasRoute({ method: method as never, url: bare }))
    if (free.length === 0) return
    for (const method of free) bareRoutes.add(`${method} ${bare}`)
    const { url: _url, path: _path, routePath: _routePath, prefix: _prefix, config, ...options } = route
    const { name: _name, ...rest } = (config ?? {}) as Record<string | symbol, unknown>
    const bareConfig: PatternConfig = { ...rest, [kPattern]: pattern, [kBare]: true }
    scope.route({ ...options, method: free as never, url: bare.slice(prefix.length), config: bareConfig as typeof config })
  }

  app.addHook('onRequest', paramsHook(pathOptions))
  if (methodNotAllowed) {
    registerMethodNotAllowed(app, [patternStrategy, trailingSlashStrategy], (route) => {
      const pattern = (route.config as PatternConfig | undefined)?.[kPattern]
      return pattern === undefined || 'regex' in pattern ? undefined : pattern
    })
  }

  app.decorate('getRouteURL', function getRouteURL (name: string, params?: Readonly<Record<string, URLParamValue | undefined>>) {
    return named.url(name, params)
  })
  registerStatic(app, (url) => staticWildcards.add(url))
  registerRestart(app, maxRestarts)
}

export default fp(routing, { name: 'routing', fastify: '5.x' })
