/**
 * The outbox and its sender against a real SMTP server (test/helpers/smtp-sink.ts): an SMTP
 * server that is down, slow or refusing neither fails nor slows the requests, and loses nothing
 * (every message is delivered, counted, once it is back); failures are recorded with their
 * error and a backoff; two replicas on one database deliver each message once; a replica
 * that dies holding messages leaves them to the others after the lease; a message past its
 * expiry is given up and recorded. Without SMTP_URL each message goes to MAIL_DIR and the log.
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { PassThrough } from 'node:stream'
import { simpleParser } from 'mailparser'
import t from 'tap'
import { build, registerAndLogin, type TestApp } from './helpers/build.js'
import { sqlClient } from './helpers/database.js'
import { startSmtpSink, type SmtpSink } from './helpers/smtp-sink.js'

const PUBLIC_URL = 'https://shop.example.com'
const FAST = { mail: { pollMs: 100, retryBaseMs: 100 } }
const NOTE = 'test-note'

let sink: SmtpSink
let app: TestApp

/** A kind of message of the tests' own: no user needed, one e-mail per enqueue. */
function defineNote (target: TestApp): void {
  target.mail.define(NOTE, async (payload) => {
    const { n, to } = payload as { n: number, to: string }
    return { message: { to, subject: `note ${n}`, text: `note ${n}`, html: `<p>note ${n}</p>` } }
  })
}

t.before(async () => {
  sink = await startSmtpSink(t)
  app = await build(t, { env: { SMTP_URL: sink.url, PUBLIC_URL }, tuning: FAST })
  defineNote(app)
})

