/**
 * Database access for users, built once and decorated as `app.usersRepository`
 * (docs/architecture.md). Only the public columns (`User` in ./schemas.ts) ever leave it,
 * except the credentials sign-in needs (src/modules/identity/). Every statement is a named
 * prepared statement (src/db/sql.ts; unnamed behind PgBouncer, DB_PGBOUNCER).
 */
import createError from '@fastify/error'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { sql, type Transaction } from '../../db/sql.js'
import type { PrismaClient } from '../../generated/prisma/client.js'
import { keysetPage, type PageOf, type PageQueryInput } from '../../lib/schemas.js'
import type { PublicUser } from './schemas.js'

/** Each field of the `User` schema and its column: `satisfies` fails the build when the schema gains or loses a field. */
const PUBLIC_COLUMNS = {
  id: 'id',
  username: 'username',
  email: 'email',
  names: 'names',
  emailVerifiedAt: 'email_verified_at',
  pendingEmail: 'pending_email',
  createdAt: 'created_at',
  updatedAt: 'updated_at'
} as const satisfies Record<keyof PublicUser, string>

/** The public columns as a select list, each named as its field (`u.email AS "email"` with `table` `u`). */
export function publicUserColumns (table?: string): string {
  return Object.entries(PUBLIC_COLUMNS).map(([field, column]) => `${table === undefined ? '' : `${table}.`}${column} AS "${field}"`).join(', ')
}

/**
 * Another account has the address a change asks for: the problem the unique index gives a
 * registration (src/db/errors.ts), raised here where no index is hit yet (the address is
 * only pending) or where the index's error is a driver's, not Prisma's.
 */
export const EmailTaken = createError('CONFLICT', 'This email is already taken', 409)

/** A public user with the version their tokens must carry (the token check: src/modules/identity/repository.ts). */
export type TokenUser = PublicUser & { tokenVersion: number }

/** The account a login name names, if any, and the name folded as the database folds it. */
interface LoginAccount {
  /** `lower(name)` under the database's collation: what citext compares. */
  folded: string
  credentials: { id: number, passwordHash: string, tokenVersion: number, emailVerified: boolean } | null
}

// Raw SQL on the pool's connection (src/db/sql.ts) rather than a Prisma interactive
// transaction: a registration under load while the database restarted left one of those
// pending forever, holding the server's close (test/faults/database-restart-under-load.test.ts).
const RETURNING_USER = `${publicUserColumns()}, token_version AS "tokenVersion"`
const CREATE_SQL = `INSERT INTO users (username, email, names, password_hash, updated_at) VALUES ($1, $2, $3, $4, now()) RETURNING ${RETURNING_USER}`

const CREDENTIALS_SQL = 'SELECT id, password_hash AS "passwordHash", token_version AS "tokenVersion" FROM users WHERE id = $1'
// Keyset pagination: the rows after the cursor, one more than the page (`keysetPage`).
const PAGE_SQL = `SELECT ${publicUserColumns()} FROM users WHERE id > $1 ORDER BY id LIMIT $2`

// One row whether or not the account exists: the name folded by the database (citext
// compares `lower()` of both sides under the database's collation, so this is the one
// spelling every variant of the name shares) and the account's credentials, if any.
const loginSql = (column: 'username' | 'email') =>
  `WITH login AS (SELECT $1::citext AS name)
   SELECT lower(login.name::text) AS folded, u.id, u.password_hash AS "passwordHash", u.token_version AS "tokenVersion",
     u.email_verified_at IS NOT NULL AS "emailVerified"
   FROM login LEFT JOIN users u ON u.${column} = login.name`
const LOGIN_SQL = { username: loginSql('username'), email: loginSql('email') }

