/**
 * The account's recent security activity (`GET /api/security/activity`), as an account
 * security page shows it so that its owner notices what they did not do: sign-ins and how,
 * wrong passwords and second-step codes, refused passkeys, factors added, removed or used, a
 * new password (changed or reset), a reset asked for, a new address, sessions ended; each
 * with when, the address and the device.
 *
 * Bounded per account: an event deletes the account's events past the newest EVENTS_KEPT.
 * Attempts that someone without the account can repeat (ATTEMPTS) never push its owner's
 * events out: an attempt of the same kind and detail as one recorded since the owner's last
 * event is merged into it (a count, the first one's time, the last one's address and
 * device), so between two events of the owner's there are at most one row per kind of
 * attempt. Events of one account are recorded one at a time (its user row locked), so the
 * bound and the merging hold under concurrent requests too.
 */
import { sql } from '../../db/sql.js'
import type { PrismaClient } from '../../generated/prisma/client.js'
import type { Device } from './repository.js'

export const EVENTS_KEPT = 50

/** Attempts against an account that need not be its owner's: merged while they repeat (see above). */
export const ATTEMPTS = ['sign-in-failed', 'second-step-failed', 'passkey-sign-in-failed', 'password-reset-requested'] as const

export type SecurityEventKind =
  | typeof ATTEMPTS[number]
  | 'sign-in' | 'password-changed' | 'password-reset-completed' | 'email-changed'
  | 'totp-enabled' | 'totp-disabled' | 'recovery-codes-replaced' | 'recovery-code-used' | 'passkey-added' | 'passkey-removed'
  | 'session-ended' | 'other-sessions-ended'

export interface SecurityEventRow {
  kind: string
  detail: string | null
  ip: string | null
  userAgent: string | null
  createdAt: Date
  count: number
  firstAt: Date
}

// The attempts of this kind and detail since the owner's last event go, and are counted into
// the new row.
const MERGE_SQL = `WITH merged AS (
    DELETE FROM security_events WHERE user_id = $1 AND kind = $2 AND detail IS NOT DISTINCT FROM $3
       AND id > coalesce((SELECT max(id) FROM security_events WHERE user_id = $1 AND kind <> ALL($4::text[])), 0)
    RETURNING count, first_at
  )
  SELECT coalesce(sum(count), 0)::int AS count, min(first_at) AS "firstAt" FROM merged`
// The snapshot of the DELETE's subquery is the statement's, taken before the INSERT: it
// deletes the earlier events past the newest EVENTS_KEPT - 1, and the new one makes EVENTS_KEPT.
const RECORD_SQL = `WITH added AS (
    INSERT INTO security_events (user_id, kind, detail, ip, user_agent, count, first_at)
    VALUES ($1, $2, $3, $4, $5, $6, coalesce($7, now()))
  )
  DELETE FROM security_events WHERE user_id = $1
     AND id <= (SELECT id FROM security_events WHERE user_id = $1 ORDER BY id DESC OFFSET ${EVENTS_KEPT - 1} LIMIT 1)`
const LIST_SQL = `SELECT kind, detail, ip, user_agent AS "userAgent", created_at AS "createdAt", count, first_at AS "firstAt"
  FROM security_events WHERE user_id = $1 ORDER BY id DESC LIMIT ${EVENTS_KEPT}`

const isAttempt = (kind: SecurityEventKind): boolean => (ATTEMPTS as readonly string[]).includes(kind)

export function securityActivity (prisma: PrismaClient) {
  const db = sql(prisma)
  return {
    /** Records an event of user `userId`'s account, from `device`; nothing when there is no such user. */
    async record (userId: number, kind: SecurityEventKind, device: Device, detail: string | null = null): Promise<void> {
      await db.forUser('security event', userId, async (tx) => {
        let earlier = { count: 0, firstAt: null as Date | null }
        if (isAttempt(kind)) [earlier] = await db.rows<typeof earlier>('security-event-merge', MERGE_SQL, [userId, kind, detail, ATTEMPTS], tx) as [typeof earlier]
        await db.rows('security-event-record', RECORD_SQL, [userId, kind, detail, device.ip, device.userAgent, earlier.count + 1, earlier.firstAt], tx)
      })
    },
    /** The account's events, newest first. */
    async list (userId: number): Promise<SecurityEventRow[]> {
      return await db.rows<SecurityEventRow>('security-event-list', LIST_SQL, [userId])
    }
  }
}

export type SecurityActivity = ReturnType<typeof securityActivity>
