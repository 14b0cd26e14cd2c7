/**
 * `app.storage`: where uploaded files live (src/storage/blob-storage.ts), built once.
 * The folder is created at start, so a path the service cannot write fails the start
 * rather than the first upload.
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { FileBlobStorage, type BlobStorage } from '../storage/blob-storage.js'

declare module 'fastify' {
  interface FastifyInstance {
    storage: BlobStorage
  }
}

export interface StorageOptions {
  /** The folder of the files (UPLOAD_DIR). */
  uploadDir: string
}

async function storage (app: FastifyInstance, options: StorageOptions): Promise<void> {
  const files = new FileBlobStorage(options.uploadDir)
  await files.init()
  app.decorate('storage', files as BlobStorage)
}

export default fp(storage, { name: 'storage', fastify: '5.x' })
