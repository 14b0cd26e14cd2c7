/**
 * The storage interface of SaveFileToStorage, and two implementations: in memory
 * (tests, small caches) and on disk under one folder. Other back ends (S3, Redis...)
 * implement the same three methods.
 */
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { ContextArgumentError, UnsafeUploadPathError } from './reply/errors.js'

export interface Storage {
  /** Stores `value` under `key`, replacing what was there. */
  set: (key: string, value: Buffer) => Promise<void>
  /** The value under `key`, or undefined. */
  get: (key: string) => Promise<Buffer | undefined>
  /** Removes `key` (no error when absent). */
  delete: (key: string) => Promise<void>
}

/**
 * Refuses a key or path that could climb out of where it is meant to go: a `..` segment
 * (with `/` or `\` as separator), a NUL byte, or an empty name.
 */
export function assertSafePath (key: string): void {
  if (typeof key !== 'string' || key === '' || key.includes('\0')) throw new UnsafeUploadPathError(JSON.stringify(String(key)))
  if (key.split(/[\\/]/).includes('..')) throw new UnsafeUploadPathError(JSON.stringify(key))
}

export class MemoryStorage implements Storage {
  readonly #entries = new Map<string, Buffer>()

  async set (key: string, value: Buffer): Promise<void> {
    assertSafePath(key)
    this.#entries.set(key, Buffer.from(value))
  }

  async get (key: string): Promise<Buffer | undefined> {
    const value = this.#entries.get(key)
    return value === undefined ? undefined : Buffer.from(value)
  }

  async delete (key: string): Promise<void> {
    this.#entries.delete(key)
  }

  /** Number of stored keys. */
  get size (): number {
    return this.#entries.size
  }
}

/** Keys are file paths under `root` (sub-folders are created); a key may not leave it. */
export class FileSystemStorage implements Storage {
  readonly root: string

  constructor (root: string) {
    if (typeof root !== 'string' || root === '') throw new ContextArgumentError('FileSystemStorage needs a root folder')
    this.root = path.resolve(root)
  }

  #file (key: string): string {
    assertSafePath(key)
    const file = path.resolve(this.root, key.replace(/^[\\/]+/, ''))
    const relative = path.relative(this.root, file)
    if (relative === '' || relative.startsWith('..') || path.isAbsolute(relative)) throw new UnsafeUploadPathError(JSON.stringify(key))
    return file
  }

  async set (key: string, value: Buffer): Promise<void> {
    const file = this.#file(key)
    await mkdir(path.dirname(file), { recursive: true })
    await writeFile(file, value)
  }

  async get (key: string): Promise<Buffer | undefined> {
    try {
      return await readFile(this.#file(key))
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
      throw error
    }
  }

  async delete (key: string): Promise<void> {
    await rm(this.#file(key), { force: true })
  }
}
