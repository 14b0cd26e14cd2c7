/**
 * A client that goes away mid-body and a database connection that is reset both surface as
 * `ECONNRESET`; only the second is the database's fault. Over real sockets: clients cut
 * their requests (FIN and RST) while sending the body, and a TCP relay in front of
 * PostgreSQL resets the service's connections.
 */
import type { IncomingMessage } from 'node:http'
import net from 'node:net'
import { Writable } from 'node:stream'
import t, { type Test } from 'tap'
import { build, registerAndLogin, type TestApp } from '../helpers/build.js'
import { createTestDatabase } from '../helpers/database.js'

interface LogLine { level: number, reqId?: string, msg?: string, code?: string, status?: number, err?: { code?: string, message?: string, stack?: string } }

function logLines (): { stream: Writable, lines: LogLine[] } {
  const lines: LogLine[] = []
  const stream = new Writable({ write (chunk, _enc, done) { lines.push(...String(chunk).trim().split('\n').map((l) => JSON.parse(l) as LogLine)); done() } })
  return { stream, lines }
}

async function until (what: string, check: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

async function listening (t: Test, env: Record<string, string>, databaseUrl?: string): Promise<{ app: TestApp, port: number, lines: LogLine[] }> {
  const { stream, lines } = logLines()
  // The test plays the proxy (127.0.0.1), so each request is found in the logs by the id it sends.
  const app = await build(t, { env: { LOG_LEVEL: 'info', TRUST_PROXY: '127.0.0.1', ...env }, logStream: stream, databaseUrl })
  await app.listen({ host: '127.0.0.1', port: 0 })
  return { app, port: (app.server.address() as net.AddressInfo).port, lines }
}

t.test('a client that drops its connection mid-body: logged at info as CLIENT_CLOSED_REQUEST, no stack, not a database outage', async (t) => {
  const { app, port, lines } = await listening(t, {})
  const { id: me, token, auth } = await registerAndLogin(app)
  // Each cut request's Node request, by the id it sends: watched, never read, from here.
  const arrived = new Map<string, IncomingMessage>()
  app.server.prependListener('request', (request: IncomingMessage) => {
    const id = request.headers['x-request-id']
    if (typeof id === 'string') arrived.set(id, request)
  })
  const product = (await app.inject({ method: 'POST', url: '/api/product', headers: auth, payload: { title: 'lamp', amount: 1 } })).json().id as number
  const png = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64').toString('latin1')

  const cuts: Array<[string, string, string]> = [
    ['JSON, Content-Length', 'POST /api/user', 'Content-Type: application/json\r\nContent-Length: 4000\r\n\r\n{"username":"half'],
    ['JSON, chunked', 'POST /api/user', 'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n6\r\n{"user\r\n'],
    ['a login form', 'POST /api/auth/login', 'Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 4000\r\n\r\nusername=half'],
    ['an authenticated PATCH', `PATCH /api/user/${me}`, `Authorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: 4000\r\n\r\n{"email":"`],
    ['an image upload (multipart)', `POST /api/product/${product}/image`, `Authorization: Bearer ${token}\r\nContent-Type: multipart/form-data; boundary=XX\r\nContent-Length: 40000\r\n\r\n` +
      `--XX\r\nContent-Disposition: form-data; name="image"; filename="a.png"\r\nContent-Type: image/png\r\n\r\n${png}${'\x07'.repeat(2000)}`]
  ]
  let n = 0
  for (const [what, requestLine, rest] of cuts) {
    for (const how of ['FIN', 'RST'] as const) {
      const id = `cut-${++n}`
      const socket = net.connect(port, '127.0.0.1')
      socket.on('error', () => {})
      await new Promise((resolve) => socket.once('connect', resolve))
      socket.write(Buffer.from(`${requestLine} HTTP/1.1\r\nHost: localhost\r\nX-Request-Id: ${id}\r\n${rest}`, 'latin1'))
      // Cut once the service is reading the body (its route matched, its hooks ran): the
      // body parser has started the request's stream.
      await until(`${id} is being read`, () => arrived.get(id)?.readableFlowing === true)
      await new Promise((resolve) => setTimeout(resolve, 100))
      if (how === 'RST') socket.resetAndDestroy()
      else socket.end()
      await until(`${id} is logged as ended`, () => lines.some((l) => l.reqId === id))
      // Give a late second line (an error log after the first) the chance to appear.
      await new Promise((resolve) => setTimeout(resolve, 100))
      const mine = lines.filter((l) => l.reqId === id)
      t.same(mine.filter((l) => l.level >= 40).map((l) => [l.level, l.msg, l.err?.code]), [], `${what}, ${how}: nothing at warn or above`)
      t.notOk(mine.some((l) => l.err?.stack !== undefined), `${what}, ${how}: no stack`)
      // 499 (the client closed the request), not the 503 of a database outage.
      t.same(mine.filter((l) => l.code !== undefined).map((l) => [l.level, l.code, l.status]), [[30, 'CLIENT_CLOSED_REQUEST', 499]], `${what}, ${how}: one info line, 499 CLIENT_CLOSED_REQUEST`)
    }
  }
  // The service is unharmed: the same user reads themselves.
  t.equal((await app.inject({ method: 'GET', url: `/api/user/${me}`, headers: auth })).statusCode, 200)
})

/** A TCP relay to PostgreSQL that can reset every connection (RST), like a database host that drops them. */
async function resettingRelay (t: Test, target: URL): Promise<{ port: number, resetting: (on: boolean) => void }> {
  const open = new Set<net.Socket>()
  let reset = false
  const server = net.createServer((client) => {
    client.on('error', () => {})
    if (reset) {
      client.once('data', () => client.resetAndDestroy())
      return
    }
    const upstream = net.connect(Number(target.port || 5432), target.hostname)
    upstream.on('error', () => client.destroy())
    client.pipe(upstream).pipe(client)
    open.add(client)
    client.on('close', () => { open.delete(client); upstream.destroy() })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => { for (const s of open) s.destroy(); server.close(resolve) }))
  return {
    port: (server.address() as net.AddressInfo).port,
    resetting (on) {
      reset = on
      if (on) for (const s of open) s.resetAndDestroy()
    }
  }
}

t.test('a database connection reset (ECONNRESET from pg) is still a 503 SERVICE_UNAVAILABLE', async (t) => {
  const direct = new URL(await createTestDatabase(t))
  const relay = await resettingRelay(t, direct)
  const viaRelay = new URL(direct)
  viaRelay.host = `127.0.0.1:${relay.port}`
  const { app, port, lines } = await listening(t, {}, viaRelay.toString())
  const { id, auth } = await registerAndLogin(app)
  // The token check's query is raw `pg` (src/modules/identity/repository.ts): its error is pg's own.
  const get = async (requestId: string): Promise<Response> => await fetch(`http://127.0.0.1:${port}/api/user/${id}`, { headers: { ...auth, 'x-request-id': requestId } })
  t.equal((await get('db-1')).status, 200, 'served through the relay')

  relay.resetting(true)
  for (const requestId of ['db-2', 'db-3']) {
    const res = await get(requestId)
    const body = await res.json() as { code: string, detail: string }
    t.equal(res.status, 503)
    t.equal(body.code, 'SERVICE_UNAVAILABLE')
    t.match(body.detail, /database is unavailable/)
    // Logged as the fault it is: error level, with the cause.
    const logged = lines.find((l) => l.reqId === requestId && l.level === 50)
    t.match(logged?.err?.stack, /caused by: Error: read ECONNRESET/, 'logged at error level, pg\'s reset as the cause')
  }

  relay.resetting(false)
  t.equal((await get('db-4')).status, 200, 'served again once the connections are not reset')
})
