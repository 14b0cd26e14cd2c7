/**
 * Parser configuration (`SetParserDecoder`, README.md "Binders"): how the binders turn string sources
 * (route parameters, query, headers, cookies, form fields) into the schema's values.
 * App-wide, like the original's package-level setting: the plugin option `parserDecoder`
 * sets it at registration, `app.setParserDecoder(config)` replaces it later.
 */
import type { FastifyInstance } from 'fastify'
import { ParserDecoderConfigError } from './errors.js'
import { kParserDecoder } from './state.js'

/** A custom type: schemas opt in with the keyword `parserType: '<customType>'`. */
export interface ParserType {
  /** The name a property schema gives in its `parserType` keyword. */
  customType: string
  /** Turns the (schema-validated) source string into the property's value; a throw is a 400. */
  converter: (value: string) => unknown
}

/** The parser configuration (README.md "Binders"). Every field is optional; omitted ones take the defaults. */
export interface ParserDecoderConfig {
  /** true (default): source keys no property maps are ignored; false: they are a 400 (not for headers). */
  ignoreUnknownKeys?: boolean
  /** Custom types and their converters. */
  parserType?: ParserType[]
  /** true (default): an empty value sets the zero value of its type ('' / 0 / false / []); false: it counts as absent. */
  zeroEmpty?: boolean
  /**
   * The schema keyword naming a property's source key (the "alias"). Unset (default): the
   * keyword named after the source, `params`, `query`, `reqHeader`, `cookie`, `form`, `json`
   * or `xml` (e.g. `Type.Integer({ query: 'page_no' })`); a property without one is read
   * under its own name. Set (e.g. 'alias'): that keyword is read for every source.
   */
  setAliasTag?: string
}

export interface ParserDecoder {
  ignoreUnknownKeys: boolean
  zeroEmpty: boolean
  converters: ReadonlyMap<string, (value: string) => unknown>
  aliasTag: string | undefined
}

export function resolveParserDecoder (config: ParserDecoderConfig = {}): ParserDecoder {
  if (typeof config !== 'object' || config === null) throw new ParserDecoderConfigError('expected an object')
  for (const key of ['ignoreUnknownKeys', 'zeroEmpty'] as const) {
    if (config[key] !== undefined && typeof config[key] !== 'boolean') throw new ParserDecoderConfigError(`${key} must be a boolean`)
  }
  if (config.setAliasTag !== undefined && (typeof config.setAliasTag !== 'string' || config.setAliasTag === '')) {
    throw new ParserDecoderConfigError('setAliasTag must be a non-empty string')
  }
  const converters = new Map<string, (value: string) => unknown>()
  for (const entry of config.parserType ?? []) {
    if (typeof entry?.customType !== 'string' || entry.customType === '' || typeof entry.converter !== 'function') {
      throw new ParserDecoderConfigError('each parserType entry needs a customType name and a converter function')
    }
    converters.set(entry.customType, entry.converter)
  }
  return {
    ignoreUnknownKeys: config.ignoreUnknownKeys ?? true,
    zeroEmpty: config.zeroEmpty ?? true,
    converters,
    aliasTag: config.setAliasTag
  }
}

declare module 'fastify' {
  interface FastifyInstance {
    /** SetParserDecoder: replaces the app-wide parser configuration of the binders. */
    setParserDecoder: (config: ParserDecoderConfig) => void
  }
}

export function registerParserDecoder (app: FastifyInstance, initial: ParserDecoderConfig | undefined): void {
  app.decorate(kParserDecoder, { current: resolveParserDecoder(initial) })
  app.decorate('setParserDecoder', function (this: FastifyInstance, config: ParserDecoderConfig) {
    this[kParserDecoder].current = resolveParserDecoder(config)
  })
}
