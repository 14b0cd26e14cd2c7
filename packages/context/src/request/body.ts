/**
 * README.md "Body reading": `bodyRaw()` and `body()`.
 *
 * A preParsing hook sits between the socket and Fastify's content-type parsers:
 * - it keeps a copy of the bytes as received (option `rawBody`, default true: one extra copy
 *   of each body, at most the route's bodyLimit, released with the request);
 * - it decodes `Content-Encoding` (gzip, x-gzip, deflate, br, and lists of them, undone in
 *   reverse order) for the parsers, so `request.body` and `body()` both see the decoded bytes.
 *   An unknown coding is a 415, a corrupt stream a 400, and decoded output past the body
 *   limit a 413 (the limit applies to the decoded size: a decompression bomb stops there).
 * Multipart bodies are left alone: @fastify/multipart reads the socket itself.
 */
import { PassThrough, Transform, pipeline, type Readable, type TransformCallback } from 'node:stream'
import zlib from 'node:zlib'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { ResolvedContextOptions } from '../options.js'
import {
  CorruptBodyError, DecodedBodyTooLargeError, RawBodyUnavailableError, UnsupportedContentEncodingError
} from './errors.js'
import { stateOf } from './state.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** BodyRaw: the body bytes as received (still encoded). Empty Buffer without a body. */
    bodyRaw: () => Buffer
    /**
     * Body: the body decoded per Content-Encoding; the same bytes as bodyRaw() without
     * one. Not `body`: that is Fastify's parsed body.
     */
    decodedBody: () => Buffer
  }
}

const DECODERS: Record<string, () => Transform> = {
  gzip: () => zlib.createGunzip(),
  'x-gzip': () => zlib.createGunzip(),
  deflate: () => zlib.createInflate(),
  br: () => zlib.createBrotliDecompress()
}

/** The codings of a Content-Encoding header in the order they were applied, identity dropped. */
export function parseContentCodings (header: string | string[] | undefined): string[] {
  if (header === undefined) return []
  const text = Array.isArray(header) ? header.join(',') : header
  return text.split(',').map((coding) => coding.trim().toLowerCase()).filter((coding) => coding !== '' && coding !== 'identity')
}

/** True when the request announces a body (Content-Length > 0 or Transfer-Encoding). */
export function hasBody (request: FastifyRequest): boolean {
  const headers = request.raw.headers
  if (headers['transfer-encoding'] !== undefined) return true
  const length = Number(headers['content-length'])
  return Number.isFinite(length) && length > 0
}

function isMultipart (request: FastifyRequest): boolean {
  const type = request.headers['content-type']
  return typeof type === 'string' && /^\s*multipart\//i.test(type)
}

/** Passes chunks through, handing each to `onChunk`; an error it returns fails the stream. */
function tap (onChunk: (chunk: Buffer) => Error | undefined): Transform {
  return new Transform({
    transform (chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback) {
      const error = onChunk(chunk)
      if (error === undefined) callback(null, chunk)
      else callback(error)
    }
  })
}

export function registerBody (app: FastifyInstance, options: ResolvedContextOptions): void {
  app.addHook('preParsing', function (request, _reply, payload, done) {
    // No body: nothing to keep (bodyRaw() answers an empty buffer), no state to make.
    if (!hasBody(request)) return done(null, payload)
    const state = stateOf(request)
    if (isMultipart(request)) {
      state.rawBodyMissing = 'multipart bodies are read by @fastify/multipart, not kept'
      return done(null, payload)
    }
    const codings = parseContentCodings(request.headers['content-encoding'])
    const unsupported = codings.find((coding) => DECODERS[coding] === undefined)
    if (unsupported !== undefined) return done(new UnsupportedContentEncodingError(unsupported))
    if (!options.rawBody && codings.length === 0) {
      state.rawBodyMissing = 'the context plugin option rawBody is false'
      return done(null, payload)
    }
    if (!options.rawBody) state.rawBodyMissing = 'the context plugin option rawBody is false'

    const limit = request.routeOptions.bodyLimit ?? request.server.initialConfig.bodyLimit ?? 1048576
    const output = new PassThrough() as PassThrough & { receivedEncodedLength: number }
    output.receivedEncodedLength = 0
    // Fastify detaches its listeners once it has answered (e.g. its own 413); a later decoder
    // error must not become an uncaught 'error' event.
    output.on('error', () => {})
    const rawChunks: Buffer[] = []
    const stages: Transform[] = [tap((chunk) => {
      output.receivedEncodedLength += chunk.length
      if (options.rawBody) rawChunks.push(chunk)
      return undefined
    })]
    if (options.rawBody) state.rawChunks = rawChunks
    if (codings.length > 0) {
      for (const coding of [...codings].reverse()) stages.push((DECODERS[coding] as () => Transform)())
      const decoded: Buffer[] = []
      let decodedLength = 0
      stages.push(tap((chunk) => {
        decodedLength += chunk.length
        if (decodedLength > limit) return new DecodedBodyTooLargeError(limit)
        if (options.rawBody) decoded.push(chunk)
        return undefined
      }))
      if (options.rawBody) state.decodedChunks = decoded
    }
    const failed = (error: NodeJS.ErrnoException): Error => {
      if ((error as { statusCode?: number }).statusCode !== undefined) return error
      if (error.code === 'ERR_STREAM_PREMATURE_CLOSE') return error
      return new CorruptBodyError(codings.join(', ') || 'raw')
    }
    // `output` stays outside the pipeline, so a decoder's error reaches the parser as our
    // 400/413 rather than as zlib's own error.
    pipeline([payload as Readable, ...stages], (error) => {
      if (error !== null && error !== undefined && !output.destroyed) output.destroy(failed(error))
    })
    ;(stages[stages.length - 1] as Transform).pipe(output)
    done(null, output)
  })

  app.decorateRequest('bodyRaw', function (this: FastifyRequest): Buffer {
    const state = stateOf(this)
    if (state.rawBody === undefined) {
      if (state.rawChunks === undefined && state.rawBodyMissing === undefined && !hasBody(this)) return Buffer.alloc(0)
      if (state.rawChunks === undefined) throw new RawBodyUnavailableError(state.rawBodyMissing ?? 'the body was not read')
      state.rawBody = Buffer.concat(state.rawChunks)
      state.rawChunks = undefined
    }
    return options.immutable ? Buffer.from(state.rawBody) : state.rawBody
  })

  app.decorateRequest('decodedBody', function (this: FastifyRequest): Buffer {
    const state = stateOf(this)
    if (state.decodedChunks === undefined && state.decodedBody === undefined) return this.bodyRaw()
    if (state.decodedBody === undefined) {
      state.decodedBody = Buffer.concat(state.decodedChunks as Buffer[])
      state.decodedChunks = undefined
    }
    return options.immutable ? Buffer.from(state.decodedBody) : state.decodedBody
  })
}
