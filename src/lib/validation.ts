/**
 * Schema validation for routes. Fastify's default Ajv coerces types everywhere and strips
 * unknown properties; for JSON bodies that would accept `{"username": 123}` and silently
 * drop `{"id": 7}`. Here bodies are validated strictly (no coercion, unknown properties
 * rejected by the schemas' `additionalProperties: false`), while params, query strings and
 * headers keep coercion, since they are strings on the wire.
 */
import { Ajv, type Options } from 'ajv'
import formats from 'ajv-formats'
import type { FastifySchemaCompiler } from 'fastify'

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
