/**
 * The mail sender's limits, from the outside, against real SMTP servers:
 * - one address gets at most PER_ADDRESS e-mails a window, whatever their kind and whoever
 *   asks: a hostile sequence (registrations with the address, deleted; changes of other
 *   accounts to it; resends) delivers only that many, the rest is dropped (not kept
 *   for later) and logged without the address; two replicas sharing Redis share the count;
 * - an SMTP server that trickles (one byte at a time, each restarting the idle timeout) ends
 *   its attempt at the deadline, and holds no other message meanwhile (a raw node:net server).
 */
import { once } from 'node:events'
import net, { type AddressInfo, type Socket } from 'node:net'
import { PassThrough } from 'node:stream'
import t from 'tap'
import { PER_ADDRESS } from '../src/modules/mail/sender.js'
import { build, injectAs, registerAndLogin, type TestApp } from './helpers/build.js'
import { sqlClient } from './helpers/database.js'
import { testRedis } from './helpers/redis.js'
import { startSmtpSink, type SmtpSink } from './helpers/smtp-sink.js'

const PUBLIC_URL = 'https://shop.example.com'
const FAST = { mail: { pollMs: 100, retryBaseMs: 100 } }
const NOTE = 'test-note'

function defineNote (target: TestApp): void {
  target.mail.define(NOTE, async (payload) => {
    const { n, to } = payload as { n: number, to: string }
    return { message: { to, subject: `note ${n}`, text: `note ${n}`, html: `<p>note ${n}</p>` } }
  })
}

