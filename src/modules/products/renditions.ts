/**
 * Resized renditions of product images (`GET /api/product/{id}/image?w=256`): a catalogue
 * shows a thumbnail at display size, never the 5 MiB original in a 128 px box.
 *
 * - Made by sharp (libvips), as WebP (a fraction of a PNG's or JPEG's bytes, shown by every
 *   current browser), never wider than the original, turned upright by its EXIF orientation.
 * - Widths are a fixed set, so that the renditions of one image are few and cacheable.
 * - Cached in memory by the image's SHA-256 and the width, up to CACHE_BYTES per process:
 *   a rendition is a function of the original's bytes, so a new image (a new digest) never
 *   meets a stale one, and a replica without it makes it again. Concurrent requests for one
 *   rendition share one computation.
 * - Bounded: at most CONCURRENCY computations at once per process (each may hold a decoded
 *   image in memory), and an original over MAX_PIXELS is not decoded at all (a small file
 *   can claim a huge canvas): 415, and the original stays available without `w`.
 */
import createError from '@fastify/error'
import { LRUCache } from 'lru-cache'
import sharp from 'sharp'

/** The widths a client may ask for, in CSS pixels times a device pixel ratio of 1 or 2. */
export const RENDITION_WIDTHS = [128, 256, 512, 1024] as const
export type RenditionWidth = typeof RENDITION_WIDTHS[number]

/** Bytes of renditions kept per process: about 1,000 thumbnails of 256 px. */
const CACHE_BYTES = 32 * 1024 * 1024
/** Renditions computed at once per process; the others wait their turn. */
const CONCURRENCY = 2
/** The largest original decoded: 50 megapixels (8,660 x 5,773), ~200 MB decoded at worst. */
export const MAX_PIXELS = 50_000_000

export const NotResizable = createError('UNSUPPORTED_IMAGE_TYPE', 'This image cannot be resized (over 50 megapixels, or undecodable): GET it without `w`', 415)

export function renditions () {
  const cache = new LRUCache<string, Buffer>({ maxSize: CACHE_BYTES, sizeCalculation: (value) => value.length })
  const pending = new Map<string, Promise<Buffer>>()
  let running = 0
  const queue: Array<() => void> = []

  async function slot<T> (work: () => Promise<T>): Promise<T> {
    if (running >= CONCURRENCY) await new Promise<void>((resolve) => queue.push(resolve))
    running++
    try {
      return await work()
    } finally {
      running--
      queue.shift()?.()
    }
  }

  async function make (original: Buffer, width: RenditionWidth): Promise<Buffer> {
    try {
      return await sharp(original, { limitInputPixels: MAX_PIXELS, sequentialRead: true })
        .rotate()
        .resize({ width, withoutEnlargement: true })
        .webp({ quality: 80 })
        .toBuffer()
    } catch {
      throw new NotResizable()
    }
  }

  return {
    /** The WebP rendition `width` wide of the image whose digest is `sha256`; `load` reads the original when it is not cached. */
    async get (sha256: string, width: RenditionWidth, load: () => Promise<Buffer>): Promise<Buffer> {
      const key = `${sha256}:${width}`
      const cached = cache.get(key)
      if (cached !== undefined) return cached
      let made = pending.get(key)
      if (made === undefined) {
        made = slot(async () => await make(await load(), width))
          .then((rendition) => { cache.set(key, rendition); return rendition })
          .finally(() => pending.delete(key))
        pending.set(key, made)
      }
      return await made
    }
  }
}

export type Renditions = ReturnType<typeof renditions>
