/**
 * A database that hangs instead of refusing: requests answer 503 in
 * problem details within seconds instead of waiting forever, `/health/ready` answers
 * within 2 s, and its 503 is logged as a warning without a stack trace.
 *
 * - Server side: another connection holds ACCESS EXCLUSIVE locks on every table, so each
 *   statement waits; PostgreSQL cancels it after DB_STATEMENT_TIMEOUT_MS (57014).
 * - Client side: a cluster of the test's own is frozen with SIGSTOP (postmaster and every
 *   backend, as a hung host would be): nothing answers at all, so only the client's query
 *   timeout (src/db/client.ts) and DB_CONNECT_TIMEOUT_MS end the wait. After SIGCONT the same
 *   process serves again.
 */
import { readdir, readFile } from 'node:fs/promises'
import { Writable } from 'node:stream'
import type { InjectOptions } from 'fastify'
import t, { type Test } from 'tap'
import { build, registerAndLogin, type TestApp } from '../helpers/build.js'
import { sqlClient } from '../helpers/database.js'
import { applyMigrations } from '../helpers/migrations.js'
import { startCluster } from './helpers/cluster.js'
import { waitFor } from './helpers/server.js'

interface Timed { route: string, status: number, ms: number, body: any, retryAfter?: string }

async function timed (app: TestApp, route: string, options: InjectOptions): Promise<Timed> {
  const began = Date.now()
  const res = await app.inject(options)
  return { route, status: res.statusCode, ms: Date.now() - began, body: res.json(), retryAfter: res.headers['retry-after'] as string | undefined }
}

function logLines () {
  const lines: { level: number, msg: string, err?: unknown, stack?: unknown, req?: { url?: string }, reqId?: string }[] = []
  const stream = new Writable({
    write (chunk, _enc, done) {
      for (const line of String(chunk).split('\n')) if (line.trim() !== '') lines.push(JSON.parse(line))
      done()
    }
  })
  return { lines, stream }
}

/** Every request of the service that reads the database, with a token where it needs one. */
function databaseRequests (me: { id: number, username: string, password: string, auth: { authorization: string } }): { route: string, options: InjectOptions }[] {
  return [
    { route: 'POST /api/auth/login', options: { method: 'POST' as const, url: '/api/auth/login', payload: { username: me.username, password: me.password } } },
    { route: 'GET /api/user/:id', options: { method: 'GET' as const, url: `/api/user/${me.id}`, headers: me.auth } },
    { route: 'GET /api/product', options: { method: 'GET' as const, url: '/api/product' } },
    { route: 'POST /api/product', options: { method: 'POST' as const, url: '/api/product', headers: me.auth, payload: { title: 'frozen', amount: 1 } } },
    { route: 'GET /health/ready', options: { method: 'GET' as const, url: '/health/ready' } }
  ]
}

function assertAllUnavailable (t: Test, answers: Timed[], boundMs: number, readyBoundMs: number) {
  for (const a of answers) {
    t.equal(a.status, 503, `${a.route}: 503 (${a.ms} ms, ${String(a.body?.detail)})`)
    t.equal(a.body?.code, 'SERVICE_UNAVAILABLE', `${a.route}: problem details`)
    t.equal(a.retryAfter, '5', `${a.route}: Retry-After`)
    t.ok(a.ms < (a.route === 'GET /health/ready' ? readyBoundMs : boundMs), `${a.route}: answered in ${a.ms} ms (bound ${a.route === 'GET /health/ready' ? readyBoundMs : boundMs} ms)`)
  }
}

t.test('statements that wait on a lock are cancelled by the server: 503 within the statement timeout', async (t) => {
  const { lines, stream } = logLines()
  const app = await build(t, { env: { DB_STATEMENT_TIMEOUT_MS: '1000', LOG_LEVEL: 'warn' }, tuning: { queryTimeoutMs: 4000, readyTimeoutMs: 1500 }, logStream: stream })
  const me = await registerAndLogin(app)
  const locker = await sqlClient(t, app.databaseUrl)
  await locker.query('BEGIN')
  await locker.query('LOCK TABLE users, products, _prisma_migrations IN ACCESS EXCLUSIVE MODE')
  // The lock ends after 8 s in any case, so that without the timeouts the requests end too
  // (late, with 2xx: the test then fails instead of hanging).
  let released: Promise<unknown> | undefined
  const release = () => (released ??= locker.query('ROLLBACK'))
  const deadline = setTimeout(release, 8000)
  let answers: Timed[]
  try {
    answers = await Promise.all(databaseRequests(me).map(async (r) => await timed(app, r.route, r.options)))
  } finally {
    clearTimeout(deadline)
    await release()
  }
  t.comment(`locked tables: ${answers.map((a) => `${a.route} ${a.status} in ${a.ms} ms`).join('; ')}`)
  assertAllUnavailable(t, answers, 3000, 2000)
  const ready = answers.find((a) => a.route === 'GET /health/ready')!
  t.ok(ready.ms < 2000, 'the readiness probe answered within 2 s')

  const readyLogs = lines.filter((l) => l.req === undefined && /database/.test(l.msg) && l.level === 40)
  t.ok(readyLogs.length >= 1, 'the readiness 503 is logged as a warning')
  t.notOk(lines.some((l) => l.level === 40 && (l.err !== undefined || l.stack !== undefined)), 'warnings carry no stack trace')

  for (const r of databaseRequests(me)) {
    const again = await timed(app, r.route, r.options)
    t.ok(again.status < 300, `${r.route}: ${again.status} once the lock is gone`)
  }
})

