/**
 * Slow and stalled clients over real sockets: a client that sends its headers slowly
 * (slowloris), one that stops mid-body, and an idle kept-alive connection are each
 * dropped after their timeout, with a 408 in problem details where an answer is due;
 * while they hang, other clients are served. The timeouts are shortened for the test
 * through the same builder the server uses (`timeoutOptions`), and the production values
 * are checked on a listening server.
 */
import t from 'tap'
import { Value } from 'typebox/value'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { Problem } from '../../src/lib/problem.js'
import { HTTP_TIMEOUTS, serverOptions, timeoutOptions, type HttpTimeouts } from '../../src/options.js'
import { TEST_ENV } from '../helpers/build.js'
import { connect, stalledPost, type RawConnection } from './helpers/raw.js'

// Nothing here reaches the database: Prisma connects lazily, to nothing.
const NO_DATABASE = 'postgresql://nobody@127.0.0.1:9/none'
const SHORT: HttpTimeouts = { headers: 800, request: 1500, keepAlive: 700, idle: 0, checkInterval: 100 }
const SLACK = 1000

interface Tap { teardown: (fn: () => unknown) => void }

async function listen (t: Tap, timeouts?: HttpTimeouts): Promise<{ url: string, server: import('node:http').Server }> {
  const config = loadConfig(TEST_ENV, false)
  const app = await buildApp({ config, databaseUrl: NO_DATABASE, fastify: timeouts ? timeoutOptions(timeouts) : {} })
  t.teardown(async () => { await app.close() })
  const url = await app.listen({ host: '127.0.0.1', port: 0 })
  return { url, server: app.server }
}

/** The status and parsed body of the one HTTP answer in `raw`. */
function parse (raw: string): { status: number, contentType: string, body: any } {
  const [head = '', body = ''] = raw.split('\r\n\r\n')
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1])
  const contentType = /^content-type: (.*)$/im.exec(head)?.[1] ?? ''
  let json: unknown
  try { json = JSON.parse(body) } catch { json = body }
  return { status, contentType, body: json }
}

function assert408 (t: Tap & { equal: Function, match: Function, ok: Function }, c: RawConnection): void {
  const answer = parse(c.received())
  t.equal(answer.status, 408, 'answered 408')
  t.match(answer.contentType, /^application\/problem\+json/, 'as problem details')
  t.ok(Value.Check(Problem, answer.body) && answer.body.code === 'REQUEST_TIMEOUT', 'in the documented shape, code REQUEST_TIMEOUT')
}

t.test('production timeouts are set on the listening server', async (t) => {
  const config = loadConfig(TEST_ENV, false)
  t.match(serverOptions(config.server), timeoutOptions(HTTP_TIMEOUTS), 'the server options carry the timeouts')
  t.ok(HTTP_TIMEOUTS.headers > 0 && HTTP_TIMEOUTS.headers <= HTTP_TIMEOUTS.request, 'a header deadline no later than the request deadline')
  t.ok(HTTP_TIMEOUTS.keepAlive > 0 && HTTP_TIMEOUTS.checkInterval > 0 && HTTP_TIMEOUTS.checkInterval <= 5000, 'keep-alive and check interval set')
  const { server } = await listen(t)
  t.equal(server.headersTimeout, HTTP_TIMEOUTS.headers, `headersTimeout ${HTTP_TIMEOUTS.headers} ms`)
  t.equal(server.requestTimeout, HTTP_TIMEOUTS.request, `requestTimeout ${HTTP_TIMEOUTS.request} ms`)
  t.equal(server.keepAliveTimeout, HTTP_TIMEOUTS.keepAlive, `keepAliveTimeout ${HTTP_TIMEOUTS.keepAlive} ms`)
})

t.test('a client that sends its headers slowly is dropped', async (t) => {
  const { url } = await listen(t, SHORT)
  const c = await connect(url)
  c.write('GET /health/live HTTP/1.1\r\nHost: localhost\r\n')
  const drip = setInterval(() => c.write('X-Slow: 1\r\n'), 100) // a header line every 100 ms, never the end
  const ms = await c.closed
  clearInterval(drip)
  t.ok(ms >= SHORT.headers - 100 && ms < SHORT.headers + SLACK, `closed after ${ms} ms (headers timeout ${SHORT.headers} ms)`)
  assert408(t, c)
})

t.test('a client that stops mid-body is dropped', async (t) => {
  const { url } = await listen(t, SHORT)
  const c = await stalledPost(url, '/api/user', 200, 20)
  const ms = await c.closed
  t.ok(ms >= SHORT.request - 100 && ms < SHORT.request + SLACK, `closed after ${ms} ms (request timeout ${SHORT.request} ms)`)
  assert408(t, c)
})

t.test('an idle kept-alive connection is closed', async (t) => {
  const { url } = await listen(t, SHORT)
  const c = await connect(url)
  c.write('GET /health/live HTTP/1.1\r\nHost: localhost\r\nConnection: keep-alive\r\n\r\n')
  const ms = await c.closed
  t.equal(parse(c.received()).status, 200, 'the request was answered')
  // Node keeps the socket up to 1 s past keepAliveTimeout (its own margin against races).
  t.ok(ms >= SHORT.keepAlive - 100 && ms < SHORT.keepAlive + 1000 + SLACK, `then closed after ${ms} ms idle (keep-alive timeout ${SHORT.keepAlive} ms)`)
})

t.test('while 50 slow clients hang, others are served', async (t) => {
  const { url } = await listen(t, SHORT)
  const slow = await Promise.all(Array.from({ length: 50 }, async () => {
    const c = await connect(url)
    c.write('POST /api/user HTTP/1.1\r\nHost: localhost\r\n')
    return c
  }))
  for (let i = 0; i < 5; i++) {
    const started = Date.now()
    const res = await fetch(`${url}/health/live`)
    t.equal(res.status, 200, `request ${i + 1} served`)
    t.ok(Date.now() - started < 500, `in ${Date.now() - started} ms`)
  }
  const closed = await Promise.all(slow.map(async (c) => await c.closed))
  t.ok(Math.max(...closed) < SHORT.headers + SLACK, `all 50 slow clients dropped (last after ${Math.max(...closed)} ms)`)
})
