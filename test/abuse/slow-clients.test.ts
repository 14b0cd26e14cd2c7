/**
 * One client cannot take the service away from everyone (src/plugins/admission.ts,
 * docs/operations.md, "Slow and greedy clients"). Real sockets against the listening service:
 * - hundreds of slow-body requests from one address: that client holds at most its share
 *   (LOAD_SHED_MAX_IN_FLIGHT_PER_CLIENT, 429 past it), and the bodies it holds are cut after
 *   one window below the minimum rate (408 BODY_TOO_SLOW, the connection closed); meanwhile
 *   another client logs in and reads at once, and /health/ready stays 200;
 * - readers that stop reading a multi-MiB image are cut once the socket is back-pressured for
 *   a window below the minimum rate, and their places are freed; a slow reader above the
 *   minimum gets the whole image;
 * - an upload above the minimum rate succeeds, one below it gets 408;
 * - the share is counted by client address: the forwarded one behind a trusted proxy, the
 *   peer's otherwise (an untrusted peer's X-Forwarded-For changes nothing).
 * Other clients are other loopback addresses (127.0.0.2, 127.0.0.3: all of 127/8 is local).
 */
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import { Value } from 'typebox/value'
import { Problem } from '../../src/lib/problem.js'
import { build, newUser, TEST_ENV, type TestApp } from '../helpers/build.js'
import { connectFrom, parseAnswer, type SourcedConnection as Raw } from '../faults/helpers/raw.js'

const ADMIN = { authorization: `Bearer ${TEST_ENV.ADMIN_API_KEYS!.split(',')[0]!}` }
const ATTACKER = '127.0.0.2'
const PROXY = '127.0.0.3'
// A real PNG signature, padded: the type is judged by the bytes.
const PNG_HEAD = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64')
const portOf = (app: TestApp): number => (app.server.address() as AddressInfo).port
const png = (size: number): Buffer => Buffer.concat([PNG_HEAD, Buffer.alloc(size - PNG_HEAD.length, 7)])

function isProblem (t: Test, text: string, status: number, code: string, label: string): void {
  const a = parseAnswer(text)
  t.equal(a.status, status, `${label}: ${status}`)
  t.ok(Value.Check(Problem, a.body) && a.body.code === code && a.body.status === status, `${label}: problem details, code ${code} (${text.slice(0, 300)})`)
  t.match(a.head, /\r\ncontent-type: application\/problem\+json/i, `${label}: problem+json`)
}

async function listening (t: Test, env: Record<string, string>): Promise<TestApp> {
  const app = await build(t, { env })
  await app.listen({ host: '127.0.0.1', port: 0 })
  return app
}

async function metric (app: TestApp, line: RegExp): Promise<number> {
  const text = (await app.inject({ method: 'GET', url: '/metrics', headers: ADMIN })).body
  return Number(line.exec(text)?.[1] ?? Number.NaN)
}

async function until (what: string, check: () => Promise<boolean> | boolean, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!await check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** A request over fetch from 127.0.0.1 (another client than the attacker), timed. */
async function timed (url: string, init?: RequestInit): Promise<{ status: number, body: string, at: number }> {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(20_000) })
  const body = await res.text()
  return { status: res.status, body, at: Date.now() }
}

