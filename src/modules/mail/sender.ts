/**
 * `app.mail`: the mail sender. Modules `define` how each kind of outbox message is prepared
 * (rendered, with whatever it needs created first) and `enqueue` messages through the
 * outbox; the sender claims due messages (./outbox.ts), prepares and sends them, and records
 * each failure with a growing backoff. It runs beside the requests, never in them: an SMTP
 * server that is down, slow or refusing delays e-mail, not answers.
 *
 * Up to CONCURRENCY messages are in hand at once, each on its own connection and each
 * claimed as a place frees up: a message whose server is slow holds its own place only,
 * and for SEND_DEADLINE_MS at most (its connection is then closed and the attempt failed).
 *
 * Every message, whatever its kind, is counted against its recipient's address once it is
 * prepared (the address is known only then): past PER_ADDRESS in a window (shared by the
 * replicas through the AttemptStore, Redis when configured) it is dropped and logged, so a
 * flood of requests naming one address cannot flood that mailbox (docs/operations.md, "E-mail").
 *
 * It wakes when this process enqueues a message and every POLL_MS otherwise (messages of
 * other replicas, retries, leases of a replica that died).
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { MemoryAttemptStore, type AttemptStore, type Reservation } from '../../lib/attempts.js'
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
/** Messages in hand at once (claimed, being prepared or sent). */
export const CONCURRENCY = 10
/** The most one attempt may take, connecting to the server's last reply, ms. */
export const SEND_DEADLINE_MS = 40_000
/** How long a claimed message is this replica's, ms: longer than an attempt can take. */
export const LEASE_MS = 120_000
/**
 * E-mails one address may receive per window, all kinds together: a user's own busy hour
 * (sign-up, a resend, a reset, notices of their changes) fits; a flood does not.
 */
export const PER_ADDRESS = { max: 5, timeWindow: 3_600_000 }
/** The first retry's wait, ms; each further one doubles it, up to MAX_BACKOFF_MS. */
export const RETRY_BASE_MS = 5000
export const MAX_BACKOFF_MS = 600_000

export interface MailSenderOptions {
  smtpUrl?: string
  /** MAIL_FROM. */
  from: string
  /** MAIL_DIR. */
  dir: string
  /** Where the per-address counts live (shared by the replicas when in Redis). */
  store?: AttemptStore
  /** Tests: a shorter poll, backoff, deadline, and another per-address limit. */
  pollMs?: number
  retryBaseMs?: number
  sendDeadlineMs?: number
  perAddress?: { max: number, timeWindow: number }
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
  /** Resolves when the sender has nothing in hand (tests, closing). */
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
  const sendDeadlineMs = Math.min(options.sendDeadlineMs ?? SEND_DEADLINE_MS, LEASE_MS / 2)
  const perAddress = options.perAddress ?? PER_ADDRESS
  const store = options.store ?? new MemoryAttemptStore()
  const domain = domainOf(options.from)
  const inHand = new Set<Promise<void>>()
  let running: Promise<void> | null = null
  let again = false
  let closing = false
  let failing = false
  /** The last claim filled every free place: more may be due. */
  let more = false

  /** Counts a message to `to`; false when the address has had its share of this window. */
  async function allowance (to: string): Promise<Reservation | null> {
    const result = await store.reserve(`to:${to.trim().toLowerCase()}`, perAddress.max, perAddress.timeWindow)
    return result.allowed ? result.reservation : null
  }

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
    let reservation: Reservation | null = null
    let sent = false
    try {
      prepared = await prepare(row.payload)
      if (prepared !== null) {
        reservation = await allowance(prepared.message.to)
        if (reservation === null) {
          // Dropped, not delayed: a flood kept for later would still arrive, only slower.
          // The address is not logged (personal data); the kind and id find the row's story.
          log.warn({ outboxId: row.id, kind: row.kind, perAddress }, 'E-mail dropped: its address has received the most e-mails allowed per window')
          await prepared.undo?.().catch(() => {})
          await app.outbox.delivered(row.id)
          return
        }
        await transport.send({
          ...prepared.message,
          from: options.from,
          // The same id on every attempt: a reader's client can tell a repeat (at-least-once).
          messageId: `<outbox.${row.id}@${domain}>`,
          headers: { 'Auto-Submitted': 'auto-generated' }
        }, AbortSignal.timeout(sendDeadlineMs))
        sent = true
      }
      await app.outbox.delivered(row.id)
      if (sent) log.info({ outboxId: row.id, kind: row.kind, attempts: row.attempts }, 'E-mail delivered')
    } catch (error) {
      const message = (error as Error).name === 'TimeoutError' || (error as Error).name === 'AbortError'
        ? `no answer within the attempt's deadline (${sendDeadlineMs} ms)`
        : (error as Error).message
      if (sent) {
        // Delivered, but the row stays: it is sent again after the backoff (at least once),
        // and the link already sent keeps working.
        log.warn({ outboxId: row.id, kind: row.kind, reason: message }, 'E-mail delivered, but not marked so; it will be sent again')
      } else {
        log.warn({ outboxId: row.id, kind: row.kind, attempts: row.attempts, retryInMs: backoff, reason: message }, 'E-mail not delivered; retrying later')
        await prepared?.undo?.().catch(() => {})
        // Only what reaches the address counts against it.
        if (reservation !== null) await Promise.resolve(store.release(reservation)).catch(() => {})
      }
      await app.outbox.failed(row.id, message, backoff).catch(() => {})
    }
  }

  function hold (row: OutboxRow): void {
    const delivery: Promise<void> = deliver(row)
      .catch((error: unknown) => { log.error({ err: error, outboxId: row.id }, 'The mail sender failed') })
      .finally(() => {
        inHand.delete(delivery)
        // A place is free: take the next due message now rather than at the next poll.
        if (more) wake()
      })
    inHand.add(delivery)
  }

  async function drain (): Promise<void> {
    for (;;) {
      again = false
      const room = CONCURRENCY - inHand.size
      // Every place is taken: the first to free up wakes the sender again.
      if (room <= 0) { more = true; return }
      let rows: OutboxRow[]
      try {
        rows = await app.outbox.claim(room, LEASE_MS)
        if (failing) log.info('The outbox is readable again')
        failing = false
      } catch (error) {
        // Once per outage: the database being down is reported by the requests too.
        if (!failing) log.warn({ reason: (error as Error).message }, 'The outbox cannot be read; retrying')
        failing = true
        return
      }
      more = rows.length === room
      for (const row of rows) hold(row)
      // A wake-up during the claim asked for another look.
      if (!more && !again) return
      if (closing) return
    }
  }

  function wake (): void {
    if (closing || options.paused === true) return
    if (running !== null) { again = true; return }
    running = drain().catch((error: unknown) => { log.error({ err: error }, 'The mail sender failed') }).finally(() => { running = null })
  }

  async function idle (): Promise<void> {
    // A delivery that ends may start a drain, and a drain deliveries: until neither is left.
    for (let busy = true; busy; busy = running !== null || inHand.size > 0) {
      if (running !== null) await running
      await Promise.all([...inHand])
    }
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
    idle
  } satisfies Mail)

  app.addHook('onReady', async () => { wake() })
  app.addHook('onClose', async () => {
    closing = true
    clearInterval(timer)
    // Bounded: each attempt ends by its deadline.
    await idle()
    transport.close()
  })
}

export default fp(mailSender, { name: 'mail-sender', fastify: '5.x', dependencies: ['outbox'] })
