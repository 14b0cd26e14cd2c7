/**
 * The service's former storage of product images, files under one folder: kept as the
 * baseline of bench/images.ts (the same run measures it against PostgreSQL's, which
 * replaced it: docs/architecture.md, "Product images in PostgreSQL").
 */
import { randomBytes } from 'node:crypto'
import { createWriteStream } from 'node:fs'
import { mkdir, open, rename, rm } from 'node:fs/promises'
import path from 'node:path'
import type { Readable, Writable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { checkKey, type BlobStorage, type ByteRange } from '../../src/storage/blob-storage.js'

/**
 * Files under one folder. `put` writes to `<root>/.incoming/<random>` and renames the
 * finished file onto the key (atomic within one file system), so a reader never sees half
 * a file and an aborted upload leaves nothing under its key; the temp file is removed on
 * any error. Keys map to paths under `root`.
 */
export class FileBlobStorage implements BlobStorage {
  readonly root: string
  readonly #incoming: string

  constructor (root: string) {
    if (typeof root !== 'string' || root === '') throw new TypeError('FileBlobStorage needs a root folder')
    this.root = path.resolve(root)
    this.#incoming = path.join(this.root, '.incoming')
  }

  /** Creates the root (and its temp folder); call once at start, so a wrong path fails early. */
  async init (): Promise<void> {
    await mkdir(this.#incoming, { recursive: true })
  }

  #path (key: string): string {
    return path.join(this.root, ...checkKey(key))
  }

  async put (key: string, body: Readable): Promise<{ size: number }> {
    const target = this.#path(key)
    const temp = path.join(this.#incoming, `${randomBytes(12).toString('hex')}.part`)
    const file = createWriteStream(temp, { flags: 'wx', mode: 0o640 })
    try {
      await pipeline(body, file as Writable)
      await mkdir(path.dirname(target), { recursive: true })
      await rename(temp, target)
    } catch (error) {
      // The file is opened asynchronously: a body that fails early can settle the pipeline
      // before the open has created the temp file, and an `rm` then would run first and
      // leave it behind (seen under load). Once the stream has closed, the file exists or
      // never will.
      file.destroy()
      if (!file.closed) await new Promise<void>((resolve) => file.once('close', () => { resolve() }))
      await rm(temp, { force: true })
      throw error
    }
    return { size: file.bytesWritten }
  }

  async stream (key: string, range?: ByteRange): Promise<Readable | undefined> {
    let handle
    try {
      // Opened first, so a missing file is `undefined` here rather than a stream error later.
      handle = await open(this.#path(key), 'r')
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
      throw error
    }
    // Closes the file when it ends or is destroyed (a client that goes away).
    return handle.createReadStream(range === undefined ? {} : { start: range.start, end: range.end })
  }

  async remove (key: string): Promise<void> {
    await rm(this.#path(key), { force: true })
  }
}
