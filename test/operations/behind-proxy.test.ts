/**
 * What the service does for the proxy in front of its replicas (docker-compose.yml,
 * deploy/haproxy.cfg): it keeps a valid X-Request-Id from the proxy, believes X-Forwarded-For from
 * exactly the addresses TRUST_PROXY names, and drains on stop (readiness 503 while requests
 * are still served). The proxy itself: test/deploy/rolling-restart-host.test.ts.
 */
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { Writable } from 'node:stream'
import t from 'tap'
import { loadConfig } from '../../src/config.js'
import { parseTrustProxy } from '../../src/lib/trust-proxy.js'
import { assertProblem } from '../helpers/assertions.js'
import { build, type TestApp } from '../helpers/build.js'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/** Log lines as objects, from a stream handed to the app. */
function logLines (): { stream: Writable, lines: Array<{ reqId?: string, msg?: string }> } {
  const lines: Array<{ reqId?: string, msg?: string }> = []
  const stream = new Writable({ write (chunk, _enc, done) { lines.push(...String(chunk).trim().split('\n').map((l) => JSON.parse(l))); done() } })
  return { stream, lines }
}

/** A GET over a real socket, from `localAddress` (any 127.x address is this host's loopback). */
async function get (app: TestApp, path: string, localAddress: string, headers: Record<string, string | string[]>): Promise<{ statusCode: number, id: string, body: string }> {
  const { port } = app.server.address() as AddressInfo
  return await new Promise((resolve, reject) => {
    http.get({ host: '127.0.0.1', port, path, localAddress, headers, agent: false }, (res) => {
      let body = ''
      res.setEncoding('utf8').on('data', (chunk: string) => { body += chunk }).on('end', () => {
        resolve({ statusCode: res.statusCode ?? 0, id: String(res.headers['x-request-id']), body })
      })
    }).on('error', reject)
  })
}

t.test('X-Request-Id: kept only from a trusted proxy, over real sockets; a client\'s own id is never its request id', async (t) => {
  const { stream, lines } = logLines()
  // The proxy is 127.0.0.1; a client connecting from 127.0.0.2 reaches the service directly.
  const app = await build(t, { env: { LOG_LEVEL: 'info', TRUST_PROXY: '127.0.0.1' }, logStream: stream })
  await app.listen({ host: '127.0.0.1', port: 0 })

  const fromProxy = await get(app, '/health/live', '127.0.0.1', { 'x-request-id': 'from-the-proxy-1' })
  t.equal(fromProxy.id, 'from-the-proxy-1', 'from the trusted proxy: kept')
  const direct = await get(app, '/health/live', '127.0.0.2', { 'x-request-id': 'chosen-by-a-client' })
  t.match(direct.id, UUID, 'from an untrusted peer: the service\'s own id')
  // A client that reuses a victim's id to plant log lines under it.
  const planted = await get(app, '/nowhere', '127.0.0.2', { 'x-request-id': 'from-the-proxy-1' })
  t.match(JSON.parse(planted.body).requestId, UUID, 'the problem body names the service\'s id, not the client\'s')
  t.equal(JSON.parse(planted.body).requestId, planted.id)
  const invalid = await get(app, '/health/live', '127.0.0.1', { 'x-request-id': 'forged\tline' })
  t.match(invalid.id, UUID, 'an invalid id, even from the proxy: replaced')

  const logged = (id: string): string[] => lines.filter((l) => l.reqId === id).map((l) => l.msg ?? '')
  t.same(logged('from-the-proxy-1'), ['request completed'], 'the logs: only the proxy\'s request under its id')
  t.equal(logged('chosen-by-a-client').length, 0, 'nothing logged under the client\'s id')
  t.same(logged(direct.id), ['request completed'], 'the direct request logged under the id it was answered with')
})

