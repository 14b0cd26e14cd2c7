/**
 * The binders (README.md "Binders"): ParamsParser, QueryParser, ReqHeaderParser, CookieParser, BodyParser.
 * Each takes a TypeBox schema (an object schema plays the part of the original's tagged
 * struct) and returns the typed, validated, coerced value, or throws BindError (400, with
 * Ajv-style `validation` entries, so the service's error handler lists the fields) or
 * UnsupportedBodyTypeError (415).
 *
 * String sources (params, query, headers, cookies, form fields) go through the parser
 * decoder (parser-decoder.ts): keys nest with qs (`a.b`, `a[b]`, `a[0][b]`, `list[]`; bounded
 * depth and indexes; unmatched brackets and list indexes that are not whole numbers are a 400;
 * a nested object none of whose keys binds a property is absent), the alias keyword picks the source key of
 * each property, matched case-insensitively (exact first), arrays take every value (split on commas: headers always, query only with
 * `enableSplittingOnParsers`), integers and numbers must be plain decimals, booleans take Go's
 * spellings (1/0, t/f, true/false in three cases), empty values follow `zeroEmpty`, unknown
 * keys follow `ignoreUnknownKeys`, and properties with `parserType` go through their converter
 * once the schema accepted the string. Then Ajv (coerceTypes 'array', useDefaults) validates.
 * JSON bodies are validated as sent (no coercion, like Go's encoding/json); XML values are
 * strings and are coerced. Schemas are compiled once each (WeakMap by schema object).
 */
import type { Ajv, ErrorObject, ValidateFunction } from 'ajv'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { XMLParser, XMLValidator } from 'fast-xml-parser'
import qs from 'qs'
import { fastifyCookie } from '@fastify/cookie'
import type { Static, TSchema } from 'typebox'
import type { AjvFactory, ResolvedContextOptions } from '../options.js'
import { BindError, MalformedXmlError, UnsupportedBodyTypeError } from './errors.js'
import { formValues } from './forms.js'
import type { ParserDecoder } from './parser-decoder.js'
import { paramsCaseInsensitive, parseBoolean, parseFloatStrict, parseInteger, searchParams } from './params-query.js'
import { headerLines } from './reading.js'
import { kParserDecoder } from './state.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** ParamsParser: route parameters bound to `schema` (alias keyword `params`). */
    paramsParser: <S extends TSchema>(schema: S) => Static<S>
    /** QueryParser: query parameters bound to `schema` (alias keyword `query`). */
    queryParser: <S extends TSchema>(schema: S) => Static<S>
    /** ReqHeaderParser: request headers bound to `schema`, names case-insensitive (alias keyword `reqHeader`). */
    reqHeaderParser: <S extends TSchema>(schema: S) => Static<S>
    /** CookieParser: cookies bound to `schema` (alias keyword `cookie`). */
    cookieParser: <S extends TSchema>(schema: S) => Static<S>
    /** BodyParser: the body bound to `schema` by Content-Type (json, xml, form); 415 for other types. */
    bodyParser: <S extends TSchema>(schema: S) => Static<S>
  }
}

type Issue = Pick<ErrorObject, 'instancePath' | 'keyword' | 'params' | 'message'>

/** How a string source is read. */
interface Source {
  /** Words for the error message. */
  label: string
  /** `validationContext` of the error, as Fastify names the parts. */
  context: string
  /** Alias keyword of this source. */
  tag: string
  /** Keys nest (`a.b`, `a[0][b]`, `list[]`); route parameters do not. */
  nest: boolean
  /** Keys match names case-insensitively (an exact match first). */
  caseInsensitive: boolean
  /** Case-insensitively, the first matching key in source order wins, exact or not (route parameters, as `param`). */
  firstInOrder?: boolean
  /** Split array values on commas. */
  split: boolean
  trimSplit: boolean
  /** Which value a scalar property takes when the key is repeated. */
  pick: 'first' | 'last' | 'join'
  /** Whether `ignoreUnknownKeys: false` applies. */
  checkUnknown: boolean
}

interface PropertySchema {
  type?: unknown
  items?: PropertySchema
  parserType?: unknown
  [keyword: string]: unknown
}

/** Compiles a binder schema, coercing (string sources, XML) or not (JSON bodies). */
type Compile = (schema: TSchema, coerce: boolean) => ValidateFunction

/**
 * The binders' two Ajv instances, from the plugin's `ajv` factory (options.ts), each schema
 * compiled once (WeakMap by schema object). The binders convert and check strings themselves
 * (`convert`: plain decimals only), so the instances only need these options.
 */