// A reset token is used by deleting it, so of two requests racing with one token the second
// finds no row (it waits for the first's lock, then re-checks); the user's other tokens go
// with it, and the new password moves the token version on: every session ends, and a pending
// change of address is dropped, as with a password change.
const RESET_USE_SQL = 'DELETE FROM password_reset_tokens WHERE hash = $1 AND expires_at > now() RETURNING user_id AS "userId"'
const RESET_OTHERS_SQL = 'DELETE FROM password_reset_tokens WHERE user_id = $1'
// A reset link proves the address as a verification link does: an unverified one becomes
// verified (`firstProof` below).
const RESET_PASSWORD_SQL = `UPDATE users SET password_hash = $2, token_version = token_version + 1, pending_email = NULL,
  email_verified_at = coalesce(email_verified_at, now()), updated_at = now() WHERE id = $1`
// The user's expired tokens go when a new one is made: a user has a few rows at most.
const RESET_CREATE_SQL = `WITH expired AS (DELETE FROM password_reset_tokens WHERE user_id = $1 AND expires_at <= now())
  INSERT INTO password_reset_tokens (hash, user_id, expires_at) VALUES ($2, $1, now() + $3::int * interval '1 millisecond')`

// A verification token is used by deleting it (as a reset token); it verifies the address it
// was made for, only while the user still has that address, or makes it theirs while a change
// to it is pending. The user's row is locked before the token's, in the order a change of
// address takes them (`update`), so that the two never wait for each other.
const VERIFICATION_OWNER_SQL = 'SELECT user_id AS "userId" FROM email_verification_tokens WHERE hash = $1'
const USER_LOCK_SQL = 'SELECT email_verified_at IS NULL AS unverified FROM users WHERE id = $1 FOR UPDATE'
const VERIFICATION_USE_SQL = 'DELETE FROM email_verification_tokens WHERE hash = $1 AND expires_at > now() RETURNING user_id AS "userId", email::text AS email'
const VERIFICATION_APPLY_SQL = `UPDATE users SET email_verified_at = coalesce(email_verified_at, now()), updated_at = now()
  WHERE id = $1 AND email = $2::citext RETURNING id`
// Fails on the unique index when another account has the address by now.
const VERIFICATION_MOVE_SQL = `UPDATE users SET email = pending_email, pending_email = NULL, email_verified_at = now(), updated_at = now()
  WHERE id = $1 AND pending_email = $2::citext RETURNING id`
// What is left to verify is the pending address, if any: the other links are worth nothing.
const VERIFICATION_OTHERS_SQL = `DELETE FROM email_verification_tokens
  WHERE user_id = $1 AND email IS DISTINCT FROM (SELECT pending_email FROM users WHERE id = $1)`
// The first proof that the account's owner holds its address (a verification link, or a reset
// link) ends everything made before it: whoever registered the address before its owner
// (pre-hijacking) keeps no session, no second-step ticket and no factor. The token version
// moves on (every session and ticket ends); factors cannot be added before the address is
// verified (src/modules/identity/security-routes.ts), and any made so are removed here.
const FIRST_PROOF_SQL = {
  'first-proof-passkeys': 'DELETE FROM passkeys WHERE user_id = $1',
  'first-proof-recovery-codes': 'DELETE FROM recovery_codes WHERE user_id = $1',
  'first-proof-totp': 'DELETE FROM totp_factors WHERE user_id = $1'
}
const FIRST_PROOF_SESSIONS_SQL = 'UPDATE users SET token_version = token_version + 1 WHERE id = $1'
/** PostgreSQL's unique_violation. */
const UNIQUE_VIOLATION = '23505'
const VERIFICATION_CREATE_SQL = `WITH expired AS (DELETE FROM email_verification_tokens WHERE user_id = $1 AND expires_at <= now())
  INSERT INTO email_verification_tokens (hash, user_id, email, expires_at) VALUES ($2, $1, $3, now() + $4::int * interval '1 millisecond')`

/** Work done in a repository's transaction by its caller, on the transaction's connection. */
export type AlsoInTransaction = (tx: Transaction, user: TokenUser) => Promise<void>

/** What following a verification link did. */
export type VerificationOutcome = 'verified' | 'changed' | 'invalid' | 'taken'
/** The outcome, and the user and address of a link that verified or changed an address. */
export interface Verification { outcome: VerificationOutcome, userId?: number, email?: string }

