/**
 * The account's recent security activity (`GET /api/security/activity`), as an account
 * security page shows it so that its owner notices what they did not do: sign-ins and how,
 * wrong passwords, factors added or removed, a new password, sessions ended; each with when,
 * the address and the device. Bounded per account: an event deletes the account's events
 * past the newest EVENTS_KEPT in the same statement, so a flood of wrong passwords keeps at
 * most that many rows.
 */
import { sql } from '../../db/sql.js'
import type { PrismaClient } from '../../generated/prisma/client.js'
import type { Device } from './repository.js'

export const EVENTS_KEPT = 50

export type SecurityEventKind =
  | 'sign-in' | 'sign-in-failed' | 'password-changed'
  | 'totp-enabled' | 'totp-disabled' | 'recovery-codes-replaced' | 'passkey-added' | 'passkey-removed'
  | 'session-ended' | 'other-sessions-ended'

export interface SecurityEventRow {
  kind: string
  detail: string | null
  ip: string | null
  userAgent: string | null
  createdAt: Date
}

// The snapshot of the DELETE's subquery is the statement's, taken before the INSERT: it
// deletes the earlier events past the newest EVENTS_KEPT - 1, and the new one makes EVENTS_KEPT.
const RECORD_SQL = `WITH added AS (
    INSERT INTO security_events (user_id, kind, detail, ip, user_agent) VALUES ($1, $2, $3, $4, $5)
  )
  DELETE FROM security_events WHERE user_id = $1
     AND id <= (SELECT id FROM security_events WHERE user_id = $1 ORDER BY id DESC OFFSET ${EVENTS_KEPT - 1} LIMIT 1)`
const LIST_SQL = `SELECT kind, detail, ip, user_agent AS "userAgent", created_at AS "createdAt"
  FROM security_events WHERE user_id = $1 ORDER BY id DESC LIMIT ${EVENTS_KEPT}`

export function securityActivity (prisma: PrismaClient) {
  const db = sql(prisma)
  return {
    /** Records an event of user `userId`'s account, from `device`. */
    async record (userId: number, kind: SecurityEventKind, device: Device, detail: string | null = null): Promise<void> {
      await db.rows('security-event-record', RECORD_SQL, [userId, kind, detail, device.ip, device.userAgent])
    },
    /** The account's events, newest first. */
    async list (userId: number): Promise<SecurityEventRow[]> {
      return await db.rows<SecurityEventRow>('security-event-list', LIST_SQL, [userId])
    }
  }
}

export type SecurityActivity = ReturnType<typeof securityActivity>