t.test('X-Request-Id from a trusted proxy: valid ids kept, anything else gets a UUID', async (t) => {
  const app = await build(t, { env: { TRUST_PROXY: 'loopback' } })
  for (const id of ['1b4e28ba-2fa1-41d2-883f-0016d3cca427', 'req-42', 'a.b_c:d/e+f=g@h', 'x'.repeat(128)]) {
    const res = await app.inject({ method: 'GET', url: '/health/live', headers: { 'x-request-id': id } })
    t.equal(res.headers['x-request-id'], id, `kept: ${id.slice(0, 40)}`)
  }
  const invalid: [string, string][] = [
    ['empty', ''], ['too long', 'x'.repeat(129)], ['a space', 'two words'], ['a control character', 'forged\tline'],
    ['a quote', 'a"b'], ['a semicolon', 'a;b'], ['non-ASCII', 'idé'], ['JSON', '{"level":60}']
  ]
  for (const [what, id] of invalid) {
    const res = await app.inject({ method: 'GET', url: '/health/live', headers: { 'x-request-id': id } })
    t.match(res.headers['x-request-id'], UUID, `${what}: replaced by a UUID`)
  }
  // Two headers arrive joined ("a, b"): not one id.
  const twice = await app.inject({ method: 'GET', url: '/health/live', headers: { 'x-request-id': ['one', 'two'] } })
  t.match(twice.headers['x-request-id'], UUID, 'repeated header: replaced by a UUID')
  const missing = await app.inject({ method: 'GET', url: '/health/live' })
  t.match(missing.headers['x-request-id'], UUID, 'none sent: a UUID')
  const problem = await app.inject({ method: 'GET', url: '/nowhere', headers: { 'x-request-id': 'trace-404' } })
  t.equal(assertProblem(t, problem, 404, 'NOT_FOUND').requestId, 'trace-404', 'the problem body names the same id')

  // The peer decides, as for X-Forwarded-For: the named ranges, IPv4-mapped addresses, CIDR.
  const seen = async (trust: string, remoteAddress: string): Promise<boolean> => {
    const other = await build(t, { env: { TRUST_PROXY: trust } })
    const res = await other.inject({ method: 'GET', url: '/health/live', remoteAddress, headers: { 'x-request-id': 'proxy-id' } })
    await other.close()
    return res.headers['x-request-id'] === 'proxy-id'
  }
  t.equal(await seen('false', '127.0.0.1'), false, 'TRUST_PROXY=false (the default): nobody\'s id is kept')
  t.equal(await seen('10.77.0.0/24', '10.77.0.9'), true, 'in the range')
  t.equal(await seen('10.77.0.0/24', '10.77.1.9'), false, 'outside the range')
  t.equal(await seen('10.77.0.10', '::ffff:10.77.0.10'), true, 'an IPv4-mapped peer (a dual-stack listener)')
  t.equal(await seen('uniquelocal', '172.20.0.3'), true, 'a named range (a compose network)')
  t.equal(await seen('uniquelocal', '203.0.113.7'), false, 'a public address is not in it')
  t.equal(await seen('true', '203.0.113.7'), true, 'true: every peer')
})

t.test('TRUST_PROXY: X-Forwarded-For believed from exactly the listed proxies', async (t) => {
  const seen = async (trust: string, remoteAddress: string, forwarded: string): Promise<string> => {
    const lines: string[] = []
    const logStream = new Writable({ write (chunk, _enc, done) { lines.push(...String(chunk).trim().split('\n')); done() } })
    const app = await build(t, { env: { LOG_LEVEL: 'info', TRUST_PROXY: trust }, logStream })
    await app.inject({ method: 'GET', url: '/health/live', remoteAddress, headers: { 'x-forwarded-for': forwarded } })
    await app.close()
    const line = lines.map((l) => JSON.parse(l) as { req?: { remoteAddress?: string } }).find((l) => l.req !== undefined)
    return line?.req?.remoteAddress ?? ''
  }
  // The proxy appends the client it saw; a client may have sent its own X-Forwarded-For first.
  t.equal(await seen('10.77.0.10', '10.77.0.10', '6.6.6.6, 203.0.113.7'), '203.0.113.7', 'from the proxy: the client the proxy saw, not what the client claimed')
  t.equal(await seen('10.77.0.10', '10.77.0.11', '203.0.113.7'), '10.77.0.11', 'from another address (another container): the header is ignored')
  t.equal(await seen('10.77.0.0/24', '10.77.0.11', '203.0.113.7'), '203.0.113.7', 'a CIDR range')
  t.equal(await seen('false', '10.77.0.10', '203.0.113.7'), '10.77.0.10', 'false: nobody')
  t.equal(await seen('true', '10.77.0.10', '6.6.6.6, 203.0.113.7'), '6.6.6.6', 'true: the whole chain, a client-chosen address included (why the compose file names the proxy)')
})

