/**
 * Files: SPEC.md SendFile and Download, through @fastify/send (the sender @fastify/static is
 * built on): Content-Type from the extension, ETag / Last-Modified, conditional GET (304,
 * 412) and Range (206, 416) as @fastify/static does them.
 *
 * Why not @fastify/static's own `reply.sendFile`: its second argument is a root folder,
 * SPEC.md's is `compress`; one decorator cannot mean both. Register @fastify/static with
 * `decorateReply: false` next to this plugin (the routing plugin's `app.static` does).
 */
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

// Declared as methods, not properties: @fastify/static's types declare `sendFile` and
// `download` methods on FastifyReply too, and method declarations merge as overloads. Its
// (rootPath / options) overloads typecheck but are refused at run time.
declare module 'fastify' {
  interface FastifyReply {
    /**
     * SPEC.md SendFile: streams `file` (read from the `files.root` option's folder; an
     * absolute path inside that folder works too) with Content-Type from its extension, ETag, Last-Modified, Range and
     * conditional GET. `compress` (default false) gzip/brotli/deflate-encodes it when the
     * client accepts one (no Range then). Outside the root: 403; missing: 404.
     * Names are taken literally: no URL-escaping needed.
     */
    sendFile (file: string, compress?: boolean): FastifyReply
    /**
     * SPEC.md Download: sends `file` as an attachment named `filename` (default: the file's
     * base name), Content-Type from that name's extension when known.
     */
    download (file: string, filename?: string): FastifyReply
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
 * `file` as the URL-encoded path @fastify/send expects, relative to `root`: an absolute
 * path inside the root is made relative to it, any other path is read from the root (as
 * Express and @fastify/static do with a root: `/etc/passwd` is `root/etc/passwd`).
 */
function sendPath (file: string, root: string): string {
  let relative = file
  if (path.isAbsolute(file) && (file === root || file.startsWith(root + path.sep))) relative = path.relative(root, file)
  // Encode each segment so names with %, # or ? are read literally; `..` stays `..` and
  // @fastify/send refuses (403) a path that climbs above the root.
  return '/' + relative.split(/[\\/]/).filter((s) => s !== '').map(encodeURIComponent).join('/')
}

interface SendFileOptions {
  compress: boolean
  /** Content-Type to use instead of the file's (download: the attachment name's). */
  contentType?: string
}

async function pump (reply: FastifyReply, files: ResolvedFilesOptions, file: string, options: SendFileOptions): Promise<void> {
  const encoded = sendPath(file, files.root)

  const request = reply.request
  const acceptEncoding = request.headers['accept-encoding']
  let coding = ''
  if (options.compress) {
    reply.vary('Accept-Encoding')
    if (acceptEncoding !== undefined) coding = negotiateEncoding(acceptEncoding, CODINGS)
    if (coding === 'identity') coding = ''
  }

  const result = await send(request.raw, encoded, {
    root: files.root,
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
  function sendFile (this: FastifyReply, file: string, compress: unknown = false): FastifyReply {
    if (files === undefined) throw new FileRootMissingError('sendFile')
    if (typeof file !== 'string' || file === '' || file.includes('\0')) throw new ContextArgumentError('reply.sendFile takes a file path')
    if (typeof compress !== 'boolean') throw new ContextArgumentError('reply.sendFile(file, compress?): compress is a boolean (the root is the files.root option)')
    pump(this, files, file, { compress }).catch((error: unknown) => this.send(error))
    return this
  }

  function download (this: FastifyReply, file: string, filename?: unknown): FastifyReply {
    if (files === undefined) throw new FileRootMissingError('download')
    if (typeof file !== 'string' || file === '' || file.includes('\0')) throw new ContextArgumentError('reply.download takes a file path')
    const name = filename === undefined || filename === '' ? path.basename(file) : filename
    if (typeof name !== 'string') throw new ContextArgumentError('reply.download: filename must be a string')
    this.header('content-disposition', attachmentHeader(name))
    const type = contentType(path.extname(name))
    pump(this, files, file, { compress: false, contentType: type === false ? undefined : type })
      .catch((error: unknown) => this.removeHeader('content-disposition').send(error))
    return this
  }

  app.decorateReply('sendFile', sendFile)
  app.decorateReply('download', download)
}
