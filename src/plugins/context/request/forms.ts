/**
 * SPEC.md "forms, cookies": Cookies, FormValue, FormFile, MultipartForm.
 *
 * The form plugins are the application's to register: @fastify/formbody for urlencoded
 * bodies, @fastify/multipart for multipart ones, and @fastify/cookie optionally (without it
 * the Cookie header is parsed here). Multipart, two ways, both supported:
 * - `attachFieldsToBody: true` (recommended): @fastify/multipart reads the whole form before
 *   the handler, enforcing its `limits` (413 past `fileSize`); every operation works at once.
 * - without it: `await request.multipartForm()` (or `formFile`) reads `request.parts()`
 *   once, buffering the files in memory under the same limits; `formValue` of a multipart
 *   field works after that.
 * `attachFieldsToBody: 'keyValues'` drops file names and types, so files are refused there.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { fastifyCookie } from '@fastify/cookie'
import { FormFileMissingError, FormNotParsedError, NotMultipartError } from './errors.js'
import { stateOf } from './state.js'

/** SPEC.md "file header": one uploaded file, held in memory. */
export interface FormFile {
  fieldname: string
  filename: string
  /** The part's Content-Type as sent by the client. */
  mimetype: string
  encoding: string
  size: number
  data: Buffer
}

/** SPEC.md MultipartForm: `Value` and `File`. */
export interface MultipartForm {
  value: Record<string, string[]>
  file: Record<string, FormFile[]>
}

declare module 'fastify' {
  interface FastifyRequest {
    /** SPEC.md Cookies: cookie value; `defaultValue` (else '') when the cookie is missing. Not `cookies`: @fastify/cookie's object. */
    cookie: (key: string, defaultValue?: string) => string
    /** SPEC.md FormValue: first value of a form field (urlencoded or multipart); `defaultValue` (else '') when absent. */
    formValue: (key: string, defaultValue?: string) => string
    /** SPEC.md FormFile: the first file uploaded under `key`; rejects with FormFileMissingError / NotMultipartError. */
    formFile: (key: string) => Promise<FormFile>
    /** SPEC.md MultipartForm: every field value and file of a multipart form. */
    multipartForm: () => Promise<MultipartForm>
  }
}

interface MultipartPart {
  type: 'field' | 'file'
  fieldname: string
  value?: unknown
  filename?: string
  mimetype?: string
  encoding?: string
  toBuffer?: () => Promise<Buffer>
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

async function toForm (parts: Iterable<MultipartPart> | AsyncIterable<MultipartPart>, copy: boolean): Promise<MultipartForm> {
  const form: MultipartForm = { value: Object.create(null), file: Object.create(null) }
  for await (const part of parts) {
    if (part.type === 'file') {
      const buffered = part.toBuffer === undefined ? Buffer.alloc(0) : await part.toBuffer()
      const data = copy ? Buffer.from(buffered) : buffered
      ;(form.file[part.fieldname] ??= []).push({
        fieldname: part.fieldname,
        filename: part.filename ?? '',
        mimetype: part.mimetype ?? 'application/octet-stream',
        encoding: part.encoding ?? '7bit',
        size: data.length,
        data
      })
    } else {
      ;(form.value[part.fieldname] ??= []).push(typeof part.value === 'string' ? part.value : String(part.value))
    }
  }
  return form
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
    const read = stateOf(request).multipartRead
    if (read !== undefined) return read.value
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

export function registerForms (app: FastifyInstance, options: { immutable: boolean }): void {
  app.decorateRequest('cookie', function (this: FastifyRequest, key: string, defaultValue?: string): string {
    const parsed = (this as { cookies?: Record<string, string | undefined> }).cookies ??
      fastifyCookie.parse(typeof this.headers.cookie === 'string' ? this.headers.cookie : '')
    return parsed[key] ?? defaultValue ?? ''
  })

  app.decorateRequest('formValue', function (this: FastifyRequest, key: string, defaultValue?: string): string {
    return formValues(this)?.[key]?.[0] ?? defaultValue ?? ''
  })

  app.decorateRequest('multipartForm', async function (this: FastifyRequest): Promise<MultipartForm> {
    if (essence(this) !== 'multipart/form-data') throw new NotMultipartError()
    const state = stateOf(this)
    if (state.multipartRead !== undefined) return state.multipartRead
    state.multipart ??= (async () => {
      const attached = attachedParts(this.body)
      if (attached !== undefined) return await toForm(attached, options.immutable)
      if (typeof this.body === 'object' && this.body !== null) {
        throw new FormNotParsedError('@fastify/multipart attachFieldsToBody: "keyValues" drops file names; use true')
      }
      const parts = (this as { parts?: () => AsyncIterable<MultipartPart> }).parts
      if (typeof parts !== 'function') throw new FormNotParsedError('register @fastify/multipart')
      // attachFieldsToBody: true leaves no body for an empty form: the stream is already read.
      if (this.raw.readableEnded) return { value: Object.create(null), file: Object.create(null) }
      return await toForm(parts.call(this), false)
    })()
    const form = await state.multipart
    state.multipartRead = form
    return form
  })

  app.decorateRequest('formFile', async function (this: FastifyRequest, key: string): Promise<FormFile> {
    const file = (await this.multipartForm()).file[key]?.[0]
    if (file === undefined) throw new FormFileMissingError(key)
    return file
  })
}
