/**
 * Slow clients behind the compose proxy (deploy/haproxy.cfg on Debian's HAProxy, the API
 * trusting it as compose does: TRUST_PROXY): the slow-body and stalled-reader attacks do not
 * take the service away from others, though the proxy gives a replica only 64 slots.
 * - slow bodies are buffered by the proxy and never take a replica slot: answered 408 by the
 *   proxy past its body deadline (shortened here), 429 past 32 connections of one address,
 *   both in problem details; meanwhile another client logs in and reads at once;
 * - readers that stop reading a large image are cut by the API within its window, and the
 *   proxy gives their replica slots back within its `timeout client` (shortened here); another
 *   client is served meanwhile;
 * - large answers (image, CSV) take their own lane (`api_bulk`, 8 slots per replica, 4 bulk
 *   requests per address): 64 stalled readers of a 16 MiB image from 2 addresses fill that
 *   lane only (the rest 429 from the proxy) and login and reads from another address are
 *   served at once, with the shipped `timeout client` (10 s). In one lane they would hold the
 *   replica's 64 slots and the others would get 503 after the 2 s queue.
 * Clients are loopback addresses (127.0.0.2 the attacker, 127.0.0.1 the others).
 */
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import { Value } from 'typebox/value'
import { freePort } from '../../src/db/embedded.js'
import { Problem } from '../../src/lib/problem.js'
import { build, newUser, TEST_ENV, type TestApp } from '../helpers/build.js'
import { connectFrom, parseAnswer, type SourcedConnection as Raw } from '../faults/helpers/raw.js'
import { haproxyMissing, startHaproxy, type Haproxy } from './helpers/haproxy.js'

const missing = haproxyMissing()
if (missing !== undefined && process.env.CI !== undefined) throw new Error(`CI needs HAProxy: ${missing}`)
const ADMIN = { authorization: `Bearer ${TEST_ENV.ADMIN_API_KEYS!.split(',')[0]!}` }
const ATTACKER = '127.0.0.2'
const PNG_HEAD = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64')

