/**
 * The proxy's overload limits (deploy/haproxy.cfg, the file compose mounts, run by Debian's
 * HAProxy on the host; docs/operations.md, "Load shedding"): at most 64 requests in progress
 * per replica, at most 256 waiting for a slot, and past that a 503 at once, in the API's
 * problem-details shape with Retry-After and the request id. The service behind it is the
 * app of the suite, listening on a loopback port and trusting the proxy (TRUST_PROXY), as
 * compose runs it; clients come from several loopback addresses (the proxy allows 32
 * connections per address: test/deploy/slow-clients-proxy.test.ts).
 */
import http from 'node:http'
import net from 'node:net'
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import { freePort } from '../../src/db/embedded.js'
import { call, isAnswer, problemViolations, type Answer, type Failure } from '../faults/helpers/http.js'
import { build, TEST_ENV } from '../helpers/build.js'
import { haproxyMissing, startHaproxy } from './helpers/haproxy.js'

const missing = haproxyMissing()
if (missing !== undefined && process.env.CI !== undefined) throw new Error(`CI needs HAProxy: ${missing}`)
const ADMIN_KEY = TEST_ENV.ADMIN_API_KEYS!.split(',')[0]!

async function until (what: string, check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!await check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** The proxy's own 503: problem details (the API's shape) with Retry-After and its request id. */
function assertProxyProblem (t: Test, res: Answer | Failure, fullPath: string): void {
  const path = fullPath.length > 60 ? `a path of ${fullPath.length} bytes` : fullPath
  if (!isAnswer(res)) { t.fail(`${path}: ${res.error}`); return }
  t.equal(res.status, 503, `${path}: 503`)
  t.same(problemViolations(res), [], `${path}: problem details with Retry-After`)
  t.equal(res.json?.code, 'SERVICE_UNAVAILABLE', `${path}: code`)
  t.equal(res.json?.instance, fullPath.split('?')[0], `${path}: instance is the path`)
  t.equal(res.json?.requestId, res.headers.get('x-request-id'), `${path}: the request id in body and header`)
}

t.test('no replica up: the proxy answers 503 in problem details, whatever the path', { skip: missing }, async (t) => {
  const nobody = await freePort()
  const proxy = await startHaproxy(t, await freePort(), [nobody])
  await until('the replica is DOWN', async () => (await proxy.states()).get('api1')?.startsWith('DOWN') === true)
  for (const path of ['/api/product', '/api/user/%22%7D%5C?x="1"', '/%C3%A9%F0%9F%92%A9/%ED%A0%80', `/${'x'.repeat(2000)}`]) {
    assertProxyProblem(t, await call(proxy.url, 'GET', path, { headers: { 'x-request-id': 'client-id' } }), path)
  }
})