async function until (what: string, check: () => Promise<boolean> | boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!await check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

let sink: SmtpSink

t.before(async () => {
  sink = await startSmtpSink(t)
})

const to = (sinkRow: SmtpSink['received'][number]): string => (Array.isArray(sinkRow.mail.to) ? '' : sinkRow.mail.to?.value[0]?.address?.toLowerCase() ?? '')

t.test('mail bombing one address with no account: every kind together delivers at most PER_ADDRESS, the rest dropped and logged', async (t) => {
  const lines: string[] = []
  const logStream = new PassThrough()
  logStream.on('data', (chunk: Buffer) => lines.push(...chunk.toString().split('\n').filter(Boolean)))
  const app = await build(t, { env: { SMTP_URL: sink.url, PUBLIC_URL, LOG_LEVEL: 'warn' }, logStream, tuning: FAST })
  const db = await sqlClient(t, app.databaseUrl)
  // Each step waits for its e-mail to leave: the sender has every chance to deliver it.
  const settled = async (): Promise<void> => {
    await until('an empty outbox', async () => (await db.query('SELECT count(*)::int AS n FROM outbox')).rows[0].n === 0)
    await app.mail.idle()
  }
  const victim = `victim.${Date.now()}@example.com`
  const before = sink.received.length
  const answers: number[] = []

  // Three registrations with the address, each deleted once its verification e-mail is out.
  for (let i = 0; i < 3; i++) {
    const squatter = await registerAndLogin(app, { email: victim })
    await settled()
    answers.push((await injectAs(app, squatter, { method: 'DELETE', url: `/api/user/${squatter.id}`, payload: { password: squatter.password } })).statusCode)
  }
  // Three accounts asking to move to the address.
  const attackers = await Promise.all([0, 1, 2].map(async () => await registerAndLogin(app)))
  await settled()
  for (const attacker of attackers) {
    answers.push((await injectAs(app, attacker, { method: 'PATCH', url: `/api/user/${attacker.id}`, payload: { email: victim, currentPassword: attacker.password } })).statusCode)
    await settled()
  }
  // Three resends of the pending address's link.
  for (let i = 0; i < 3; i++) {
    answers.push((await injectAs(app, attackers[0]!, { method: 'POST', url: '/api/auth/verify-email/resend' })).statusCode)
    await settled()
  }
  t.same(answers, [204, 204, 204, 200, 200, 200, 202, 202, 202], 'every request answered as usual: the limit gives nothing away')

  const toVictim = sink.received.slice(before).filter((r) => to(r) === victim)
  t.equal(toVictim.length, PER_ADDRESS.max, `nine asked for, ${PER_ADDRESS.max} delivered`)
  t.equal((await db.query('SELECT count(*)::int AS n FROM outbox')).rows[0].n, 0, 'the rest dropped, not kept for later')
  const dropped = lines.filter((line) => line.includes('E-mail dropped'))
  t.equal(dropped.length, 9 - PER_ADDRESS.max, 'each drop logged')
  t.notOk(dropped.some((line) => line.includes(victim)), 'without the address')
  t.same(new Set(dropped.map((line) => JSON.parse(line).kind)), new Set(['verify-email']))
  for (const attacker of attackers) {
    t.ok(sink.received.slice(before).some((r) => to(r) === attacker.email.toLowerCase() && (r.mail.subject ?? '').startsWith('A change of your e-mail')), 'other addresses still get theirs')
  }
})

t.test('two replicas sharing Redis share the count', async (t) => {
  const redis = await testRedis(t)
  if (redis === undefined) return
  const env = { SMTP_URL: sink.url, PUBLIC_URL, REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix }
  // Separate databases: each replica sends its own messages, only Redis is shared.
  const replicas = [await build(t, { env, tuning: FAST }), await build(t, { env, tuning: FAST })]
  replicas.forEach(defineNote)
  const address = `shared.${Date.now()}@example.com`
  const before = sink.received.length
  for (let n = 0; n < 8; n++) {
    await replicas[n % 2]!.mail.enqueue(NOTE, { n, to: n % 3 === 0 ? address.toUpperCase() : address }, 60_000)
  }
  for (const replica of replicas) {
    const db = await sqlClient(t, replica.databaseUrl)
    await until('an empty outbox', async () => (await db.query('SELECT count(*)::int AS n FROM outbox')).rows[0].n === 0)
    await replica.mail.idle()
  }
  const delivered = sink.received.slice(before).filter((r) => to(r) === address)
  t.equal(delivered.length, PER_ADDRESS.max, 'four asked of each, the limit of one address delivered in all')
  t.ok(delivered.some((r) => /note [0246]/.test(r.mail.subject ?? '')) && delivered.some((r) => /note [1357]/.test(r.mail.subject ?? '')), 'by both replicas')
  t.ok((await redis.client.keys(`${redis.prefix}attempts:mail-recipients:*`)).length === 1, 'one count in Redis, whatever the case of the address')
})

/**
 * A minimal SMTP server over node:net: it answers at once, except to RCPT TO an address that
 * starts with `slow`, where it sends its reply one byte at a time, every `byteEveryMs`, never
 * ending the line.
 */
async function tricklingServer (t: { teardown: (fn: () => unknown) => void }, byteEveryMs: number) {
  const received: Array<{ to: string, at: number }> = []
  const trickling = new Set<Socket>()
  const closed: Array<{ at: number, startedAt: number }> = []
  const server = net.createServer((socket) => {
    let rcpt = ''
    let inData = false
    let buffer = ''
    let timer: NodeJS.Timeout | undefined
    socket.on('error', () => {})
    socket.on('close', () => {
      if (timer !== undefined) {
        clearInterval(timer)
        trickling.delete(socket)
        closed.push({ at: Date.now(), startedAt: (socket as Socket & { startedAt: number }).startedAt })
      }
    })
    socket.write('220 trickle.test ESMTP\r\n')
    socket.on('data', (chunk: Buffer) => {
      buffer += chunk.toString('latin1')
      for (let end = buffer.indexOf('\r\n'); end >= 0; end = buffer.indexOf('\r\n')) {
        const line = buffer.slice(0, end)
        buffer = buffer.slice(end + 2)
        if (inData) {
          if (line === '.') { inData = false; received.push({ to: rcpt, at: Date.now() }); socket.write('250 queued\r\n') }
          continue
        }
        const command = line.slice(0, 4).toUpperCase()
        if (command === 'EHLO' || command === 'HELO') socket.write('250 trickle.test\r\n')
        else if (command === 'MAIL') socket.write('250 ok\r\n')
        else if (command === 'RCPT') {
          rcpt = /<([^>]*)>/.exec(line)?.[1] ?? ''
          if (rcpt.startsWith('slow')) {
            trickling.add(socket);
            (socket as Socket & { startedAt: number }).startedAt = Date.now()
            const reply = '250 ' + 'a'.repeat(100_000)
            let i = 0
            timer = setInterval(() => { socket.write(reply[i++ % reply.length]!) }, byteEveryMs)
          } else socket.write('250 ok\r\n')
        } else if (command === 'DATA') { inData = true; socket.write('354 go on\r\n') } else if (command === 'QUIT') { socket.end('221 bye\r\n') } else socket.write('250 ok\r\n')
      }
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(async () => {
    for (const socket of trickling) socket.destroy()
    await new Promise((resolve) => server.close(resolve))
  })
  return { url: `smtp://127.0.0.1:${(server.address() as AddressInfo).port}`, received, trickling, closed }
}

t.test('an SMTP server that trickles: the attempt ends at its deadline, and another message is sent meanwhile', async (t) => {
  const deadlineMs = 2000
  const smtp = await tricklingServer(t, 100)
  const app = await build(t, { env: { SMTP_URL: smtp.url, PUBLIC_URL }, tuning: { mail: { pollMs: 100, retryBaseMs: 60_000, sendDeadlineMs: deadlineMs } } })
  defineNote(app)
  const db = await sqlClient(t, app.databaseUrl)

  await app.mail.enqueue(NOTE, { n: 1, to: 'slow@example.com' }, 600_000)
  await until('the slow reply to start', () => smtp.trickling.size === 1)
  const queuedAt = Date.now()
  await app.mail.enqueue(NOTE, { n: 2, to: 'fast@example.com' }, 600_000)
  await until('the other message delivered', () => smtp.received.some((r) => r.to === 'fast@example.com'), deadlineMs)
  t.comment(`the other message delivered ${Date.now() - queuedAt} ms after it was queued, while the slow one trickles`)
  t.equal(smtp.trickling.size, 1, 'delivered while the slow attempt was still open')

  await until('the slow attempt closed', () => smtp.closed.length === 1, deadlineMs + 5000)
  const took = smtp.closed[0]!.at - smtp.closed[0]!.startedAt
  t.comment(`the trickling attempt closed after ${took} ms of trickle (deadline ${deadlineMs} ms for the whole attempt)`)
  t.ok(took <= deadlineMs + 500, 'closed by the deadline, though each byte restarts the idle timeout')
  await until('the failure recorded', async () => (await db.query('SELECT count(*)::int AS n FROM outbox WHERE last_error IS NOT NULL')).rows[0].n === 1)
  const [row] = (await db.query('SELECT last_error AS "lastError", next_attempt_at > now() AS later FROM outbox')).rows
  t.match(row.lastError, /deadline/, 'the reason recorded')
  t.ok(row.later, 'retried later, as any failure')
  await db.query('DELETE FROM outbox')
})
