/**
 * README.md "Parameters, query, forms, cookies": route parameters and the query string.
 *
 * The query operations read the raw URL with URLSearchParams, not Fastify's `request.query`
 * (whose parser may be replaced, and which turns repeated keys into arrays): keys are kept
 * literally (`list[]`, `a.b.c`, `a[b][c]`), `+` is a space, commas stay in the value, and
 * for a repeated key the last value wins.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { ParamNotIntegerError } from './errors.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** Params: route parameter; `*`, `*1`, `*2`... for unnamed ones; `defaultValue` (else '') when absent or empty. Not `params`: Fastify's object. */
    param: (key: string, defaultValue?: string) => string
    /** AllParams: every route parameter, the wildcard under `*1`. */
    allParams: () => Record<string, string>
    /** ParamsInt: the parameter as an integer; 0 when absent; throws ParamNotIntegerError (400) otherwise. */
    paramsInt: (key: string) => number
    /** Query: query value (last one for a repeated key); `defaultValue` (else '') when absent. Not `query`: Fastify's object. */
    queryValue: (key: string, defaultValue?: string) => string
    /** Queries: every query key (literal) to its last value. */
    queries: () => Record<string, string>
    /** QueryBool: false when absent; a non-boolean or empty value gives `defaultValue`, else false. */
    queryBool: (key: string, defaultValue?: boolean) => boolean
    /** QueryInt: `defaultValue` (else 0) when absent, empty or not an integer. */
    queryInt: (key: string, defaultValue?: number) => number
    /** QueryFloat: `defaultValue` (else 0) when absent, empty or not a number. */
    queryFloat: (key: string, defaultValue?: number) => number
  }
}

const INTEGER = /^[+-]?\d+$/
const FLOAT = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/
const TRUE = new Set(['1', 't', 'T', 'TRUE', 'true', 'True'])
const FALSE = new Set(['0', 'f', 'F', 'FALSE', 'false', 'False'])

/** Go's strconv.ParseBool spellings; undefined for anything else. */
export function parseBoolean (value: string): boolean | undefined {
  if (TRUE.has(value)) return true
  if (FALSE.has(value)) return false
  return undefined
}

/** A decimal integer within the safe range (no `1e3`, `0x10`, spaces or fractions); undefined otherwise. */
export function parseInteger (value: string): number | undefined {
  if (!INTEGER.test(value)) return undefined
  const number = Number(value)
  return Number.isSafeInteger(number) ? number : undefined
}

/** A finite decimal number (`1.5`, `-.5`, `2e3`); undefined for anything else, `NaN`/`Infinity` included. */
export function parseFloatStrict (value: string): number | undefined {
  if (!FLOAT.test(value)) return undefined
  const number = Number(value)
  return Number.isFinite(number) ? number : undefined
}

interface RouterConfig { caseSensitive?: unknown, routerOptions?: { caseSensitive?: unknown } }

/**
 * The router matches paths case-insensitively: parameter names too. Read as Fastify reads
 * it: `routerOptions.caseSensitive` (Fastify 5), else the deprecated top-level
 * `caseSensitive` (Fastify does not default the former when the latter is given).
 */
export function paramsCaseInsensitive (request: FastifyRequest): boolean {
  const config = request.server.initialConfig as RouterConfig
  return (config.routerOptions?.caseSensitive ?? config.caseSensitive) === false
}

/**
 * The parameter under `key`, with the unnamed aliases: `*` and `*1` (and `+` and `+1`) name
 * the same one. With a case-insensitive router, the first parameter of the route whose name
 * matches case-insensitively, in route order (the reference's rule: `/:id/:ID` reads `:id`
 * for `ID`), an exact spelling later in the route notwithstanding.
 */
function rawParam (request: FastifyRequest, key: string): string | undefined {
  const params = (request.params ?? {}) as Record<string, string | undefined>
  if (paramsCaseInsensitive(request)) {
    const lower = key.toLowerCase()
    for (const [name, value] of Object.entries(params)) if (name.toLowerCase() === lower) return value
  } else if (params[key] !== undefined) {
    return params[key]
  }
  if (key === '*') return params['*1']
  if (key === '*1') return params['*']
  if (key === '+') return params['+1']
  if (key === '+1') return params['+']
  return undefined
}

/** The query string of the raw URL, parsed once per call site. */
export function searchParams (request: FastifyRequest): URLSearchParams {
  const url = request.raw.url ?? ''
  const at = url.indexOf('?')
  return new URLSearchParams(at === -1 ? '' : url.slice(at + 1))
}

function lastQueryValue (request: FastifyRequest, key: string): string | undefined {
  const values = searchParams(request).getAll(key)
  return values.length === 0 ? undefined : values[values.length - 1]
}

export function registerParamsQuery (app: FastifyInstance): void {
  app.decorateRequest('param', function (this: FastifyRequest, key: string, defaultValue?: string): string {
    const value = rawParam(this, key)
    return value === undefined || value === '' ? (defaultValue ?? '') : value
  })

  app.decorateRequest('allParams', function (this: FastifyRequest): Record<string, string> {
    const all: Record<string, string> = Object.create(null)
    for (const [key, value] of Object.entries((this.params ?? {}) as Record<string, string>)) {
      if (key === '*' || key === '+') {
        if (!(`${key}1` in all)) all[`${key}1`] = value
      } else {
        all[key] = value
      }
    }
    return all
  })

  app.decorateRequest('paramsInt', function (this: FastifyRequest, key: string): number {
    const value = rawParam(this, key)
    if (value === undefined || value === '') return 0
    const number = parseInteger(value)
    if (number === undefined) throw new ParamNotIntegerError(key, value)
    return number
  })

  app.decorateRequest('queryValue', function (this: FastifyRequest, key: string, defaultValue?: string): string {
    return lastQueryValue(this, key) ?? defaultValue ?? ''
  })

  app.decorateRequest('queries', function (this: FastifyRequest): Record<string, string> {
    // Null prototype: a `__proto__` key is a key like any other.
    const all: Record<string, string> = Object.create(null)
    for (const [key, value] of searchParams(this)) all[key] = value
    return all
  })

  app.decorateRequest('queryBool', function (this: FastifyRequest, key: string, defaultValue?: boolean): boolean {
    const value = lastQueryValue(this, key)
    if (value === undefined) return false
    return parseBoolean(value) ?? defaultValue ?? false
  })

  app.decorateRequest('queryInt', function (this: FastifyRequest, key: string, defaultValue?: number): number {
    const value = lastQueryValue(this, key)
    return (value === undefined ? undefined : parseInteger(value)) ?? defaultValue ?? 0
  })

  app.decorateRequest('queryFloat', function (this: FastifyRequest, key: string, defaultValue?: number): number {
    const value = lastQueryValue(this, key)
    return (value === undefined ? undefined : parseFloatStrict(value)) ?? defaultValue ?? 0
  })
}
