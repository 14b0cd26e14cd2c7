/**
 * Sessions and refresh tokens in PostgreSQL (tables `sessions`, `refresh_tokens`), as named
 * prepared statements on Prisma's own pg pool: refresh is a hot path, and each statement
 * below does in one round trip what would take Prisma several queries and a transaction.
 *
 * Rotation is one statement: the old token is marked used only if it is unused, unexpired
 * and its session is live, and the new token is inserted from that same row. Two requests
 * racing with one token serialise on the row lock: the second sees `used_at` set when it
 * re-checks the row (READ COMMITTED's re-evaluation), updates nothing, and is then reuse.
 */
import { randomUUID } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type pg from 'pg'
import { sqlPool, statementName } from '../../db/client.js'
import type { PrismaClient } from '../../generated/prisma/client.js'

/** Why a refresh token did not rotate. */
export type RefreshRefusal = 'unknown' | 'reused' | 'expired' | 'ended'

export interface RotatedSession {
  sessionId: string
  userId: number
  tokenVersion: number
}

// A new session and its first refresh token; the user's expired sessions go at the same time.
const CREATE_SQL = `WITH expired AS (DELETE FROM sessions WHERE user_id = $2 AND expires_at < now()),
  session AS (INSERT INTO sessions (id, user_id, token_version, expires_at) VALUES ($1, $2, $3, $5))
  INSERT INTO refresh_tokens (hash, session_id, expires_at) VALUES ($4, $1, $5)`

const ROTATE_SQL = `WITH old AS (
    UPDATE refresh_tokens t SET used_at = now()
    FROM sessions s JOIN users u ON u.id = s.user_id
    WHERE t.hash = $1 AND t.used_at IS NULL AND t.expires_at > now() AND s.id = t.session_id
      AND s.revoked_at IS NULL AND s.token_version = u.token_version
    RETURNING t.session_id, u.id AS user_id, u.token_version
  ), fresh AS (
    INSERT INTO refresh_tokens (hash, session_id, expires_at) SELECT $2, session_id, $3 FROM old
  ), extended AS (
    UPDATE sessions SET expires_at = $3 FROM old WHERE sessions.id = old.session_id
  )
  SELECT session_id AS "sessionId", user_id AS "userId", token_version AS "tokenVersion" FROM old`

// Why a token did not rotate, and its session: read after ROTATE_SQL changed nothing.
const CLASSIFY_SQL = `SELECT t.session_id AS "sessionId", t.used_at IS NOT NULL AS used, t.expires_at <= now() AS expired,
    s.revoked_at IS NOT NULL OR s.token_version <> u.token_version AS ended
  FROM refresh_tokens t JOIN sessions s ON s.id = t.session_id JOIN users u ON u.id = s.user_id
  WHERE t.hash = $1`

const REVOKE_SQL = 'UPDATE sessions SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL'

/** Wrapped so the error handler's classifier reads the driver error as the cause (503 when the database is down). */
async function query<R extends pg.QueryResultRow> (pool: pg.Pool, name: string, text: string, values: unknown[], prepare: boolean): Promise<pg.QueryResult<R>> {
  try {
    // Unnamed behind PgBouncer in transaction mode (DB_PGBOUNCER, docs/operations.md).
    return await pool.query<R>({ name: prepare ? name : undefined, text, values })
  } catch (error) {
    throw new Error(`Session query ${name} failed: ${(error as Error).message}`, { cause: error })
  }
}

export function sessionsRepository (prisma: PrismaClient) {
  const pool = sqlPool(prisma)
  const prepare = statementName(prisma, 'session') !== undefined
  return {
    /** Starts a session for the user with its first refresh token (by digest); returns the session id. */
    async create (user: { id: number, tokenVersion: number }, refreshHash: Buffer, expiresAt: Date): Promise<string> {
      const id = randomUUID()
      await query(pool, 'session-create', CREATE_SQL, [id, user.id, user.tokenVersion, refreshHash, expiresAt], prepare)
      return id
    },

    /**
     * Uses the refresh token of digest `oldHash` once and puts `newHash` in its place, or
     * says why not; a token presented again (`reused`) revokes its whole session.
     */
    async rotate (oldHash: Buffer, newHash: Buffer, expiresAt: Date): Promise<RotatedSession | RefreshRefusal> {
      const { rows: [rotated] } = await query<RotatedSession>(pool, 'session-rotate', ROTATE_SQL, [oldHash, newHash, expiresAt], prepare)
      if (rotated !== undefined) return rotated
      type Row = { sessionId: string, used: boolean, expired: boolean, ended: boolean }
      const { rows: [row] } = await query<Row>(pool, 'session-classify', CLASSIFY_SQL, [oldHash], prepare)
      if (row === undefined) return 'unknown'
      if (row.used) {
        await query(pool, 'session-revoke', REVOKE_SQL, [row.sessionId], prepare)
        return 'reused'
      }
      return row.ended ? 'ended' : row.expired ? 'expired' : 'unknown'
    },

    /** Ends a session (logout); its access and refresh tokens stop working at once. */
    async revoke (sessionId: string): Promise<void> {
      await query(pool, 'session-revoke', REVOKE_SQL, [sessionId], prepare)
    }
  }
}

export type SessionsRepository = ReturnType<typeof sessionsRepository>

declare module 'fastify' {
  interface FastifyInstance {
    sessionsRepository: SessionsRepository
  }
}

export default fp(async function sessionsRepositoryPlugin (app: FastifyInstance) {
  app.decorate('sessionsRepository', sessionsRepository(app.prisma))
}, { name: 'sessions-repository', fastify: '5.x', dependencies: ['prisma'] })