async function until (what: string, check: () => Promise<boolean> | boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!await check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

const RESET = 'Reset your password'
const resets = (from = 0) => sink.received.slice(from).filter((r) => r.mail.subject === RESET)

/** Waits until the outbox is empty (the registrations' verification e-mails delivered). */
async function settled (): Promise<void> {
  const db = await sqlClient(t, app.databaseUrl)
  await until('an empty outbox', async () => (await db.query('SELECT count(*)::int AS n FROM outbox')).rows[0].n === 0)
}

function percentile (values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!
}

async function timedResets (emails: string[]): Promise<number[]> {
  const times: number[] = []
  for (const email of emails) {
    const start = process.hrtime.bigint()
    const res = await app.inject({ method: 'POST', url: '/api/auth/password-reset', payload: { email } })
    times.push(Number(process.hrtime.bigint() - start) / 1e6)
    if (res.statusCode !== 202) throw new Error(`${res.statusCode} ${res.body}`)
  }
  return times
}

t.test('SMTP down: requests stay 202 and fast; failures are recorded; once it is back every message arrives, once', async (t) => {
  const users = await Promise.all(Array.from({ length: 10 }, async () => await registerAndLogin(app)))
  const up = await timedResets(users.map((u) => u.email))
  await until('the first ten delivered', () => resets().length >= 10)
  await settled()
  const db = await sqlClient(t, app.databaseUrl)

  await sink.stop()
  const before = sink.received.length
  const down = await timedResets(users.map((u) => u.email))
  t.comment(`reset request latency ms, SMTP up: p50 ${percentile(up, 0.5).toFixed(2)} p99 ${percentile(up, 0.99).toFixed(2)}; SMTP down: p50 ${percentile(down, 0.5).toFixed(2)} p99 ${percentile(down, 0.99).toFixed(2)}`)
  t.ok(percentile(down, 0.99) < 1000, 'no request waited on the SMTP server')
  t.ok(percentile(down, 0.5) < Math.max(50, 5 * percentile(up, 0.5)), 'the median is about as with SMTP up')

  await until('failed attempts recorded', async () => (await db.query('SELECT count(*)::int AS n FROM outbox WHERE attempts >= 2 AND last_error IS NOT NULL')).rows[0].n === 10)
  const failed = await db.query('SELECT attempts, last_error AS "lastError", next_attempt_at IS NOT NULL AS later FROM outbox')
  t.equal(failed.rowCount, 10, 'all ten kept')
  t.match(failed.rows[0].lastError, /ECONNREFUSED|connect/i, 'the error recorded')
  t.ok(failed.rows.every((row: { later: boolean }) => row.later), 'each has a next attempt (none given up)')

  await sink.start()
  await until('the ten queued while down delivered', () => sink.received.length >= before + 10)
  await new Promise((resolve) => setTimeout(resolve, 500))
  const delivered = sink.received.slice(before)
  t.equal(resets(before).length, 10, 'all reset e-mails')
  t.equal(delivered.length, 10, 'ten, no more')
  t.same(new Set(delivered.map((r) => (Array.isArray(r.mail.to) ? '' : r.mail.to?.text))), new Set(users.map((u) => u.email)), 'one to each address')
  t.equal((await db.query('SELECT count(*)::int AS n FROM outbox')).rows[0].n, 0, 'the outbox is empty')
  t.equal((await db.query('SELECT count(*)::int AS n FROM password_reset_tokens WHERE user_id = ANY($1)', [users.map((u) => u.id)])).rows[0].n, 20,
    'one token per e-mail delivered: the failed attempts left none behind')
})

t.test('SMTP slow (each message answered after 1.5 s): requests stay fast, every message arrives', async (t) => {
  const users = await Promise.all(Array.from({ length: 5 }, async () => await registerAndLogin(app)))
  await settled()
  sink.delay(1500)
  t.teardown(() => { sink.delay(0) })
  const before = sink.received.length
  const times = await timedResets(users.map((u) => u.email))
  t.comment(`reset request latency ms, SMTP slow: p50 ${percentile(times, 0.5).toFixed(2)} max ${Math.max(...times).toFixed(2)}`)
  t.ok(Math.max(...times) < 1000, 'no request waited for the slow server')
  await until('five delivered', () => sink.received.length >= before + 5)
  t.equal(sink.received.length, before + 5)
})

t.test('SMTP refusing (4xx, then 5xx): retried with backoff, each failure recorded, delivered once accepted', async (t) => {
  await settled()
  const db = await sqlClient(t, app.databaseUrl)
  for (const code of [451, 554]) {
    sink.refuse(code)
    const refusals = sink.refusals
    const before = sink.received.length
    await app.mail.enqueue(NOTE, { n: code, to: 'refused@example.com' }, 60_000)
    await until(`three refusals of ${code}`, () => sink.refusals >= refusals + 3)
    const [row] = (await db.query('SELECT attempts, last_error AS "lastError" FROM outbox')).rows
    t.ok(row.attempts >= 3, `${code}: attempts counted (${row.attempts})`)
    t.match(row.lastError, new RegExp(String(code)), `${code}: the server's reply recorded`)
    sink.refuse(null)
    await until(`the ${code} message delivered`, () => sink.received.length >= before + 1)
    await app.mail.idle()
    t.equal(sink.received.at(-1)!.mail.subject, `note ${code}`)
    t.equal((await db.query('SELECT count(*)::int AS n FROM outbox')).rows[0].n, 0, `${code}: delivered, gone from the outbox`)
  }
})

t.test('a message past its expiry is given up, and recorded', async (t) => {
  const db = await sqlClient(t, app.databaseUrl)
  sink.refuse(451)
  t.teardown(() => { sink.refuse(null) })
  await app.mail.enqueue(NOTE, { n: 0, to: 'late@example.com' }, 300)
  await until('given up', async () => (await db.query('SELECT count(*)::int AS n FROM outbox WHERE next_attempt_at IS NULL')).rows[0].n === 1)
  const [row] = (await db.query('SELECT attempts, last_error AS "lastError" FROM outbox')).rows
  t.ok(row.attempts >= 1)
  t.ok(row.lastError, `recorded: ${row.lastError}`)
  await db.query('DELETE FROM outbox')
})

t.test('a kind this replica does not know (an older version in a rolling deployment) is left for another, not given up', async (t) => {
  const db = await sqlClient(t, app.databaseUrl)
  await db.query('INSERT INTO outbox (kind, payload, expires_at) VALUES ($1, $2, now() + interval \'1 minute\')', ['from-the-future', '{}'])
  await until('an attempt', async () => (await db.query('SELECT count(*)::int AS n FROM outbox WHERE attempts >= 1 AND last_error IS NOT NULL')).rows[0].n === 1)
  const [row] = (await db.query('SELECT last_error AS "lastError", next_attempt_at IS NOT NULL AS later FROM outbox')).rows
  t.match(row.lastError, /no sender for kind from-the-future/)
  t.ok(row.later, 'another attempt is planned')
  await db.query('DELETE FROM outbox')
})

t.test('two replicas on one database: each message delivered once', async (t) => {
  const other = await build(t, { databaseUrl: app.databaseUrl, env: { SMTP_URL: sink.url, PUBLIC_URL }, tuning: FAST })
  defineNote(other)
  const before = sink.received.length
  const count = 60
  const start = Date.now()
  await Promise.all(Array.from({ length: count }, async (_, n) => await (n % 2 === 0 ? app : other).mail.enqueue(NOTE, { n, to: `replica-${n}@example.com` }, 60_000)))
  await until('all delivered', () => sink.received.length >= before + count)
  const seconds = (Date.now() - start) / 1000
  t.comment(`outbox throughput: ${count} messages in ${seconds.toFixed(2)} s, ${(count / seconds).toFixed(0)}/s to the sink, two replicas`)
  await new Promise((resolve) => setTimeout(resolve, 500))
  await Promise.all([app.mail.idle(), other.mail.idle()])
  const delivered = sink.received.slice(before)
  t.equal(delivered.length, count, 'as many as enqueued')
  t.equal(new Set(delivered.map((r) => r.mail.messageId)).size, count, 'no message twice')
})

t.test('a replica that dies holding messages: another delivers them once the lease ends', async (t) => {
  const db = await sqlClient(t, app.databaseUrl)
  const before = sink.received.length
  // A message as a replica's claim leaves it (its attempt counted, the next one at the end of an
  // 800 ms lease), written in one statement: the running sender cannot take it first. Then
  // that replica dies.
  await db.query('INSERT INTO outbox (kind, payload, expires_at, attempts, next_attempt_at) VALUES ($1, $2, now() + interval \'1 minute\', 1, now() + interval \'800 milliseconds\')', [NOTE, JSON.stringify({ n: 1, to: 'orphan@example.com' })])
  t.same(await app.outbox.claim(10, 800), [], 'no other replica can claim it during the lease')
  await new Promise((resolve) => setTimeout(resolve, 400))
  t.equal(sink.received.length, before, 'nobody else sends it during the lease')
  await until('delivered after the lease', () => sink.received.length >= before + 1)
  t.equal(sink.received.at(-1)!.mail.subject, 'note 1')
})

t.test('without SMTP_URL (development): each message to MAIL_DIR as .eml and to the log, the link included', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'mail-'))
  t.teardown(async () => { await rm(dir, { recursive: true, force: true }) })
  const lines: string[] = []
  const logStream = new PassThrough()
  logStream.on('data', (chunk: Buffer) => lines.push(...chunk.toString().split('\n').filter(Boolean)))
  const local = await build(t, { env: { MAIL_DIR: dir, LOG_LEVEL: 'info', PUBLIC_URL: 'http://localhost:3000' }, logStream, tuning: FAST })
  const user = await registerAndLogin(local)
  await until('the verification e-mail', async () => (await readdir(dir)).length === 1)
  await rm(path.join(dir, (await readdir(dir))[0]!))
  t.equal((await local.inject({ method: 'POST', url: '/api/auth/password-reset', payload: { email: user.email } })).statusCode, 202)
  await until('a file', async () => (await readdir(dir)).length === 1)
  const [file] = await readdir(dir)
  t.match(file, /\.eml$/)
  const mail = await simpleParser(await readFile(path.join(dir, file!)))
  t.equal(mail.headers.get('auto-submitted'), 'auto-generated')
  t.equal(mail.subject, 'Reset your password')
  t.match(String(mail.html), /<a href="http:\/\/localhost:3000\/reset-password#token=/, 'an HTML part')
  const link = /http:\/\/localhost:3000\/reset-password#token=[A-Za-z0-9_-]+/.exec(mail.text ?? '')?.[0]
  t.ok(link, 'the link is in the text part')
  t.ok(lines.some((line) => line.includes(link!)), 'and in the log')
  const token = link!.split('#token=')[1]!
  t.equal((await local.inject({ method: 'POST', url: '/api/auth/password-reset/confirm', payload: { token, password: 'a new password' } })).statusCode, 204, 'the link works')
})
