/**
 * buildApp: the whole service as a Fastify instance that never listens. The server
 * (src/server.ts) and the tests build it the same way.
 */
import fastifyHelmet from '@fastify/helmet'
import fastifyRateLimit from '@fastify/rate-limit'
import fastifySwagger from '@fastify/swagger'
import fastifySwaggerUi from '@fastify/swagger-ui'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import type { Config } from './config.js'
import { createValidatorCompiler, strictIntegerStrings } from './lib/validation.js'
import { adminApiKeyScheme } from './modules/admin/api-keys.js'
import { adminRoutes } from './modules/admin/routes.js'
import { authRoutes } from './modules/auth/routes.js'
import { healthRoutes } from './modules/health/routes.js'
import { productRoutes } from './modules/products/routes.js'
import { userRoutes } from './modules/users/routes.js'
import authentication from './plugins/authentication.js'
import contentCoding from './plugins/content-coding.js'
import errorHandler from './plugins/error-handler.js'
import password from './plugins/password.js'
import prisma from './plugins/prisma.js'
import { serverOptions } from './options.js'

export interface BuildAppOptions {
  config: Config
  /** The database the app uses (the embedded one, or the configured one). */
  databaseUrl: string
  /** Where logs go (default stdout). */
  logStream?: NodeJS.WritableStream
  /** Overrides of the Fastify options from `serverOptions(config)`. */
  fastify?: Partial<FastifyServerOptions>
}

export async function buildApp (options: BuildAppOptions): Promise<FastifyInstance> {
  const { config } = options
  const app = Fastify({ ...serverOptions(config, options.logStream), ...options.fastify }).withTypeProvider<TypeBoxTypeProvider>()
  // The API speaks JSON only: without this, Fastify's built-in text/plain parser would
  // hand a string to the JSON schemas (a 400) where the right answer is 415.
  app.removeContentTypeParser('text/plain')
  app.setValidatorCompiler(createValidatorCompiler())
  app.addHook('onRoute', strictIntegerStrings)

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id)
  })

  await app.register(errorHandler)
  await app.register(contentCoding)
  await app.register(fastifyHelmet, {
    // The OpenAPI page loads its own scripts and styles from /docs/static.
    contentSecurityPolicy: { directives: { 'img-src': ["'self'", 'data:', 'validator.swagger.io'] } }
  })
  await app.register(fastifyRateLimit, {
    global: false,
    errorResponseBuilder: (_request, context) => {
      const error = new Error(`Too many requests; retry in ${Math.ceil(context.ttl / 1000)} s`) as Error & { statusCode: number }
      error.statusCode = context.statusCode
      return error
    }
  })
  await app.register(fastifySwagger, {
    openapi: {
      info: { title: 'User and product service', version: '0.1.0', description: 'Users, JWT login and products. Errors are RFC 9457 problem details.' },
      components: { securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' }, adminApiKey: adminApiKeyScheme } }
    }
  })
  await app.register(fastifySwaggerUi, { routePrefix: '/docs' })

  await app.register(prisma, { url: options.databaseUrl, poolSize: config.DB_POOL_SIZE })
  await app.register(password, { cost: config.BCRYPT_COST })
  await app.register(authentication, { secret: config.SECRET, expiresIn: config.JWT_EXPIRES_IN })

  const rateLimit = { max: config.RATE_LIMIT_AUTH_MAX, timeWindow: config.RATE_LIMIT_AUTH_WINDOW_MS }
  await app.register(healthRoutes, { prefix: '/health' })
  const accountLimit = { max: config.LOGIN_FAILURES_MAX, timeWindow: config.LOGIN_FAILURES_WINDOW_MS }
  await app.register(authRoutes, { prefix: '/api/auth', rateLimit, accountLimit, expiresIn: config.JWT_EXPIRES_IN })
  await app.register(userRoutes, { prefix: '/api/user', rateLimit })
  await app.register(productRoutes, { prefix: '/api/product' })
  await app.register(adminRoutes, { prefix: '/api/admin', apiKeys: config.ADMIN_API_KEYS })

  return app
}