async function until (what: string, check: () => Promise<boolean> | boolean, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!await check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

async function metric (app: TestApp, line: RegExp): Promise<number> {
  const text = (await app.inject({ method: 'GET', url: '/metrics', headers: ADMIN })).body
  return Number(line.exec(text)?.[1] ?? Number.NaN)
}

/** The API behind HAProxy, trusting it (the proxy connects from 127.0.0.1). */
async function behindProxy (t: Test, env: Record<string, string>, timeouts: Record<string, string> = {}): Promise<{ app: TestApp, proxy: Haproxy, port: number }> {
  const app = await build(t, { env: { TRUST_PROXY: '127.0.0.1', ...env } })
  await app.listen({ host: '127.0.0.1', port: 0 })
  const proxy = await startHaproxy(t, await freePort(), [(app.server.address() as AddressInfo).port], timeouts)
  const up = async (backend: string): Promise<boolean> => (await proxy.states(backend)).get('api1') === 'UP'
  await until('the replica is UP in both lanes', async () => await up('api') && await up('api_bulk'))
  return { app, proxy, port: Number(new URL(proxy.url).port) }
}

t.test('300 slow bodies from one address through the proxy: buffered there, 408 or 429 from the proxy; the replica\'s slots stay free and others are served', { skip: missing }, async (t) => {
  const { app, proxy, port } = await behindProxy(t, {}, { 'http-request wait-for-body time': '2s' })
  const user = newUser()
  t.equal((await app.inject({ method: 'POST', url: '/api/user', payload: user })).statusCode, 201)

  const slow: Raw[] = []
  t.teardown(() => { for (const c of slow) c.socket.destroy() })
  for (let i = 0; i < 300; i++) {
    const c = await connectFrom(port, ATTACKER)
    c.socket.write('POST /api/auth/refresh-token HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{')
    slow.push(c)
  }
  // None of them reached the replica: the proxy holds the bodies.
  t.equal(await proxy.current(), 0, 'no replica slot held by a slow body')

  const started = Date.now()
  const [login, read, ready] = await Promise.all([
    fetch(`${proxy.url}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: user.username, password: user.password }) }),
    fetch(`${proxy.url}/api/product?limit=2`),
    fetch(`${proxy.url}/health/ready`)
  ])
  const ms = Date.now() - started
  t.same([login.status, read.status, ready.status], [200, 200, 200], 'login, a read and readiness through the proxy: 200')
  t.ok(ms < 1800, `served in ${ms} ms, before the slow ones' deadline`)

  const closed = await Promise.all(slow.map(async (c) => await c.closed))
  const statuses = slow.map((c) => parseAnswer(c.text()).status)
  const count = (status: number): number => statuses.filter((s) => s === status).length
  t.equal(count(408), 32, 'the first 32 connections of the address waited for their body: 408 past the deadline')
  t.equal(count(429), 300 - 32, 'the others: 429 at once (and closed, so the address never reaches 256 connections, where the proxy refuses them unanswered)')
  for (const status of [408, 429]) {
    const one = slow.find((c) => parseAnswer(c.text()).status === status)!
    const body = parseAnswer(one.text()).body
    t.ok(Value.Check(Problem, body) && body.status === status, `${status}: problem details (${one.text().slice(0, 200)})`)
    t.match(parseAnswer(one.text()).head, /content-type: application\/problem\+json/i)
  }
  const refused = parseAnswer(slow.find((c) => parseAnswer(c.text()).status === 429)!.text())
  t.equal(refused.body.code, 'TOO_MANY_IN_PROGRESS', '429: the code the API uses for a client over its share')
  t.match(refused.head, /retry-after: 2/i, '429: Retry-After')
  t.equal(refused.body.requestId, /x-request-id: (\S+)/i.exec(refused.head)?.[1], '429: the request id in body and header')
  t.ok(Math.max(...closed) < 2000 + 3000, `every slow connection closed by ${Math.max(...closed)} ms`)
  t.equal(await metric(app, /^http_client_limited_total\{reason="body_too_slow"\} (\d+)$/m), 0, 'the API never saw them')
})

t.test('readers that stop reading a large image through the proxy: the API cuts them within its window, the replica slots come back, others are served', { skip: missing }, async (t) => {
  const WINDOW = 1000
  // Well above the API's window: on a loaded machine the API's cut can come seconds late,
  // and a proxy that gave up first would end the connections before the API could count them.
  const CLIENT_TIMEOUT = 8000
  const { app, proxy, port } = await behindProxy(t, { SLOW_CLIENT_WINDOW_MS: String(WINDOW), SLOW_CLIENT_MIN_BYTES_PER_S: String(256 * 1024), IMAGE_MAX_BYTES: String(24 * 1024 * 1024) }, { 'timeout client': `${CLIENT_TIMEOUT}ms` })
  const user = newUser()
  await app.inject({ method: 'POST', url: '/api/user', payload: user })
  const token = (await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: user.username, password: user.password } })).json().token as string
  const id = (await app.inject({ method: 'POST', url: '/api/product', headers: { authorization: `Bearer ${token}` }, payload: { title: 'big', amount: 1 } })).json().id as number
  // Larger than the kernel buffers of both hops (client-proxy, proxy-API) together.
  const image = Buffer.concat([PNG_HEAD, Buffer.alloc(20 * 1024 * 1024, 7)])
  const form = Buffer.concat([Buffer.from('--b\r\nContent-Disposition: form-data; name="image"; filename="a.png"\r\nContent-Type: image/png\r\n\r\n'), image, Buffer.from('\r\n--b--\r\n')])
  t.equal((await app.inject({ method: 'POST', url: `/api/product/${id}/image`, headers: { authorization: `Bearer ${token}`, 'content-type': 'multipart/form-data; boundary=b' }, payload: form })).statusCode, 201)

  // 8 from two addresses: each within its 4 bulk requests at the proxy, together the 8 slots
  // of the large answers' lane on the replica.
  const stalled = await Promise.all(Array.from({ length: 8 }, async (_, i) => {
    const c = await connectFrom(port, i % 2 === 0 ? ATTACKER : '127.0.0.4', { paused: true })
    c.socket.write(`GET /api/product/${id}/image HTTP/1.1\r\nHost: api\r\n\r\n`)
    return c
  }))
  t.teardown(() => { for (const c of stalled) c.socket.destroy() })
  await until('8 bulk-lane slots held', async () => await proxy.current('api_bulk') >= 8, 30_000)

  const read = await fetch(`${proxy.url}/api/product?limit=2`)
  t.equal(read.status, 200, 'another client is served meanwhile')

  const started = Date.now()
  await until('the API cut the stalled readers', async () => await metric(app, /^http_client_limited_total\{reason="read_too_slow"\} (\d+)$/m) === 8, 30_000)
  const cut = Date.now() - started
  t.ok(cut < WINDOW * 3 + 10_000, `the API cut all 8 within ${cut} ms (window ${WINDOW} ms)`)
  await until('the replica slots came back', async () => await proxy.current('api_bulk') === 0, 30_000)
  const ms = Date.now() - started
  t.ok(ms < CLIENT_TIMEOUT + WINDOW * 3 + 10_000, `the proxy gave their slots back within ${ms} ms (timeout client ${CLIENT_TIMEOUT} ms)`)
  for (const c of stalled) c.socket.resume()
  await Promise.all(stalled.map(async (c) => await c.closed))
  t.ok(stalled.every((c) => c.bytes() < image.length), 'each stalled reader got part of the image, then the end of its connection')
  t.equal((await fetch(`${proxy.url}/api/product/${id}/image`, { method: 'HEAD' })).status, 200, 'the image is still served')
})

t.test('64 stalled readers of a large image from 2 addresses through the proxy fill only the large answers\' lane: past 4 per address 429, and others log in and read at once', { skip: missing }, async (t) => {
  const { app, proxy, port } = await behindProxy(t, { IMAGE_MAX_BYTES: String(24 * 1024 * 1024) })
  const user = newUser()
  const created = (await app.inject({ method: 'POST', url: '/api/user', payload: user })).json().id as number
  const token = (await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: user.username, password: user.password } })).json().token as string
  const id = (await app.inject({ method: 'POST', url: '/api/product', headers: { authorization: `Bearer ${token}` }, payload: { title: 'big', amount: 1 } })).json().id as number
  // Larger than what the kernel buffers of both hops take: the proxy keeps bytes for each reader.
  const image = Buffer.concat([PNG_HEAD, Buffer.alloc(16 * 1024 * 1024, 7)])
  const form = Buffer.concat([Buffer.from('--b\r\nContent-Disposition: form-data; name="image"; filename="a.png"\r\nContent-Type: image/png\r\n\r\n'), image, Buffer.from('\r\n--b--\r\n')])
  t.equal((await app.inject({ method: 'POST', url: `/api/product/${id}/image`, headers: { authorization: `Bearer ${token}`, 'content-type': 'multipart/form-data; boundary=b' }, payload: form })).statusCode, 201)

  // The lanes: the image (GET, HEAD) and the CSV export go to `api_bulk`, the rest to `api`.
  const sent = async (backend: string): Promise<number> => (await proxy.totals(backend)).get('api1')!
  const [bulkBefore, apiBefore] = [await sent('api_bulk'), await sent('api')]
  for (const [url, init] of [[`/api/product/${id}/image`, { method: 'HEAD' }], [`/api/product/${id}/image`, { headers: { range: 'bytes=0-9' } }], ['/api/product?limit=2', { headers: { accept: 'text/csv; charset=utf-8' } }], ['/api/product?limit=2', {}], [`/api/product/${id}`, {}]] as const) {
    const res = await fetch(`${proxy.url}${url}`, init)
    t.ok(res.status === 200 || res.status === 206, `${url} ${JSON.stringify(init)}: ${res.status}`)
    await res.arrayBuffer()
  }
  t.same([await sent('api_bulk') - bulkBefore, await sent('api') - apiBefore], [3, 2], 'image and CSV requests went to the large answers\' lane, the others to the API\'s')

  // Each reads the first chunk of its answer (the status line), then never another byte.
  const first: string[] = []
  const stalled = await Promise.all(Array.from({ length: 64 }, async (_, i) => {
    const c = await connectFrom(port, i % 2 === 0 ? ATTACKER : '127.0.0.4')
    c.socket.once('data', (chunk: Buffer) => { first[i] = chunk.toString('latin1'); c.socket.pause() })
    c.socket.write(`GET /api/product/${id}/image HTTP/1.1\r\nHost: api\r\n\r\n`)
    return c
  }))
  t.teardown(() => { for (const c of stalled) c.socket.destroy() })
  const statuses = (): number[] => first.filter(Boolean).map((text) => parseAnswer(text).status)
  await until('every stalled reader answered', () => statuses().length === 64, 30_000)
  await until('their requests in progress at the proxy', async () => await proxy.current() + await proxy.current('api_bulk') >= 64 - statuses().filter((s) => s === 429).length, 30_000)

  const started = Date.now()
  const [login, product, account, ready] = await Promise.all([
    fetch(`${proxy.url}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: user.username, password: user.password }) }),
    fetch(`${proxy.url}/api/product/${id}`),
    fetch(`${proxy.url}/api/user/${created}`, { headers: { authorization: `Bearer ${token}` } }),
    fetch(`${proxy.url}/health/ready`)
  ])
  const ms = Date.now() - started
  t.same([login.status, product.status, account.status, ready.status], [200, 200, 200, 200], 'login, a product, an account and readiness through the proxy: 200')
  // Not a bound on `ms`: on a loaded machine the login's bcrypt alone can take seconds. What the
  // lanes promise is that none of these waits for a slot a stalled reader holds: had one waited
  // past the queue timeout (2 s) it would be a 503, above; the queue's high-water mark says none waited at all.
  t.equal(await proxy.queuedMost('api'), 0, `none of them waited in the proxy's queue for a slot of the API's lane (served in ${ms} ms)`)
  t.equal(await proxy.current(), 0, 'no slot of the API\'s lane held by a stalled reader')
  t.equal(await proxy.current('api_bulk'), 8, 'the large answers\' lane is full: 8 slots')
  const count = (status: number): number => statuses().filter((s) => s === status).length
  t.equal(count(200), 8, '8 readers (4 per address) got their answer started')
  t.equal(count(429), 56, 'the other 56: 429 at once, past 4 bulk requests per address')

  // One more image request from an attacking address: 429 problem details from the proxy.
  const more = await connectFrom(port, ATTACKER)
  more.socket.write(`GET /api/product/${id}/image HTTP/1.1\r\nHost: api\r\nConnection: close\r\n\r\n`)
  await more.closed
  const refused = parseAnswer(more.text())
  t.equal(refused.status, 429, 'another image request from the address: 429')
  t.ok(Value.Check(Problem, refused.body), `429: problem details (${more.text().slice(0, 200)})`)
  t.equal(refused.body.code, 'TOO_MANY_IN_PROGRESS')
  t.match(refused.head, /content-type: application\/problem\+json/i)
  t.match(refused.head, /retry-after: 2/i)
})