t.test('past 64 requests in progress and 256 queued per replica: 503 at once, from the proxy; the API\'s own cap never reached', { skip: missing }, async (t) => {
  // As compose runs it: the API trusts the proxy, so each client address counts on its own.
  // Held bodies are never cut by the API here (no minimum rate): the test decides when they end.
  const app = await build(t, { env: { TRUST_PROXY: '127.0.0.1', SLOW_CLIENT_WINDOW_MS: '0' } })
  await app.listen({ host: '127.0.0.1', port: 0 })
  const { port } = app.server.address() as AddressInfo
  const proxy = await startHaproxy(t, await freePort(), [port])
  await until('the replica is UP', async () => (await proxy.states()).get('api1') === 'UP')
  const metric = async (name: RegExp): Promise<number> => {
    const text = (await app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${ADMIN_KEY}` } })).body
    return Number(name.exec(text)?.[1] ?? Number.NaN)
  }
  const proxyPort = Number(new URL(proxy.url).port)
  /** A GET through the proxy from a loopback address (the proxy allows 32 connections per address). */
  const get = async (from: string, path: string): Promise<Answer | Failure> => await new Promise((resolve) => {
    const at = Date.now()
    const request = http.request({ host: '127.0.0.1', port: proxyPort, path, localAddress: from, agent: false }, (response) => {
      let body = ''
      response.on('data', (chunk: Buffer) => { body += chunk.toString() })
      response.on('end', () => {
        let json: unknown
        try { json = JSON.parse(body) } catch {}
        resolve({ method: 'GET', path, status: response.statusCode ?? 0, headers: new Headers(response.headers as Record<string, string>), body, json, ms: Date.now() - at, at })
      })
    })
    request.on('error', (error) => { resolve({ method: 'GET', path, error: (error as NodeJS.ErrnoException).code ?? error.message, ms: Date.now() - at, at }) })
    request.end()
  })

  // 64 logins whose bodies stop after 20 KB, from 4 addresses: past the proxy's 16 KB buffer a
  // body is streamed to the replica (a smaller one would wait in the proxy), so each holds a slot.
  const DECLARED = 1_000_000
  const head = `POST /api/auth/login HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\nContent-Length: ${DECLARED}\r\n\r\n`
  const start = '{"username"'.padEnd(20_000, ' ')
  const holders = Array.from({ length: 64 }, (_, i) => net.connect({ port: proxyPort, host: '127.0.0.1', localAddress: `127.0.1.${1 + (i % 4)}` }))
  t.teardown(() => { for (const socket of holders) socket.destroy() })
  const answered: string[] = []
  for (const socket of holders) {
    socket.on('data', (chunk) => { answered.push(chunk.toString('latin1')) })
    socket.on('error', () => {})
    socket.write(head + start)
  }
  // The app counts them (admission's count: the scrape is not in it).
  await until('64 requests in progress in the app', async () => await metric(/^http_requests_in_flight (\d+)$/m) === 64, 30_000)

  // 256 more wait in the proxy's queue (from 10 addresses).
  const queued = Array.from({ length: 256 }, async (_, i) => await get(`127.0.2.${1 + (i % 10)}`, '/api/product'))
  await until('256 requests queued in the proxy', async () => await proxy.queued() >= 256, 30_000)
  // The fewest of a few samples: the proxy's health check (once a second) may be in flight
  // beside them for a moment.
  const samples: number[] = []
  for (let i = 0; i < 5; i++, await new Promise((resolve) => setTimeout(resolve, 100))) samples.push(await metric(/^http_requests_in_flight (\d+)$/m))
  t.equal(Math.min(...samples), 64, `still 64 in the app: the queue is the proxy's (${samples.join(', ')})`)

  // The next ones are refused by the proxy at once.
  const refused = await Promise.all(Array.from({ length: 10 }, async () => await get('127.0.3.1', '/api/product?limit=2')))
  for (const res of refused) {
    assertProxyProblem(t, res, '/api/product?limit=2')
    t.ok(res.ms < 1500, `refused at once (${res.ms} ms), not after the 2 s queue timeout`)
  }

  // Release the slots: the bodies end (malformed JSON: 400), and the queue drains.
  for (const socket of holders) socket.write(' '.repeat(DECLARED - Buffer.byteLength(start)))
  const served = await Promise.all(queued)
  const statuses = new Set(served.map((res) => isAnswer(res) ? res.status : res.error))
  t.ok([...statuses].every((status) => status === 200 || status === 503), `the queued requests: served, or 503 past the queue timeout (${[...statuses].join(', ')})`)
  await until('the held logins are answered', async () => answered.length >= 64)
  t.ok(answered.every((text) => text.startsWith('HTTP/1.1 400')), 'each held login answered 400 (malformed JSON) once its body came')
  t.equal(await metric(/^http_load_shed_total\{reason="in_flight"\} (\d+)$/m), 0, 'the API\'s own cap (256) was never reached behind the proxy')
  t.equal(await metric(/^http_client_limited_total\{reason="client_share"\} (\d+)$/m), 0, 'nor any client\'s share: each address is its own client')
})
