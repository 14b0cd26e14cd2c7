/**
 * The type of an uploaded image, decided from its first bytes (its "magic number"), never
 * from the file name or the Content-Type the client sent. Three formats are accepted:
 *
 * | type       | bytes                                  |
 * |------------|----------------------------------------|
 * | image/png  | 89 50 4E 47 0D 0A 1A 0A (8 bytes)      |
 * | image/jpeg | FF D8 FF (3 bytes)                     |
 * | image/webp | "RIFF", 4 bytes of length, "WEBP" (12) |
 *
 * Twelve bytes decide. Written here rather than taken from `file-type`: that package
 * needs Node 22 (this service supports 20) and detects hundreds of formats where three
 * fixed signatures are the whole need. The signatures are those of the formats' own
 * specifications (PNG 5.2, JPEG SOI + marker, RIFF/WebP container).
 */
import { createHash, type Hash } from 'node:crypto'
import { Transform, type TransformCallback } from 'node:stream'
import createError from '@fastify/error'

export const SNIFF_BYTES = 12

export const IMAGE_TYPES = {
  'image/png': 'png',
  'image/jpeg': 'jpg',
  'image/webp': 'webp'
} as const

export type ImageType = keyof typeof IMAGE_TYPES

export const UnsupportedImageType = createError('UNSUPPORTED_IMAGE_TYPE', 'The file is not a PNG, JPEG or WebP image (judged by its content, not its name or Content-Type)', 415)

const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
const JPEG = Buffer.from([0xff, 0xd8, 0xff])
const RIFF = Buffer.from('RIFF', 'latin1')
const WEBP = Buffer.from('WEBP', 'latin1')

/** The image type the first bytes announce, or undefined (fewer than needed included). */
export function detectImageType (head: Buffer): ImageType | undefined {
  if (head.length >= PNG.length && head.subarray(0, PNG.length).equals(PNG)) return 'image/png'
  if (head.length >= JPEG.length && head.subarray(0, JPEG.length).equals(JPEG)) return 'image/jpeg'
  if (head.length >= SNIFF_BYTES && head.subarray(0, 4).equals(RIFF) && head.subarray(8, 12).equals(WEBP)) return 'image/webp'
  return undefined
}

/**
 * A pass-through stream that holds back the first 12 bytes until it knows the type (and
 * fails with UnsupportedImageType, before anything is written, when they are no image),
 * and hashes everything that passes (SHA-256, for the ETag).
 */
export class ImageInspector extends Transform {
  type: ImageType | undefined
  readonly #hash: Hash = createHash('sha256')
  #head: Buffer[] | undefined = []
  #headLength = 0

  override _transform (chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.#hash.update(chunk)
    if (this.#head === undefined) {
      callback(null, chunk)
      return
    }
    this.#head.push(chunk)
    this.#headLength += chunk.length
    if (this.#headLength < SNIFF_BYTES) {
      callback()
      return
    }
    this.#decide(callback)
  }

  override _flush (callback: TransformCallback): void {
    if (this.#head === undefined) callback()
    else this.#decide(callback)
  }

  #decide (callback: TransformCallback): void {
    const head = Buffer.concat(this.#head ?? [])
    this.#head = undefined
    this.type = detectImageType(head)
    if (this.type === undefined) callback(new UnsupportedImageType())
    else callback(null, head)
  }

  /** The SHA-256 of the bytes seen, base64url; once the stream has ended. */
  digest (): string {
    return this.#hash.digest('base64url')
  }
}
