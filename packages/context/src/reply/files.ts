/**
 * Files: SendFile and Download as `reply.serveFile(file, compress?)` and
 * `reply.downloadFile(file, filename?)`, through @fastify/send (the sender @fastify/static is
 * built on): Content-Type from the extension, ETag / Last-Modified, conditional GET (304,
 * 412) and Range (206, 416) as @fastify/static does them.
 *
 * Not `sendFile` / `download`: those are @fastify/static's decorators, whose second argument
 * is a root folder (ours is `compress`). Other names let both plugins live in one app,
 * each decorator meaning what its plugin documents.
 */
import { realpath } from 'node:fs/promises'
import path from 'node:path'
import { pipeline, type Readable } from 'node:stream'
import zlib from 'node:zlib'
import send from '@fastify/send'
import type { FastifyInstance, FastifyReply } from 'fastify'
import { contentType } from 'mime-types'
import { negotiateEncoding } from '../negotiation.js'
import {
  ContextArgumentError,
  FileForbiddenError,
  FileNotFoundError,
  FileRootMissingError,
  FileSendError
} from './errors.js'
import { attachmentHeader } from './headers.js'
import type { ResolvedFilesOptions } from './options.js'

declare module 'fastify' {
  interface FastifyReply {
    /**
     * SendFile: streams `file` (read from the `files.root` option's folder; an
     * absolute path inside that folder works too) with Content-Type from its extension, ETag, Last-Modified, Range and
     * conditional GET. `compress` (default false) gzip/brotli/deflate-encodes it when the
     * client accepts one (no Range then). Outside the root: 403; missing: 404.
     * Names are taken literally: no URL-escaping needed.
     */
    serveFile: (file: string, compress?: boolean) => FastifyReply
    /**
     * Download: sends `file` as an attachment named `filename` (default: the file's
     * base name), Content-Type from that name's extension when known.
     */
    downloadFile: (file: string, filename?: string) => FastifyReply
  }
}

/** Codings `compress` offers, in preference order for equal q (gzip is fast and universal). */
const CODINGS = ['gzip', 'br', 'deflate', 'identity'] as const

function encoder (coding: string): zlib.Gzip | zlib.BrotliCompress | zlib.Deflate {
  if (coding === 'br') {
    // Quality 11 (the default) costs ~10x the CPU of gzip for a few percent; 5 is a common balance.
    return zlib.createBrotliCompress({ params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 5 } })
  }
  return coding === 'gzip' ? zlib.createGzip() : zlib.createDeflate()
}

/**
 * The segments of `file` relative to `root`: an absolute path inside the root is made
 * relative to it, any other path is read from the root (as Express and @fastify/static do
 * with a root: `/etc/passwd` is `root/etc/passwd`). `/` and `\\` both separate.
 */
function segmentsOf (file: string, root: string): string[] {
  let relative = file
  if (path.isAbsolute(file) && (file === root || file.startsWith(root + path.sep))) relative = path.relative(root, file)
  return relative.split(/[\\/]/).filter((s) => s !== '' && s !== '.')
}

function isInside (target: string, root: string): boolean {
  return target === root || target.startsWith(root.endsWith(path.sep) ? root : root + path.sep)
}

function hasDotfile (segments: readonly string[]): boolean {
  return segments.some((s) => s.length > 1 && s.startsWith('.'))
}

function dotfileError (files: ResolvedFilesOptions): Error {
  return files.dotfiles === 'deny' ? new FileForbiddenError() : new FileNotFoundError()
}

/**
 * The URL-encoded path (relative to `files.realRoot`) that @fastify/send reads for `file`.
 * Contained twice: the path as given must not climb out of the root (403), and its real
 * path, every symbolic link resolved, must lie inside the root's real path (403), so a link
 * inside the root to a file outside it is refused. Dotfiles are judged on both paths (a
 * link `.secret` to a public file, or `public.txt` to `.env`). Missing: 404.
 */
