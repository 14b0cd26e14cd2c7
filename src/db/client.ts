/**
 * Creates the Prisma client on the `pg` driver adapter (no native query engine), over a
 * `pg` pool of our own that `sqlPool` also hands out: the per-request token check
 * (src/plugins/authentication.ts) reads through it directly, because Prisma compiles
 * every query anew (about 40% of that route's CPU, bench/README.md "Profile").
 */
import { PrismaPg } from '@prisma/adapter-pg'
import pg from 'pg'
import { PrismaClient } from '../generated/prisma/client.js'

export type { PrismaClient }

export interface ClientOptions {
  url: string
  poolSize?: number
  /** How long to wait for a connection before failing (the request then answers 503). */
  connectionTimeoutMillis?: number
}

const pools = new WeakMap<PrismaClient, pg.Pool>()

export function createPrismaClient (options: ClientOptions): PrismaClient {
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.poolSize ?? 10,
    connectionTimeoutMillis: options.connectionTimeoutMillis ?? 5000,
    idleTimeoutMillis: 30_000
  })
  // Prisma's $disconnect ends the pool.
  const client = new PrismaClient({ adapter: new PrismaPg(pool, { disposeExternalPool: true }) })
  pools.set(client, pool)
  return client
}

/** The `pg` pool under a client made by `createPrismaClient`, shared with Prisma. */
export function sqlPool (client: PrismaClient): pg.Pool {
  const pool = pools.get(client)
  if (pool === undefined) throw new Error('This Prisma client was not made by createPrismaClient')
  return pool
}
