/**
 * Where uploaded files (product images) live: a small interface (put / stream / remove)
 * and its implementation in PostgreSQL (`PgBlobStorage`), so that the database's backups,
 * point-in-time restores and replicas carry the files with the rows that name them, and no
 * replica of the service keeps files of its own (docs/architecture.md, "Product images in
 * PostgreSQL").
 *
 * Keys are chosen by the service, never by a client (`products/17/<random>`): plain
 * segments of `[A-Za-z0-9._-]`, no `..`, checked here all the same.
 */
import { Readable } from 'node:stream'
import type { Sql, Transaction } from '../db/sql.js'

/** An inclusive byte range, as in HTTP's `Range: bytes=start-end`. */
export interface ByteRange {
  start: number
  end: number
}

export interface BlobStorage {
  /**
   * Streams `body` to `key` (replacing what is there) and resolves with the bytes written.
   * The bytes become visible under `key` only once complete: when `body` fails or is
   * aborted, the promise rejects with its error and nothing is left behind.
   */
  put: (key: string, body: Readable) => Promise<{ size: number }>
  /** The bytes under `key` (only `range`, when given), or undefined when there is no such key. */
  stream: (key: string, range?: ByteRange) => Promise<Readable | undefined>
  /** Removes `key`; no error when it is absent. */
  remove: (key: string) => Promise<void>
}

const SEGMENT = /^[A-Za-z0-9_-][A-Za-z0-9._-]*$/

export class InvalidStorageKeyError extends Error {
  override name = 'InvalidStorageKeyError'
}

/** Refuses keys the service never makes: empty, absolute, `..`, or odd characters. */
export function checkKey (key: string): string[] {
  const segments = typeof key === 'string' ? key.split('/') : []
  if (segments.length === 0 || !segments.every((segment) => SEGMENT.test(segment) && segment !== '..' && segment !== '.')) {
    throw new InvalidStorageKeyError(`Invalid storage key ${JSON.stringify(key)}`)
  }
  return segments
}

/**
 * Bytes per chunk row. Large enough that a 100 MiB image is 400 rows and a chunk's
 * statement costs little beside its bytes; small enough that an upload or a download holds
 * one chunk in memory at a time.
 */
export const CHUNK_SIZE = 256 * 1024

interface BlobRow { id: string, size: number, chunkSize: number }

/**
 * Files as rows: `blobs` (key, size) and `blob_chunks` (fixed-size bytea pieces), see
 * prisma/schema.prisma. `put` writes the blob and all its chunks in one transaction, so a
 * reader never sees part of a file and a body that fails or a database that goes away
 * leaves nothing (the transaction rolls back). The transaction starts once the first chunk
 * is in (or the body has ended), so a small image sent slowly holds no connection while it
 * arrives; a larger one holds one until it is stored (the request's time and slow-body
 * limits bound that).
 *
 * `stream` reads one chunk per statement, only those the range needs, as the client takes
 * them. A key's bytes never change (the service writes each key once; a `put` onto a key
 * makes a new blob id): a download reads the blob it started with, or fails when that blob
 * is removed meanwhile, never a mix of two files.
 */
export class PgBlobStorage implements BlobStorage {
  readonly #db: Sql
  readonly #chunkSize: number

  constructor (db: Sql, chunkSize = CHUNK_SIZE) {
    this.#db = db
    this.#chunkSize = chunkSize
  }

  async put (key: string, body: Readable): Promise<{ size: number }> {
    checkKey(key)
    const chunkSize = this.#chunkSize
    const pieces = body[Symbol.asyncIterator]() as AsyncIterator<Buffer | string>
    let pending: Buffer[] = []
    let pendingBytes = 0
    let ended = false
    /** Reads until a whole chunk is pending or the body ends; false at the end with nothing pending. */
    const fill = async (): Promise<boolean> => {
      while (!ended && pendingBytes < chunkSize) {
        const next = await pieces.next()
        if (next.done === true) { ended = true; break }
        const piece = typeof next.value === 'string' ? Buffer.from(next.value) : next.value
        pending.push(piece)
        pendingBytes += piece.length
      }
      return pendingBytes > 0
    }
    const take = (): Buffer => {
      const all = pending.length === 1 ? pending[0]! : Buffer.concat(pending, pendingBytes)
      const chunk = all.subarray(0, chunkSize)
      const rest = all.subarray(chunk.length)
      pending = rest.length > 0 ? [rest] : []
      pendingBytes = rest.length
      return chunk
    }
    try {
      await fill()
      return await this.#db.transaction('blob-put', async (tx) => {
        await this.#db.rows('blob-delete', 'DELETE FROM blobs WHERE key = $1', [key], tx)
        const [blob] = await this.#db.rows<{ id: string }>('blob-create', 'INSERT INTO blobs (key, size, chunk_size) VALUES ($1, 0, $2) RETURNING id', [key, chunkSize], tx)
        let size = 0
        for (let seq = 0; await fill(); seq++) {
          const chunk = take()
          await this.#insertChunk(tx, blob!.id, seq, chunk)
          size += chunk.length
        }
        await this.#db.rows('blob-size', 'UPDATE blobs SET size = $2 WHERE id = $1', [blob!.id, size], tx)
        return { size }
      })
    } finally {
      // A put that failed on the database's side stops reading the body (and destroys it).
      if (!ended) await pieces.return?.()
    }
  }

  async #insertChunk (tx: Transaction, blobId: string, seq: number, data: Buffer): Promise<void> {
    await this.#db.rows('blob-chunk-insert', 'INSERT INTO blob_chunks (blob_id, seq, data) VALUES ($1, $2, $3)', [blobId, seq, data], tx)
  }

  async stream (key: string, range?: ByteRange): Promise<Readable | undefined> {
    checkKey(key)
    const [blob] = await this.#db.rows<BlobRow>('blob-find', 'SELECT id, size::float8 AS size, chunk_size AS "chunkSize" FROM blobs WHERE key = $1', [key])
    if (blob === undefined) return undefined
    const start = Math.max(0, range?.start ?? 0)
    const end = Math.min(range?.end ?? blob.size - 1, blob.size - 1)
    const db = this.#db
    async function * chunks (): AsyncGenerator<Buffer> {
      for (let seq = Math.floor(start / blob!.chunkSize); seq * blob!.chunkSize <= end; seq++) {
        const [row] = await db.rows<{ data: Buffer }>('blob-chunk-read', 'SELECT data FROM blob_chunks WHERE blob_id = $1 AND seq = $2', [blob!.id, seq])
        if (row === undefined) throw new Error(`Blob ${JSON.stringify(key)} was removed while it was read`)
        const offset = seq * blob!.chunkSize
        yield row.data.subarray(Math.max(0, start - offset), end - offset + 1)
      }
    }
    // Bytes, not objects, and one chunk read ahead at most.
    return Readable.from(start > end ? [] : chunks(), { objectMode: false, highWaterMark: 1 })
  }

  async remove (key: string): Promise<void> {
    checkKey(key)
    await this.#db.rows('blob-delete', 'DELETE FROM blobs WHERE key = $1', [key])
  }
}
