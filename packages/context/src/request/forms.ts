/**
 * README.md "Parameters, query, forms, cookies": Cookies, FormValue, FormFile, MultipartForm.
 *
 * The form plugins are the application's to register: @fastify/formbody for urlencoded
 * bodies, @fastify/multipart for multipart ones, and @fastify/cookie optionally (without it
 * the Cookie header is parsed here). Multipart, two ways, both supported:
 * - `attachFieldsToBody: true` (recommended): @fastify/multipart reads the whole form before
 *   the handler, enforcing its `limits` (413 past `fileSize`); every operation works at once.
 * - without it: `await request.multipartForm()` (or `formFile`) reads `request.parts()`
 *   part by part, files in memory up to `formFiles.memoryThreshold` and in temp files past it
 *   (removed when the response ends), under the same limits; `formFile(key)` stops at the part
 *   it needs; `formValue` of a multipart field works once the whole form was read.
 * Both ways the whole body is bounded by bodyLimit and a malformed body is a 400 (multipart.ts).
 * `attachFieldsToBody: 'keyValues'` drops file names and types, so files are refused there.
 */
import { once } from 'node:events'
import { createReadStream, createWriteStream, type WriteStream } from 'node:fs'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { Readable } from 'node:stream'
import { finished } from 'node:stream/promises'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { fastifyCookie } from '@fastify/cookie'
import type { ResolvedContextOptions } from '../options.js'
import { FormFileMissingError, FormNotParsedError, MultipartTooLargeError, NotMultipartError } from './errors.js'
import { clientError, type MultipartPart } from './multipart.js'
import { kState, stateOf, whenResponseEnds } from './state.js'

/**
 * The file header (README.md FormFile): one uploaded file. In memory (`data`) up to the plugin option
 * `formFiles.memoryThreshold`, on disk (`path`, a temp file removed when the response ends)
 * past it; `toBuffer()` and `stream()` read either.
 */
export interface FormFile {
  fieldname: string
  filename: string
  /** The part's Content-Type as sent by the client. */
  mimetype: string
  encoding: string
  size: number
  /** The bytes, when the file is held in memory. */
  data: Buffer | undefined
  /** The temp file holding the bytes, when the file went to disk (valid until the response ends). */
  path: string | undefined
  /** The bytes (read from the temp file for a file on disk). */
  toBuffer: () => Promise<Buffer>
  /** A new stream of the bytes. */
  stream: () => Readable
}

/** MultipartForm: `Value` and `File`. */
export interface MultipartForm {
  value: Record<string, string[]>
  file: Record<string, FormFile[]>
}

/** A multipart body read part by part (formFile stops at the part it needs). */
export interface MultipartReader {
  form: MultipartForm
  /** The next part, or undefined at the end; undefined when the form was attached by @fastify/multipart. */
  next: (() => Promise<IteratorResult<MultipartPart>>) | undefined
  done: boolean
  /** Reads are serialized: one at a time. */
  busy: Promise<unknown>
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Cookies: cookie value; `defaultValue` (else '') when the cookie is missing. Not `cookies`: @fastify/cookie's object. */
    cookie: (key: string, defaultValue?: string) => string
    /** FormValue: first value of a form field (urlencoded or multipart); `defaultValue` (else '') when absent. */
    formValue: (key: string, defaultValue?: string) => string
    /** FormFile: the first file uploaded under `key`; rejects with FormFileMissingError / NotMultipartError. */
    formFile: (key: string) => Promise<FormFile>
    /** MultipartForm: every field value and file of a multipart form. */
    multipartForm: () => Promise<MultipartForm>
  }
}

function essence (request: FastifyRequest): string {
  const type = request.headers['content-type']
  return typeof type === 'string' ? (type.split(';')[0] ?? '').trim().toLowerCase() : ''
}

function isPart (value: unknown): value is MultipartPart {
  return typeof value === 'object' && value !== null && !Buffer.isBuffer(value) &&
    ((value as MultipartPart).type === 'field' || (value as MultipartPart).type === 'file')
}

/** Lists an attached multipart body (`attachFieldsToBody: true`) as parts. */
function attachedParts (body: unknown): MultipartPart[] | undefined {
  if (typeof body !== 'object' || body === null) return undefined
  const parts: MultipartPart[] = []
  for (const value of Object.values(body)) {
    for (const item of Array.isArray(value) ? value : [value]) {
      if (!isPart(item)) return undefined
      parts.push(item)
    }
  }
  return parts
}

function emptyForm (): MultipartForm {
  return { value: Object.create(null), file: Object.create(null) }
}

