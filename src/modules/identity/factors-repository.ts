/**
 * The second factors in PostgreSQL (tables `totp_factors`, `recovery_codes`, `passkeys`) as
 * prepared statements on the pool (src/db/sql.ts). Every single-use step is one statement
 * whose condition decides it: a TOTP step is taken by `last_step < $step`, a recovery code by
 * its DELETE, a passkey's signature counter by `counter < $new`; of two requests racing with
 * one code or one assertion, the second changes no row and is refused.
 */
import { sql, type Transaction } from '../../db/sql.js'
import type { PrismaClient } from '../../generated/prisma/client.js'

export interface PasskeyRow {
  /** The credential id (base64url): WebAuthn's lookup key. */
  id: string
  /** The short id the API names the passkey by (a UUID). */
  publicId: string
  userId: number
  publicKey: Buffer
  counter: number
  transports: string[]
  name: string
  backedUp: boolean
  createdAt: Date
  lastUsedAt: Date | null
}

const PASSKEY_COLUMNS = `id, public_id::text AS "publicId", user_id AS "userId", public_key AS "publicKey", counter::float8 AS counter, coalesce(transports, '{}') AS transports,
  name, backed_up AS "backedUp", created_at AS "createdAt", last_used_at AS "lastUsedAt"`

// The statement's snapshot still holds the code it deletes: the count of those left is one less.
const RECOVERY_CODE_TAKE_SQL = `WITH taken AS (DELETE FROM recovery_codes WHERE user_id = $1 AND digest = $2 RETURNING 1)
  SELECT (SELECT count(*) FROM taken)::int AS taken,
         ((SELECT count(*) FROM recovery_codes WHERE user_id = $1) - (SELECT count(*) FROM taken))::int AS "left"`

/** Work its caller does in a change's transaction (the outbox row of the notice of it). */
export type Also = (tx: Transaction) => Promise<void>

