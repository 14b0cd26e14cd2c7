/**
 * Per-request private state of the request decorators, under a Symbol. Fastify 5 refuses
 * object decorator values, so it starts as null and is assigned in an onRequest hook.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { ResolvedContextOptions } from '../options.js'
import { ContextNotReadyError } from './errors.js'
import type { MultipartReader } from './forms.js'
import type { ParserDecoder } from './parser-decoder.js'

export interface RequestState {
  reply: FastifyReply
  options: ResolvedContextOptions
  /** `locals(key, value)` values, in insertion order. */
  locals: Map<unknown, unknown> | undefined
  userContext: object | undefined
  /** Body bytes as received (kept by the preParsing hook, see body.ts). */
  rawChunks: Buffer[] | undefined
  rawBody: Buffer | undefined
  /** Body bytes after Content-Encoding decoding; undefined when there was no coding. */
  decodedChunks: Buffer[] | undefined
  decodedBody: Buffer | undefined
  /** Why no raw body is available, for the error message. */
  rawBodyMissing: string | undefined
  /** The multipart form as read so far by `multipartForm()` / `formFile()`. */
  multipartReader: MultipartReader | undefined
  /** The multipart body was not read to its end (the reply then closes the connection). */
  multipartUnfinished: boolean
  /** Temp folder of this request's uploaded files (created on first use, removed at the end). */
  tempFolder: Promise<string> | undefined
  abort: AbortController | undefined
}

export const kState = Symbol('context.request.state')
export const kParserDecoder = Symbol('context.parserDecoder')

declare module 'fastify' {
  interface FastifyRequest {
    [kState]: RequestState | null
  }
  interface FastifyInstance {
    [kParserDecoder]: { current: ParserDecoder }
  }
}

export function registerState (app: FastifyInstance, options: ResolvedContextOptions): void {
  app.decorateRequest(kState, null)
  app.addHook('onRequest', function (request, reply, done) {
    request[kState] = {
      reply,
      options,
      locals: undefined,
      userContext: undefined,
      rawChunks: undefined,
      rawBody: undefined,
      decodedChunks: undefined,
      decodedBody: undefined,
      rawBodyMissing: undefined,
      multipartReader: undefined,
      multipartUnfinished: false,
      tempFolder: undefined,
      abort: undefined
    }
    done()
  })
}

/** The state of a request (every routed request, 404s included, runs onRequest first). */
export function stateOf (request: FastifyRequest): RequestState {
  const state = request[kState]
  if (state === null) throw new ContextNotReadyError()
  return state
}
