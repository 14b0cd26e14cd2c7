/**
 * The outbox (table `outbox`), built once and decorated as `app.outbox`: e-mail to send,
 * written by the change that needs it (in its transaction when it has one), and claimed by
 * the mail sender (./sender.ts) of any replica.
 *
 * A claim is a lease, not a lock held while sending: one statement picks due rows with
 * `FOR UPDATE SKIP LOCKED` (replicas claiming at once take different rows) and moves their
 * next attempt past the lease, so no other replica takes them while this one sends, and no
 * connection is held while an SMTP server is slow. A replica that dies mid-send leaves its
 * rows to be claimed again once the lease ends: delivery is at least once (docs/operations.md,
 * "E-mail"). A delivered row is deleted; a failed one records its error and waits its backoff.
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { sql, type Transaction } from '../../db/sql.js'
import type { PrismaClient } from '../../generated/prisma/client.js'

export interface OutboxRow {
  id: string
  kind: string
  payload: unknown
  /** Attempts started, this one included. */
  attempts: number
  /** Past its expiry: given up rather than sent. */
  expired: boolean
}

const ENQUEUE_SQL = 'INSERT INTO outbox (kind, payload, expires_at) VALUES ($1, $2, now() + $3::int * interval \'1 millisecond\') RETURNING id::text AS id'

const CLAIM_SQL = `UPDATE outbox o SET attempts = o.attempts + 1, next_attempt_at = now() + $2::int * interval '1 millisecond'
  WHERE o.id IN (SELECT id FROM outbox WHERE next_attempt_at <= now() ORDER BY next_attempt_at, id LIMIT $1 FOR UPDATE SKIP LOCKED)
  RETURNING o.id::text AS id, o.kind, o.payload, o.attempts, o.expires_at <= now() AS expired`

const DELIVERED_SQL = 'DELETE FROM outbox WHERE id = $1'

// The next attempt after the backoff, unless the message expires first: then none (NULL).
const FAILED_SQL = `UPDATE outbox SET last_error = left($2, 2000),
  next_attempt_at = CASE WHEN $3::int < 0 OR now() + $3::int * interval '1 millisecond' >= expires_at THEN NULL
                         ELSE now() + $3::int * interval '1 millisecond' END
  WHERE id = $1`

function outbox (prisma: PrismaClient) {
  const db = sql(prisma)
  return {
    /** Writes a message to send (inside `tx` when given), worth sending for `expiresInMs`; its id. */
    async enqueue (kind: string, payload: unknown, expiresInMs: number, tx?: Transaction): Promise<string> {
      const [row] = await db.rows<{ id: string }>('outbox-enqueue', ENQUEUE_SQL, [kind, JSON.stringify(payload), expiresInMs], tx)
      return row!.id
    },

    /** Claims up to `limit` due messages for `leaseMs` (their attempt counted). */
    async claim (limit: number, leaseMs: number): Promise<OutboxRow[]> {
      return await db.rows<OutboxRow>('outbox-claim', CLAIM_SQL, [limit, leaseMs])
    },

    /** The message was accepted by the SMTP server (or needs no sending): it goes. */
    async delivered (id: string): Promise<void> {
      await db.rows('outbox-delivered', DELIVERED_SQL, [id])
    },

    /** Records a failed attempt; the next in `retryInMs`, or none when negative or past the expiry. */
    async failed (id: string, error: string, retryInMs: number): Promise<void> {
      await db.rows('outbox-failed', FAILED_SQL, [id, error, Math.round(retryInMs)])
    }
  }
}

export type Outbox = ReturnType<typeof outbox>

declare module 'fastify' {
  interface FastifyInstance {
    outbox: Outbox
  }
}

export default fp(async function outboxPlugin (app: FastifyInstance) {
  app.decorate('outbox', outbox(app.prisma))
}, { name: 'outbox', fastify: '5.x', dependencies: ['prisma'] })
