/**
 * The context body: Send, SendString, SendStatus, Write, Writef, WriteString (and
 * JSON, JSONP, XML, Format, which set it too), plus SendStream.
 *
 * The body model (README.md "Response side"): Send "sets the body", Write "appends", SendStatus sets the status
 * and, when the body is empty, makes the status text the body. None of them sends: the body
 * is kept on the reply, set and appended in any order with the status and headers, and goes
 * out once, when the handler ends:
 *
 * - an async handler that resolves with `undefined`: its result becomes the body;
 * - a sync handler that returns `undefined` without having sent: the body is sent then;
 * - `reply.send()` without a payload (any time, e.g. from a callback): sends the body.
 *
 * Plain `reply.send(payload)` keeps Fastify's meaning: it sends `payload`, which replaces the
 * context body, as does a value the handler returns. The first two points come from an
 * `onRoute` hook, so they hold for routes registered after the plugin; the third (and async
 * handlers anywhere) from an `onSend` hook.
 *
 * `send` itself is Fastify's, so the Send operation is `reply.setBody(data)`.
 */
import { STATUS_CODES } from 'node:http'
import type { Readable } from 'node:stream'
import { format } from 'node:util'
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteHandlerMethod } from 'fastify'
import { ContextArgumentError, ReplyAlreadySentError } from './errors.js'

declare module 'fastify' {
  interface FastifyReply {
    /**
     * Send: sets the context body to `data` (bytes, or text as UTF-8), replacing
     * what was set or written. Does not send: the body goes out when the handler ends (see
     * the module notes). Content-Type, unless the reply has one: application/octet-stream
     * for bytes, text/plain for text.
     */
    setBody: (data: Uint8Array | string) => void
    /** SendString: sets the context body to `text` (text/plain unless a type is set). Does not send. */
    sendString: (text: string) => void
    /**
     * SendStatus: sets the status; when the context body is empty, it becomes the
     * standard status text (`Not Found`, text/plain). Does not send.
     */
    sendStatus: (status: number) => void
    /**
     * SendStream: sends `stream` as the body (application/octet-stream unless a type
     * is set), with Content-Length when `size` is given. This one sends at once.
     */
    sendStream: (stream: Readable, size?: number) => FastifyReply
    /** Write: appends bytes (or text, as UTF-8) to the context body; returns the byte count. */
    write: (data: Uint8Array | string) => number
    /** Writef: appends `util.format(format, ...args)` (`%v` reads as `%s`); returns the byte count. */
    writef: (format: string, ...args: unknown[]) => number
    /** WriteString: appends text (UTF-8); returns the byte count. */
    writeString: (text: string) => number
  }
}

/** The context body; null until a decorator sets or appends (most replies never do). */
interface ContextBody {
  chunks: Buffer[]
  length: number
  /** Content-Type to use when the reply has none at send time. */
  type: string
}

const TEXT = 'text/plain; charset=utf-8'
const BYTES = 'application/octet-stream'

const kBody = Symbol('context.reply.body')
type WithBody = FastifyReply & { [kBody]: ContextBody | null }

/** Bytes in the context body (0 when none). */
export function bodyLength (reply: FastifyReply): number {
  return (reply as WithBody)[kBody]?.length ?? 0
}

function notSent (reply: FastifyReply, operation: string): void {
  if (reply.sent || reply.raw.headersSent) throw new ReplyAlreadySentError(operation)
}

/**
 * Replaces the context body with `chunk` (JSON, XML and the other serializers use this).
 * `type` is the Content-Type used when the reply has none when it is sent.
 */
export function setContextBody (reply: FastifyReply, chunk: Buffer, type: string, operation: string): void {
  notSent(reply, operation)
  ;(reply as WithBody)[kBody] = { chunks: [chunk], length: chunk.length, type }
}

function append (reply: FastifyReply, chunk: Buffer, operation: string): number {
  notSent(reply, operation)
  const self = reply as WithBody
  const body = self[kBody] ??= { chunks: [], length: 0, type: TEXT }
  body.chunks.push(chunk)
  body.length += chunk.length
  return chunk.length
}

/** The context body as the payload to send (setting its default Content-Type), or undefined when there is none. */
function takeBody (reply: FastifyReply): Buffer | undefined {
  const self = reply as WithBody
  const body = self[kBody]
  if (body === null) return undefined
  self[kBody] = null
  if (!reply.hasHeader('content-type')) reply.header('content-type', body.type)
  return body.chunks.length === 1 ? body.chunks[0] : Buffer.concat(body.chunks, body.length)
}