t.test('shipped defaults: 300 slow refresh-token bodies from one client; others still served, readiness 200, the slow ones cut within the window', async (t) => {
  // LOAD_SHED_MAX_IN_FLIGHT 256, 32 per client, a 5 s window at 1024 bytes/s: the defaults.
  const app = await listening(t, {})
  const [window, share] = [5000, 32]
  t.same([app.config.limits.maxInFlight, app.config.limits.maxInFlightPerClient, app.config.limits.slowClientWindowMs, app.config.limits.slowClientMinBytesPerS], [256, share, window, 1024], 'the shipped defaults')
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
  const user = newUser()
  t.equal((await app.inject({ method: 'POST', url: '/api/user', payload: user })).statusCode, 201)

  // The finding: Content-Length 100, one byte sent, no token.
  const slow = await Promise.all(Array.from({ length: 300 }, async () => {
    const c = await connectFrom(portOf(app), ATTACKER)
    c.socket.write('POST /api/auth/refresh-token HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{')
    return c
  }))
  await until(`${share} slow requests in progress`, async () => await metric(app, /^http_requests_in_flight (\d+)$/m) >= share)

  // Another client, meanwhile: login, a read, readiness, all at once, well before any cut.
  const started = Date.now()
  const [login, products, ready] = await Promise.all([
    timed(`${base}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: user.username, password: user.password }) }),
    timed(`${base}/api/product?limit=5`),
    timed(`${base}/health/ready`)
  ])
  t.equal(login.status, 200, `login served (${login.body.slice(0, 120)})`)
  t.equal(products.status, 200, 'a read served')
  t.equal(ready.status, 200, `/health/ready stays 200 (${ready.body.slice(0, 120)})`)
  const served = Math.max(login.at, products.at, ready.at) - started

  const closed = await Promise.all(slow.map(async (c) => await c.closed))
  const statuses = slow.map((c) => parseAnswer(c.text()).status)
  const cut = slow.filter((c) => parseAnswer(c.text()).status === 408)
  const refused = slow.filter((c) => parseAnswer(c.text()).status === 429)
  t.equal(cut.length, share, `the client's share (${share}) was admitted, then cut with 408`)
  t.equal(refused.length, 300 - share, 'the rest refused with 429 at once')
  t.same([...new Set(statuses)].sort(), [408, 429], 'nothing else')
  isProblem(t, cut[0]!.text(), 408, 'BODY_TOO_SLOW', 'a cut body')
  isProblem(t, refused[0]!.text(), 429, 'TOO_MANY_IN_PROGRESS', 'a refusal')
  t.match(parseAnswer(refused[0]!.text()).head, /\r\nretry-after: \d+\r\n/i, 'the 429 says when to retry')
  t.match(parseAnswer(refused[0]!.text()).head, /\r\nconnection: close\r\n/i, 'its unread body: Connection: close')
  t.match(parseAnswer(cut[0]!.text()).head, /\r\nconnection: close\r\n/i, 'the 408 closes the connection')
  const firstCut = Math.min(...cut.map((c, i) => closed[slow.indexOf(c)] ?? i))
  t.ok(served < firstCut, `the other client was served in ${served} ms, before the first cut (${firstCut} ms): it never waited for the slow ones`)
  t.ok(Math.max(...closed) < window * 2 + 3000, `every slow connection ended by ${Math.max(...closed)} ms (window ${window} ms)`)
  t.ok(firstCut >= window - 200, `none cut before its window (${firstCut} ms)`)

  t.equal(await metric(app, /^http_client_limited_total\{reason="client_share"\} (\d+)$/m), 300 - share, 'refusals counted by reason')
  t.equal(await metric(app, /^http_client_limited_total\{reason="body_too_slow"\} (\d+)$/m), share, 'cuts counted by reason')
  t.equal(await metric(app, /^http_load_shed_total\{reason="in_flight"\} (\d+)$/m), 0, 'the service-wide cap was never reached')
  await until('every place freed', async () => await metric(app, /^http_requests_in_flight (\d+)$/m) === 0)
})

t.test('stalled readers of a multi-MiB image are cut within the window and free their places; a slow reader above the minimum gets it all', async (t) => {
  const WINDOW = 1000
  const MIN = 512 * 1024
  const app = await listening(t, { SLOW_CLIENT_WINDOW_MS: String(WINDOW), SLOW_CLIENT_MIN_BYTES_PER_S: String(MIN), LOAD_SHED_MAX_IN_FLIGHT_PER_CLIENT: '64' })
  const image = png(5 * 1024 * 1024)
  const login = async () => {
    const user = newUser()
    await app.inject({ method: 'POST', url: '/api/user', payload: user })
    return (await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: user.username, password: user.password } })).json().token as string
  }
  const token = await login()
  const id = (await app.inject({ method: 'POST', url: '/api/product', headers: { authorization: `Bearer ${token}` }, payload: { title: 'big', amount: 1 } })).json().id as number
  const boundary = 'b0undary'
  const form = Buffer.concat([Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="image"; filename="a.png"\r\nContent-Type: image/png\r\n\r\n`), image, Buffer.from(`\r\n--${boundary}--\r\n`)])
  const uploaded = await app.inject({ method: 'POST', url: `/api/product/${id}/image`, headers: { authorization: `Bearer ${token}`, 'content-type': `multipart/form-data; boundary=${boundary}` }, payload: form })
  t.equal(uploaded.statusCode, 201, 'a 5 MiB image')

  const get = `GET /api/product/${id}/image HTTP/1.1\r\nHost: api\r\n\r\n`
  const stalled = await Promise.all(Array.from({ length: 40 }, async () => {
    const c = await connectFrom(portOf(app), ATTACKER, { paused: true })
    c.socket.write(get)
    return c
  }))
  // A reader at 4x the minimum: it pauses after each chunk for the time that chunk is worth.
  const slow = await connectFrom(portOf(app), '127.0.0.1')
  slow.socket.on('data', (chunk: Buffer) => {
    slow.socket.pause()
    setTimeout(() => slow.socket.resume(), chunk.length * 1000 / (4 * MIN))
  })
  slow.socket.write(get)

  await until('41 image downloads in progress', async () => await metric(app, /^http_requests_in_flight (\d+)$/m) >= 41)
  const started = Date.now()
  let cut: number | undefined
  // The count, not only "timed out", when it never reaches 40 (over: a reader above the minimum was cut too).
  await until('the stalled readers cut', async () => (cut = await metric(app, /^http_client_limited_total\{reason="read_too_slow"\} (\d+)$/m)) === 40)
    .catch((error: Error) => { throw new Error(`${error.message} (${cut} cut)`) })
  const ms = Date.now() - started
  // From the start of the 41 downloads: each is cut a window after its socket's buffers fill,
  // and filling 40 of them from the database takes 4-5 s on an idle 2-core machine, 16 s
  // beside the rest of the suite.
  t.ok(ms < WINDOW * 3 + 25_000, `40 stalled readers cut after ${ms} ms (window ${WINDOW} ms)`)
  await until('their places freed', async () => await metric(app, /^http_requests_in_flight (\d+)$/m) <= 1)

  for (const c of stalled) c.socket.resume()
  await Promise.all(stalled.map(async (c) => await c.closed))
  t.ok(stalled.every((c) => c.bytes() < image.length), `each stalled reader got part of the image only (${Math.max(...stalled.map((c) => c.bytes()))} bytes at most), then the end`)

  await until('the slow reader has it all', () => slow.bytes() > image.length, 30_000)
  t.equal(parseAnswer(slow.text()).status, 200, 'the slow reader (above the minimum) got a 200')
  t.ok(slow.bytes() > image.length, `and the whole image (${slow.bytes()} bytes with the headers)`)
  t.equal(await metric(app, /^http_client_limited_total\{reason="read_too_slow"\} (\d+)$/m), 40, 'only the stalled ones were cut')
  slow.socket.destroy()
})

t.test('an upload above the minimum rate succeeds; one below it gets 408 BODY_TOO_SLOW and frees its place', async (t) => {
  const WINDOW = 1000
  const MIN = 32 * 1024
  const app = await listening(t, { SLOW_CLIENT_WINDOW_MS: String(WINDOW), SLOW_CLIENT_MIN_BYTES_PER_S: String(MIN) })
  const user = newUser()
  await app.inject({ method: 'POST', url: '/api/user', payload: user })
  const token = (await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: user.username, password: user.password } })).json().token as string
  const product = async () => (await app.inject({ method: 'POST', url: '/api/product', headers: { authorization: `Bearer ${token}` }, payload: { title: 'p', amount: 1 } })).json().id as number

  /** A multipart upload of `size` bytes sent at `bytesPerSecond`, in 100 ms steps. */
  async function upload (id: number, size: number, bytesPerSecond: number): Promise<Raw> {
    const boundary = 'b0undary'
    const body = Buffer.concat([Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="image"; filename="a.png"\r\nContent-Type: image/png\r\n\r\n`), png(size), Buffer.from(`\r\n--${boundary}--\r\n`)])
    const c = await connectFrom(portOf(app), '127.0.0.1')
    c.socket.write(`POST /api/product/${id}/image HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer ${token}\r\nContent-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${body.length}\r\n\r\n`)
    const step = Math.ceil(bytesPerSecond / 10)
    let sent = 0
    const timer = setInterval(() => {
      if (c.socket.destroyed || sent >= body.length) { clearInterval(timer); return }
      c.socket.write(body.subarray(sent, sent + step))
      sent += step
    }, 100)
    t.teardown(() => { clearInterval(timer) })
    return c
  }

  // 3x the minimum: 300 KiB in about 3 s, several windows.
  const good = await upload(await product(), 300 * 1024, 3 * MIN)
  const bad = await upload(await product(), 300 * 1024, MIN / 4)
  const answered = async (c: Raw) => { await until('an answer', () => c.text().includes('\r\n\r\n') || c.socket.destroyed, 20_000); return c.text() }
  const goodText = await answered(good)
  t.equal(parseAnswer(goodText).status, 201, `the upload above the minimum rate is stored (${goodText.slice(0, 200)})`)
  await bad.closed
  isProblem(t, bad.text(), 408, 'BODY_TOO_SLOW', 'the upload below the minimum')
  t.ok(Date.now() - bad.started < WINDOW * 2 + 8000, 'cut after about one window, not after the 120 s request deadline')
  t.equal(await metric(app, /^http_client_limited_total\{reason="body_too_slow"\} (\d+)$/m), 1)
  good.socket.destroy()
  await until('places freed', async () => await metric(app, /^http_requests_in_flight (\d+)$/m) === 0)
})