function usersRepository (prisma: PrismaClient) {
  const db = sql(prisma)

  /** In `tx`, once an unverified address is proven: the factors made before go (FIRST_PROOF_SQL); `endSessions` moves the token version on. */
  async function firstProof (userId: number, endSessions: boolean, tx: Transaction): Promise<void> {
    for (const [name, statement] of Object.entries(FIRST_PROOF_SQL)) await db.rows(name, statement, [userId], tx)
    if (endSessions) await db.rows('first-proof-sessions', FIRST_PROOF_SESSIONS_SQL, [userId], tx)
  }

  return {
    /**
     * The account of a login name, by username or e-mail (both case-insensitive: citext),
     * with the database's folding of the name.
     */
    async findLoginAccount (login: { username: string } | { email: string }): Promise<LoginAccount> {
      const column = 'email' in login ? 'email' : 'username'
      const name = 'email' in login ? login.email : login.username
      type Row = { folded: string, id: number | null, passwordHash: string | null, tokenVersion: number | null, emailVerified: boolean }
      const [row] = await db.rows<Row>(`login-account-${column}`, LOGIN_SQL[column], [name])
      if (row === undefined) throw new Error('The login query returned no row')
      const credentials = row.id === null ? null : { id: row.id, passwordHash: row.passwordHash!, tokenVersion: row.tokenVersion!, emailVerified: row.emailVerified }
      return { folded: row.folded, credentials }
    },

    /** Creates a user; `also` runs in the same transaction (the outbox row of its verification e-mail). */
    async create (data: { username: string, email: string, names?: string, passwordHash: string }, also: AlsoInTransaction): Promise<TokenUser> {
      return await db.transaction(`registering ${data.username}`, async (tx) => {
        const [user] = await db.rows<TokenUser>('user-create', CREATE_SQL, [data.username, data.email, data.names ?? null, data.passwordHash], tx)
        await also(tx, user!)
        return user!
      })
    },

    /** The password hash and token version of a user, by id. */
    async findCredentialsById (id: number): Promise<{ id: number, passwordHash: string, tokenVersion: number } | null> {
      const [row] = await db.rows<{ id: number, passwordHash: string, tokenVersion: number }>('user-credentials', CREDENTIALS_SQL, [id])
      return row ?? null
    },

    /**
     * Changes a user; a new password hash also bumps the token version (earlier tokens stop
     * working) and removes every reset token (links sent before it stop working). A new e-mail address (as citext compares) is not set but pending, replacing
     * an earlier pending one and the links made for it; `onNewEmail` runs in the same
     * transaction (the outbox rows of its verification e-mail and of the notice to the
     * current address). An address another account has: 409, nothing changed. The current
     * address (in any case) drops a pending change, and so does a new password: whoever asked
     * for it with a stolen session loses it with the session. Null when there is no such user.
     */
    async update (id: number, data: { username?: string, email?: string, names?: string | null, passwordHash?: string }, onNewEmail: AlsoInTransaction): Promise<TokenUser | null> {
      const newPassword = data.passwordHash !== undefined
      /** The UPDATE itself; `same`: the address sent is the current one (or none was sent). */
      const change = async (same: boolean, tx?: Transaction): Promise<TokenUser | null> => {
        const fields = Object.entries({
          username: data.username,
          // The current address again (perhaps in another case) is kept as spelt now.
          email: data.email !== undefined && same ? data.email : undefined,
          pending_email: data.email !== undefined ? (same ? null : data.email) : (newPassword ? null : undefined),
          names: data.names,
          password_hash: data.passwordHash
        }).filter(([, value]) => value !== undefined)
        const set = [
          ...fields.map(([column], i) => `${column} = $${i + 2}`),
          ...(newPassword ? ['token_version = token_version + 1'] : []),
          'updated_at = now()'
        ]
        const [user] = await db.rows<TokenUser>(`user-update-${fields.map(([column]) => column).join('-')}${newPassword ? '-version' : ''}`,
          `UPDATE users SET ${set.join(', ')} WHERE id = $1 RETURNING ${RETURNING_USER}`, [id, ...fields.map(([, value]) => value)], tx)
        return user ?? null
      }
      if (data.email === undefined && !newPassword) return await change(true)
      return await db.transaction(`changing user ${id}`, async (tx) => {
        let same = true
        if (data.email !== undefined) {
          // Locked: of two changes at once, the later one's address and link are the ones left.
          const [before] = await db.rows<{ same: boolean }>('user-email-for-update', 'SELECT email = $2::citext AS same FROM users WHERE id = $1 FOR UPDATE', [id, data.email], tx)
          if (before === undefined) return null
          same = before.same
          if (!same && (await db.rows('user-email-taken', 'SELECT 1 FROM users WHERE email = $1::citext AND id <> $2', [data.email, id], tx)).length > 0) throw new EmailTaken()
          // The links of an earlier pending change stop working; the current address's stay.
          await db.rows('verification-tokens-unpend', 'DELETE FROM email_verification_tokens t USING users u WHERE u.id = $1 AND t.user_id = u.id AND t.email <> u.email', [id], tx)
        }
        const user = await change(same, tx)
        if (user === null) return null
        // A new password voids the reset links sent before it, as it ends the sessions.
        if (newPassword) await db.rows('reset-tokens-void', RESET_OTHERS_SQL, [id], tx)
        if (!same) await onNewEmail(tx, user)
        return user
      })
    },

    /** The address of user `id`, whether it is verified, and the address pending, if any. */
    async findEmail (id: number): Promise<{ email: string, verified: boolean, pendingEmail: string | null } | null> {
      type Row = { email: string, verified: boolean, pendingEmail: string | null }
      const [row] = await db.rows<Row>('user-email', 'SELECT email::text AS email, email_verified_at IS NOT NULL AS verified, pending_email::text AS "pendingEmail" FROM users WHERE id = $1', [id])
      return row ?? null
    },

    /** Stores a verification token of `email` for user `userId` by its digest, valid for `ttlMs`. */
    async createVerificationToken (userId: number, email: string, hash: Buffer, ttlMs: number): Promise<void> {
      await db.rows('verification-token-create', VERIFICATION_CREATE_SQL, [userId, hash, email, ttlMs])
    },

    /** Removes a verification token (its e-mail could not be sent). */
    async deleteVerificationToken (hash: Buffer): Promise<void> {
      await db.rows('verification-token-delete', 'DELETE FROM email_verification_tokens WHERE hash = $1', [hash])
    },

    /**
     * Uses the live verification token of digest `hash`: its user's address is verified if
     * it is still the one the token was made for (`verified`), or becomes the pending address
     * the token was made for, verified (`changed`). `invalid` for an unknown, used or expired
     * token, or one of an address the user has since left or no longer asks for. The first
     * verification of an account ends what was made before it (FIRST_PROOF_SQL). `taken`,
     * and nothing changed (the token stays), when another account has the pending address.
     */
    async verifyEmail (hash: Buffer): Promise<Verification> {
      try {
        return await db.transaction('e-mail verification', async (tx): Promise<Verification> => {
          const [owner] = await db.rows<{ userId: number }>('verification-token-owner', VERIFICATION_OWNER_SQL, [hash], tx)
          if (owner === undefined) return { outcome: 'invalid' }
          const [lock] = await db.rows<{ unverified: boolean }>('user-lock', USER_LOCK_SQL, [owner.userId], tx)
          const [used] = await db.rows<{ userId: number, email: string }>('verification-token-use', VERIFICATION_USE_SQL, [hash], tx)
          if (used === undefined) return { outcome: 'invalid' }
          let outcome: VerificationOutcome = 'invalid'
          if ((await db.rows('verification-apply', VERIFICATION_APPLY_SQL, [used.userId, used.email], tx)).length === 1) outcome = 'verified'
          else if ((await db.rows('verification-move', VERIFICATION_MOVE_SQL, [used.userId, used.email], tx)).length === 1) outcome = 'changed'
          if (outcome !== 'invalid') await db.rows('verification-token-others', VERIFICATION_OTHERS_SQL, [used.userId], tx)
          if (outcome !== 'invalid' && lock?.unverified === true) await firstProof(used.userId, true, tx)
          // Reset links went to the address the account has left: they reach it no more.
          if (outcome === 'changed') await db.rows('reset-tokens-void', RESET_OTHERS_SQL, [used.userId], tx)
          return outcome === 'invalid' ? { outcome } : { outcome, userId: used.userId, email: used.email }
        })
      } catch (error) {
        if ((error as { cause?: { code?: unknown } }).cause?.code === UNIQUE_VIOLATION) return { outcome: 'taken' }
        throw error
      }
    },

    /**
     * Deletes user `id` in one transaction: their row is locked first (a creation or image
     * of theirs waits, then finds no user), then `first` runs (the rows that must go before
     * the user, returning what to clean up once this commits), then the user goes, their
     * sessions with it (ON DELETE CASCADE). Null, and nothing done, when there is no such user.
     */
    async delete<T> (id: number, first: (tx: Transaction) => Promise<T>): Promise<T | null> {
      return await db.transaction(`deleting user ${id}`, async (tx) => {
        if ((await db.rows('user-delete-lock', 'SELECT id FROM users WHERE id = $1 FOR UPDATE', [id], tx)).length === 0) return null
        const result = await first(tx)
        await db.rows('user-delete', 'DELETE FROM users WHERE id = $1', [id], tx)
        return result
      })
    },

    /** The account of an e-mail address (case-insensitive), for a password reset. */
    async findByEmail (email: string): Promise<{ id: number, email: string } | null> {
      const [row] = await db.rows<{ id: number, email: string }>('user-by-email', 'SELECT id, email::text AS email FROM users WHERE email = $1::citext', [email])
      return row ?? null
    },

    /** Stores a reset token of user `userId` by its digest, valid for `ttlMs`. */
    async createResetToken (userId: number, hash: Buffer, ttlMs: number): Promise<void> {
      await db.rows('reset-token-create', RESET_CREATE_SQL, [userId, hash, ttlMs])
    },

    /** Removes a reset token (its e-mail could not be sent). */
    async deleteResetToken (hash: Buffer): Promise<void> {
      await db.rows('reset-token-delete', 'DELETE FROM password_reset_tokens WHERE hash = $1', [hash])
    },

    /**
     * Uses the live reset token of digest `hash`: its user gets `passwordHash`, a new token
     * version, no other reset token, and a verified address (a first proof: FIRST_PROOF_SQL). The user's id, or null for an unknown, used or
     * expired token.
     */
    async resetPassword (hash: Buffer, passwordHash: string): Promise<number | null> {
      return await db.transaction('password reset', async (tx) => {
        const [used] = await db.rows<{ userId: number }>('reset-token-use', RESET_USE_SQL, [hash], tx)
        if (used === undefined) return null
        const [lock] = await db.rows<{ unverified: boolean }>('user-lock', USER_LOCK_SQL, [used.userId], tx)
        await db.rows('reset-token-others', RESET_OTHERS_SQL, [used.userId], tx)
        // The new password moves the token version on already.
        if (lock?.unverified === true) await firstProof(used.userId, false, tx)
        await db.rows('reset-password', RESET_PASSWORD_SQL, [used.userId, passwordHash], tx)
        return used.userId
      })
    },

    /** A page in id order. */
    async page (query: PageQueryInput): Promise<PageOf<PublicUser>> {
      return keysetPage(await db.rows<PublicUser>('users-page', PAGE_SQL, [query.cursor ?? 0, query.limit + 1]), query.limit)
    }
  }
}

export type UsersRepository = ReturnType<typeof usersRepository>

declare module 'fastify' {
  interface FastifyInstance {
    usersRepository: UsersRepository
  }
}

export default fp(async function usersRepositoryPlugin (app: FastifyInstance) {
  app.decorate('usersRepository', usersRepository(app.prisma))
}, { name: 'users-repository', fastify: '5.x', dependencies: ['prisma'] })
