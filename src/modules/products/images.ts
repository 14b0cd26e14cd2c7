/**
 * Product images (docs/api.md, "Product images"): the upload, streamed from the multipart
 * body through a type check and a hash into storage; the download, with validators, 304
 * and byte ranges; the removal; and the clean-up of files whose row is gone.
 *
 * A row never names a missing file: an upload is written under a fresh key and the row is
 * pointed at it afterwards (repository.ts); whatever key a statement replaced or deleted is
 * removed from storage once the statement has committed. A removal that fails (storage
 * down) is logged with its key and does not fail the request: the row already says there
 * is no image. What that leaves behind, and the upload whose process stopped between its
 * file and its row, is removed by the sweep, every SWEEP_EVERY_MS on every replica: files
 * under `products/` that no row names, older than SWEEP_GRACE_MS (an upload in progress
 * is younger). A row that comes to name one meanwhile makes its removal fail (the foreign
 * key products.image_key -> blobs.key), never lose the image.
 */
import { randomBytes } from 'node:crypto'
import { pipeline, type Readable } from 'node:stream'
import createError from '@fastify/error'
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { Forbidden, NotFound } from '../../lib/problem.js'
import { MalformedMultipartError } from '@user-product-service/context'
import type { BlobStorage, ByteRange } from '../../storage/blob-storage.js'
import { IMAGE_TYPES, ImageInspector, type ImageType } from './image-type.js'
import { renditions, type RenditionWidth } from './renditions.js'
import type { ImageChange, ImageMeta, ProductsRepository } from './repository.js'

export const NotMultipart = createError('UNSUPPORTED_MEDIA_TYPE', 'Send the image as multipart/form-data (one file part)', 415)
export const ImageMissing = createError('IMAGE_MISSING', 'The form has no file part: send the image as one file', 400)
export const TooManyFiles = createError('TOO_MANY_FILES', 'Send exactly one file', 400)
export const TooManyParts = createError('TOO_MANY_PARTS', 'The form has too many parts: send one file', 400)
export const ImageTooLarge = createError<[number]>('PAYLOAD_TOO_LARGE', 'Images are limited to %d bytes', 413)
export const RangeNotSatisfiable = createError<[number]>('RANGE_NOT_SATISFIABLE', 'The Range header selects nothing of the %d bytes', 416)
/** The creator's images would pass IMAGE_BYTES_MAX_PER_USER: 409 (docs/api.md, "Quotas"), until they remove some. */
export const ImageQuotaExceeded = createError<[number, number]>('IMAGE_QUOTA_EXCEEDED', 'Your images may take %d bytes in all and your other images take %d: remove an image or product, or send a smaller one', 409)

/** How often each replica looks for stored images that no product names. */
export const SWEEP_EVERY_MS = 60 * 60_000
/** Far longer than any upload may take (the request timeout), so a file about to be named is never one. */
export const SWEEP_GRACE_MS = 60 * 60_000
/** Files removed per sweep at most; the next sweep takes the rest. */
const SWEEP_BATCH = 1000

/** The image columns of a product row. */
export interface ProductImageRow {
  id: number
  imageKey: string | null
  imageType: string | null
  imageSize: number | null
  imageSha256: string | null
  imageUpdatedAt: Date | null
}

/** What @fastify/multipart hands out for a part, as far as the upload reads it. */
interface Part {
  type: 'file' | 'field'
  file?: Readable & { truncated?: boolean }
}

export interface ProductImagesOptions {
  storage: BlobStorage
  repository: ProductsRepository
  /** IMAGE_MAX_BYTES. */
  maxBytes: number
  /** IMAGE_BYTES_MAX_PER_USER. */
  bytesPerUser: number
  log: FastifyBaseLogger
}

/** Multipart limits of the upload route: one file of at most `maxBytes`, a few small fields. */
export function uploadLimits (maxBytes: number) {
  return { fileSize: maxBytes, files: 1, fields: 10, fieldSize: 1024, parts: 12, headerPairs: 20 }
}

/** Bytes a multipart body may have besides the file (boundaries, part headers, small fields). */
export const MULTIPART_OVERHEAD = 64 * 1024

/** @fastify/multipart's limit errors as ours. */
function uploadError (error: unknown, maxBytes: number): unknown {
  switch ((error as { code?: string } | null)?.code) {
    case 'FST_REQ_FILE_TOO_LARGE': return new ImageTooLarge(maxBytes)
    case 'FST_FILES_LIMIT': return new TooManyFiles()
    case 'FST_PARTS_LIMIT': case 'FST_FIELDS_LIMIT': return new TooManyParts()
    default: return error
  }
}

/**
 * RFC 9110 13.1.5: a Range applies only while If-Range (when sent) still names this version:
 * the strong ETag, or the exact Last-Modified date. A date is a strong validator here, as
 * no two images of a product ever get the same Last-Modified (repository.ts); when
 * none is shown (`lastModified` undefined), a date never matches.
 */