function binderCompiler (createAjv: AjvFactory): Compile {
  const ajv = (coerce: boolean): Ajv => createAjv({ allErrors: true, useDefaults: true, coerceTypes: coerce ? 'array' : false, strict: false })
  const instances = { coercing: ajv(true), strict: ajv(false) }
  const compiled = { coercing: new WeakMap<object, ValidateFunction>(), strict: new WeakMap<object, ValidateFunction>() }
  return (schema, coerce) => {
    const kind = coerce ? 'coercing' : 'strict'
    let validate = compiled[kind].get(schema)
    if (validate === undefined) {
      validate = instances[kind].compile(schema as object)
      compiled[kind].set(schema, validate)
    }
    return validate
  }
}

function propertiesOf (schema: TSchema): Record<string, PropertySchema> | undefined {
  const properties = (schema as { properties?: unknown }).properties
  return typeof properties === 'object' && properties !== null ? properties as Record<string, PropertySchema> : undefined
}

function sourceName (property: string, schema: PropertySchema, tag: string, decoder: ParserDecoder): string {
  const alias = schema[decoder.aliasTag ?? tag]
  return typeof alias === 'string' && alias !== '' ? alias : property
}

function typeOf (schema: PropertySchema | undefined): string | undefined {
  return typeof schema?.type === 'string' ? schema.type : undefined
}

function zeroOf (schema: PropertySchema | undefined): unknown {
  switch (typeOf(schema)) {
    case 'integer': case 'number': return 0
    case 'boolean': return false
    case 'array': return []
    default: return ''
  }
}

/** One string to the property's type; an Issue when it cannot be. */
function convert (value: string, schema: PropertySchema | undefined, path: string): unknown {
  if (schema?.parserType !== undefined) return value
  switch (typeOf(schema)) {
    case 'integer': return parseInteger(value) ?? issue(path, 'type', 'must be an integer')
    case 'number': return parseFloatStrict(value) ?? issue(path, 'type', 'must be a number')
    case 'boolean': return parseBoolean(value) ?? issue(path, 'type', 'must be a boolean')
    default: return value
  }
}

class IssueMarker {
  constructor (readonly issue: Issue) {}
}

function issue (instancePath: string, keyword: string, message: string): IssueMarker {
  return new IssueMarker({ instancePath, keyword, params: {}, message })
}

function fail (source: Pick<Source, 'label' | 'context'>, issues: Issue[]): never {
  const summary = issues.map((i) => `${i.instancePath || '(whole)'} ${i.message ?? 'is invalid'}`).join('; ')
  throw Object.assign(new BindError(source.label, summary), { validation: issues, validationContext: source.context })
}

/** qs settings: nesting and lists, bounded against abuse (`a[999999]=x` is a 400, not a huge array). */
const QS_OPTIONS = {
  allowDots: true,
  depth: 10,
  strictDepth: true,
  arrayLimit: 1000,
  parameterLimit: 10000,
  throwOnLimitExceeded: true,
  duplicates: 'combine',
  plainObjects: true,
  allowPrototypes: false
} as const

/** `a[b` or `a]b`: brackets that do not pair up once every `[...]` group is removed. */
function hasUnmatchedBrackets (key: string): boolean {
  return /[[\]]/.test(key.replace(/\[[^[\]]*\]/g, ''))
}

type Tree = Record<string, unknown>

/**
 * Keys to a tree: `a.b`, `a[b]`, `a[0][b]` and `list[]` nest (qs); keys with unmatched
 * brackets, nesting deeper than 10 or list indexes past 1000 are issues. Flat sources keep keys.
 */
function toTree (entries: Map<string, string[]>, source: Source): Tree {
  const flat: Tree = Object.create(null)
  const issues: Issue[] = []
  for (const [key, values] of entries) {
    if (source.nest && hasUnmatchedBrackets(key)) {
      issues.push({ instancePath: `/${key}`, keyword: 'syntax', params: { key }, message: 'has unmatched brackets' })
      continue
    }
    flat[key] = values.length === 1 ? values[0] : values
  }
  if (issues.length > 0) fail(source, issues)
  if (!source.nest) return flat
  try {
    return qs.parse(flat as Record<string, string>, QS_OPTIONS) as Tree
  } catch (error) {
    fail(source, [{ instancePath: '', keyword: 'limit', params: {}, message: `keys rejected: ${(error as Error).message}` }])
  }
}