function setBody (this: FastifyReply, data: Uint8Array | string): void {
  if (typeof data === 'string') setContextBody(this, Buffer.from(data, 'utf8'), TEXT, 'setBody')
  else if (data instanceof Uint8Array) setContextBody(this, Buffer.from(data), BYTES, 'setBody')
  else throw new ContextArgumentError('reply.setBody takes a string, Buffer or Uint8Array')
}

function sendString (this: FastifyReply, text: string): void {
  if (typeof text !== 'string') throw new ContextArgumentError('reply.sendString takes a string')
  setContextBody(this, Buffer.from(text, 'utf8'), TEXT, 'sendString')
}

function write (this: FastifyReply, data: Uint8Array | string): number {
  if (typeof data === 'string') return append(this, Buffer.from(data, 'utf8'), 'write')
  if (data instanceof Uint8Array) return append(this, Buffer.from(data), 'write')
  throw new ContextArgumentError('reply.write takes a string, Buffer or Uint8Array')
}

function writeString (this: FastifyReply, text: string): number {
  if (typeof text !== 'string') throw new ContextArgumentError('reply.writeString takes a string')
  return append(this, Buffer.from(text, 'utf8'), 'writeString')
}

// Go's %v has no util.format equivalent; %s is the closest (String(), objects inspected).
const GO_VERB_V = /%(%|v)/g

function writef (this: FastifyReply, template: string, ...args: unknown[]): number {
  if (typeof template !== 'string') throw new ContextArgumentError('reply.writef takes a format string')
  const text = format(template.replace(GO_VERB_V, (match, verb: string) => verb === 'v' ? '%s' : match), ...args)
  return append(this, Buffer.from(text, 'utf8'), 'writef')
}

function sendStatus (this: FastifyReply, status: number): void {
  notSent(this, 'sendStatus')
  this.code(status)
  if (bodyLength(this) === 0) setContextBody(this, Buffer.from(STATUS_CODES[status] ?? '', 'utf8'), TEXT, 'sendStatus')
}

function sendStream (this: FastifyReply, stream: Readable, size?: number): FastifyReply {
  if (stream === null || typeof stream !== 'object' || typeof (stream as Readable).pipe !== 'function') {
    throw new ContextArgumentError('reply.sendStream takes a readable stream')
  }
  if (size !== undefined) {
    if (!Number.isSafeInteger(size) || size < 0) throw new ContextArgumentError('reply.sendStream: size must be a whole number >= 0')
    this.header('content-length', size)
  }
  if (!this.hasHeader('content-type')) this.header('content-type', 'application/octet-stream')
  return this.send(stream)
}

function isThenable (value: unknown): value is PromiseLike<unknown> {
  return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof (value as PromiseLike<unknown>).then === 'function'
}

/**
 * The route handler, ending with the context body: an async handler's `undefined` result
 * becomes the body (so every onSend hook sees it), and a sync handler that returns
 * `undefined` without sending has the body sent when it returns.
 */
function withContextBody (handler: RouteHandlerMethod): RouteHandlerMethod {
  const wrapped = function contextBodyHandler (this: FastifyInstance, request: FastifyRequest, reply: FastifyReply) {
    const result: unknown = handler.call(this, request, reply)
    if (isThenable(result)) {
      return Promise.resolve(result).then((value) => {
        if (value !== undefined || reply.sent || reply.raw.headersSent) return value
        return takeBody(reply)
      })
    }
    if (result === undefined && (reply as WithBody)[kBody] !== null && !reply.sent && !reply.raw.headersSent) {
      reply.send(takeBody(reply))
    }
    return result
  } as RouteHandlerMethod
  // request.routeOptions.handler (and the request side's route()) show the handler's own name.
  Object.defineProperty(wrapped, 'name', { value: handler.name })
  return wrapped
}

export function registerBodyDecorators (app: FastifyInstance): void {
  app.decorateReply(kBody, null)
  app.decorateReply('setBody', setBody)
  app.decorateReply('sendString', sendString)
  app.decorateReply('sendStatus', sendStatus)
  app.decorateReply('sendStream', sendStream)
  app.decorateReply('write', write)
  app.decorateReply('writef', writef)
  app.decorateReply('writeString', writeString)

  app.addHook('onRoute', function contextBodyRoute (route) {
    route.handler = withContextBody(route.handler as RouteHandlerMethod)
  })

  // `reply.send()` without a payload (and async handlers of routes registered before the
  // plugin): the context body goes out. A payload given to `send` wins; the body is dropped.
  app.addHook('onSend', function sendContextBody (_request, reply, payload, done) {
    if (payload !== undefined) {
      ;(reply as WithBody)[kBody] = null
      done(null, payload)
      return
    }
    done(null, takeBody(reply))
  })
}