function ifRangeHolds (header: string | string[] | undefined, etag: string, lastModified: string | undefined): boolean {
  if (header === undefined) return true
  if (Array.isArray(header)) return false
  const value = header.trim()
  if (value.startsWith('"') || value.startsWith('W/')) return value === etag
  return lastModified !== undefined && value === lastModified
}

export function productImages (options: ProductImagesOptions) {
  const { storage, repository, maxBytes, bytesPerUser, log } = options
  const resized = renditions()

  /** Removes files whose rows are gone; failures are logged, never thrown. */
  async function discard (...keys: (string | null | undefined)[]): Promise<void> {
    for (const key of keys) {
      if (key === null || key === undefined) continue
      try {
        await storage.remove(key)
      } catch (error) {
        log.error({ err: error, key }, 'product image: cannot remove a file whose row is gone (the sweep retries)')
      }
    }
  }

  /** Streams one file part to storage under a new key: type checked, hashed, size-limited. */
  async function store (productId: number, file: Readable & { truncated?: boolean }): Promise<ImageMeta> {
    const key = `products/${productId}/${randomBytes(16).toString('hex')}`
    const inspector = new ImageInspector()
    // busboy cuts a file at `fileSize` and says so with 'limit': fail before the rename.
    file.once('limit', () => { inspector.destroy(new ImageTooLarge(maxBytes)) })
    // The part's own failure (busboy: a body cut short, a part never terminated) is the
    // client's: a 400, where a storage failure stays a 500.
    // (It may have failed before this function saw it: `errored` keeps the error.)
    let partError: Error | null = file.errored
    file.once('error', (error: Error) => { partError = error })
    const body = pipeline(file, inspector, () => {})
    let size: number
    try {
      ({ size } = await storage.put(key, body))
    } catch (error) {
      const status = (error as { statusCode?: number }).statusCode
      const failure = partError ?? file.errored
      if (failure !== null && (status === undefined || status >= 500)) throw new MalformedMultipartError(failure.message)
      throw error
    }
    if (file.truncated === true) {
      await discard(key)
      throw new ImageTooLarge(maxBytes)
    }
    return { key, type: inspector.type as ImageType, size, sha256: inspector.digest() }
  }

  function refuse (change: ImageChange, id: number): Error {
    if (change.outcome === 'missing') return new NotFound(`Product ${id} does not exist`)
    if (change.outcome === 'forbidden') return new Forbidden('Only the creator of a product can change its image')
    if (change.outcome === 'quota') return new ImageQuotaExceeded(bytesPerUser, change.used)
    return new NotFound(`Product ${id} has no image`)
  }

  return {
    discard,

    /** Removes stored images no product names, older than `graceMs`; resolves with how many were found. */
    async sweep (graceMs = SWEEP_GRACE_MS): Promise<number> {
      const keys = await repository.orphanImageKeys(graceMs, SWEEP_BATCH)
      if (keys.length > 0) log.info({ count: keys.length }, 'product images: removing stored files that no product names')
      await discard(...keys)
      return keys.length
    },

    /**
     * Reads the one file of a multipart request into storage and makes it product `id`'s
     * image; `replaced` says whether there was one before. The owner is checked before a
     * byte of the body is read, and again (under the row lock) when the row is updated.
     */
    async upload (request: FastifyRequest, id: number, userId: number): Promise<{ replaced: boolean }> {
      if (!request.isMultipart()) throw new NotMultipart()
      const owner = await repository.ownerOf(id)
      if (owner === undefined) throw new NotFound(`Product ${id} does not exist`)
      if (owner !== userId) throw new Forbidden('Only the creator of a product can change its image')
      // No room for a single byte: refused before the body is stored (attach checks again).
      const used = await repository.imageBytesUsed(userId, id)
      if (used >= bytesPerUser) throw new ImageQuotaExceeded(bytesPerUser, used)

      let stored: ImageMeta | undefined
      try {
        // request.parts() as wrapped by the context plugin: the whole body is bounded by the
        // route's bodyLimit and a malformed body is a 400 (the context package's request/multipart.ts).
        for await (const part of request.parts() as AsyncIterable<Part>) {
          if (part.type !== 'file' || part.file === undefined) continue
          if (stored !== undefined) throw new TooManyFiles()
          stored = await store(id, part.file)
        }
      } catch (error) {
        await discard(stored?.key)
        throw uploadError(error, maxBytes)
      }
      if (stored === undefined) throw new ImageMissing()

      const change = await repository.attachImage(id, userId, stored, bytesPerUser).catch(async (error: unknown) => {
        await discard(stored.key)
        throw error
      })
      if (change.outcome !== 'done') {
        await discard(stored.key)
        throw refuse(change, id)
      }
      await discard(change.previousKey)
      return { replaced: change.previousKey !== null }
    },

    /**
     * Answers GET (and HEAD) of a product's image: strong ETag (the SHA-256) and
     * Last-Modified (a date no other image of the product has had), 304 when the client's copy is fresh, one byte range as 206 (several
     * ranges, a malformed header or a stale If-Range: the whole image, as RFC 9110 allows),
     * 416 for a range past the end; `versioned`: cacheable for a year, immutable. With `width`, its WebP rendition that wide
     * (renditions.ts), whole: small enough that ranges would buy nothing.
     */
    async send (request: FastifyRequest, reply: FastifyReply, product: ProductImageRow, { width, versioned = false }: { width?: RenditionWidth, versioned?: boolean } = {}): Promise<FastifyReply> {
      const { imageKey: key, imageType: type, imageSize: size, imageSha256: sha256, imageUpdatedAt: updatedAt } = product
      if (key === null || type === null || size === null || sha256 === null || updatedAt === null) {
        throw new NotFound(`Product ${product.id} has no image`)
      }
      const etag = width === undefined ? `"${sha256}"` : `"${sha256}-w${width}"`
      // Never a date after the answer's own (RFC 9110 8.8.2.1): an image stored while the
      // one before it had the same second carries the next second, shown once it has come.
      // The answer's Date is set from the same clock read: Node's own is a string cached per
      // second, which lags the clock when the event loop is late past a second's turn.
      const now = Date.now()
      const lastModified = updatedAt.getTime() <= now ? updatedAt.toUTCString() : undefined
      // Revalidated on every use, as the image may change under the same URL; unless the URL
      // names the product's version (`?v=<updatedAt>`), which no other image ever has.
      reply.header('etag', etag).header('cache-control', versioned ? 'public, max-age=31536000, immutable' : 'public, no-cache').header('date', new Date(now).toUTCString())
      if (lastModified !== undefined) reply.header('last-modified', lastModified)
      if (request.fresh()) return await reply.code(304).send()
      reply.header('x-content-type-options', 'nosniff')

      if (width !== undefined) {
        const rendition = await resized.get(sha256, width, async () => {
          const original = await storage.stream(key)
          if (original === undefined) throw new NotFound(`Product ${product.id} has no image`)
          return Buffer.concat(await original.toArray())
        })
        return await reply.type('image/webp').header('accept-ranges', 'none').header('content-length', rendition.length)
          .header('content-disposition', `inline; filename="product-${product.id}-${width}.webp"`).send(rendition)
      }

      let range: ByteRange | undefined
      if (request.headers.range !== undefined && ifRangeHolds(request.headers['if-range'], etag, lastModified)) {
        try {
          const parsed = request.range(size)
          if (parsed.type === 'bytes' && parsed.ranges.length === 1) range = parsed.ranges[0]
        } catch (error) {
          if ((error as { statusCode?: number }).statusCode === 416) {
            reply.header('content-range', `bytes */${size}`)
            throw new RangeNotSatisfiable(size)
          }
          // A malformed Range header is ignored (RFC 9110 14.2): the whole image.
        }
      }

      const body = await storage.stream(key, range)
      if (body === undefined) {
        log.error({ key, productId: product.id }, 'product image: the row names a file that storage does not have')
        throw new NotFound(`Product ${product.id} has no image`)
      }
      reply
        .type(type)
        .header('accept-ranges', 'bytes')
        .header('content-disposition', `inline; filename="product-${product.id}.${IMAGE_TYPES[type as ImageType] ?? 'bin'}"`)
      if (range === undefined) {
        reply.header('content-length', size)
      } else {
        reply.code(206).header('content-range', `bytes ${range.start}-${range.end}/${size}`).header('content-length', range.end - range.start + 1)
      }
      return await reply.send(body)
    },

    /** Removes product `id`'s image (its creator only). */
    async remove (id: number, userId: number): Promise<void> {
      const change = await repository.detachImage(id, userId)
      if (change.outcome !== 'done') throw refuse(change, id)
      await discard(change.previousKey)
    }
  }
}

export type ProductImages = ReturnType<typeof productImages>

declare module 'fastify' {
  interface FastifyInstance {
    /** Product images: upload, download, removal, and the removal of files whose rows are gone (at once, and by the sweep). */
    productImages: ProductImages
  }
}

export interface ProductImagesPluginOptions {
  /** IMAGE_MAX_BYTES. */
  imageMaxBytes: number
  /** IMAGE_BYTES_MAX_PER_USER. */
  imageBytesPerUser: number
}

export default fp(async function productImagesPlugin (app: FastifyInstance, options: ProductImagesPluginOptions) {
  const images = productImages({
    storage: app.storage,
    repository: app.productsRepository,
    maxBytes: options.imageMaxBytes,
    bytesPerUser: options.imageBytesPerUser,
    log: app.log
  })
  app.decorate('productImages', images)
  const sweep = setInterval(() => {
    images.sweep().catch((error: unknown) => { app.log.error({ err: error }, 'product images: the sweep of unnamed files failed (the next one retries)') })
  }, SWEEP_EVERY_MS).unref()
  app.addHook('onClose', async () => { clearInterval(sweep) })
}, { name: 'product-images', fastify: '5.x', dependencies: ['products-repository', 'storage'] })
