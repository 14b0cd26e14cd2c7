/**
 * Schema validation for routes. Fastify's default Ajv coerces types everywhere and strips
 * unknown properties; for JSON bodies that would accept `{"username": 123}` and silently
 * drop `{"id": 7}`. Here bodies are validated strictly (no coercion, unknown properties
 * rejected by the schemas' `additionalProperties: false`), while params, query strings and
 * headers keep coercion, since they are strings on the wire.
 *
 * Every string, in every part of every route, must also be well-formed text: no NUL
 * (U+0000) and no unpaired UTF-16 surrogate. PostgreSQL refuses NUL in text (SQLSTATE
 * 22021) and the driver cannot encode a lone surrogate: either one reaching the database
 * would answer 500. The compiler adds the `wellFormedText` keyword to every string
 * schema it compiles (a route cannot forget it); a failure is an ordinary 400 that names
 * the field. Passwords are held to the same rule: bcrypt would see U+FFFD for any lone
 * surrogate (so "\ud800" and "\udc00" would be one password) and C implementations stop
 * at NUL.
 */
import { Ajv, type ErrorObject, type Options, type SchemaValidateFunction } from 'ajv'
import formats from 'ajv-formats'
import type { FastifySchemaCompiler } from 'fastify'

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

/** A plain decimal integer: no sign but `-`, no leading zeros, no exponent, hex or blanks. */
const DECIMAL_INTEGER = /^-?(0|[1-9][0-9]*)$/
export const DECIMAL_INTEGER_MESSAGE = 'must be a decimal integer'

interface SubSchema { type?: unknown, items?: SubSchema }

/** JSON Pointer escaping of one path segment (RFC 6901), as Ajv writes `instancePath`. */
const pointer = (key: string | number): string => `/${String(key).replace(/~/g, '~0').replace(/\//g, '~1')}`

/**
 * Ajv's coercion reads `1e3`, ` 12` and `0x10` as integers, so `/api/product/0x10` would
 * fetch product 16. The keyword sits on the object of a string-sourced part (params,
 * querystring, headers) and runs before `properties`, that is before the properties are
 * coerced: every string headed for an integer property (or an integer list's item) must be a
 * plain decimal integer, otherwise the ordinary 400 names the field.
 */
const validateDecimalIntegers: SchemaValidateFunction = function (schema: boolean, data: Record<string, unknown>, parentSchema, dataCxt) {
  if (!schema) return true
  const base = dataCxt?.instancePath ?? ''
  const properties = (parentSchema?.properties ?? {}) as Record<string, SubSchema>
  const errors: Partial<ErrorObject>[] = []
  const check = (value: unknown, path: string): void => {
    if (typeof value === 'string' && !DECIMAL_INTEGER.test(value)) {
      errors.push({ keyword: 'decimalIntegers', instancePath: path, params: {}, message: DECIMAL_INTEGER_MESSAGE })
    }
  }
  for (const [key, sub] of Object.entries(properties)) {
    const value = data[key]
    if (sub.type === 'integer') check(value, base + pointer(key))
    else if (sub.type === 'array' && sub.items?.type === 'integer') {
      // A lone value is wrapped into a list by the coercion ('array'), after this check.
      if (Array.isArray(value)) value.forEach((item, index) => check(item, base + pointer(key) + pointer(index)))
      else check(value, base + pointer(key))
    }
  }
  validateDecimalIntegers.errors = errors
  return errors.length === 0
}

/**
 * The service's one Ajv factory: ajv-formats, `wellFormedText` and `decimalIntegers`, and the
 * service's defaults (first error only, defaults applied, nothing removed). `createValidatorCompiler`
 * builds its two instances with it; a plugin that validates on its own (the context plugin's
 * binders) is handed it as its `ajv` option instead of making its own.
 */
export function createAjv (options: Options = {}): Ajv {
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
  // Before `properties`, which coerces the values this keyword must see as sent.
  ajv.addKeyword({ keyword: 'decimalIntegers', type: 'object', schemaType: 'boolean', errors: true, before: 'properties', validate: validateDecimalIntegers })
  return ajv
}

/**
 * The route validator: bodies strictly (no coercion), the string-sourced parts coerced, with
 * plain decimal integers only. Every string is well-formed text (`requireWellFormedText`).
 */
export function createValidatorCompiler (): FastifySchemaCompiler<unknown> {
  const strict = createAjv({ coerceTypes: false })
  const coercing = createAjv({ coerceTypes: 'array' })
  return ({ schema, httpPart }) => {
    const wellFormed = requireWellFormedText(schema) as Record<string, unknown>
    if (httpPart === 'body') return strict.compile(wellFormed)
    return coercing.compile(wellFormed.decimalIntegers === undefined ? { ...wellFormed, decimalIntegers: true } : wellFormed)
  }
}
