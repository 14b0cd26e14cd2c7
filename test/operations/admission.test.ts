/**
 * Admission (src/plugins/admission.ts), over real HTTP: it sits in front of Fastify, so
 * `app.inject` never meets it. Requests are held in progress deterministically: the pool has
 * one connection, held by `pg_sleep`, and the admitted requests queue for it.
 */
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import pg from 'pg'
import { sqlPool } from '../../src/db/client.js'
import type { Tuning } from '../../src/app.js'
import { assertProblem } from '../helpers/assertions.js'
import { build, newUser, TEST_ENV, type TestApp } from '../helpers/build.js'

const ADMIN_KEY = TEST_ENV.ADMIN_API_KEYS!.split(',')[0]!

interface Answer {
  statusCode: number
  headers: http.IncomingHttpHeaders
  body: string
  json: () => any
  /** The time from sending to the end of the answer, in ms. */
  ms: number
}

interface Send { method?: string, path: string, headers?: Record<string, string>, body?: string, agent?: http.Agent, localAddress?: string }

/** One request over a real socket; `onRequest` gets the client request (to destroy it). */
async function send (app: TestApp, { method = 'GET', path, headers = {}, body, agent, localAddress }: Send, onRequest?: (request: http.ClientRequest) => void): Promise<Answer> {
  const { port } = app.server.address() as AddressInfo
  const started = Date.now()
  return await new Promise((resolve, reject) => {
    const request = http.request({ host: '127.0.0.1', port, method, path, headers, agent: agent ?? false, localAddress }, (response) => {
      const chunks: Buffer[] = []
      response.on('data', (chunk: Buffer) => chunks.push(chunk))
      response.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8')
        resolve({ statusCode: response.statusCode ?? 0, headers: response.headers, body: text, json: () => JSON.parse(text), ms: Date.now() - started })
      })
    })
    request.on('error', reject)
    onRequest?.(request)
    request.end(body)
  })
}

