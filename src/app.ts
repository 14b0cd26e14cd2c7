/**
 * buildApp: the whole service as a Fastify instance that never listens. The server
 * (src/server.ts) and the tests build it the same way.
 */
import fastifyCookie from '@fastify/cookie'
import fastifyRateLimit from '@fastify/rate-limit'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import { durationMs, type Config } from './config.js'
import { createAdmission } from './lib/admission.js'
import { requestIds } from './lib/request-id.js'
import { parseTrustProxy } from './lib/trust-proxy.js'
import { MemoryAttemptStore, type AttemptStore } from './lib/attempts.js'
import { RedisAttemptStore } from './lib/redis-attempts.js'
import { createAjv, createValidatorCompiler } from './lib/validation.js'
import { adminApiKeyScheme } from './modules/admin/api-keys.js'
import { adminRoutes } from './modules/admin/routes.js'
import { accountLimiter } from './modules/auth/account-limit.js'
import { authBudget as createAuthBudget } from './modules/auth/budget.js'
import { authRoutes } from './modules/auth/routes.js'
import { healthRoutes } from './modules/health/routes.js'
import { metricsRoutes } from './modules/metrics/routes.js'
import productImages from './modules/products/images.js'
import productsRepository from './modules/products/repository.js'
import { productRoutes } from './modules/products/routes.js'
import { sessionCookieNames } from './modules/sessions/cookies.js'
import { originCheck as createOriginCheck } from './modules/sessions/csrf.js'
import sessionsRepository from './modules/sessions/repository.js'
import sessionsService from './modules/sessions/plugin.js'
import productsService from './modules/products/service.js'
import usersRepository from './modules/users/repository.js'
import { userRoutes } from './modules/users/routes.js'
import usersService from './modules/users/service.js'
import authentication from './plugins/authentication.js'
import contentCoding from './plugins/content-coding.js'
import context from './plugins/context/index.js'
import draining from './plugins/draining.js'
import errorHandler from './plugins/error-handler.js'
import loadShedding from './plugins/load-shedding.js'
import metrics from './plugins/metrics.js'
import openapi from './plugins/openapi.js'
import password from './plugins/password.js'
import prisma from './plugins/prisma.js'
import redis from './plugins/redis.js'
import routing from './plugins/routing/index.js'
import securityHeaders from './plugins/security-headers.js'
import storage from './plugins/storage.js'
import { serverOptions } from './options.js'
import type { Tracing } from './telemetry/index.js'

export interface BuildAppOptions {
  config: Config
  /** The database the app uses (the embedded one, or the configured one). */
  databaseUrl: string
  /** Where logs go (default stdout). */
  logStream?: NodeJS.WritableStream
  /** Overrides of the Fastify options from `serverOptions(config)`. */
  fastify?: Partial<FastifyServerOptions>
  /** Tracing, when `startTracing(config)` (src/telemetry) started it. */
  tracing?: Tracing
}

