/**
 * Creates the Prisma client on the `pg` driver adapter (no native query engine), over a
 * `pg` pool of our own that `sqlPool` also hands out: the users repository's hot reads (the
 * token's user on every authenticated request, the login account) are prepared statements
 * on it, because Prisma compiles every query anew (about 40% of that route's CPU,
 * bench/README.md "Profile"); health, metrics and load shedding read its state.
 */
import { PrismaPg } from '@prisma/adapter-pg'
import pg from 'pg'
import { PrismaClient } from '../generated/prisma/client.js'

export type { PrismaClient }

export interface ClientOptions {
  url: string
  poolSize?: number
  /** How long to wait for a connection before failing (the request then answers 503). */
  connectTimeoutMs?: number
  /** Server side: PostgreSQL cancels a longer statement (SQLSTATE 57014, answered 503); 0 = none. */
  statementTimeoutMs?: number
  /**
   * Client side: a query with no answer fails after this long ('Query read timeout', 503) and
   * its connection is dropped; 0 = none. By default the statement timeout plus
   * QUERY_TIMEOUT_MARGIN_MS (none without a statement timeout).
   */
  queryTimeoutMs?: number
  /**
   * The URL leads to PgBouncer in transaction pooling mode: each transaction may run on
   * another server connection, so no named prepared statements (a name prepared on one is
   * missing on the next), and no `statement_timeout` startup parameter (PgBouncer refuses
   * parameters it does not know; set it on the role instead: docs/operations.md).
   */
  pgbouncer?: boolean
}

/**
 * How much longer than the statement timeout the client waits for an answer: a statement the
 * server cancels answers 57014 first, so the client's own timeout only ends the waits of a
 * server that does not answer at all (a frozen host, a network gone).
 */
export const QUERY_TIMEOUT_MARGIN_MS = 2000

const pools = new WeakMap<PrismaClient, pg.Pool>()
const unnamed = new WeakSet<PrismaClient>()

export function createPrismaClient (options: ClientOptions): PrismaClient {
  const statementTimeout = options.statementTimeoutMs ?? 0
  const queryTimeout = options.queryTimeoutMs ?? (statementTimeout > 0 ? statementTimeout + QUERY_TIMEOUT_MARGIN_MS : 0)
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.poolSize ?? 10,
    connectionTimeoutMillis: options.connectTimeoutMs ?? 5000,
    idleTimeoutMillis: 30_000,
    // A hung database must not hold requests: the server cancels long statements (also a
    // wait on a lock), and when the server itself does not answer (frozen host, network
    // gone), the client gives up. pg-pool discards a connection whose query failed so.
    ...(statementTimeout && options.pgbouncer !== true ? { statement_timeout: statementTimeout } : {}),
    ...(queryTimeout ? { query_timeout: queryTimeout } : {})
  })
  // An idle connection the server drops (a restart, a dropped database) is discarded by the
  // pool and the next query opens a new one. Without a listener of our own, the 'error'
  // event would crash the process whenever Prisma (which adds one when it first
  // connects) has not run a query yet and only our own statements used the pool.
  pool.on('error', () => {})
  // And one on every connection for its whole life: pg-pool hands a released connection to
  // the next `connect()` waiter, whose promise resolves a microtask later; when the server's
  // goodbye (57P01, a restart) arrives in the same read as the ReadyForQuery that freed it,
  // its 'error' is emitted in between, with no listener yet: an uncaught exception
  // (test/faults/database-restart-under-load.test.ts, about 1 run in 5). The statement that
  // next uses the connection fails ("not queryable") and the pool drops it.
  pool.on('connect', (connection) => { connection.on('error', () => {}) })
  // Prisma's $disconnect ends the pool (once Prisma has connected; see `closePrismaClient`).
  const client = new PrismaClient({ adapter: new PrismaPg(pool, { disposeExternalPool: true }) })
  pools.set(client, pool)
  if (options.pgbouncer === true) unnamed.add(client)
  return client
}

/**
 * The name to give a prepared statement on `sqlPool(client)`: `name` (parsed once per
 * connection), or undefined behind PgBouncer's transaction pooling (an unnamed statement,
 * parsed each time). Prisma's own queries are unnamed statements already.
 */
export function statementName (client: PrismaClient, name: string): string | undefined {
  return unnamed.has(client) ? undefined : name
}

/** Disconnects Prisma and ends its pool, also when only `sqlPool` statements ever used it. */
export async function closePrismaClient (client: PrismaClient): Promise<void> {
  await client.$disconnect()
  const pool = pools.get(client)
  if (pool !== undefined && !pool.ended) await pool.end()
}

/** The `pg` pool under a client made by `createPrismaClient`, shared with Prisma. */
export function sqlPool (client: PrismaClient): pg.Pool {
  const pool = pools.get(client)
  if (pool === undefined) throw new Error('This Prisma client was not made by createPrismaClient')
  return pool
}
