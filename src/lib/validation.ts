/**
 * Schema validation for routes. Fastify's default Ajv coerces types everywhere and strips
 * unknown properties; for JSON bodies that would accept `{"username": 123}` and silently
 * drop `{"id": 7}`. Here bodies are validated strictly (no coercion, unknown properties
 * rejected by the schemas' `additionalProperties: false`), while params, query strings and
 * headers keep coercion, since they are strings on the wire.
 */
import { Ajv, type Options } from 'ajv'
import formats from 'ajv-formats'
import type { FastifyRequest, FastifySchemaCompiler, RouteOptions } from 'fastify'

function makeAjv (options: Options): Ajv {
  const ajv = new Ajv({
    allErrors: false,
    useDefaults: true,
    removeAdditional: false,
    strict: false,
    ...options
  })
  // ajv-formats is CommonJS; its callable is the module itself.
  ;(formats as unknown as (ajv: Ajv) => void)(ajv)
  return ajv
}

export function createValidatorCompiler (): FastifySchemaCompiler<unknown> {
  const strict = makeAjv({ coerceTypes: false })
  const coercing = makeAjv({ coerceTypes: 'array' })
  return ({ schema, httpPart }) => {
    const ajv = httpPart === 'body' ? strict : coercing
    return ajv.compile(schema as object)
  }
}

const DECIMAL_INTEGER = /^-?(0|[1-9][0-9]*)$/

type Part = 'params' | 'querystring'

function integerKeys (schema: unknown): string[] {
  const properties = (schema as { properties?: Record<string, { type?: unknown }> } | undefined)?.properties ?? {}
  return Object.entries(properties).filter(([, s]) => s.type === 'integer').map(([key]) => key)
}

/**
 * Ajv's coercion reads `1e3`, ` 12` and `0x10` as integers, so `/api/product/0x10` would
 * fetch product 16. Registered as an `onRoute` hook, this adds a `preValidation` check to
 * every route with integer params or query fields: the raw string must be a plain decimal
 * integer, otherwise the request fails validation like any other bad field (400).
 */
export function strictIntegerStrings (route: RouteOptions): void {
  const checks = (['params', 'querystring'] as Part[])
    .map((part) => ({ part, keys: integerKeys(route.schema?.[part]) }))
    .filter(({ keys }) => keys.length > 0)
  if (checks.length === 0) return

  const hook = async (request: FastifyRequest): Promise<void> => {
    for (const { part, keys } of checks) {
      const values = (part === 'params' ? request.params : request.query) as Record<string, unknown>
      for (const key of keys) {
        const value = values[key]
        if (typeof value === 'string' && !DECIMAL_INTEGER.test(value)) {
          throw Object.assign(new Error(`${part}/${key} must be a decimal integer`), {
            statusCode: 400,
            validationContext: part,
            validation: [{ instancePath: `/${key}`, keyword: 'type', params: {}, message: 'must be a decimal integer' }]
          })
        }
      }
    }
  }
  const existing = route.preValidation
  route.preValidation = existing === undefined ? [hook] : [hook, ...(Array.isArray(existing) ? existing : [existing])]
}