t.test('TRUST_PROXY: values', async (t) => {
  t.equal(parseTrustProxy('false'), false)
  t.equal(parseTrustProxy('true'), true)
  t.same(parseTrustProxy('10.77.0.10'), ['10.77.0.10'])
  t.same(parseTrustProxy(' 10.0.0.0/8, fd00::/8 ,loopback'), ['10.0.0.0/8', 'fd00::/8', 'loopback'])
  t.equal(loadConfig({}, false).server.trustProxy, 'false', 'default: nobody')
  for (const wrong of ['proxy', 'yes', '10.0.0.0/33', 'fd00::/129', '10.0.0.1/8/1', '10.0.0.300', '10.0.0.1,', '10.0.0.0/x', '']) {
    if (wrong === '') {
      t.equal(loadConfig({ TRUST_PROXY: wrong }, false).server.trustProxy, 'false', 'empty: the default')
      continue
    }
    t.throws(() => loadConfig({ TRUST_PROXY: wrong }, false), { name: 'ConfigError', message: /TRUST_PROXY/ }, `refused: ${wrong}`)
  }
})

t.test('SHUTDOWN_DRAIN_MS is part of the grace period', async (t) => {
  t.equal(loadConfig({}, false).server.shutdownDrainMs, 0, 'default: no drain')
  t.equal(loadConfig({ SHUTDOWN_DRAIN_MS: '4000' }, false).server.shutdownDrainMs, 4000)
  t.throws(() => loadConfig({ SHUTDOWN_DRAIN_MS: '10000' }, false), { name: 'ConfigError', message: /SHUTDOWN_DRAIN_MS \(10000\) must be shorter than SHUTDOWN_GRACE_MS \(10000\)/ })
  t.throws(() => loadConfig({ SHUTDOWN_DRAIN_MS: '-1' }, false), { name: 'ConfigError', message: /SHUTDOWN_DRAIN_MS/ })
  t.throws(() => loadConfig({ SHUTDOWN_DRAIN_MS: 'soon' }, false), { name: 'ConfigError', message: /SHUTDOWN_DRAIN_MS/ })
})

t.test('draining: readiness answers 503, every other request is still served, with Connection: close', async (t) => {
  const app = await build(t)
  t.equal((await app.inject({ method: 'GET', url: '/health/ready' })).statusCode, 200, 'ready before')
  t.not((await app.inject({ method: 'GET', url: '/api/product' })).headers.connection, 'close', 'kept alive before')
  app.draining.start()
  const ready = await app.inject({ method: 'GET', url: '/health/ready' })
  const problem = assertProblem(t, ready, 503, 'SERVICE_UNAVAILABLE')
  t.match(problem.detail, /shutting down/)
  t.match(ready.headers['retry-after'], /^\d+$/)
  const list = await app.inject({ method: 'GET', url: '/api/product' })
  t.equal(list.statusCode, 200, 'requests are still served')
  t.equal(list.headers.connection, 'close', 'and their connections closed, so clients reconnect elsewhere')
  t.equal((await app.inject({ method: 'GET', url: '/health/live' })).statusCode, 200, 'alive')
})
