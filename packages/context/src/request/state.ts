/**
 * Per-request private state of the request decorators, under a Symbol. Fastify 5 refuses
 * object decorator values, so it starts as null and is made by `stateOf` on first use.
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
const kReply = Symbol('context.request.reply')
const kOptions = Symbol('context.options')

declare module 'fastify' {
  interface FastifyRequest {
    [kState]: RequestState | null
    [kReply]: FastifyReply | null
  }
  interface FastifyInstance {
    [kParserDecoder]: { current: ParserDecoder }
    [kOptions]: ResolvedContextOptions
  }
}

/**
 * The state is made on first use: a request that no decorator touches (most JSON routes)
 * pays one field assignment in onRequest, not an object of a dozen fields.
 */
export function registerState (app: FastifyInstance, options: ResolvedContextOptions): void {
  app.decorateRequest(kState, null)
  app.decorateRequest(kReply, null)
  app.decorate(kOptions, options)
  app.addHook('onRequest', function (request, reply, done) {
    request[kReply] = reply
    done()
  })
}

/** The state of a request (every routed request, 404s included, runs onRequest first). */
export function stateOf (request: FastifyRequest): RequestState {
  // `undefined` as well as null: requests of routes made before the plugin was registered
  // lack the decorator fields (the onRequest hook still reaches them).
  const state = request[kState]
  if (state !== null && state !== undefined) return state
  const reply = request[kReply]
  if (reply === null || reply === undefined) throw new ContextNotReadyError()
  request[kState] = {
    reply,
    options: request.server[kOptions],
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
  return request[kState]
}

/**
 * Runs `cleanup` once the response is over, also when the client cut it off (the response's
 * 'close'; at once if it is already over). Attached only by the requests that hold something
 * to release (locals, upload files), so the others pay nothing: a Fastify onRequestAbort hook
 * adds a 'close' listener with its closure to every request, which doubled the garbage
 * collector's time per request of GET /api/user/:id (bench/README.md). The onResponse hooks
 * of locals.ts and forms.ts release earlier on the usual path; `cleanup` must allow a second call.
 */
export function whenResponseEnds (request: FastifyRequest, cleanup: () => Promise<void>): void {
  const response = stateOf(request).reply.raw
  const run = (): void => {
    cleanup().catch((error: unknown) => { request.log.error({ err: error }, 'context: releasing a request\'s resources failed') })
  }
  if (response.closed) run()
  else response.once('close', run)
}
