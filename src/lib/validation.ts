/**
 * Schema validation for routes. Fastify's default Ajv coerces types everywhere and strips
 * unknown properties; for JSON bodies that would accept `{"username": 123}` and silently
 * drop `{"id": 7}`. Here bodies are validated strictly (no coercion, unknown properties
 * rejected by the schemas' `additionalProperties: false`), while params, query strings and
 * headers keep coercion, since they are strings on the wire.
 *
 * Every string, in every part of every route, must also be well-formed text: no NUL
 * (U+0000) and no unpaired UTF-16 surrogate. PostgreSQL refuses NUL in text (SQLSTATE
 * 22021) and the driver cannot encode a lone surrogate, so either one used to reach the
 * database and answer 500. The compiler adds the `wellFormedText` keyword to every string
 * schema it compiles (a route cannot forget it); a failure is an ordinary 400 that names
 * the field. Passwords are held to the same rule: bcrypt would see U+FFFD for any lone
 * surrogate (so "\ud800" and "\udc00" would be one password) and C implementations stop
 * at NUL.
 */
import { Ajv, type Options, type SchemaValidateFunction } from 'ajv'
import formats from 'ajv-formats'
import type { FastifyRequest, FastifySchemaCompiler, RouteOptions } from 'fastify'

/** NUL, or a surrogate that is not half of a pair (with the `u` flag a pair is one code point). */
// eslint-disable-next-line no-control-regex -- NUL is exactly what this looks for
const ILL_FORMED_TEXT = /\u0000|\p{Cs}/u
export const WELL_FORMED_MESSAGE = 'must not contain NUL (U+0000) or unpaired surrogates'

/** True when the string can be stored in PostgreSQL text as it is. */
export function isWellFormedText (value: string): boolean {
  return !ILL_FORMED_TEXT.test(value)
}

const validateWellFormed: SchemaValidateFunction = function (schema: boolean, data: string) {
  if (!schema || isWellFormedText(data)) return true
  validateWellFormed.errors = [{ keyword: 'wellFormedText', message: WELL_FORMED_MESSAGE, params: {} }]
  return false
}

/** Keys whose values are data, not subschemas. */
const DATA_KEYS = new Set(['const', 'enum', 'default', 'examples', 'example'])
/** Keys whose values map names to subschemas (a property may be named `default`). */
const SCHEMA_MAPS = new Set(['properties', 'patternProperties', 'dependentSchemas', '$defs', 'definitions'])

/**
 * A copy of `schema` with `wellFormedText: true` on every string subschema (properties,
 * items, unions...), unless one says `wellFormedText: false`. The route's own schema, which
 * the OpenAPI document shows, is left as it is.
 */
export function requireWellFormedText (schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map((item) => requireWellFormedText(item))
  if (typeof schema !== 'object' || schema === null) return schema
  const copy: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(schema)) {
    if (SCHEMA_MAPS.has(key) && typeof value === 'object' && value !== null && !Array.isArray(value)) {
      copy[key] = Object.fromEntries(Object.entries(value).map(([name, sub]) => [name, requireWellFormedText(sub)]))
    } else {
      copy[key] = DATA_KEYS.has(key) ? value : requireWellFormedText(value)
    }
  }
  const type = copy.type
  const isString = type === 'string' || (Array.isArray(type) && type.includes('string'))
  if (isString && copy.wellFormedText === undefined) copy.wellFormedText = true
  return copy
}

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
  // Checked before the length, pattern and format keywords, so the 400 says what is wrong.
  ajv.addKeyword({ keyword: 'wellFormedText', type: 'string', schemaType: 'boolean', errors: true, before: 'maxLength', validate: validateWellFormed })
  return ajv
}

export function createValidatorCompiler (): FastifySchemaCompiler<unknown> {
  const strict = makeAjv({ coerceTypes: false })
  const coercing = makeAjv({ coerceTypes: 'array' })
  return ({ schema, httpPart }) => {
    const ajv = httpPart === 'body' ? strict : coercing
    return ajv.compile(requireWellFormedText(schema) as object)
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
