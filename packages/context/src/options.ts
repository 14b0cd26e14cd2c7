import { Ajv, type Options as AjvOptions } from 'ajv'
import formats from 'ajv-formats'
import type { ReplyOptions, ResolvedReplyOptions } from './reply/options.js'
import type { ParserDecoderConfig } from './request/parser-decoder.js'

/**
 * Options of the context plugin: the application settings (README.md "Settings (plugin options)"), and the response
 * side's (files, views, cookie, redirectBackOrigins: reply/options.ts).
 */
export interface ContextOptions extends ReplyOptions {
  /**
   * Immutable. In JavaScript strings are immutable already; see
   * README.md for what it changes (Buffers handed out are copies).
   * @default false
   */
  immutable?: boolean
  /** ProxyHeader: when set, `request.ipAddress()` reads the client address from this header. */
  proxyHeader?: string
  /** EnableSplittingOnParsers: split `a,b` query values into list elements in the binders. @default false */
  enableSplittingOnParsers?: boolean
  /** subdomain offset: labels dropped from the right by `subdomains()`. @default 2 */
  subdomainOffset?: number
  /**
   * Keep a copy of each request body for `request.bodyRaw()` / `decodedBody()` (one extra copy,
   * at most bodyLimit bytes, released with the request). Multipart bodies are never kept.
   * @default true
   */
  rawBody?: boolean
  /** Register a content-type parser for application/xml and text/xml (the text, for `bodyParser`). @default false */
  xml?: boolean
  /** The parser configuration of the binders (README.md "Binders"), app-wide (later: `app.setParserDecoder`). */
  parserDecoder?: ParserDecoderConfig
  /**
   * Files read by `multipartForm()` / `formFile()` from `request.parts()`: a file larger than
   * `memoryThreshold` bytes (default 1 MiB) is streamed to a temp file under `tmpDir`
   * (default: the OS temp folder), removed when the response ends.
   */
  formFiles?: { memoryThreshold?: number, tmpDir?: string }
  /**
   * Makes the binders' two Ajv instances (one coercing, one not), given the options they need
   * (`coerceTypes`, `allErrors`, `useDefaults`, `strict: false`): apply them. An application
   * passes its own factory so that the binders know its formats and keywords, one Ajv set-up
   * for its routes and its binders. @default plain Ajv with ajv-formats
   */
  ajv?: AjvFactory
}

/** Makes an Ajv instance from the options given (the `ajv` option). */
export type AjvFactory = (options: AjvOptions) => Ajv

/** The default `ajv` factory: plain Ajv with ajv-formats. */
export const defaultAjvFactory: AjvFactory = (options) => {
  const ajv = new Ajv(options)
  // ajv-formats is CommonJS; its callable is the module itself.
  ;(formats as unknown as (ajv: Ajv) => void)(ajv)
  return ajv
}

export interface ResolvedContextOptions {
  immutable: boolean
  proxyHeader: string | undefined
  enableSplittingOnParsers: boolean
  subdomainOffset: number
  rawBody: boolean
  xml: boolean
  parserDecoder: ParserDecoderConfig | undefined
  formFiles: { memoryThreshold: number, tmpDir: string }
  ajv: AjvFactory
  reply: ResolvedReplyOptions
}
