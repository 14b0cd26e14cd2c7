/**
 * buildApp: the whole service as a Fastify instance that never listens. The server
 * (src/server.ts) and the tests build it the same way.
 */
import fastifyCookie from '@fastify/cookie'
import fastifyRateLimit from '@fastify/rate-limit'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import { durationMs, type Config } from './config.js'
import { createAdmission } from './plugins/admission.js'
import { requestIds } from './lib/request-id.js'
import { parseTrustProxy } from './lib/trust-proxy.js'
import { attemptStore as storeOf } from './plugins/redis-attempts.js'
import { createAjv, createValidatorCompiler } from './lib/validation.js'
import { adminApiKeyScheme, adminRoutes } from './modules/admin/index.js'
import { healthRoutes } from './modules/health/index.js'
import { identity, identityRoutes, sessionCookieNames } from './modules/identity/index.js'
import { mailSender, outbox } from './modules/mail/index.js'
import { metricsRoutes } from './modules/metrics/index.js'
import { productImages, productRoutes, productsRepository, productsService } from './modules/products/index.js'
import { emailVerification, passwordReset, userRoutes, usersRepository, usersService } from './modules/users/index.js'
import contentCoding from './plugins/content-coding.js'
import cors, { corsHeadersOutsideFastify } from './plugins/cors.js'
import context from '@user-product-service/context'
import draining from './plugins/draining.js'
import errorHandler from './plugins/error-handler.js'
import loadShedding from './plugins/load-shedding.js'
import metrics from './plugins/metrics.js'
import openapi from './plugins/openapi.js'
import password from './plugins/password.js'
import prisma from './plugins/prisma.js'
import redis from './plugins/redis.js'
import routing from '@user-product-service/routing'
import securityHeaders from './plugins/security-headers.js'
import storage from './plugins/storage.js'
import webApp from './plugins/web-app.js'
import { serverOptions } from './options.js'
import type { Tracing } from './telemetry/index.js'

/**
 * The plugins' constants (each documented where its plugin defines it), changed by tests
 * that need a shorter wait or a smaller budget than production has; no variable sets them.
 */
export interface Tuning {
  /** The client-side query timeout, ms (src/db/client.ts). */
  queryTimeoutMs?: number
  /** `/health/ready`'s own bound, ms (src/modules/health/routes.ts). */
  readyTimeoutMs?: number
  /** `Retry-After` of a refusal, s (src/plugins/admission.ts). */
  retryAfterSeconds?: number
  /** How often the event loop delay is sampled, ms (src/plugins/load-shedding.ts). */
  sampleIntervalMs?: number
  /** Redis connection and command timeouts, ms (src/plugins/redis.ts). */
  redis?: { connectTimeoutMs?: number, commandTimeoutMs?: number }
  /** Changes of one's own record per user and window (src/modules/users/routes.ts). */
  accountChanges?: { max?: number, timeWindow?: number }
  /** Wrong admin keys per client and window (src/modules/admin/api-keys.ts). */
  keyFailures?: { max?: number, timeWindow?: number }
  /** Rotated refresh tokens kept per session (src/modules/identity/repository.ts). */
  refreshTokensKept?: number
  /** Live values of each in-memory challenge store, and WebAuthn challenges per client (src/modules/identity/challenges.ts). */
  challenges?: { maxKeys?: number, perOwner?: number }
  /** The clock of TOTP codes, ms (src/modules/identity/factors.ts). */
  clock?: () => number
  /** The mail sender's poll interval, first retry's wait and attempt deadline, ms, its per-address limit, or no sending at all (src/modules/mail/sender.ts). */
  mail?: { pollMs?: number, retryBaseMs?: number, sendDeadlineMs?: number, perAddress?: { max: number, timeWindow: number }, paused?: boolean }
}

export interface BuildAppOptions {
  config: Config
  /** The database the app uses (the embedded one, or the configured one). */
  databaseUrl: string
  /** Where logs go (default stdout). */
  logStream?: NodeJS.WritableStream
  /** Overrides of the Fastify options from `serverOptions(config.server)`. */
  fastify?: Partial<FastifyServerOptions>
  /** Tracing, when `startTracing(config.telemetry)` (src/telemetry) started it. */
  tracing?: Tracing
  /** Tests only. */
  tuning?: Tuning
}

