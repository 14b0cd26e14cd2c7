/**
 * E-mail through the outbox, against the real service (production settings, its own SMTP
 * sink in this process): in the same run,
 *   1. POST /api/auth/password-reset for MAIL_USERS distinct accounts, 20 at a time, with the
 *      SMTP server up: the requests' p50/p99, and how fast the outbox delivers them (from the
 *      first request to the last message received);
 *   2. the same requests again with the SMTP server down (its port closed): p50/p99, which
 *      must not move (the request writes one outbox row; it never waits for SMTP);
 *   3. the server back: how long until every message of step 2 has arrived (the sender's
 *      backoff: 5 s, doubling), none lost.
 *
 *   npx tsx bench/mail.ts                 200 accounts
 *   MAIL_USERS=50 BENCH_WRITE=0 npx tsx bench/mail.ts
 */
import type { AddressInfo } from 'node:net'
import path from 'node:path'
import { SMTPServer } from 'smtp-server'
import { benchDatabase } from './lib/database.js'
import { describeMachine, formatLoad, machine } from './lib/machine.js'
import { ROOT, startServer } from './lib/processes.js'
import { formatMs, markdownTable, writeSection } from './lib/report.js'
import { serviceEnv } from './lib/service.js'

const USERS = Number(process.env.MAIL_USERS ?? 200)
const WRITE = process.env.BENCH_WRITE !== '0'
const CONCURRENCY = 20

let received = 0
const sink = new SMTPServer({ authOptional: true, disabledCommands: ['STARTTLS', 'AUTH'], logger: false, onData (stream, _session, callback) { stream.resume(); stream.on('end', () => { received++; callback() }) } })
const listen = async (port: number): Promise<number> => await new Promise((resolve) => { sink.listen(port, '127.0.0.1', () => { resolve((sink.server.address() as AddressInfo).port) }) })
const close = async (): Promise<void> => { await new Promise<void>((resolve) => { sink.server.close(() => { resolve() }) }) }

async function until (what: string, done: () => boolean, ms: number): Promise<number> {
  const started = Date.now()
  while (!done()) {
    if (Date.now() - started > ms) throw new Error(`${what}: not within ${ms} ms`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  return Date.now() - started
}

/** Runs `jobs` with CONCURRENCY in flight; the duration of each, ms. */
async function timed (jobs: Array<() => Promise<void>>): Promise<number[]> {
  const durations: number[] = []
  let next = 0
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next < jobs.length) {
      const job = jobs[next++]!
      const started = performance.now()
      await job()
      durations.push(performance.now() - started)
    }
  }))
  return durations
}

const quantile = (values: number[], q: number): number => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(q * values.length))]!

async function post (url: string, body: unknown, expected: number): Promise<void> {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
  await response.arrayBuffer()
  if (response.status !== expected) throw new Error(`${url}: ${response.status}, expected ${expected}`)
}

const database = await benchDatabase()
const port = await listen(0)
const service = await startServer({
  entry: 'src/server.ts',
  // Cost 4: the accounts are made for the bench; hashing is not what it measures, nor load
  // shedding (a busy shared machine delays the event loop past its bound: 503s).
  env: serviceEnv(database.url, { SMTP_URL: `smtp://127.0.0.1:${port}`, BCRYPT_COST: '4', MAX_EVENT_LOOP_DELAY_MS: '0' }),
  readyPath: '/health/live'
})
try {
  const emails = Array.from({ length: USERS }, (_, i) => `mail_${Date.now()}_${i}@example.com`)
  await timed(emails.map((email, i) => async () => { await post(`${service.url}/api/user`, { username: `mail_${Date.now()}_${i}`, email, password: 'correct horse battery staple' }, 201) }))
  await until('the verification e-mails', () => received >= USERS, 120_000)
  const load: number[][] = []

  load.push(machine().load)
  let from = received
  const started = Date.now()
  const up = await timed(emails.map((email) => async () => { await post(`${service.url}/api/auth/password-reset`, { email }, 202) }))
  await until('the reset e-mails, SMTP up', () => received - from >= USERS, 120_000)
  const deliveredMs = Date.now() - started

  load.push(machine().load)
  await close()
  const down = await timed(emails.map((email) => async () => { await post(`${service.url}/api/auth/password-reset`, { email }, 202) }))
  from = received
  await listen(port)
  const recoveryMs = await until('the reset e-mails sent while SMTP was down', () => received - from >= USERS, 300_000)
  await new Promise((resolve) => setTimeout(resolve, 2000))
  const extra = received - from - USERS

  const m = machine()
  const report = [
    `Measured ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC on ${describeMachine(m)}; load average at the start of each phase: ${load.map(formatLoad).join('; ')}.`,
    `Command: \`${process.env.MAIL_USERS === undefined ? '' : `MAIL_USERS=${USERS} `}npx tsx bench/mail.ts\` (${USERS} accounts, ${CONCURRENCY} requests at a time, SMTP without TLS to a sink in the bench process).`,
    '',
    markdownTable(['POST /api/auth/password-reset', 'p50 ms', 'p99 ms', 'delivery'], [
      ['SMTP up', formatMs(quantile(up, 0.5)), formatMs(quantile(up, 0.99)), `${USERS} messages ${(deliveredMs / 1000).toFixed(1)} s after the first request: ${(USERS / (deliveredMs / 1000)).toFixed(0)} a second`],
      ['SMTP down (port closed)', formatMs(quantile(down, 0.5)), formatMs(quantile(down, 0.99)), `all ${USERS} arrived ${(recoveryMs / 1000).toFixed(1)} s after the server came back (the sender's backoff); ${extra} extra`]
    ])
  ].join('\n')
  console.log(`\n${report}`)
  if (WRITE) writeSection(path.join(ROOT, 'bench', 'README.md'), 'mail', report)
} finally {
  await service.stop()
  sink.close()
  await database.drop()
}
