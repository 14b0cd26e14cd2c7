/**
 * The OpenAPI document (`/docs/json`) and its page (`/docs`), made from the schemas the
 * routes validate and serialize with: nothing is written twice. OpenAPI 3.1, whose schema
 * objects are JSON Schema 2020-12, so `null` types and `examples` arrays stay as the
 * routes have them. The problem body is one component (`Problem`, src/lib/problem.ts) that
 * every error response refers to; test/openapi.test.ts validates the document and checks
 * each route's documented statuses against what it answers.
 */
import fastifySwagger, { type SwaggerOptions } from '@fastify/swagger'
import fastifySwaggerUi from '@fastify/swagger-ui'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { Problem } from '../lib/problem.js'

type SecuritySchemes = NonNullable<NonNullable<NonNullable<Extract<SwaggerOptions, { openapi?: unknown }>['openapi']>['components']>['securitySchemes']>

interface OpenApiOptions {
  version: string
  securitySchemes: SecuritySchemes
}

type JsonSchema = { properties?: Record<string, { default?: unknown }>, required?: string[] }

/**
 * A property with a default is not required of the client: the validator fills it in, so
 * handlers (and the schema's type) see it present, but the document must not demand it
 * (`limit` of the page query, a product's `description`).
 */
function withoutDefaultedRequired<T> (schema: T): T {
  const object = schema as JsonSchema
  if (object?.properties === undefined || object.required === undefined) return schema
  const required = object.required.filter((name) => object.properties?.[name]?.default === undefined)
  return { ...schema, required }
}

async function openapi (app: FastifyInstance, options: OpenApiOptions): Promise<void> {
  app.addSchema(Problem)
  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'User and product service', version: options.version, description: 'Users, JWT login and products. Errors are RFC 9457 problem details (`application/problem+json`).' },
      components: { securitySchemes: options.securitySchemes }
    },
    // Shared schemas keep their `$id` as their component name (`#/components/schemas/Problem`).
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => typeof json.$id === 'string' ? json.$id : `def-${i}` },
    transform: ({ schema, url }) => ({
      schema: schema === undefined ? schema : { ...schema, body: withoutDefaultedRequired(schema.body), querystring: withoutDefaultedRequired(schema.querystring) },
      url
    })
  })
  await app.register(fastifySwaggerUi, { routePrefix: '/docs' })
}

export default fp(openapi, { name: 'openapi', fastify: '5.x' })