async function until (what: string, check: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

async function listening (t: Test, env: Record<string, string>, tuning: Tuning = {}): Promise<TestApp> {
  // Requests wait for the pool's one connection as long as a test holds it: pg-pool's
  // connection timeout also bounds that wait (DB_CONNECT_TIMEOUT_MS), so it is raised here.
  const app = await build(t, { env: { DB_POOL_SIZE: '1', DB_CONNECT_TIMEOUT_MS: '60000', ...env }, tuning })
  await app.listen({ host: '127.0.0.1', port: 0 })
  return app
}

interface Hold {
  /** Ends the hold (cancels the sleeping query); its connection goes back to the pool. */
  release: () => Promise<void>
}

/**
 * Holds the pool's one connection with a sleeping query until `release()`, and resolves once
 * the query runs (connected, nothing waiting): then every admitted request queues behind it.
 */
async function holdPool (t: Test, app: TestApp): Promise<Hold> {
  const pool = sqlPool(app.prisma)
  const marker = `hold_${Math.random().toString(36).slice(2)}`
  const sleeping = pool.query(`SELECT pg_sleep(60) AS ${marker}`).catch(() => {})
  await until('the hold runs on the pool\'s one connection', () => pool.totalCount === 1 && pool.idleCount === 0 && pool.waitingCount === 0)
  const release = async (): Promise<void> => {
    const client = new pg.Client({ connectionString: app.databaseUrl })
    await client.connect()
    try {
      await client.query('SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE $1 AND pid <> pg_backend_pid()', [`%${marker}%`])
    } finally { await client.end() }
    await sleeping
  }
  t.teardown(release)
  return { release }
}

async function metric (app: TestApp, line: RegExp): Promise<number | undefined> {
  const text = (await app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${ADMIN_KEY}` } })).body
  const match = line.exec(text)
  return match === null ? undefined : Number(match[1])
}

t.test('past LOAD_SHED_MAX_IN_FLIGHT: 503 OVERLOADED problem details at once, before Fastify; exempt routes served; then recovery', async (t) => {
  // The proxy is 127.0.0.1 (its X-Request-Id is kept); clients from 127.0.0.2 reach the service directly.
  const app = await listening(t, { LOAD_SHED_MAX_IN_FLIGHT: '2', TRUST_PROXY: '127.0.0.1' }, { retryAfterSeconds: 4 })
  const pool = sqlPool(app.prisma)
  const hold = await holdPool(t, app)
  // Two requests admitted: both wait for the one connection.
  const admitted = [send(app, { path: '/api/product' }), send(app, { path: '/api/product?limit=1' })]
  await until('two requests queue for the pool', () => pool.waitingCount >= 2)

  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  const refused = await send(app, { path: '/api/product?limit=5', agent })
  const body = assertProblem(t, refused, 503, 'OVERLOADED')
  t.equal(body.instance, '/api/product', 'instance: the path, without the query')
  t.match(body.detail, /^The service is overloaded \(2 requests in progress\); retry in 4 s$/)
  t.equal(refused.headers['retry-after'], '4', 'Retry-After (as set)')
  t.equal(refused.headers['x-content-type-options'], 'nosniff')
  t.equal(refused.headers['cache-control'], 'no-store')
  t.equal(refused.headers.connection, 'keep-alive', 'a request without a body keeps its connection')
  t.ok(refused.ms < 1000, `refused at once (${refused.ms} ms), not after the pool`)
  t.equal(Number(refused.headers['content-length']), Buffer.byteLength(refused.body), 'Content-Length is the body\'s')

  // The same kept-alive connection serves the next refusal.
  const again = await send(app, { path: '/api/user/1', agent, headers: { 'x-request-id': 'proxy-id-123' } })
  t.equal(again.statusCode, 503)
  t.equal(again.json().requestId, 'proxy-id-123', 'a valid X-Request-Id from the trusted proxy is kept')
  t.equal(again.headers['x-request-id'], 'proxy-id-123')
  const direct = await send(app, { path: '/api/user/1', localAddress: '127.0.0.2', headers: { 'x-request-id': 'chosen-by-a-client' } })
  t.equal(direct.statusCode, 503)
  t.match(direct.json().requestId, /^[0-9a-f-]{36}$/, 'a client\'s own id (an untrusted peer) is not: a UUID')
  t.equal(direct.headers['x-request-id'], direct.json().requestId)
  const badId = await send(app, { path: '/api/user/1', headers: { 'x-request-id': 'x'.repeat(129) } })
  t.match(badId.json().requestId, /^[0-9a-f-]{36}$/, 'an invalid one is replaced by a UUID')
  agent.destroy()

  // Hostile paths land in `instance` as JSON strings, never break the body.
  for (const path of ['/api/product/%22%7D%00', '/a"b\\c/%F0%9F%92%A9', '/%C3%A9%ED%A0%80', `/${'x'.repeat(4000)}`]) {
    const res = await send(app, { path })
    const label = path.length > 60 ? `a path of ${path.length} bytes` : path
    t.equal(res.statusCode, 503, `${label}: 503`)
    t.doesNotThrow(() => res.json(), `${label}: the body is JSON`)
  }

  const head = await send(app, { method: 'HEAD', path: '/api/product' })
  t.equal(head.statusCode, 503, 'HEAD refused too')
  t.equal(head.body, '', 'HEAD: no body')

  // Readiness reflects it; liveness and metrics are exempt (with a query, with a trailing slash).
  assertProblem(t, await send(app, { path: '/health/ready' }), 503, 'OVERLOADED')
  t.equal((await send(app, { path: '/health/live' })).statusCode, 200, '/health/live is never refused')
  t.equal((await send(app, { path: '/health/live/?probe=1' })).statusCode, 200, '/health/live/ too')
  t.equal((await send(app, { path: '/metrics', headers: { authorization: `Bearer ${ADMIN_KEY}` } })).statusCode, 200, '/metrics is never refused')

  // A refused write writes nothing, and its connection is closed (its body is never read).
  const user = newUser()
  const payload = JSON.stringify(user)
  const write = await send(app, { method: 'POST', path: '/api/user', headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(payload)) }, body: payload })
  assertProblem(t, write, 503, 'OVERLOADED')
  t.equal(write.headers.connection, 'close', 'a request with a body: Connection: close')
  const chunked = await send(app, { method: 'POST', path: '/api/user', headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' }, body: payload })
  t.equal(chunked.statusCode, 503)
  t.equal(chunked.headers.connection, 'close', 'chunked body: Connection: close')

  await hold.release()
  const served = await Promise.all(admitted)
  t.same(served.map((res) => res.statusCode), [200, 200], 'the admitted requests are served')
  t.equal((await send(app, { path: '/api/product' })).statusCode, 200, 'served again')
  t.equal((await send(app, { path: '/health/ready' })).statusCode, 200, 'ready again')
  const created = await send(app, { method: 'POST', path: '/api/user', headers: { 'content-type': 'application/json' }, body: payload })
  t.equal(created.statusCode, 201, 'the refused registration had written nothing: the same user registers now')

  t.equal(await metric(app, /^http_load_shed_total\{reason="in_flight"\} (\d+)$/m), 12, 'every refusal counted once, by reason')
  t.equal(await metric(app, /^http_load_shed_total\{reason="db_queue"\} (\d+)$/m), 0)
})

t.test('a client that goes away frees its place', async (t) => {
  const app = await listening(t, { LOAD_SHED_MAX_IN_FLIGHT: '1' })
  const pool = sqlPool(app.prisma)
  const hold = await holdPool(t, app)
  let client: http.ClientRequest | undefined
  const gone = send(app, { path: '/api/product' }, (request) => { client = request }).catch((error: Error) => error)
  await until('the request queues for the pool', () => pool.waitingCount >= 1)
  t.equal((await send(app, { path: '/api/product' })).statusCode, 503, 'the one place is taken')
  client!.destroy()
  t.type(await gone, Error, 'the client went away')
  // Its place is free once the server sees the socket close, though its handler still waits
  // for the pool (http_requests_in_flight is admission's own count; the scrape is not in it).
  const inFlight = async (): Promise<number | undefined> => await metric(app, /^http_requests_in_flight (\d+)$/m)
  const deadline = Date.now() + 5000
  while (await inFlight() !== 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10))
  t.equal(await inFlight(), 0, 'the request that went away is no longer in progress')
  const next = send(app, { path: '/api/product' })
  await until('the next request queues for the pool', () => pool.waitingCount >= 1)
  await hold.release()
  t.equal((await next).statusCode, 200, 'the next request is admitted and served')
})

t.test('LOAD_SHED_MAX_IN_FLIGHT=0: no cap', async (t) => {
  // One client here: no share of the cap either.
  const app = await listening(t, { LOAD_SHED_MAX_IN_FLIGHT: '0', LOAD_SHED_MAX_IN_FLIGHT_PER_CLIENT: '0' })
  const pool = sqlPool(app.prisma)
  const hold = await holdPool(t, app)
  const pending = Array.from({ length: 40 }, async () => await send(app, { path: '/api/product' }))
  await until('40 requests queue for the pool', () => pool.waitingCount >= 40)
  await hold.release()
  const answers = await Promise.all(pending)
  t.same(new Set(answers.map((res) => res.statusCode)), new Set([200]), '40 requests in progress at once, all served')
})

t.test('past LOAD_SHED_MAX_DB_WAITING queued queries: 503 OVERLOADED before Fastify; live served; then recovery', async (t) => {
  const app = await listening(t, { LOAD_SHED_MAX_DB_WAITING: '2', LOAD_SHED_MAX_IN_FLIGHT: '0' })
  const pool = sqlPool(app.prisma)
  const hold = await holdPool(t, app)
  const queued = [pool.query('SELECT 1'), pool.query('SELECT 1')]
  t.ok(pool.waitingCount >= 2, `${pool.waitingCount} queries wait for the connection`)
  const [product, ready, live] = await Promise.all([
    send(app, { path: '/api/product' }),
    send(app, { path: '/health/ready' }),
    send(app, { path: '/health/live' })
  ])
  const body = assertProblem(t, product, 503, 'OVERLOADED')
  t.match(body.detail, /[2-9] requests waiting for a database connection/)
  t.equal(product.headers['retry-after'], '2', 'Retry-After (RETRY_AFTER_SECONDS)')
  t.ok(product.ms < 1000, `refused at once (${product.ms} ms), not after waiting for the pool`)
  assertProblem(t, ready, 503, 'OVERLOADED')
  t.equal(live.statusCode, 200, '/health/live never sheds')
  await hold.release()
  await Promise.all(queued)
  t.equal((await send(app, { path: '/api/product' })).statusCode, 200, 'served again once the queue is gone')
  t.equal(await metric(app, /^http_load_shed_total\{reason="db_queue"\} (\d+)$/m), 2, 'counted by reason')
})

t.test('the default cap is on', async (t) => {
  const { loadConfig } = await import('../../src/config.js')
  t.equal(loadConfig(TEST_ENV, false).limits.maxInFlight, 256, 'default 256')
})
