/**
 * Maps database errors to answers: a unique violation is a 409 (also when two
 * registrations race, since the database decides), a missing row a 404, an unreachable
 * database a 503 that the client may retry. A missing table or column is a 503 too: it
 * means the migrations have not been applied yet (the server applies them in the
 * background once the database answers, src/db/migrate-on-start.ts); the error handler
 * still logs it at error level, so a real schema bug does not go unseen.
 */
interface Classified { status: number, code: string, detail: string }

/**
 * PostgreSQL SQLSTATE classes and Node socket errors that mean "the database is not there":
 * connection failures, shutdown, insufficient resources, and a database or role the
 * server does not know or refuses (3D000, 28xxx: dropped, or a deployment mistake).
 */
const UNAVAILABLE_SQLSTATE = /^(08|57P0|53|3D|28)/
/**
 * A write reached a server that takes only reads (25006, read_only_sql_transaction): a primary
 * demoted by a failover (deploy/ha: Patroni), or a replica behind a stale route, until the
 * connection is dropped and the next one reaches the new primary. Retryable, like the rest.
 */
const READ_ONLY_SQLSTATE = '25006'
const UNAVAILABLE_KINDS = new Set(['DatabaseNotReachable', 'DatabaseDoesNotExist', 'DatabaseAccessDenied', 'AuthenticationFailed'])
const UNAVAILABLE_ERRNO = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'EAI_AGAIN'])
/**
 * The database did not answer in time: a statement cancelled by `statement_timeout`
 * (57014) or `lock_timeout` (55P03), or no answer at all within the client's
 * `query_timeout` (src/db/client.ts).
 */
const TIMEOUT_SQLSTATE = new Set(['57014', '55P03'])
const CLIENT_TIMEOUT_MESSAGE = /Query read timeout/
/** Undefined table / column: the schema lags the code (migrations pending). */
const SCHEMA_SQLSTATE = new Set(['42P01', '42703'])

/**
 * The fields of a violated unique constraint. Through the pg adapter Prisma reports the
 * index name (`users_username_key`), named by Prisma's convention `<table>_<fields>_key`.
 */
function uniqueFields (error: Record<string, any>): string[] {
  const cause = error.meta?.driverAdapterError?.cause
  const target = error.meta?.target ?? cause?.constraint?.fields
  if (Array.isArray(target)) return target.map(String)
  if (typeof target === 'string') return [target]
  return indexFields(cause?.constraint?.index, cause?.table)
}

/** The fields of unique index `<table>_<fields>_key` (Prisma's naming), as `pg` reports it. */
function indexFields (index: unknown, table: unknown): string[] {
  if (typeof index === 'string' && typeof table === 'string' && index.startsWith(`${table}_`) && index.endsWith('_key')) {
    return [index.slice(table.length + 1, -'_key'.length)]
  }
  return []
}

export function classifyDatabaseError (error: unknown): Classified | undefined {
  if (typeof error !== 'object' || error === null) return undefined
  const e = error as Record<string, any>
  switch (e.code) {
    case 'P2002':
      return taken(uniqueFields(e))
    case 'P2025':
      return { status: 404, code: 'NOT_FOUND', detail: 'The record does not exist' }
    case 'P1000': case 'P1001': case 'P1002': case 'P1003': case 'P1017': case 'P2024':
      return unavailable()
    case 'P2021': case 'P2022':
      return schemaNotReady()
  }
  const cause = e.cause ?? e.meta?.driverAdapterError?.cause ?? {}
  // Prisma wraps the driver's error (meta.driverAdapterError.cause); a raw `pg` error (the
  // token check's prepared statement) carries its SQLSTATE in `code` itself.
  const sqlState = String(cause.originalCode ?? cause.code ?? e.originalCode ?? (typeof e.code === 'string' && !e.code.startsWith('P') ? e.code : ''))
  if (SCHEMA_SQLSTATE.has(sqlState)) return schemaNotReady()
  if (sqlState === '23505') return taken(indexFields(cause.constraint, cause.table))
  if (TIMEOUT_SQLSTATE.has(sqlState) || CLIENT_TIMEOUT_MESSAGE.test(String(e.message)) || CLIENT_TIMEOUT_MESSAGE.test(String(cause.message))) {
    return { status: 503, code: 'SERVICE_UNAVAILABLE', detail: 'The database did not answer in time; retry shortly' }
  }
  // Node socket errors name themselves in `code` (`errno` is the number).
  const socketError = UNAVAILABLE_ERRNO.has(String(cause.code)) || UNAVAILABLE_ERRNO.has(String(e.code))
  if (sqlState === READ_ONLY_SQLSTATE) {
    return { status: 503, code: 'SERVICE_UNAVAILABLE', detail: 'The database takes only reads at the moment (a failover); retry shortly' }
  }
  if (UNAVAILABLE_SQLSTATE.test(sqlState) || socketError || UNAVAILABLE_KINDS.has(cause.kind) ||
      /Can't reach database|Connection terminated|connect ECONNREFUSED|terminating connection|timeout exceeded when trying to connect|Client has encountered a connection error/.test(String(e.message))) {
    return unavailable()
  }
  return undefined
}

/** A unique violation, from Prisma (P2002) or from a statement of our own on `pg` (23505). */
function taken (fields: string[]): Classified {
  const detail = fields.length > 0 ? `This ${fields.join(', ')} is already taken` : 'A record with these values already exists'
  return { status: 409, code: 'CONFLICT', detail }
}

function unavailable (): Classified {
  return { status: 503, code: 'SERVICE_UNAVAILABLE', detail: 'The database is unavailable; retry shortly' }
}

function schemaNotReady (): Classified {
  return { status: 503, code: 'SERVICE_UNAVAILABLE', detail: 'The database schema is not ready (migrations pending); retry shortly' }
}
