/**
 * Guards around @fastify/multipart for hostile clients (the form operations in forms.ts and
 * `attachFieldsToBody` both read through `request.parts()`):
 * - the whole multipart body is bounded by the route's bodyLimit (@fastify/multipart bounds
 *   each file, not their sum): a Content-Length past it is a 413 before anything is read, and
 *   the bytes of a body without one are counted as they arrive (413 once past the limit);
 * - errors of the multipart parser that carry no status (busboy's: a truncated body, no
 *   boundary, a malformed part header) become MalformedMultipartError (400) instead of 500s;
 * - temp files of `formFile()` / `multipartForm()` are removed when the response ends;
 * - a reply sent while the body was not read to its end (a refusal, or formFile(key), which
 *   stops at the part it needs) first reads and drops the rest when it is small (a declared
 *   Content-Length within the route's bodyLimit and the server's, arriving within
 *   DRAIN_MAX_MS): a client still sending then reads the answer, where a close under its
 *   feet can cost it the answer (EPIPE / ECONNRESET). Otherwise the reply closes the
 *   connection, so the rest of a large upload is never read.
 *
 * `request.parts` is wrapped per multipart request (an own property over the decorator); code
 * that calls @fastify/multipart's `request.file()` / `files()` directly gets the Content-Length
 * check only.
 */
import type { IncomingMessage } from 'node:http'
import type { Readable } from 'node:stream'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { MalformedMultipartError, MultipartTooLargeError } from './errors.js'
import { kState, stateOf } from './state.js'

/** The part objects of @fastify/multipart, as far as the guards need them. */
export interface MultipartPart {
  type: 'field' | 'file'
  fieldname: string
  value?: unknown
  filename?: string
  mimetype?: string
  encoding?: string
  file?: Readable & { truncated?: boolean }
  toBuffer?: () => Promise<Buffer>
}

type PartsFunction = (this: FastifyRequest, options?: unknown) => AsyncIterable<MultipartPart>

export function isMultipartRequest (request: FastifyRequest): boolean {
  const type = request.headers['content-type']
  return typeof type === 'string' && /^\s*multipart\/form-data\s*(?:;|$)/i.test(type)
}

export function bodyLimitOf (request: FastifyRequest): number {
  return request.routeOptions.bodyLimit ?? request.server.initialConfig.bodyLimit ?? 1048576
}

/** How long the rest of a small unread body may take to arrive before the answer goes out with `Connection: close`. */
export const DRAIN_MAX_MS = 2000

/**
 * Reads and drops the rest of a request body that is small enough (a Content-Length of at
 * most `limit`) within DRAIN_MAX_MS; true when the body has then been received whole.
 */
async function drained (raw: IncomingMessage, limit: number): Promise<boolean> {
  if (raw.complete) return true
  const length = Number(raw.headers['content-length'])
  if (!Number.isSafeInteger(length) || length > limit || raw.destroyed) return false
  return await new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer)
      raw.off('end', done)
      raw.off('close', done)
      resolve(raw.complete)
    }
    const timer = setTimeout(done, DRAIN_MAX_MS)
    raw.once('end', done)
    raw.once('close', done)
    // The parser may still be piped, or stopped: unpiped, the bytes are read and dropped.
    raw.unpipe()
    raw.resume()
  })
}

/** A multipart parser error as a client error: its own 4xx when it has one, else a 400. */
export function clientError (error: unknown): Error {
  const status = (error as { statusCode?: unknown } | null)?.statusCode
  if (typeof status === 'number' && status >= 400 && status < 500) return error as Error
  return new MalformedMultipartError(error instanceof Error ? error.message : String(error))
}

function guardParts (request: FastifyRequest, original: PartsFunction): PartsFunction {
  return async function * guardedParts (this: FastifyRequest, options?: unknown): AsyncGenerator<MultipartPart> {
    const state = stateOf(request)
    const raw = request.raw
    const limit = bodyLimitOf(request)
    let received = 0
    let current: MultipartPart | undefined
    let fail!: (error: Error) => void
    const failed = new Promise<never>((_resolve, reject) => { fail = reject })
    failed.catch(() => {})
    let failure: Error | undefined
    const onData = (chunk: Buffer): void => {
      received += chunk.length
      if (received <= limit || failure !== undefined) return
      failure = new MultipartTooLargeError(`more than ${limit} bytes`)
      state.multipartUnfinished = true
      // Stop parsing; the rest is read and dropped until the 413 closes the connection.
      raw.unpipe()
      current?.file?.destroy(failure)
      fail(failure)
    }
    let iterator: AsyncIterator<MultipartPart>
    let pending: Promise<IteratorResult<MultipartPart>>
    try {
      iterator = original.call(this, options)[Symbol.asyncIterator]()
      // The first next() runs @fastify/multipart up to `request.pipe(busboy)`: the stream is
      // flowing from here on, so counting with a 'data' listener takes nothing from it.
      pending = iterator.next()
    } catch (error) {
      throw clientError(error)
    }
    raw.on('data', onData)
    state.multipartUnfinished = true
    try {
      while (true) {
        let result: IteratorResult<MultipartPart>
        try {
          result = await Promise.race([pending, failed])
        } catch (error) {
          throw clientError(error)
        }
        if (result.done === true) {
          state.multipartUnfinished = failure !== undefined
          return
        }
        current = guardPart(result.value)
        yield current
        if (failure !== undefined) throw failure
        pending = iterator.next()
      }
    } finally {
      if (failure === undefined) raw.off('data', onData)
    }
  }
}

/** Maps the errors of a file part's `toBuffer()` (used by attachFieldsToBody) as the iterator's. */
function guardPart (part: MultipartPart): MultipartPart {
  const toBuffer = part.toBuffer
  if (part.type === 'file' && typeof toBuffer === 'function') {
    part.toBuffer = async function (this: MultipartPart): Promise<Buffer> {
      try {
        return await toBuffer.call(this)
      } catch (error) {
        throw clientError(error)
      }
    }
  }
  return part
}

export function registerMultipartGuards (app: FastifyInstance): void {
  app.addHook('onRequest', function (request, _reply, done) {
    const parts = (request as { parts?: unknown }).parts
    if (typeof parts === 'function' && isMultipartRequest(request)) {
      ;(request as unknown as { parts: PartsFunction }).parts = guardParts(request, parts as PartsFunction)
    }
    done()
  })

  app.addHook('preParsing', function (request, _reply, payload, done) {
    if (!isMultipartRequest(request)) return done(null, payload)
    const length = Number(request.headers['content-length'])
    const limit = bodyLimitOf(request)
    if (Number.isFinite(length) && length > limit) {
      stateOf(request).multipartUnfinished = true
      return done(new MultipartTooLargeError(`Content-Length ${length} is more than ${limit} bytes`))
    }
    done(null, payload)
  })

  app.addHook('onSend', function (request, reply, payload, done) {
    // HTTP/1 only: HTTP/2 has no Connection header (its stream is reset instead).
    if (request[kState]?.multipartUnfinished !== true || request.raw.httpVersionMajor !== 1) return done(null, payload)
    // The connection closes after this answer anyway (the client asked for it, or the server
    // gave up on the body, e.g. one arriving too slowly): nothing to drain, answer at once.
    if (!reply.raw.shouldKeepAlive) return done(null, payload)
    // A body within the route's limit and the server's (what any request may make it read).
    const limit = Math.min(bodyLimitOf(request), request.server.initialConfig.bodyLimit ?? 1048576)
    drained(request.raw, limit).then((whole) => {
      if (!whole) reply.header('connection', 'close')
      done(null, payload)
    }, done)
  })
}
