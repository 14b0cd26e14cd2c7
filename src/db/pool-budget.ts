/**
 * The connection budget, checked once at start (src/server.ts): every replica opens up to
 * DB_POOL_SIZE connections, so DB_POOL_SIZE x API_REPLICAS must fit in what the server
 * gives its clients (`max_connections` less the slots reserved for superusers and, from
 * PostgreSQL 16, `reserved_connections`). Past that, under load some connections are refused
 * (SQLSTATE 53300, answered 503) while other replicas hold idle ones. Only a warning: the
 * service still starts (a budget can be tight on purpose, and pools rarely all fill at once).
 *
 * Behind PgBouncer (DB_PGBOUNCER) the replicas' connections go to PgBouncer, which opens
 * its own few to the server: the check then reports PgBouncer's side instead (our
 * `statement_timeout`, which pg cannot send as a startup parameter there).
 */
import type pg from 'pg'

export interface PoolBudgetInput {
  poolSize: number
  replicas: number
  /** DATABASE_URL leads to PgBouncer in transaction pooling mode. */
  pgbouncer: boolean
  /** The configured statement timeout (ms; 0 = none), checked behind PgBouncer. */
  statementTimeoutMs: number
}

export interface PoolBudget {
  level: 'info' | 'warn'
  message: string
  /** The figures the message is made of (logged with it). */
  figures: Record<string, number | string>
}

const SERVER_SQL = `SELECT current_setting('max_connections')::int AS "maxConnections",
  current_setting('superuser_reserved_connections')::int AS "superuserReserved",
  coalesce(current_setting('reserved_connections', true), '0')::int AS "reserved",
  (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')::int AS "inUse",
  (SELECT rolconnlimit FROM pg_roles WHERE rolname = current_user)::int AS "roleLimit"`

/** Reads the server's limits over `pool` (one connection, a few ms) and judges the budget. */
export async function checkPoolBudget (pool: pg.Pool, input: PoolBudgetInput): Promise<PoolBudget> {
  if (input.pgbouncer) {
    const { rows } = await pool.query<{ statement_timeout: string }>('SHOW statement_timeout')
    const timeout = rows[0]?.statement_timeout ?? '0'
    if (input.statementTimeoutMs > 0 && timeout === '0') {
      return {
        level: 'warn',
        message: `Behind PgBouncer (DB_PGBOUNCER) the statement timeout cannot be sent at connection; the server's is ${timeout} (none): set it on the role, e.g. ALTER ROLE <user> SET statement_timeout = '${input.statementTimeoutMs}ms'`,
        figures: { statementTimeout: timeout }
      }
    }
    return {
      level: 'info',
      message: `Behind PgBouncer (DB_PGBOUNCER): ${input.poolSize} client connections per replica to PgBouncer (its max_client_conn must cover ${input.poolSize * input.replicas}); statement_timeout ${timeout}`,
      figures: { statementTimeout: timeout }
    }
  }
  const { rows } = await pool.query<{ maxConnections: number, superuserReserved: number, reserved: number, inUse: number, roleLimit: number }>(SERVER_SQL)
  const server = rows[0]
  if (server === undefined) throw new Error('The server did not report its settings')
  return judge(input, server)
}

/** The verdict on given figures (exported for the tests of each branch). */
export function judge (input: Pick<PoolBudgetInput, 'poolSize' | 'replicas'>, server: { maxConnections: number, superuserReserved: number, reserved: number, inUse: number, roleLimit: number }): PoolBudget {
  const needed = input.poolSize * input.replicas
  const available = server.maxConnections - server.superuserReserved - server.reserved
  const figures = { needed, poolSize: input.poolSize, replicas: input.replicas, ...server, available }
  const product = `DB_POOL_SIZE ${input.poolSize} x API_REPLICAS ${input.replicas} = ${needed} connections`
  if (server.roleLimit >= 0 && needed > server.roleLimit) {
    return { level: 'warn', message: `${product}, more than this role's connection limit (${server.roleLimit}): lower DB_POOL_SIZE or raise the role's CONNECTION LIMIT, or put PgBouncer in front (docs/operations.md)`, figures }
  }
  if (needed > available) {
    return { level: 'warn', message: `${product}, more than the ${available} the server gives clients (max_connections ${server.maxConnections} less ${server.superuserReserved + server.reserved} reserved): under load connections will be refused (503); lower DB_POOL_SIZE, raise max_connections, or put PgBouncer in front (docs/operations.md)`, figures }
  }
  // Connections held now by anyone (this replica's included: at start it holds only this one).
  const others = Math.max(0, server.inUse - 1)
  if (needed + others > available) {
    return { level: 'warn', message: `${product} fit in the server's ${available}, but not beside the ${others} other connections open now: under load some will be refused (503)`, figures }
  }
  return { level: 'info', message: `${product} within the server's ${available} (max_connections ${server.maxConnections}; ${others} other connections open now)`, figures }
}