function isTree (value: unknown): value is Tree {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** The string values a scalar property may take from a tree value (a repeated key gives several). */
function stringsOf (value: unknown): string[] | undefined {
  if (typeof value === 'string') return [value]
  if (Array.isArray(value) && value.every((item) => typeof item === 'string')) return value as string[]
  return undefined
}

const INDEX = /^(?:0|[1-9]\d*)$/
const NUMBER_LIKE = /^\s*[+-]?\d+\s*$/

/**
 * The items of a list property that qs left as an object because some key is no list index
 * (`items[-1].value=x`, `data[01]=x`, `data[0]=a&data[x]=b`): such keys are issues, never
 * dropped. An object with no number-like key at all is one item written with names
 * (`items.value=x`): undefined, the caller takes it as one item.
 */
function indexedItems (tree: Tree, path: string, issues: Issue[]): unknown[] | 'invalid' | undefined {
  const keys = Object.keys(tree)
  if (!keys.some((key) => NUMBER_LIKE.test(key))) return undefined
  const bad = keys.filter((key) => !INDEX.test(key))
  for (const key of bad) issues.push({ instancePath: `${path}/${key}`, keyword: 'index', params: { index: key }, message: `is not a list index (a whole number from 0 to ${QS_OPTIONS.arrayLimit})` })
  if (bad.length > 0) return 'invalid'
  return keys.sort((a, b) => Number(a) - Number(b)).map((key) => tree[key])
}

/** Binds one value of the tree to `schema`, collecting issues; the result goes to Ajv. */
function decodeValue (value: unknown, schema: PropertySchema | undefined, path: string, source: Source, decoder: ParserDecoder, issues: Issue[]): { value?: unknown } {
  const type = typeOf(schema)
  if (type === 'array') {
    let items: unknown[]
    if (Array.isArray(value)) {
      items = value
    } else if (isTree(value)) {
      const listed = indexedItems(value, path, issues)
      if (listed === 'invalid') return {}
      items = listed ?? [value]
    } else {
      items = [value]
    }
    const output: unknown[] = []
    let index = 0
    for (const item of items) {
      const parts = typeof item === 'string' && source.split ? item.split(',').map((part) => source.trimSplit ? part.trim() : part) : [item]
      for (const part of parts) {
        const decoded = decodeValue(part, schema?.items, `${path}/${index}`, { ...source, split: false }, decoder, issues)
        if ('value' in decoded) {
          output.push(decoded.value)
          index++
        }
      }
    }
    if (output.length > 0 || decoder.zeroEmpty) return { value: output }
    return {}
  }
  if (isTree(value)) {
    // Nested object (`a.b=1`, `a[b]=1`): bound by its own properties, or handed to Ajv as is.
    if (propertiesOf(schema as TSchema) === undefined) return { value }
    const object = decodeObject(value, schema as TSchema, path, source, decoder, issues)
    // No key bound a property (`next.value=2` where `next` has only `val`): the unknown keys
    // are ignored as at the top level, so the object is absent, not `{}`; its default (or
    // its being optional) then applies, as if nothing had been sent under it.
    return Object.keys(object).length === 0 ? {} : { value: object }
  }
  const strings = stringsOf(value)
  if (strings === undefined) return { value }
  const text = pick(strings, source)
  if (text === '') return decoder.zeroEmpty ? { value: zeroOf(schema) } : {}
  const converted = convert(text, schema, path)
  if (converted instanceof IssueMarker) {
    issues.push(converted.issue)
    return {}
  }
  return { value: converted }
}

/**
 * Binds a tree to an object schema: each property reads the key named by its alias keyword
 * (or its name), compared case-insensitively (an exact match first), at every level.
 */
function decodeObject (tree: Tree, schema: TSchema, path: string, source: Source, decoder: ParserDecoder, issues: Issue[]): Record<string, unknown> {
  const properties = propertiesOf(schema)
  const output: Record<string, unknown> = {}
  if (properties === undefined) {
    const record: Record<string, unknown> = Object.create(null)
    for (const [key, value] of Object.entries(tree)) {
      const strings = stringsOf(value)
      record[key] = strings === undefined ? value : pick(strings, source)
    }
    return record
  }
  const keys = Object.keys(tree)
  const used = new Set<string>()
  for (const [property, propertySchema] of Object.entries(properties)) {
    const name = sourceName(property, propertySchema, source.tag, decoder)
    const lower = name.toLowerCase()
    const matches = source.caseInsensitive && source.firstInOrder === true
      ? keys.filter((key) => key.toLowerCase() === lower).slice(0, 1)
      : keys.includes(name) ? [name] : source.caseInsensitive ? keys.filter((key) => key.toLowerCase() === lower) : []
    if (matches.length === 0) continue
    for (const key of matches) used.add(key)
    const value = matches.length === 1 ? tree[matches[0] as string] : matches.flatMap((key) => tree[key] as unknown)
    const decoded = decodeValue(value, propertySchema, `${path}/${property}`, source, decoder, issues)
    if ('value' in decoded) output[property] = decoded.value
  }
  if (!decoder.ignoreUnknownKeys && source.checkUnknown) {
    for (const key of keys) {
      if (!used.has(key)) issues.push({ instancePath: `${path}/${key}`, keyword: 'additionalProperties', params: { additionalProperty: key }, message: 'is not a known key' })
    }
  }
  return output
}

/** Runs the parser decoder over string sources: the object Ajv then validates. */
function decode (entries: Map<string, string[]>, schema: TSchema, source: Source, decoder: ParserDecoder): Record<string, unknown> {
  const issues: Issue[] = []
  const input = decodeObject(toTree(entries, source), schema, '', source, decoder, issues)
  if (issues.length > 0) fail(source, issues)
  return input
}

function pick (values: string[], source: Source): string {
  if (source.pick === 'join') return values.join(', ')
  return (source.pick === 'first' ? values[0] : values[values.length - 1]) ?? ''
}

/** Renames top-level keys of an object body from their alias to the property name. */
function renameAliases (body: unknown, schema: TSchema, tag: string, decoder: ParserDecoder): unknown {
  const properties = propertiesOf(schema)
  if (properties === undefined || typeof body !== 'object' || body === null || Array.isArray(body)) return body
  const input: Record<string, unknown> = { ...(body as Record<string, unknown>) }
  for (const [property, propertySchema] of Object.entries(properties)) {
    const name = sourceName(property, propertySchema, tag, decoder)
    if (name !== property && name in input) {
      input[property] = input[name]
      delete input[name]
    }
  }
  return input
}

/** Ajv, then the custom-type converters of top-level properties (and array items). */
function validate<S extends TSchema> (compile: Compile, input: unknown, schema: S, coerce: boolean, source: Pick<Source, 'label' | 'context'>, decoder: ParserDecoder): Static<S> {
  const check = compile(schema, coerce)
  if (!check(input)) fail(source, (check.errors ?? []) as Issue[])
  const properties = propertiesOf(schema)
  if (properties === undefined || decoder.converters.size === 0 || typeof input !== 'object' || input === null) return input as Static<S>
  const record = input as Record<string, unknown>
  const issues: Issue[] = []
  const run = (value: unknown, type: unknown, path: string): unknown => {
    const converter = typeof type === 'string' ? decoder.converters.get(type) : undefined
    if (converter === undefined || typeof value !== 'string') return value
    try {
      return converter(value)
    } catch (error) {
      issues.push({ instancePath: path, keyword: 'parserType', params: { parserType: type }, message: `cannot be converted: ${(error as Error).message}` })
      return value
    }
  }
  for (const [property, propertySchema] of Object.entries(properties)) {
    const value = record[property]
    if (value === undefined) continue
    if (Array.isArray(value) && propertySchema.items?.parserType !== undefined) {
      record[property] = value.map((item, index) => run(item, propertySchema.items?.parserType, `/${property}/${index}`))
    } else if (propertySchema.parserType !== undefined) {
      record[property] = run(value, propertySchema.parserType, `/${property}`)
    }
  }
  if (issues.length > 0) fail(source, issues)
  return record as Static<S>
}

function entriesOf (record: Record<string, string | string[] | undefined>, lowerCase = false): Map<string, string[]> {
  const entries = new Map<string, string[]>()
  for (const [key, value] of Object.entries(record)) {
    if (value === undefined) continue
    entries.set(lowerCase ? key.toLowerCase() : key, Array.isArray(value) ? value.map(String) : [String(value)])
  }
  return entries
}

const xmlParser = new XMLParser({ ignoreAttributes: true, parseTagValue: false, trimValues: true })

function parseXml (body: unknown): unknown {
  if (typeof body === 'object' && body !== null && !Buffer.isBuffer(body)) return body
  const text = Buffer.isBuffer(body) ? body.toString('utf8') : typeof body === 'string' ? body : ''
  const valid = XMLValidator.validate(text)
  if (valid !== true) throw new MalformedXmlError(valid.err.msg)
  const document = xmlParser.parse(text) as Record<string, unknown>
  // Bind the root element's children, as Go's xml.Unmarshal into a struct does.
  const roots = Object.keys(document).filter((key) => !key.startsWith('?'))
  if (roots.length !== 1) throw new MalformedXmlError('expected one root element')
  const root = document[roots[0] as string]
  return typeof root === 'object' && root !== null ? root : {}
}

const SOURCES = {
  params: { label: 'path parameters', context: 'params', tag: 'params', nest: false, caseInsensitive: false, split: false, trimSplit: false, pick: 'first', checkUnknown: true },
  query: { label: 'query string', context: 'querystring', tag: 'query', nest: true, caseInsensitive: true, split: false, trimSplit: false, pick: 'last', checkUnknown: true },
  headers: { label: 'headers', context: 'headers', tag: 'reqHeader', nest: true, caseInsensitive: true, split: true, trimSplit: true, pick: 'join', checkUnknown: false },
  cookies: { label: 'cookies', context: 'cookies', tag: 'cookie', nest: true, caseInsensitive: true, split: false, trimSplit: false, pick: 'first', checkUnknown: true },
  form: { label: 'request body', context: 'body', tag: 'form', nest: true, caseInsensitive: true, split: false, trimSplit: false, pick: 'first', checkUnknown: true }
} satisfies Record<string, Source>

export function registerBinding (app: FastifyInstance, options: ResolvedContextOptions): void {
  const decoderOf = (request: FastifyRequest): ParserDecoder => request.server[kParserDecoder].current
  const querySource: Source = { ...SOURCES.query, split: options.enableSplittingOnParsers }
  const compile = binderCompiler(options.ajv)

  function bindStrings<S extends TSchema> (request: FastifyRequest, schema: S, entries: Map<string, string[]>, source: Source): Static<S> {
    const decoder = decoderOf(request)
    return validate(compile, decode(entries, schema, source, decoder), schema, true, source, decoder)
  }

  app.decorateRequest('paramsParser', function <S extends TSchema>(this: FastifyRequest, schema: S): Static<S> {
    const source = paramsCaseInsensitive(this) ? { ...SOURCES.params, caseInsensitive: true, firstInOrder: true } : SOURCES.params
    return bindStrings(this, schema, entriesOf((this.params ?? {}) as Record<string, string>), source)
  })

  app.decorateRequest('queryParser', function <S extends TSchema>(this: FastifyRequest, schema: S): Static<S> {
    const entries = new Map<string, string[]>()
    for (const [key, value] of searchParams(this)) {
      const list = entries.get(key)
      if (list === undefined) entries.set(key, [value])
      else list.push(value)
    }
    return bindStrings(this, schema, entries, querySource)
  })

  app.decorateRequest('reqHeaderParser', function <S extends TSchema>(this: FastifyRequest, schema: S): Static<S> {
    return bindStrings(this, schema, entriesOf(headerLines(this)), SOURCES.headers)
  })

  app.decorateRequest('cookieParser', function <S extends TSchema>(this: FastifyRequest, schema: S): Static<S> {
    const cookies = (this as { cookies?: Record<string, string | undefined> }).cookies ??
      fastifyCookie.parse(typeof this.headers.cookie === 'string' ? this.headers.cookie : '')
    return bindStrings(this, schema, entriesOf(cookies), SOURCES.cookies)
  })

  app.decorateRequest('bodyParser', function <S extends TSchema>(this: FastifyRequest, schema: S): Static<S> {
    const header = this.headers['content-type']
    const type = typeof header === 'string' ? (header.split(';')[0] ?? '').trim().toLowerCase() : ''
    const decoder = decoderOf(this)
    const source = SOURCES.form
    switch (type) {
      case 'application/json':
        return validate(compile, renameAliases(structuredClone(this.body), schema, 'json', decoder), schema, false, source, decoder)
      case 'application/xml':
      case 'text/xml':
        return validate(compile, renameAliases(parseXml(this.body), schema, 'xml', decoder), schema, true, source, decoder)
      case 'application/x-www-form-urlencoded':
      case 'multipart/form-data': {
        const values = formValues(this) ?? {}
        return bindStrings(this, schema, new Map(Object.entries(values)), source)
      }
      default:
        throw new UnsupportedBodyTypeError(type === '' ? 'no Content-Type' : type)
    }
  })
}
