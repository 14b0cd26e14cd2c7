/**
 * The database half of `/health/ready` (src/modules/health/routes.ts): the migrations the
 * app's database has not applied (src/db/pending.ts), asked on a connection of the app's
 * own pool, so that a full or broken pool shows in the probe as it would in requests.
 */
import { sqlPool, type PrismaClient } from './client.js'
import { pendingAmong } from './pending.js'

/** Of `expected`, the migrations not applied; the query gives up after `queryTimeoutMs` (its connection is dropped). */
export async function pendingOnPool (prisma: PrismaClient, expected: string[], queryTimeoutMs: number): Promise<string[]> {
  return await pendingAmong(sqlPool(prisma), expected, queryTimeoutMs)
}
