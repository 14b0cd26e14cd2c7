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

type Operation = { requestBody?: { required?: boolean, content?: Record<string, { schema?: { type?: string } }> }, responses?: Record<string, { headers?: Record<string, unknown> }>, 'x-optional-body'?: boolean }
type Document = { paths?: Record<string, Record<string, Operation>> }

/**
 * What the routes' schemas cannot say by themselves, added to every operation:
 * - `x-optional-body` (a route that also takes no body at all, refresh by cookie): the body
 *   is not required (@fastify/swagger marks every body required);
 * - a multipart body is an object of parts, so the page offers a file picker for its
 *   `format: binary` field (the route's schema has no `type`: the route reads the stream);
 * - every answer carries `X-Request-Id` (src/app.ts, onRequest).
 */
function completeOperations (document: Document): Document {
  for (const operations of Object.values(document.paths ?? {})) {
    for (const operation of Object.values(operations)) {
      if (operation['x-optional-body'] === true && operation.requestBody !== undefined) operation.requestBody.required = false
      delete operation['x-optional-body']
      for (const media of Object.values(operation.requestBody?.content ?? {})) {
        if (media.schema !== undefined && media.schema.type === undefined) media.schema = { type: 'object', ...media.schema }
      }
      for (const response of Object.values(operation.responses ?? {})) {
        response.headers = { 'X-Request-Id': REQUEST_ID_HEADER, ...response.headers }
      }
    }
  }
  return document
}

const REQUEST_ID_HEADER = { description: 'the request\'s id, also the `requestId` of a problem and of its log lines', schema: { type: 'string' } }

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
    transformObject: (documents) => completeOperations(('openapiObject' in documents ? documents.openapiObject : documents.swaggerObject) as Document) as never,
    transform: ({ schema, url }) => ({
      schema: schema === undefined ? schema : { ...schema, body: withoutDefaultedRequired(schema.body), querystring: withoutDefaultedRequired(schema.querystring) },
      url
    })
  })
  await app.register(fastifySwaggerUi, { routePrefix: '/docs' })
}

export default fp(openapi, { name: 'openapi', fastify: '5.x' })
