/**
 * Body writing: SPEC.md Write, Writef, WriteString, SendStatus, SendStream.
 *
 * `write*` append to a buffer kept on the reply. The buffer becomes the body when the reply
 * is sent without a payload: an async handler that returns nothing (Fastify then calls
 * `reply.send()` itself), or an explicit `reply.send()`; an `onSend` hook swaps it in. A
 * payload given to `send` replaces what was written (as SPEC.md's Send "sets the body").
 */
import { STATUS_CODES } from 'node:http'
import type { Readable } from 'node:stream'
import { format } from 'node:util'
import type { FastifyInstance, FastifyReply } from 'fastify'
import { ContextArgumentError, ReplyAlreadySentError } from './errors.js'

declare module 'fastify' {
  interface FastifyReply {
    /**
     * SPEC.md SendStatus: sets the status; when nothing was written, the body becomes the
     * standard status text (`text/plain`). Sends the reply.
     */
    sendStatus: (status: number) => FastifyReply
    /**
     * SPEC.md SendStream: sends `stream` as the body (application/octet-stream unless a type
     * is set), with Content-Length when `size` is given.
     */
    sendStream: (stream: Readable, size?: number) => FastifyReply
    /** SPEC.md Write: appends bytes (or text, as UTF-8) to the body; returns the byte count. */
    write: (data: Uint8Array | string) => number
    /** SPEC.md Writef: appends `util.format(format, ...args)` (`%v` reads as `%s`); returns the byte count. */
    writef: (format: string, ...args: unknown[]) => number
    /** SPEC.md WriteString: appends text (UTF-8); returns the byte count. */
    writeString: (text: string) => number
  }
}

/** What was written so far; null until the first write (most replies never write). */
interface WrittenBody {
  chunks: Buffer[]
  length: number
}

const kWritten = Symbol('context.reply.written')
type WithBody = FastifyReply & { [kWritten]: WrittenBody | null }

/** Bytes written to this reply with `write*` (0 when none). */
export function writtenLength (reply: FastifyReply): number {
  return (reply as WithBody)[kWritten]?.length ?? 0
}

function append (reply: FastifyReply, chunk: Buffer, operation: string): number {
  if (reply.sent) throw new ReplyAlreadySentError(operation)
  const self = reply as WithBody
  const body = self[kWritten] ??= { chunks: [], length: 0 }
  body.chunks.push(chunk)
  body.length += chunk.length
  return chunk.length
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

function sendStatus (this: FastifyReply, status: number): FastifyReply {
  this.code(status)
  if (writtenLength(this) > 0) return this.send()
  return this.type('text/plain; charset=utf-8').send(STATUS_CODES[status] ?? '')
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

export function registerBodyDecorators (app: FastifyInstance): void {
  app.decorateReply(kWritten, null)
  app.decorateReply('sendStatus', sendStatus)
  app.decorateReply('sendStream', sendStream)
  app.decorateReply('write', write)
  app.decorateReply('writef', writef)
  app.decorateReply('writeString', writeString)

  app.addHook('onSend', function sendWrittenBody (_request, reply, payload, done) {
    const body = (reply as WithBody)[kWritten]
    if (body === null || body.length === 0 || (payload !== undefined && payload !== null && payload !== '')) {
      done(null, payload)
      return
    }
    // Go's net/http (and the original) default a written body to text/plain.
    if (!reply.hasHeader('content-type')) reply.header('content-type', 'text/plain; charset=utf-8')
    done(null, Buffer.concat(body.chunks, body.length))
  })
}