async function containedPath (file: string, files: ResolvedFilesOptions): Promise<string> {
  const segments = segmentsOf(file, files.root)
  const lexical = path.resolve(files.root, ...segments)
  if (!isInside(lexical, files.root)) throw new FileForbiddenError()
  if (files.dotfiles !== 'allow' && hasDotfile(path.relative(files.root, lexical).split(path.sep))) throw dotfileError(files)
  let real: string
  try {
    real = await realpath(lexical)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'ELOOP' || code === 'ENAMETOOLONG') throw new FileNotFoundError()
    throw error
  }
  if (!isInside(real, files.realRoot)) throw new FileForbiddenError()
  // Encode each segment so names with %, # or ? are read literally.
  return '/' + path.relative(files.realRoot, real).split(path.sep).filter((s) => s !== '').map(encodeURIComponent).join('/')
}

interface SendFileOptions {
  compress: boolean
  /** Content-Type to use instead of the file's (downloadFile: the attachment name's). */
  contentType?: string
}

async function pump (reply: FastifyReply, files: ResolvedFilesOptions, file: string, options: SendFileOptions): Promise<void> {
  const encoded = await containedPath(file, files)

  const request = reply.request
  const acceptEncoding = request.headers['accept-encoding']
  let coding = ''
  if (options.compress) {
    reply.vary('Accept-Encoding')
    if (acceptEncoding !== undefined) coding = negotiateEncoding(acceptEncoding, CODINGS)
    if (coding === 'identity') coding = ''
  }

  const result = await send(request.raw, encoded, {
    root: files.realRoot,
    dotfiles: files.dotfiles,
    maxAge: files.maxAge,
    immutable: files.immutable,
    etag: files.etag,
    lastModified: files.lastModified,
    index: false,
    // A compressed body has other byte offsets than the file: no ranges then.
    acceptRanges: coding === ''
  })

  if (result.type !== 'file') {
    result.stream.destroy()
    const status = result.type === 'error' ? (result.metadata.error as { status?: number }).status ?? 500 : 404
    if (status === 404 || result.type === 'directory') throw new FileNotFoundError()
    if (status === 403) throw new FileForbiddenError()
    // 412, 416 (with its Content-Range), 400: keep @fastify/send's headers that say why.
    const contentRange = result.headers['Content-Range']
    if (contentRange !== undefined) reply.header('content-range', contentRange)
    const error = new FileSendError(result.type === 'error' ? (result.metadata.error as Error).message : 'Not a file')
    ;(error as { statusCode: number }).statusCode = status
    throw error
  }

  // A status the handler chose (other than 200) wins, as with @fastify/static.
  reply.code(reply.statusCode !== 200 ? reply.statusCode : result.statusCode)
  reply.headers(result.headers)
  if (options.contentType !== undefined && result.statusCode !== 304) reply.header('content-type', options.contentType)

  let body: Readable = result.stream
  if (coding !== '' && result.statusCode === 200) {
    reply.removeHeader('content-length')
    reply.header('content-encoding', coding)
    body = pipeline(result.stream, encoder(coding), () => {})
  }
  reply.send(body)
}

export function registerFileDecorators (app: FastifyInstance, files: ResolvedFilesOptions | undefined): void {
  function serveFile (this: FastifyReply, file: string, compress: unknown = false): FastifyReply {
    if (files === undefined) throw new FileRootMissingError('serveFile')
    if (typeof file !== 'string' || file === '' || file.includes('\0')) throw new ContextArgumentError('reply.serveFile takes a file path')
    if (typeof compress !== 'boolean') throw new ContextArgumentError('reply.serveFile(file, compress?): compress is a boolean (the root is the files.root option)')
    pump(this, files, file, { compress }).catch((error: unknown) => this.send(error))
    return this
  }

  function downloadFile (this: FastifyReply, file: string, filename?: unknown): FastifyReply {
    if (files === undefined) throw new FileRootMissingError('downloadFile')
    if (typeof file !== 'string' || file === '' || file.includes('\0')) throw new ContextArgumentError('reply.downloadFile takes a file path')
    const name = filename === undefined || filename === '' ? path.basename(file) : filename
    if (typeof name !== 'string') throw new ContextArgumentError('reply.downloadFile: filename must be a string')
    this.header('content-disposition', attachmentHeader(name))
    const type = contentType(path.extname(name))
    pump(this, files, file, { compress: false, contentType: type === false ? undefined : type })
      .catch((error: unknown) => this.removeHeader('content-disposition').send(error))
    return this
  }

  app.decorateReply('serveFile', serveFile)
  app.decorateReply('downloadFile', downloadFile)
}