function memoryFile (part: MultipartPart, data: Buffer): FormFile {
  return {
    fieldname: part.fieldname,
    filename: part.filename ?? '',
    mimetype: part.mimetype ?? 'application/octet-stream',
    encoding: part.encoding ?? '7bit',
    size: data.length,
    data,
    path: undefined,
    toBuffer: async () => data,
    stream: () => Readable.from([data])
  }
}

function diskFile (part: MultipartPart, path: string, size: number): FormFile {
  return {
    fieldname: part.fieldname,
    filename: part.filename ?? '',
    mimetype: part.mimetype ?? 'application/octet-stream',
    encoding: part.encoding ?? '7bit',
    size,
    data: undefined,
    path,
    toBuffer: async () => await readFile(path),
    stream: () => createReadStream(path)
  }
}

let fileCounter = 0

/**
 * Reads a file part's stream: in memory up to `threshold` bytes, then into a temp file of the
 * request's temp folder. A part cut at @fastify/multipart's `fileSize` limit is a 413.
 */
async function readFilePart (request: FastifyRequest, part: MultipartPart, options: ResolvedContextOptions): Promise<FormFile> {
  const stream = part.file
  if (stream === undefined) return memoryFile(part, part.toBuffer === undefined ? Buffer.alloc(0) : await part.toBuffer())
  const { memoryThreshold, tmpDir } = options.formFiles
  const chunks: Buffer[] = []
  let size = 0
  let out: WriteStream | undefined
  let path: string | undefined
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      size += chunk.length
      if (out === undefined && size <= memoryThreshold) {
        chunks.push(chunk)
        continue
      }
      if (out === undefined) {
        const state = stateOf(request)
        if (state.tempFolder === undefined) {
          state.tempFolder = mkdtemp(join(tmpDir, 'context-upload-'))
          whenResponseEnds(request, async () => { await removeTempFolder(request) })
        }
        path = join(await state.tempFolder, `file-${++fileCounter}`)
        out = createWriteStream(path, { flags: 'wx', mode: 0o600 })
        for (const held of chunks) if (!out.write(held)) await once(out, 'drain')
        chunks.length = 0
      }
      if (!out.write(chunk)) await once(out, 'drain')
    }
    if (stream.truncated === true) throw new MultipartTooLargeError(`the file of "${part.fieldname}" is larger than the fileSize limit`)
    if (out !== undefined) {
      out.end()
      await finished(out)
    }
  } catch (error) {
    out?.destroy()
    throw clientError(error)
  }
  if (path !== undefined) return diskFile(part, path, size)
  const data = Buffer.concat(chunks)
  return memoryFile(part, options.immutable ? Buffer.from(data) : data)
}

async function addPart (request: FastifyRequest, form: MultipartForm, part: MultipartPart, options: ResolvedContextOptions, attached: boolean): Promise<void> {
  if (part.type === 'file') {
    let file: FormFile
    if (attached) {
      // attachFieldsToBody: true has buffered the file already.
      const buffered = part.toBuffer === undefined ? Buffer.alloc(0) : await part.toBuffer()
      file = memoryFile(part, options.immutable ? Buffer.from(buffered) : buffered)
    } else {
      file = await readFilePart(request, part, options)
    }
    ;(form.file[part.fieldname] ??= []).push(file)
  } else {
    ;(form.value[part.fieldname] ??= []).push(typeof part.value === 'string' ? part.value : String(part.value))
  }
}

/**
 * The form's field values as lists, synchronously: urlencoded bodies, attached multipart
 * bodies, or a multipart form already read by `multipartForm()`. Undefined when the request
 * carries no form; throws FormNotParsedError when it does but nothing parsed it yet.
 */
export function formValues (request: FastifyRequest): Record<string, string[]> | undefined {
  const type = essence(request)
  const body: unknown = request.body
  if (type === 'application/x-www-form-urlencoded') {
    if (typeof body !== 'object' || body === null) throw new FormNotParsedError('register @fastify/formbody')
    const values: Record<string, string[]> = Object.create(null)
    for (const [key, value] of Object.entries(body)) values[key] = (Array.isArray(value) ? value : [value]).map(String)
    return values
  }
  if (type === 'multipart/form-data') {
    const reader = stateOf(request).multipartReader
    if (reader?.done === true) return reader.form.value
    const parts = attachedParts(body)
    if (parts !== undefined) {
      const values: Record<string, string[]> = Object.create(null)
      for (const part of parts) if (part.type === 'field') (values[part.fieldname] ??= []).push(String(part.value))
      return values
    }
    if (typeof body === 'object' && body !== null) {
      // attachFieldsToBody: 'keyValues': plain values (files as Buffers, skipped).
      const values: Record<string, string[]> = Object.create(null)
      for (const [key, value] of Object.entries(body)) {
        const list = (Array.isArray(value) ? value : [value]).filter((item) => !Buffer.isBuffer(item)).map(String)
        if (list.length > 0) values[key] = list
      }
      return values
    }
    throw new FormNotParsedError('register @fastify/multipart with attachFieldsToBody: true, or await request.multipartForm() first')
  }
  return undefined
}

