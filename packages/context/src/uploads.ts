/**
 * Uploads: SaveFile and SaveFileToStorage, as request decorators (the file is part
 * of the request, not of the reply). The file is what
 * @fastify/multipart hands out (`await request.file()`, the parts of `request.files()`, or
 * fields of `attachFieldsToBody`), what `request.formFile()` returns (in memory or spooled to
 * a temp file), a Buffer, or a readable stream.
 *
 * A destination with a `..` segment or a NUL byte is refused (UnsafeUploadPathError, 400),
 * so a path built from the client's file name (`uploads/${file.filename}`) cannot climb out
 * of its folder. Build such paths by joining strings, not with `path.resolve`, which would
 * remove the `..` before it is seen.
 */
import { createWriteStream } from 'node:fs'
import { copyFile, rm, writeFile } from 'node:fs/promises'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { ContextArgumentError, UploadTooLargeError } from './reply/errors.js'
import { assertSafePath, type Storage } from './storage.js'

/**
 * A file part: @fastify/multipart's (a stream `file` and a buffering `toBuffer`) or the
 * context plugin's `request.formFile()` result (its bytes in `data`, or in the temp file
 * `path` when it was spooled to disk).
 */
export interface UploadedFilePart {
  file?: Readable & { truncated?: boolean }
  toBuffer?: () => Promise<Buffer>
  data?: Uint8Array
  path?: string
}

export type UploadedFile = UploadedFilePart | Buffer | Uint8Array | Readable

declare module 'fastify' {
  interface FastifyRequest {
    /** SaveFile: writes the uploaded file to `path` on disk (replacing a file there). */
    saveFile: (file: UploadedFile, path: string) => Promise<void>
    /** SaveFileToStorage: stores the uploaded file under `path` in `storage`. */
    saveFileToStorage: (file: UploadedFile, path: string, storage: Storage) => Promise<void>
  }
}

function isUnreadStream (value: unknown): value is Readable & { truncated?: boolean } {
  return value instanceof Readable && !value.readableEnded && !value.destroyed
}

function checkTruncated (stream: { truncated?: boolean } | undefined): void {
  if (stream?.truncated === true) throw new UploadTooLargeError()
}

/** The file's bytes, in memory. */
async function contents (file: UploadedFile): Promise<Buffer> {
  if (file instanceof Uint8Array) return Buffer.from(file)
  if (file instanceof Readable) {
    const chunks: Buffer[] = []
    for await (const chunk of file) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string))
    checkTruncated(file as { truncated?: boolean })
    return Buffer.concat(chunks)
  }
  if (file !== null && typeof file === 'object') {
    if (file.data instanceof Uint8Array) return Buffer.from(file.data)
    if (typeof file.toBuffer === 'function') {
      try {
        return await file.toBuffer()
      } catch (error) {
        // @fastify/multipart's RequestFileTooLargeError
        if ((error as { code?: string }).code === 'FST_REQ_FILE_TOO_LARGE') throw new UploadTooLargeError()
        throw error
      }
    }
    if (isUnreadStream(file.file)) return await contents(file.file)
  }
  throw new ContextArgumentError('saveFile takes a multipart file, a Buffer or a readable stream')
}

/** The stream to copy from, when the file is (or holds) one not read yet. */
function unreadStream (file: UploadedFile): (Readable & { truncated?: boolean }) | undefined {
  if (file instanceof Readable) return file
  if (file !== null && typeof file === 'object' && !(file instanceof Uint8Array) && isUnreadStream(file.file)) return file.file
  return undefined
}

/** The temp file of a `request.formFile()` result spooled to disk. */
function spooledPath (file: UploadedFile): string | undefined {
  if (file === null || typeof file !== 'object' || file instanceof Uint8Array || file instanceof Readable) return undefined
  return file.data === undefined && typeof file.path === 'string' ? file.path : undefined
}

async function saveFile (this: FastifyRequest, file: UploadedFile, destination: string): Promise<void> {
  assertSafePath(destination)
  const spooled = spooledPath(file)
  if (spooled !== undefined) {
    // Copied file to file: a large upload never comes back into memory.
    await copyFile(spooled, destination)
    return
  }
  const stream = unreadStream(file)
  if (stream === undefined) {
    await writeFile(destination, await contents(file))
    return
  }
  // Stream to disk; a part cut at the size limit leaves no half-written file behind.
  try {
    await pipeline(stream, createWriteStream(destination))
    checkTruncated(stream)
  } catch (error) {
    await rm(destination, { force: true })
    throw error
  }
}

async function saveFileToStorage (this: FastifyRequest, file: UploadedFile, destination: string, storage: Storage): Promise<void> {
  assertSafePath(destination)
  if (storage === null || typeof storage !== 'object' || typeof storage.set !== 'function') {
    throw new ContextArgumentError('saveFileToStorage needs a storage with set/get/delete')
  }
  await storage.set(destination, await contents(file))
}

export function registerUploadDecorators (app: FastifyInstance): void {
  app.decorateRequest('saveFile', saveFile)
  app.decorateRequest('saveFileToStorage', saveFileToStorage)
}
