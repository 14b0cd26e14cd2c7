/** Creates the Prisma client on the `pg` driver adapter (no native query engine). */
import { PrismaPg } from '@prisma/adapter-pg'
import { PrismaClient } from '../generated/prisma/client.js'

export type { PrismaClient }

export interface ClientOptions {
  url: string
  poolSize?: number
  /** How long to wait for a connection before failing (the request then answers 503). */
  connectionTimeoutMillis?: number
}

export function createPrismaClient (options: ClientOptions): PrismaClient {
  const adapter = new PrismaPg({
    connectionString: options.url,
    max: options.poolSize ?? 10,
    connectionTimeoutMillis: options.connectionTimeoutMillis ?? 5000,
    idleTimeoutMillis: 30_000
  })
  return new PrismaClient({ adapter })
}