export async function buildApp (options: BuildAppOptions): Promise<FastifyInstance> {
  const { config } = options
  const { tracing } = options
  // Admission first: under overload, a request is refused before Fastify sees it (src/lib/admission.ts).
  // Its refusals carry the id Fastify would give the request (genReqId in src/options.ts).
  const trustProxy = parseTrustProxy(config.TRUST_PROXY)
  const admission = createAdmission({
    maxInFlight: config.LOAD_SHED_MAX_IN_FLIGHT,
    retryAfterSeconds: config.LOAD_SHED_RETRY_AFTER_S,
    requestId: requestIds(trustProxy),
    maxInFlightPerClient: config.LOAD_SHED_MAX_IN_FLIGHT_PER_CLIENT,
    trustProxy,
    slowWindowMs: config.SLOW_CLIENT_WINDOW_MS,
    minBytesPerSecond: config.SLOW_CLIENT_MIN_BYTES_PER_S
  })
  const app = Fastify({ ...serverOptions(config, options.logStream, tracing?.logMixin), serverFactory: admission.serverFactory, ...options.fastify }).withTypeProvider<TypeBoxTypeProvider>()
  admission.useLogger(app.log)
  // First, so that its span is active in every later hook, handler and query.
  if (tracing) await app.register(tracing.plugin)
  // The API speaks JSON only: without this, Fastify's built-in text/plain parser would
  // hand a string to the JSON schemas (a 400) where the right answer is 415.
  app.removeContentTypeParser('text/plain')
  app.setValidatorCompiler(createValidatorCompiler())

  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id)
    done()
  })

  await app.register(errorHandler)
  await app.register(draining)
  await app.register(contentCoding)
  // The context API (docs/context-api.md, "In the service"): request and reply decorators
  // for every request. Content codings never reach its decoder (content-coding answers 415
  // in onRequest, before its preParsing hook), and it keeps no raw copy of bodies. It
  // registers @fastify/cookie unless that is registered first (register it above to set
  // cookie options).
  // Cookies of browser sessions (src/modules/sessions/cookies.ts); the context plugin uses this registration too.
  await app.register(fastifyCookie)
  await app.register(context, { rawBody: false, ajv: createAjv })
  await app.register(securityHeaders, { httpsOnly: config.HTTPS_ONLY })
  // Shared state of the replicas (REDIS_URL); app.redis is null without it.
  await app.register(redis, {
    url: config.REDIS_URL,
    keyPrefix: config.REDIS_KEY_PREFIX,
    connectTimeoutMs: config.REDIS_CONNECT_TIMEOUT_MS,
    commandTimeoutMs: config.REDIS_COMMAND_TIMEOUT_MS
  })
  // Each limit's counts: in Redis when configured (every replica sees the same), else here.
  const attemptStore = (name: string): AttemptStore => app.redis === null ? new MemoryAttemptStore() : new RedisAttemptStore(app.redis, name)
  await app.register(fastifyRateLimit, {
    global: false,
    // Route limits (none of the service's own routes uses one yet) count in Redis too; a
    // Redis that is down lets their requests through: they guard reads, which stay up. The
    // limits that guard passwords and keys are AttemptStores and fail closed instead.
    ...(app.redis === null ? {} : { redis: app.redis, nameSpace: 'rate-limit:', skipOnError: true }),
    errorResponseBuilder: (_request, context) => {
      const error = new Error(`Too many requests; retry in ${Math.ceil(context.ttl / 1000)} s`) as Error & { statusCode: number }
      error.statusCode = context.statusCode
      return error
    }
  })
  await app.register(openapi, {
    version: '0.1.0',
    securitySchemes: {
      bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
      cookieAuth: { type: 'apiKey', in: 'cookie', name: sessionCookieNames(config.COOKIE_SECURE).access, description: 'Browsers: the access token in an HttpOnly cookie set by login in cookie mode. Changes (POST, PATCH, DELETE) must come from a trusted origin (`Origin` header): 403 `CSRF_REJECTED` otherwise.' },
      adminApiKey: adminApiKeyScheme
    }
  })

  await app.register(prisma, {
    url: options.databaseUrl,
    poolSize: config.DB_POOL_SIZE,
    connectionTimeoutMillis: config.DB_CONNECT_TIMEOUT_MS,
    statementTimeoutMillis: config.DB_STATEMENT_TIMEOUT_MS,
    queryTimeoutMillis: config.DB_QUERY_TIMEOUT_MS,
    pgbouncer: config.DB_PGBOUNCER
  })
  await app.register(password, { cost: config.BCRYPT_COST })
  await app.register(metrics, { admission })
  await app.register(loadShedding, { admission, maxEventLoopDelayMs: config.MAX_EVENT_LOOP_DELAY_MS, sampleIntervalMs: config.LOAD_SHED_SAMPLE_MS, maxDbWaiting: config.LOAD_SHED_MAX_DB_WAITING })

  // Data access and services, each built once (docs/architecture.md); routes call the services.
  await app.register(usersRepository)
  await app.register(productsRepository, { maxPerUser: config.PRODUCTS_MAX_PER_USER })
  await app.register(storage, { root: config.UPLOAD_DIR })
  // Images before the services: deleting a product or a user deletes its image files too.
  await app.register(productImages, { maxBytes: config.IMAGE_MAX_BYTES, bytesPerUser: config.IMAGE_BYTES_MAX_PER_USER })
  const originCheck = createOriginCheck({ trustedOrigins: config.CSRF_TRUSTED_ORIGINS })
  await app.register(authentication, {
    secret: config.SECRET,
    expiresIn: config.ACCESS_TOKEN_TTL,
    findUser: app.usersRepository.findTokenUser,
    accessCookie: sessionCookieNames(config.COOKIE_SECURE).access,
    originCheck
  })
  await app.register(sessionsRepository, { sessionsMax: config.SESSIONS_MAX_PER_USER, refreshKept: config.REFRESH_TOKENS_KEPT, refreshMinIntervalMs: config.REFRESH_MIN_INTERVAL_MS })
  await app.register(sessionsService, { refreshTtlMs: durationMs(config.REFRESH_TOKEN_TTL), cookieSecure: config.COOKIE_SECURE })
  // One budget of password guesses per account, for login and the current-password checks.
  const guesses = accountLimiter({ max: config.LOGIN_FAILURES_MAX, timeWindow: config.LOGIN_FAILURES_WINDOW_MS }, attemptStore('guesses'))
  await app.register(usersService, { guesses })
  await app.register(productsService)

  // One per-client budget for every request that costs a bcrypt computation.
  const authBudget = createAuthBudget({ max: config.RATE_LIMIT_AUTH_MAX, timeWindow: config.RATE_LIMIT_AUTH_WINDOW_MS, store: attemptStore('auth') })
  await app.register(healthRoutes, { prefix: '/health', readyTimeoutMs: config.HEALTH_READY_TIMEOUT_MS })
  await app.register(authRoutes, { prefix: '/api/auth', authBudget, expiresIn: config.ACCESS_TOKEN_TTL, originCheck })
  await app.register(userRoutes, { prefix: '/api/user', authBudget, expiresIn: config.ACCESS_TOKEN_TTL, accountChanges: { max: config.ACCOUNT_CHANGES_MAX, timeWindow: config.ACCOUNT_CHANGES_WINDOW_MS, store: attemptStore('account-changes') } })
  // The routing plugin only where it serves: named-route URLs (a product's imageUrl). In this
  // scope its onRoute and onRequest hooks see the product routes alone, and its 405 answer is
  // off, so every route answers as before (test/service-routes.test.ts).
  await app.register(async function catalogue (scope) {
    await scope.register(routing, { methodNotAllowed: false })
    await scope.register(productRoutes, { prefix: '/api/product', imageMaxBytes: config.IMAGE_MAX_BYTES, csvMaxRows: config.CSV_MAX_ROWS })
  })
  // One budget of wrong admin keys per client for /api/admin and /metrics together.
  const keyFailures = { max: config.ADMIN_KEY_FAILURES_MAX, timeWindow: config.ADMIN_KEY_FAILURES_WINDOW_MS, store: attemptStore('admin-keys') }
  await app.register(adminRoutes, { prefix: '/api/admin', apiKeys: config.ADMIN_API_KEYS, keyFailures })
  await app.register(metricsRoutes, { apiKeys: config.ADMIN_API_KEYS, keyFailures })

  return app
}