/** The postmaster of the server this client is connected to, and every process it started. */
async function clusterProcesses (client: { query: (sql: string) => Promise<{ rows: any[] }> }): Promise<number[]> {
  const backend = Number((await client.query('SELECT pg_backend_pid() AS pid')).rows[0].pid)
  const ppid = async (pid: number) => Number((await readFile(`/proc/${pid}/stat`, 'utf8')).replace(/^.*\) /s, '').split(' ')[1])
  const postmaster = await ppid(backend)
  const children: number[] = []
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (await ppid(Number(entry)) === postmaster) children.push(Number(entry))
    } catch { /* gone meanwhile */ }
  }
  return [postmaster, ...children]
}

t.test('a frozen database server (SIGSTOP): the client gives up, 503 within seconds, then it serves again', async (t) => {
  const cluster = await startCluster(t)
  await applyMigrations(cluster.url)
  const { lines, stream } = logLines()
  const app = await build(t, {
    databaseUrl: cluster.url,
    env: { DB_STATEMENT_TIMEOUT_MS: '1000', DB_CONNECT_TIMEOUT_MS: '2000', LOG_LEVEL: 'warn' },
    tuning: { queryTimeoutMs: 2000, readyTimeoutMs: 1000 },
    logStream: stream
  })
  const me = await registerAndLogin(app)
  // Warm the pool: established connections, which a frozen server leaves hanging.
  await Promise.all(Array.from({ length: 6 }, async () => await app.inject({ method: 'GET', url: `/api/user/${me.id}`, headers: me.auth })))
  const admin = await sqlClient(t, cluster.url)
  const pids = await clusterProcesses(admin)
  t.ok(pids.length >= 3, `${pids.length} processes of the cluster to freeze`)

  let first: Timed[] = []
  let second: Timed[] = []
  const thaw = () => {
    for (const pid of pids) {
      try { process.kill(pid, 'SIGCONT') } catch { /* exited */ }
    }
  }
  for (const pid of pids) process.kill(pid, 'SIGSTOP')
  // Thawed after 10 s in any case: without the timeouts the requests would end late (2xx).
  const deadline = setTimeout(thaw, 10_000)
  try {
    first = await Promise.all(databaseRequests(me).map(async (r) => await timed(app, r.route, r.options)))
    // Again, now that the hung connections are gone: new ones cannot be opened either.
    second = await Promise.all(databaseRequests(me).map(async (r) => await timed(app, r.route, r.options)))
  } finally {
    clearTimeout(deadline)
    thaw()
  }
  t.comment(`frozen, established connections: ${first.map((a) => `${a.route} ${a.status} in ${a.ms} ms`).join('; ')}`)
  t.comment(`frozen, new connections: ${second.map((a) => `${a.route} ${a.status} in ${a.ms} ms`).join('; ')}`)
  assertAllUnavailable(t, first, 4500, 2000)
  assertAllUnavailable(t, second, 4500, 2000)

  const readyLogs = lines.filter((l) => l.req === undefined && /database/.test(l.msg) && l.level === 40)
  t.ok(readyLogs.length >= 2, 'each readiness 503 is logged as a warning')
  t.notOk(lines.some((l) => l.level === 40 && (l.err !== undefined || l.stack !== undefined)), 'warnings carry no stack trace')

  const ms = await waitFor('readiness after SIGCONT', async () => (await app.inject({ method: 'GET', url: '/health/ready' })).statusCode === 200, 15_000)
  t.comment(`ready again ${ms} ms after SIGCONT`)
  for (const r of databaseRequests(me)) {
    const again = await timed(app, r.route, r.options)
    t.ok(again.status < 300, `${r.route}: ${again.status} after the database thawed`)
  }
})