/** Removes the request's upload temp folder (once the response is over: whenResponseEnds). */
async function removeTempFolder (request: FastifyRequest): Promise<void> {
  const state = stateOf(request)
  const folder = state.tempFolder
  if (folder === undefined) return
  state.tempFolder = undefined
  try {
    await rm(await folder, { recursive: true, force: true })
  } catch (error) {
    request.log.warn({ err: error }, 'context: cannot remove the upload temp folder')
  }
}

export function registerForms (app: FastifyInstance, options: ResolvedContextOptions): void {
  // Upload files go when the response is sent, or on the response's 'close' if the client
  // cut it off (whenResponseEnds, attached with the folder). The second call finds none.
  app.addHook('onResponse', function (request, _reply, done) {
    if (request[kState]?.tempFolder === undefined) return done()
    removeTempFolder(request).then(() => { done() }, done)
  })
  app.decorateRequest('cookie', function (this: FastifyRequest, key: string, defaultValue?: string): string {
    const parsed = (this as { cookies?: Record<string, string | undefined> }).cookies ??
      fastifyCookie.parse(typeof this.headers.cookie === 'string' ? this.headers.cookie : '')
    return parsed[key] ?? defaultValue ?? ''
  })

  app.decorateRequest('formValue', function (this: FastifyRequest, key: string, defaultValue?: string): string {
    return formValues(this)?.[key]?.[0] ?? defaultValue ?? ''
  })

  /** The request's reader, made on first use; throws when the body is no readable multipart form. */
  async function readerOf (request: FastifyRequest): Promise<MultipartReader> {
    if (essence(request) !== 'multipart/form-data') throw new NotMultipartError()
    const state = stateOf(request)
    if (state.multipartReader !== undefined) return state.multipartReader
    const form = emptyForm()
    const attached = attachedParts(request.body)
    let reader: MultipartReader
    if (attached !== undefined) {
      for (const part of attached) await addPart(request, form, part, options, true)
      reader = { form, next: undefined, done: true, busy: Promise.resolve() }
    } else if (typeof request.body === 'object' && request.body !== null) {
      throw new FormNotParsedError('@fastify/multipart attachFieldsToBody: "keyValues" drops file names; use true')
    } else {
      const parts = (request as { parts?: () => AsyncIterable<MultipartPart> }).parts
      if (typeof parts !== 'function') throw new FormNotParsedError('register @fastify/multipart')
      // attachFieldsToBody: true leaves no body for an empty form: the stream is already read.
      if (request.raw.readableEnded) {
        reader = { form, next: undefined, done: true, busy: Promise.resolve() }
      } else {
        const iterator = parts.call(request)[Symbol.asyncIterator]()
        reader = { form, next: async () => await iterator.next(), done: false, busy: Promise.resolve() }
      }
    }
    state.multipartReader ??= reader
    return state.multipartReader
  }

  /** Reads parts until `enough(form)` or the end of the body, one reader at a time. */
  async function readUntil (request: FastifyRequest, enough: (form: MultipartForm) => boolean): Promise<MultipartForm> {
    const reader = await readerOf(request)
    const run = async (): Promise<MultipartForm> => {
      while (!reader.done && !enough(reader.form) && reader.next !== undefined) {
        const result = await reader.next()
        if (result.done === true) {
          reader.done = true
          break
        }
        await addPart(request, reader.form, result.value, options, false)
      }
      return reader.form
    }
    const turn = reader.busy.then(run, run)
    reader.busy = turn.catch(() => {})
    return await turn
  }

  app.decorateRequest('multipartForm', async function (this: FastifyRequest): Promise<MultipartForm> {
    return await readUntil(this, () => false)
  })

  app.decorateRequest('formFile', async function (this: FastifyRequest, key: string): Promise<FormFile> {
    // Stops at the first file under `key`: later parts stay unread unless something asks for them.
    const form = await readUntil(this, (form) => form.file[key] !== undefined)
    const file = form.file[key]?.[0]
    if (file === undefined) throw new FormFileMissingError(key)
    return file
  })
}