t.test('the share is per client: over it, 429; another address still admitted; behind a trusted proxy the forwarded address counts, an untrusted peer\'s X-Forwarded-For does not', async (t) => {
  // Held bodies are never cut here (no window), so each holds its place until it ends.
  const app = await listening(t, { LOAD_SHED_MAX_IN_FLIGHT_PER_CLIENT: '2', SLOW_CLIENT_WINDOW_MS: '0', TRUST_PROXY: PROXY })
  const held: Raw[] = []
  t.teardown(() => { for (const c of held) c.socket.destroy() })
  async function hold (from: string, forwardedFor?: string): Promise<Raw> {
    const c = await connectFrom(portOf(app), from)
    c.socket.write(`POST /api/user HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\nContent-Length: 100\r\n${forwardedFor === undefined ? '' : `X-Forwarded-For: ${forwardedFor}\r\n`}\r\n{`)
    held.push(c)
    return c
  }
  async function ask (from: string, forwardedFor?: string): Promise<string> {
    const c = await connectFrom(portOf(app), from)
    c.socket.write(`GET /api/product?limit=1 HTTP/1.1\r\nHost: api\r\nConnection: close\r\n${forwardedFor === undefined ? '' : `X-Forwarded-For: ${forwardedFor}\r\n`}\r\n`)
    await c.closed
    return c.text()
  }
  const inFlight = async () => await metric(app, /^http_requests_in_flight (\d+)$/m)

  // A client without a proxy: two held, the third refused; another address admitted.
  await hold(ATTACKER); await hold(ATTACKER)
  await until('2 held', async () => await inFlight() === 2)
  isProblem(t, await ask(ATTACKER), 429, 'TOO_MANY_IN_PROGRESS', `${ATTACKER}, a third request`)
  const body = parseAnswer(await ask(ATTACKER, '198.51.100.1')).body
  t.match(body?.detail, /already has 2 requests in progress/, 'an untrusted peer\'s X-Forwarded-For is ignored: still that peer, still refused')
  t.equal(parseAnswer(await ask('127.0.0.1')).status, 200, 'another address is admitted')

  // Behind the trusted proxy: the forwarded address is the client.
  await hold(PROXY, '203.0.113.7'); await hold(PROXY, '10.1.1.1, 203.0.113.7')
  await until('4 held', async () => await inFlight() === 4)
  isProblem(t, await ask(PROXY, '203.0.113.7'), 429, 'TOO_MANY_IN_PROGRESS', '203.0.113.7 through the proxy, a third request')
  t.equal(parseAnswer(await ask(PROXY, '203.0.113.8')).status, 200, 'another client through the same proxy is admitted')
  t.equal(parseAnswer(await ask(PROXY)).status, 200, 'the proxy\'s own request (its health check) is its own client')

  // Ending a held request gives its place back.
  held[0]!.socket.destroy()
  await until('a place freed', async () => await inFlight() === 3)
  t.equal(parseAnswer(await ask(ATTACKER)).status, 200, 'below its share again: admitted')
  t.equal(await metric(app, /^http_client_limited_total\{reason="client_share"\} (\d+)$/m), 3, 'three refusals counted')
})
