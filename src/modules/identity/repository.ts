/**
 * Sessions and refresh tokens in PostgreSQL (tables `sessions`, `refresh_tokens`), and the
 * token check that reads a session with its user, as named prepared statements (src/db/sql.ts):
 * the token check runs on every authenticated request and refresh is a hot path, and each
 * statement below does in one round trip what would otherwise take several.
 *
 * The token check is a join on the session's primary key in the same statement as the user's
 * public columns (the users module's `publicUserColumns`): no second round trip
 * (bench/README.md, "Session check").
 *
 * Rotation is one statement: the old token is marked used only if it is unused, unexpired
 * and its session is live, and the new token is inserted from that same row. Two requests
 * racing with one token serialise on the row lock: the second sees `used_at` set when it
 * re-checks the row (READ COMMITTED's re-evaluation), updates nothing, and is then reuse.
 *
 * Bounded (docs/api.md, "Quotas"): a user has at most `sessionsMaxPerUser` live sessions (a login
 * past it ends the least recently used one, in a transaction holding the user's row); a
 * session keeps its current refresh token and the `refreshTokensKept` most recently rotated ones
 * (what reuse detection looks up), the rotation itself deleting the older ones; and a
 * session rotates at most once per `refreshMinIntervalMs` after its first rotation (a
 * refresh right after login is not limited: logins have limits of their own).
 */
import { randomUUID } from 'node:crypto'
import { sql } from '../../db/sql.js'
import type { PrismaClient } from '../../generated/prisma/client.js'
import { publicUserColumns, type TokenUser } from '../users/index.js'

/** Why a refresh token did not rotate; `tooSoon`: the session rotated less than the minimum interval ago (seconds to wait). */
export type RefreshRefusal = 'unknown' | 'reused' | 'expired' | 'ended' | { tooSoon: number }

/**
 * Rotated refresh tokens kept per session, the ones whose reuse is detected (401
 * REFRESH_TOKEN_REUSED, the session revoked); older ones are deleted by the rotation. With the
 * minimum refresh interval, a thief needs this many rotations, so this many intervals, to push
 * a stolen token out of detection: 100 x 10 s outlasts a 15 min access token. Rows per user:
 * sessions x (this + 1).
 */
export const REFRESH_TOKENS_KEPT = 100

export interface SessionLimits {
  /** Live sessions per user (SESSIONS_MAX_PER_USER). */
  sessionsMaxPerUser: number
  /** The least time between two rotations of a session, in ms; 0 = none (REFRESH_MIN_INTERVAL_MS). */
  refreshMinIntervalMs: number
  /** REFRESH_TOKENS_KEPT unless a test sets it. */
  refreshTokensKept?: number
}

export interface RotatedSession {
  sessionId: string
  userId: number
  tokenVersion: number
}

// A new session and its first refresh token, run after the user's row is locked (so that
// concurrent logins of one user see each other): the user's dead sessions go (expired,
// revoked, or of an older token version), and so do the least recently used live ones past
// the newest $6 - 1, so that with the new one the user has at most $6 (SESSIONS_MAX_PER_USER).
const CREATE_SQL = `WITH kept AS (
    SELECT s.id FROM sessions s JOIN users u ON u.id = s.user_id
     WHERE s.user_id = $2 AND s.expires_at > now() AND s.revoked_at IS NULL AND s.token_version = u.token_version
     ORDER BY s.expires_at DESC, s.created_at DESC LIMIT $6::int - 1
  ), ended AS (DELETE FROM sessions WHERE user_id = $2 AND id NOT IN (SELECT id FROM kept)),
  session AS (INSERT INTO sessions (id, user_id, token_version, expires_at, methods, user_agent, ip) VALUES ($1, $2, $3, $5, $7, $8, $9))
  INSERT INTO refresh_tokens (hash, session_id, expires_at) VALUES ($4, $1, $5)`

const ROTATE_SQL = `WITH old AS (
    UPDATE refresh_tokens t SET used_at = now()
    FROM sessions s JOIN users u ON u.id = s.user_id
    WHERE t.hash = $1 AND t.used_at IS NULL AND t.expires_at > now() AND s.id = t.session_id
      AND s.revoked_at IS NULL AND s.token_version = u.token_version
      AND ($4::int = 0 OR t.created_at <= now() - $4::int * interval '1 millisecond'
           OR NOT EXISTS (SELECT 1 FROM refresh_tokens p WHERE p.session_id = t.session_id AND p.used_at IS NOT NULL))
    RETURNING t.session_id, u.id AS user_id, u.token_version
  ), fresh AS (
    INSERT INTO refresh_tokens (hash, session_id, expires_at) SELECT $2, session_id, $3 FROM old
  ), extended AS (
    UPDATE sessions SET expires_at = $3 FROM old WHERE sessions.id = old.session_id
  ), pruned AS (
    DELETE FROM refresh_tokens WHERE session_id = (SELECT session_id FROM old) AND used_at IS NOT NULL
       AND hash NOT IN (SELECT hash FROM refresh_tokens WHERE session_id = (SELECT session_id FROM old) AND used_at IS NOT NULL
                         ORDER BY used_at DESC, created_at DESC LIMIT $5::int - 1)
  )
  SELECT session_id AS "sessionId", user_id AS "userId", token_version AS "tokenVersion" FROM old`

// Why a token did not rotate, and its session: read after ROTATE_SQL changed nothing.
const CLASSIFY_SQL = `SELECT t.session_id AS "sessionId", t.used_at IS NOT NULL AS used, t.expires_at <= now() AS expired,
    s.revoked_at IS NOT NULL OR s.token_version <> u.token_version AS ended,
    ceil(extract(epoch FROM t.created_at + $2::int * interval '1 millisecond' - now()))::int AS "waitSeconds"
  FROM refresh_tokens t JOIN sessions s ON s.id = t.session_id JOIN users u ON u.id = s.user_id
  WHERE t.hash = $1`