export function factorsRepository (prisma: PrismaClient) {
  const db = sql(prisma)

  /** In `tx`: the user's recovery codes become these, the old ones gone. */
  async function setRecoveryCodes (userId: number, digests: Buffer[], tx: Transaction): Promise<void> {
    await db.rows('recovery-codes-clear', 'DELETE FROM recovery_codes WHERE user_id = $1', [userId], tx)
    await db.rows('recovery-codes-insert', 'INSERT INTO recovery_codes (digest, user_id) SELECT unnest($2::bytea[]), $1', [userId, digests], tx)
  }
  return {
    /** TOTP's state and the number of recovery codes left. */
    async state (userId: number): Promise<{ totpEnabledAt: Date | null, recoveryCodesLeft: number }> {
      const [row] = await db.rows<{ totpEnabledAt: Date | null, recoveryCodesLeft: number }>('factors-state',
        `SELECT (SELECT enabled_at FROM totp_factors WHERE user_id = $1) AS "totpEnabledAt",
                (SELECT count(*)::int FROM recovery_codes WHERE user_id = $1) AS "recoveryCodesLeft"`, [userId])
      return row!
    },

    async totpEnabled (userId: number): Promise<boolean> {
      const rows = await db.rows('totp-enabled', 'SELECT 1 FROM totp_factors WHERE user_id = $1 AND enabled_at IS NOT NULL', [userId])
      return rows.length > 0
    },

    /** Keeps a pending secret (replacing a pending one); false when TOTP is on already. */
    async startTotp (userId: number, secret: Buffer): Promise<boolean> {
      const rows = await db.rows('totp-start', `INSERT INTO totp_factors (user_id, secret) VALUES ($1, $2)
        ON CONFLICT (user_id) DO UPDATE SET secret = EXCLUDED.secret, last_step = 0, created_at = now() WHERE totp_factors.enabled_at IS NULL
        RETURNING user_id`, [userId, secret])
      return rows.length > 0
    },

    /** The secret of TOTP, pending (`enabled: false`) or on. */
    async totpSecret (userId: number, enabled: boolean): Promise<Buffer | null> {
      const [row] = await db.rows<{ secret: Buffer }>(`totp-secret-${String(enabled)}`,
        `SELECT secret FROM totp_factors WHERE user_id = $1 AND enabled_at IS ${enabled ? 'NOT ' : ''}NULL`, [userId])
      return row?.secret ?? null
    },

    /** Turns the pending `secret` on at `step` with new recovery codes, `also` in the same transaction; false when it is no longer the pending one. */
    async enableTotp (userId: number, secret: Buffer, step: number, digests: Buffer[], also: Also): Promise<boolean> {
      return await db.transaction('totp-enable', async (tx) => {
        const rows = await db.rows('totp-enable', 'UPDATE totp_factors SET enabled_at = now(), last_step = $3 WHERE user_id = $1 AND secret = $2 AND enabled_at IS NULL RETURNING 1', [userId, secret, step], tx)
        if (rows.length > 0) {
          await setRecoveryCodes(userId, digests, tx)
          await also(tx)
        }
        return rows.length > 0
      })
    },

    /** Takes `step` for the user's TOTP: false when a code of this step or a later one was accepted already. */
    async takeStep (userId: number, step: number): Promise<boolean> {
      const rows = await db.rows('totp-take-step', 'UPDATE totp_factors SET last_step = $2 WHERE user_id = $1 AND enabled_at IS NOT NULL AND last_step < $2 RETURNING 1', [userId, step])
      return rows.length > 0
    },

    /** Turns TOTP off and drops the recovery codes; `also`, in the same transaction, when it was on. */
    async disableTotp (userId: number, also: Also): Promise<void> {
      await db.transaction('totp-disable', async (tx) => {
        const on = await db.rows('totp-delete', 'DELETE FROM totp_factors WHERE user_id = $1 RETURNING enabled_at IS NOT NULL AS on', [userId], tx)
        await db.rows('recovery-codes-clear', 'DELETE FROM recovery_codes WHERE user_id = $1', [userId], tx)
        if ((on[0] as { on?: boolean } | undefined)?.on === true) await also(tx)
      })
    },

    /** Replaces the recovery codes, `also` in the same transaction; false (nothing changed) when TOTP is off. */
    async replaceRecoveryCodes (userId: number, digests: Buffer[], also: Also): Promise<boolean> {
      return await db.transaction('recovery-codes-replace', async (tx) => {
        const on = await db.rows('totp-lock', 'SELECT 1 FROM totp_factors WHERE user_id = $1 AND enabled_at IS NOT NULL FOR UPDATE', [userId], tx)
        if (on.length > 0) {
          await setRecoveryCodes(userId, digests, tx)
          await also(tx)
        }
        return on.length > 0
      })
    },

    /** Uses a recovery code, once: how many codes the user has left, or null when it was not one of theirs (or is used). */
    async takeRecoveryCode (userId: number, digest: Buffer): Promise<number | null> {
      const [row] = await db.rows<{ taken: number, left: number }>('recovery-code-take', RECOVERY_CODE_TAKE_SQL, [userId, digest])
      return row!.taken === 0 ? null : row!.left
    },

    async passkeys (userId: number): Promise<PasskeyRow[]> {
      return await db.rows<PasskeyRow>('passkeys-of', `SELECT ${PASSKEY_COLUMNS} FROM passkeys WHERE user_id = $1 ORDER BY created_at, id`, [userId])
    },

    async passkey (id: string): Promise<PasskeyRow | null> {
      const [row] = await db.rows<PasskeyRow>('passkey-by-id', `SELECT ${PASSKEY_COLUMNS} FROM passkeys WHERE id = $1`, [id])
      return row ?? null
    },

    /**
     * A new passkey, counted under the user's row lock, `also` in the same transaction:
     * `{ quota }` when the user holds `max` already, null when the user is gone. A credential
     * id registered already (by anyone) is a unique violation: 409.
     */
    async addPasskey (passkey: Omit<PasskeyRow, 'publicId' | 'name' | 'createdAt' | 'lastUsedAt'> & { name: string | undefined }, max: number, also: (tx: Transaction, row: PasskeyRow) => Promise<void>): Promise<PasskeyRow | { quota: number } | null> {
      return await db.forUser('passkey-insert', passkey.userId, async (tx) => {
        const [{ held }] = await db.rows<{ held: number }>('passkeys-count', 'SELECT count(*)::int AS held FROM passkeys WHERE user_id = $1', [passkey.userId], tx) as [{ held: number }]
        if (held >= max) return { quota: held }
        const [row] = await db.rows<PasskeyRow>('passkey-insert', `INSERT INTO passkeys (id, user_id, public_key, counter, transports, name, backed_up)
          VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${PASSKEY_COLUMNS}`,
        [passkey.id, passkey.userId, passkey.publicKey, passkey.counter, passkey.transports, passkey.name ?? `Passkey ${held + 1}`, passkey.backedUp], tx)
        await also(tx, row!)
        return row!
      })
    },

    /** Renames the user's passkey `publicId`; null when the user has none with that id. */
    async renamePasskey (userId: number, publicId: string, name: string): Promise<PasskeyRow | null> {
      const [row] = await db.rows<PasskeyRow>('passkey-rename', `UPDATE passkeys SET name = $3 WHERE user_id = $1 AND public_id = $2::uuid RETURNING ${PASSKEY_COLUMNS}`, [userId, publicId, name])
      return row ?? null
    },

    async deletePasskey (userId: number, publicId: string): Promise<boolean> {
      return (await db.rows('passkey-delete', 'DELETE FROM passkeys WHERE user_id = $1 AND public_id = $2::uuid RETURNING 1', [userId, publicId])).length > 0
    },

    /**
     * Records a use with the authenticator's new signature counter: false when the counter
     * did not go up (a cloned authenticator, or a race of two uses), unless both are 0 (an
     * authenticator without a counter).
     */
    async usePasskey (id: string, counter: number): Promise<boolean> {
      const rows = await db.rows('passkey-use', `UPDATE passkeys SET counter = $2, last_used_at = now()
        WHERE id = $1 AND (counter < $2 OR (counter = 0 AND $2 = 0)) RETURNING 1`, [id, counter])
      return rows.length > 0
    },

    /** How a session was signed in, when, and whether its user has TOTP on. */
    async sessionStrength (sessionId: string): Promise<{ methods: string[], signedInAt: Date, totpOn: boolean } | null> {
      const [row] = await db.rows<{ methods: string[], signedInAt: Date, totpOn: boolean }>('session-strength',
        `SELECT coalesce(s.methods, '{password}') AS methods, s.created_at AS "signedInAt",
                EXISTS (SELECT 1 FROM totp_factors t WHERE t.user_id = s.user_id AND t.enabled_at IS NOT NULL) AS "totpOn"
           FROM sessions s WHERE s.id = $1`, [sessionId])
      return row ?? null
    },

    /** Removes every factor of a user (admin); false when they had none. */
    async reset (userId: number): Promise<boolean> {
      return await db.transaction('factors-reset', async (tx) => {
        let removed = 0
        for (const table of ['totp_factors', 'recovery_codes', 'passkeys']) {
          removed += (await db.rows(`factors-reset-${table}`, `DELETE FROM ${table} WHERE user_id = $1 RETURNING 1`, [userId], tx)).length
        }
        return removed > 0
      })
    }
  }
}

export type FactorsRepository = ReturnType<typeof factorsRepository>
