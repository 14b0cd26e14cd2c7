/**
 * `app.storage`: where uploaded files live (src/storage/blob-storage.ts), in the
 * database, on Prisma's `pg` pool; built once.
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { sql } from '../db/sql.js'
import { PgBlobStorage, type BlobStorage } from '../storage/blob-storage.js'

declare module 'fastify' {
  interface FastifyInstance {
    storage: BlobStorage
  }
}

async function storage (app: FastifyInstance): Promise<void> {
  app.decorate('storage', new PgBlobStorage(sql(app.prisma)) as BlobStorage)
}

export default fp(storage, { name: 'storage', fastify: '5.x', dependencies: ['prisma'] })