const REVOKE_SQL = 'UPDATE sessions SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL'

// A user's live sessions, the most recently used first: last used is when its newest refresh
// token was issued (the login, or the last refresh).
const LIVE = 's.user_id = $1 AND s.revoked_at IS NULL AND s.expires_at > now() AND s.token_version = (SELECT token_version FROM users WHERE id = $1)'
const LIST_SQL = `SELECT s.id, s.created_at AS "createdAt", s.expires_at AS "expiresAt", s.methods, s.user_agent AS "userAgent", s.ip,
    (SELECT max(t.created_at) FROM refresh_tokens t WHERE t.session_id = s.id) AS "lastUsedAt"
  FROM sessions s WHERE ${LIVE} ORDER BY "lastUsedAt" DESC NULLS LAST, s.created_at DESC`
const END_ONE_SQL = `UPDATE sessions s SET revoked_at = now() WHERE ${LIVE} AND s.id = $2 RETURNING s.id`
const END_OTHERS_SQL = `UPDATE sessions s SET revoked_at = now() WHERE ${LIVE} AND s.id <> $2 RETURNING s.id`

/** A live session as the account's list shows it. */
export interface SessionRow {
  id: string
  createdAt: Date
  expiresAt: Date
  lastUsedAt: Date | null
  methods: string[]
  userAgent: string | null
  ip: string | null
}

/** Where a sign-in came from, kept with its session. */
export interface Device {
  userAgent: string | null
  ip: string | null
}

const TOKEN_USER_SQL = `SELECT ${publicUserColumns('u')}, u.token_version AS "tokenVersion"
  FROM users u JOIN sessions s ON s.user_id = u.id
  WHERE u.id = $1 AND s.id = $2 AND s.revoked_at IS NULL`

export function sessionsRepository (prisma: PrismaClient, limits: SessionLimits) {
  const db = sql(prisma)
  const { sessionsMaxPerUser, refreshMinIntervalMs } = limits
  const refreshTokensKept = limits.refreshTokensKept ?? REFRESH_TOKENS_KEPT
  return {
    /** The user a token names, with their token version, if the token's session is live; run on every authenticated request. */
    async tokenUser (id: number, sessionId: string): Promise<TokenUser | null> {
      const [row] = await db.rows<TokenUser>('token-user-session', TOKEN_USER_SQL, [id, sessionId])
      return row ?? null
    },

    /**
     * Starts a session for the user with its first refresh token (by digest), recording how
     * it was signed in (`methods`: factors.ts); returns the
     * session id, or undefined when the user no longer exists. Past `sessionsMaxPerUser` live
     * sessions, the least recently used one ends.
     */
    async create (user: { id: number, tokenVersion: number }, refreshHash: Buffer, expiresAt: Date, methods: string[], device: Device): Promise<string | undefined> {
      const id = randomUUID()
      // A user deleted since their password was checked gets no session (not a foreign-key error, a 500).
      const created = await db.forUser('session-create', user.id, async (tx) => {
        await db.rows('session-create', CREATE_SQL, [id, user.id, user.tokenVersion, refreshHash, expiresAt, sessionsMaxPerUser, methods, device.userAgent, device.ip], tx)
        return id
      })
      return created ?? undefined
    },

    /**
     * Uses the refresh token of digest `oldHash` once and puts `newHash` in its place, or
     * says why not; a token presented again (`reused`) revokes its whole session.
     */
    async rotate (oldHash: Buffer, newHash: Buffer, expiresAt: Date): Promise<RotatedSession | RefreshRefusal> {
      const [rotated] = await db.rows<RotatedSession>('session-rotate', ROTATE_SQL, [oldHash, newHash, expiresAt, refreshMinIntervalMs, refreshTokensKept])
      if (rotated !== undefined) return rotated
      type Row = { sessionId: string, used: boolean, expired: boolean, ended: boolean, waitSeconds: number }
      const [row] = await db.rows<Row>('session-classify', CLASSIFY_SQL, [oldHash, refreshMinIntervalMs])
      if (row === undefined) return 'unknown'
      if (row.used) {
        await db.rows('session-revoke', REVOKE_SQL, [row.sessionId])
        return 'reused'
      }
      if (row.ended) return 'ended'
      if (row.expired) return 'expired'
      // Live, unused, unexpired: the session rotated too recently (a wait of 0: the interval
      // ended between the two statements).
      return { tooSoon: Math.max(1, row.waitSeconds) }
    },

    /** Ends a session (logout); its access and refresh tokens stop working at once. */
    async revoke (sessionId: string): Promise<void> {
      await db.rows('session-revoke', REVOKE_SQL, [sessionId])
    },

    /** The user's live sessions, the most recently used first (at most SESSIONS_MAX_PER_USER). */
    async list (userId: number): Promise<SessionRow[]> {
      return await db.rows<SessionRow>('session-list', LIST_SQL, [userId])
    },

    /** Ends the user's live session `sessionId`; false when they have no such session. */
    async endOwn (userId: number, sessionId: string): Promise<boolean> {
      return (await db.rows('session-end-own', END_ONE_SQL, [userId, sessionId])).length === 1
    },

    /** Ends every live session of the user but `keep`; how many it ended. */
    async endOthers (userId: number, keep: string): Promise<number> {
      return (await db.rows('session-end-others', END_OTHERS_SQL, [userId, keep])).length
    }
  }
}

export type SessionsRepository = ReturnType<typeof sessionsRepository>