export async function buildApp (options: BuildAppOptions): Promise<FastifyInstance> {
  const { config, tracing, tuning = {} } = options
  // Admission first: under overload, a request is refused before Fastify sees it (src/plugins/admission.ts).
  // Its refusals carry the id Fastify would give the request (genReqId in src/options.ts).
  const trustProxy = parseTrustProxy(config.server.trustProxy)
  const admission = createAdmission({ ...config.limits, trustProxy, requestId: requestIds(trustProxy), retryAfterSeconds: tuning.retryAfterSeconds, corsHeaders: corsHeadersOutsideFastify(config.auth.corsOrigins) })
  const app = Fastify({ ...serverOptions(config.server, options.logStream, tracing?.logMixin), serverFactory: admission.serverFactory, ...options.fastify }).withTypeProvider<TypeBoxTypeProvider>()
  admission.useLogger(app.log)
  // First, so that its span is active in every later hook, handler and query.
  if (tracing) await app.register(tracing.plugin)
  // The API speaks JSON only: without this, Fastify's built-in text/plain parser would
  // hand a string to the JSON schemas (a 400) where the right answer is 415.
  app.removeContentTypeParser('text/plain')
  app.setValidatorCompiler(createValidatorCompiler())

  // First: every answer, a refusal of any later hook included, carries these.
  await app.register(securityHeaders, config.server)
  await app.register(errorHandler)
  // CORS before the hooks that can refuse a request (draining, content codings,
  // authentication), so that a listed front-end can read their answers too; its preflights
  // are answered here, before anything else looks at them.
  await app.register(cors, { origins: config.auth.corsOrigins })
  await app.register(draining)
  await app.register(contentCoding)
  // Cookies of browser sessions (src/modules/identity/cookies.ts); the context plugin, in the
  // products scope below, uses this registration too.
  await app.register(fastifyCookie)
  // Shared state of the replicas (REDIS_URL); app.redis is null without it.
  await app.register(redis, { ...config.redis, ...tuning.redis })
  // Each limit's counts: in Redis when configured (every replica sees the same), else here.
  const attemptStore = (name: string) => storeOf(app.redis, name)
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
      cookieAuth: { type: 'apiKey', in: 'cookie', name: sessionCookieNames(config.auth.cookieSecure).access, description: 'Browsers only: the HttpOnly access-token cookie that login in cookie mode sets; the browser sends it by itself. This page cannot: a page\'s script may not set a Cookie header, so try the routes here with bearerAuth. Changes by cookie (POST, PATCH, DELETE) must come from the service\'s own origin or one of `CORS_ORIGINS` (the `Origin` header browsers send): 403 `CSRF_REJECTED` otherwise.' },
      adminApiKey: adminApiKeyScheme
    }
  })

  await app.register(prisma, { ...config.database, url: options.databaseUrl, queryTimeoutMs: tuning.queryTimeoutMs })
  await app.register(password, config.auth)
  await app.register(metrics, { admission })
  await app.register(loadShedding, { ...config.limits, admission, sampleIntervalMs: tuning.sampleIntervalMs })

  // Data access and services, each built once (docs/architecture.md); routes call the services.
  await app.register(usersRepository)
  await app.register(productsRepository, config.products)
  await app.register(storage)
  // Images before the services: deleting a product or a user deletes its image files too.
  await app.register(productImages, config.products)
  // E-mail goes through the outbox, sent beside the requests (src/modules/mail/).
  await app.register(outbox)
  await app.register(mailSender, { ...config.mail, store: attemptStore('mail-recipients'), ...tuning.mail })
  await app.register(emailVerification, { publicUrl: config.mail.publicUrl, store: attemptStore('verification-mails') })
  await app.register(usersService)
  await app.register(productsService)
  await app.register(passwordReset, { publicUrl: config.mail.publicUrl, ttlMs: durationMs(config.auth.passwordResetTtl), store: attemptStore('password-resets') })
  // Sign-in, sessions and factors, with their budgets (src/modules/identity/).
  await app.register(identity, { auth: config.auth, limits: config.limits, tuning })

  await app.register(healthRoutes, { prefix: '/health', readyTimeoutMs: tuning.readyTimeoutMs })
  await app.register(identityRoutes)
  await app.register(userRoutes, { prefix: '/api/user', accountChanges: { ...tuning.accountChanges, store: attemptStore('account-changes') } })
  // The routing and context plugins only where they serve: the product routes (named-route
  // URLs for a product's imageUrl; CSV negotiation, conditional and ranged image reads, the
  // guarded multipart upload: docs/context-api.md). In this scope their hooks see the product
  // routes alone, so no other request pays for them. The routing plugin's 405 answer is off:
  // the app-wide not-found handler (src/plugins/error-handler.ts) answers 405 with `Allow`
  // on every path, these included. The context
  // plugin keeps no raw copy of bodies, and content codings never reach its decoder
  // (content-coding answers 415 in onRequest, before its preParsing hook).
  await app.register(async function catalogue (scope) {
    await scope.register(routing, { methodNotAllowed: false })
    await scope.register(context, { rawBody: false, ajv: createAjv })
    await scope.register(productRoutes, { ...config.products, prefix: '/api/product' })
  })
  // One budget of wrong admin keys per client for /api/admin and /metrics together.
  const keyFailures = { ...tuning.keyFailures, store: attemptStore('admin-keys') }
  await app.register(adminRoutes, { ...config.auth, prefix: '/api/admin', keyFailures })
  await app.register(metricsRoutes, { ...config.auth, keyFailures })
  if (config.server.webApp) await app.register(webApp, { currency: config.server.currency })

  return app
}
