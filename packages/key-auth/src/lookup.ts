/**
 * `keyLookup` (`<source>:<name>`) compiled once into a function that reads the key from a
 * request. An extractor returns the key, or undefined when it is missing or malformed:
 * absent, empty, repeated (`?key=a&key=b`), not a string, or a header without the scheme.
 */
import type { FastifyRequest } from 'fastify'
import { KeyAuthCookiePluginMissingError, KeyAuthOptionError } from './errors.js'

export type KeySource = 'header' | 'cookie' | 'query' | 'form' | 'param'
export type KeyExtractor = (request: FastifyRequest) => string | undefined

export interface ParsedLookup {
  /** The lookup as given, for messages. */
  lookup: string
  source: KeySource
  name: string
  /** The scheme word of a header source; `''` for none (and for every other source). */
  scheme: string
}

const SOURCES: readonly KeySource[] = ['header', 'cookie', 'query', 'form', 'param']
/** RFC 9110 token: header names, auth schemes and cookie names are tokens. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/

type ParseCookie = (header: string) => Record<string, string | undefined>

export function compileLookup (lookup: unknown, authScheme: unknown): { parsed: ParsedLookup, extract: KeyExtractor } {
  if (typeof lookup !== 'string') throw new KeyAuthOptionError('keyLookup must be a string "<source>:<name>"')
  const colon = lookup.indexOf(':')
  const source = lookup.slice(0, colon) as KeySource
  const name = lookup.slice(colon + 1)
  if (colon < 0 || !SOURCES.includes(source)) {
    throw new KeyAuthOptionError(`keyLookup "${lookup}" must be "<source>:<name>" with source one of ${SOURCES.join(', ')}`)
  }
  if (name === '') throw new KeyAuthOptionError(`keyLookup "${lookup}" names no ${source}`)
  if ((source === 'header' || source === 'cookie') && !TOKEN.test(name)) {
    throw new KeyAuthOptionError(`keyLookup "${lookup}": "${name}" is not a valid ${source} name`)
  }

  if (authScheme !== undefined && (typeof authScheme !== 'string' || (authScheme !== '' && !TOKEN.test(authScheme)))) {
    throw new KeyAuthOptionError('authScheme must be a single word such as "Bearer", or "" for none')
  }
  if (source !== 'header' && authScheme !== undefined && authScheme !== '') {
    throw new KeyAuthOptionError(`authScheme applies to header sources only, not to keyLookup "${lookup}"`)
  }
  const scheme = source === 'header'
    ? (authScheme as string | undefined) ?? (name.toLowerCase() === 'authorization' ? 'Bearer' : '')
    : ''

  const parsed: ParsedLookup = { lookup, source, name, scheme }
  return { parsed, extract: extractor(parsed) }
}

/** A string that is not empty, or undefined. Arrays (repeated fields) are malformed. */
function nonEmpty (value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined
}

/** An own property of a parsed object (query, body, params), never an inherited one. */
function field (container: unknown, name: string): string | undefined {
  if (typeof container !== 'object' || container === null || !Object.hasOwn(container, name)) return undefined
  return nonEmpty((container as Record<string, unknown>)[name])
}

function isBlank (char: string | undefined): boolean {
  return char === ' ' || char === '\t'
}

/**
 * `<scheme> <key>`: the scheme compared without regard to ASCII case, then one or more
 * spaces or tabs, then a non-empty key (trailing blanks are not part of it).
 */
export function keyAfterScheme (value: string, scheme: string): string | undefined {
  const start = value.slice(0, scheme.length)
  if (!/^[\x21-\x7e]*$/.test(start) || start.toLowerCase() !== scheme.toLowerCase() || !isBlank(value[scheme.length])) return undefined
  let from = scheme.length
  while (isBlank(value[from])) from++
  let to = value.length
  while (to > from && isBlank(value[to - 1])) to--
  return to > from ? value.slice(from, to) : undefined
}

function extractor ({ source, name, scheme, lookup }: ParsedLookup): KeyExtractor {
  switch (source) {
    case 'header': {
      const header = name.toLowerCase()
      if (scheme === '') return (request) => nonEmpty(request.headers[header])
      return (request) => {
        const value = request.headers[header]
        return typeof value === 'string' ? keyAfterScheme(value, scheme) : undefined
      }
    }
    case 'cookie':
      return (request) => {
        // @fastify/cookie fills `request.cookies` in its hook; when that hook runs after
        // ours (or is disabled), parse the header with the plugin's own parser.
        const parsed = (request as { cookies?: Record<string, string | undefined> | null }).cookies
        if (parsed != null) return nonEmpty(parsed[name])
        if (!request.server.hasDecorator('parseCookie')) throw new KeyAuthCookiePluginMissingError(lookup)
        const header = request.headers.cookie
        return header === undefined ? undefined : nonEmpty(request.server.getDecorator<ParseCookie>('parseCookie')(header)[name])
      }
    case 'query':
      return (request) => field(request.query, name)
    case 'form':
      return (request) => field(request.body, name)
    case 'param':
      return (request) => field(request.params, name)
  }
}
