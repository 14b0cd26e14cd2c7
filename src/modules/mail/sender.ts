/**
 * `app.mail`: the mail sender. Modules `define` how each kind of outbox message is prepared
 * (rendered, with whatever it needs created first) and `enqueue` messages through the
 * outbox; the sender claims due messages (./outbox.ts), prepares and sends them, and records
 * each failure with a growing backoff. It runs beside the requests, never in them: an SMTP
 * server that is down, slow or refusing delays e-mail, not answers.
 *
 * It wakes when this process enqueues a message and every POLL_MS otherwise (messages of
 * other replicas, retries, leases of a replica that died).
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { Transaction } from '../../db/sql.js'
import type { OutboxRow } from './outbox.js'
import { localTransport, smtpTransport, type MailTransport, type Message } from './transport.js'

/** A message ready to send, and what to undo when sending it fails. */
export interface Prepared {
  message: Message
  /** Runs after a failed attempt (a token created for this attempt's link is removed). */
  undo?: () => Promise<void>
}

/** Renders a message of one kind from its payload; null when there is nothing to send. */
export type Prepare = (payload: unknown) => Promise<Prepared | null>

/** How often the outbox is looked at without a wake-up, ms. */
export const POLL_MS = 2000
/** Messages claimed at a time. */
export const BATCH = 10
/** How long a claimed message is this replica's, ms: longer than an attempt can take (transport.ts). */
export const LEASE_MS = 120_000
/** The first retry's wait, ms; each further one doubles it, up to MAX_BACKOFF_MS. */
export const RETRY_BASE_MS = 5000
export const MAX_BACKOFF_MS = 600_000

export interface MailSenderOptions {
  smtpUrl?: string
  /** MAIL_FROM. */
  from: string
  /** MAIL_DIR. */
  dir: string
  /** Tests: a shorter poll and backoff. */
  pollMs?: number
  retryBaseMs?: number
  /** Tests that send no e-mail: messages are written to the outbox and stay there. */
  paused?: boolean
}

export interface Mail {
  /** How messages of `kind` are prepared when they are sent. */
  define: (kind: string, prepare: Prepare) => void
  /** Writes a message to the outbox (inside `tx` when given: call `wake` after it commits). */
  enqueue: (kind: string, payload: unknown, expiresInMs: number, tx?: Transaction) => Promise<void>
  /** Looks at the outbox now. */
  wake: () => void
  /** Resolves when the sender has nothing in hand (tests). */
  idle: () => Promise<void>
}

declare module 'fastify' {
  interface FastifyInstance {
    mail: Mail
  }
}

/** The message-id domain: the From address's. */
function domainOf (from: string): string {
  return /@([^>\s]+)>?\s*$/.exec(from)?.[1] ?? 'localhost'
}

async function mailSender (app: FastifyInstance, options: MailSenderOptions): Promise<void> {
  const log = app.log.child({ module: 'mail' })
  const transport: MailTransport = options.smtpUrl === undefined ? localTransport(options.dir, log) : smtpTransport(options.smtpUrl)
  const kinds = new Map<string, Prepare>()
  const pollMs = options.pollMs ?? POLL_MS
  const retryBaseMs = options.retryBaseMs ?? RETRY_BASE_MS
  const domain = domainOf(options.from)
  let running: Promise<void> | null = null
  let again = false
  let closing = false
  let failing = false

  async function deliver (row: OutboxRow): Promise<void> {
    const backoff = Math.min(MAX_BACKOFF_MS, retryBaseMs * 2 ** (row.attempts - 1))
    if (row.expired) {
      log.error({ outboxId: row.id, kind: row.kind, attempts: row.attempts }, 'E-mail given up: it expired before it could be delivered')
      await app.outbox.failed(row.id, 'expired before it could be delivered', -1).catch(() => {})
      return
    }
    const prepare = kinds.get(row.kind)
    if (prepare === undefined) {
      // A replica of an older version, during a rolling deployment: a newer one will send it.
      log.warn({ outboxId: row.id, kind: row.kind }, 'E-mail of a kind this replica does not know; left to another')
      await app.outbox.failed(row.id, `no sender for kind ${row.kind} in this replica`, backoff).catch(() => {})
      return
    }
    let prepared: Prepared | null = null
    let sent = false
    try {
      prepared = await prepare(row.payload)
      if (prepared !== null) {
        await transport.send({
          ...prepared.message,
          from: options.from,
          // The same id on every attempt: a reader's client can tell a repeat (at-least-once).
          messageId: `<outbox.${row.id}@${domain}>`,
          headers: { 'Auto-Submitted': 'auto-generated' }
        })
        sent = true
      }
      await app.outbox.delivered(row.id)
      if (sent) log.info({ outboxId: row.id, kind: row.kind, attempts: row.attempts }, 'E-mail delivered')
    } catch (error) {
      const message = (error as Error).message
      if (sent) {
        // Delivered, but the row stays: it is sent again after the backoff (at least once),
        // and the link already sent keeps working.
        log.warn({ outboxId: row.id, kind: row.kind, reason: message }, 'E-mail delivered, but not marked so; it will be sent again')
      } else {
        log.warn({ outboxId: row.id, kind: row.kind, attempts: row.attempts, retryInMs: backoff, reason: message }, 'E-mail not delivered; retrying later')
        await prepared?.undo?.().catch(() => {})
      }
      await app.outbox.failed(row.id, message, backoff).catch(() => {})
    }
  }

  async function drain (): Promise<void> {
    for (;;) {
      again = false
      let rows: OutboxRow[]
      try {
        rows = await app.outbox.claim(BATCH, LEASE_MS)
        if (failing) log.info('The outbox is readable again')
        failing = false
      } catch (error) {
        // Once per outage: the database being down is reported by the requests too.
        if (!failing) log.warn({ reason: (error as Error).message }, 'The outbox cannot be read; retrying')
        failing = true
        return
      }
      await Promise.all(rows.map(deliver))
      // A full batch may have more behind it; a wake-up during the batch asked for another look.
      if (rows.length < BATCH && !again) return
      if (closing) return
    }
  }

  function wake (): void {
    if (closing || options.paused === true) return
    if (running !== null) { again = true; return }
    running = drain().catch((error: unknown) => { log.error({ err: error }, 'The mail sender failed') }).finally(() => { running = null })
  }

  const timer = setInterval(wake, pollMs)
  timer.unref()

  app.decorate('mail', {
    define (kind, prepare) { kinds.set(kind, prepare) },
    async enqueue (kind, payload, expiresInMs, tx) {
      await app.outbox.enqueue(kind, payload, expiresInMs, tx)
      if (tx === undefined) wake()
    },
    wake,
    async idle () {
      for (let current = running; current !== null; current = running) await current
    }
  } satisfies Mail)

  app.addHook('onReady', async () => { wake() })
  app.addHook('onClose', async () => {
    closing = true
    clearInterval(timer)
    if (running !== null) await running
    transport.close()
  })
}

export default fp(mailSender, { name: 'mail-sender', fastify: '5.x', dependencies: ['outbox'] })
