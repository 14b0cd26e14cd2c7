/**
 * Body limits, enforced before any work: a body over BODY_LIMIT answers 413 as soon as
 * its declared length is known (or, chunked, as soon as it crosses the limit), multipart
 * answers 415 on every JSON route (only the image upload reads it: body-types.test.ts),
 * and a compressed body answers 415
 * without being decompressed (no decompression bomb). Malformed HTTP, oversized headers
 * and request smuggling are refused in problem details, and the server keeps serving.
 */
import { gzipSync } from 'node:zlib'
import t from 'tap'
import { Value } from 'typebox/value'
import { Problem } from '../../src/lib/problem.js'
import { assertProblem } from '../helpers/assertions.js'
import { build, newUser, registerAndLogin } from '../helpers/build.js'
import { sqlClient } from '../helpers/database.js'
import { connect } from '../faults/helpers/raw.js'

const LIMIT = 4096

function parse (raw: string): { status: number, headers: string, body: any } {
  const [head = '', ...rest] = raw.split('\r\n\r\n')
  let body: unknown
  try { body = JSON.parse(rest.join('\r\n\r\n')) } catch { body = undefined }
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]), headers: head, body }
}

t.test('over the body limit: 413 on every body route, nothing stored', async (t) => {
  const app = await build(t, { env: { BODY_LIMIT: String(LIMIT) } })
  const me = await registerAndLogin(app)
  const big = { ...newUser(), padding: 'x'.repeat(LIMIT) }
  const routes = [
    { method: 'POST' as const, url: '/api/user' },
    { method: 'POST' as const, url: '/api/auth/register' },
    { method: 'POST' as const, url: '/api/auth/login' },
    { method: 'PATCH' as const, url: `/api/user/${me.id}`, headers: me.auth },
    { method: 'POST' as const, url: '/api/product', headers: me.auth }
  ]
  for (const route of routes) {
    assertProblem(t, await app.inject({ ...route, payload: big }), 413, 'PAYLOAD_TOO_LARGE')
  }
  const sql = await sqlClient(t, app.databaseUrl)
  t.equal((await sql.query('SELECT count(*)::int AS n FROM users')).rows[0].n, 1, 'no user was created')
  t.equal((await sql.query('SELECT count(*)::int AS n FROM products')).rows[0].n, 0, 'no product was created')
})

t.test('413 before the body is read (real socket)', async (t) => {
  const app = await build(t, { env: { BODY_LIMIT: String(LIMIT) } })
  const url = await app.listen({ host: '127.0.0.1', port: 0 })

  // 50 MB declared, none sent: the answer comes from the headers alone.
  const declared = await connect(url)
  declared.write('POST /api/user HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 52428800\r\n\r\n')
  const ms = await Promise.race([declared.closed, new Promise<number>((resolve) => setTimeout(() => resolve(-1), 5000))])
  const answer = parse(declared.received())
  t.equal(answer.status, 413, 'a declared 50 MB body: 413 without sending it')
  t.ok(Value.Check(Problem, answer.body), 'in problem details')
  t.ok(ms >= 0 && ms < 2000, `and the connection closed (${ms} ms)`)
  declared.socket.destroy()

  // Chunked: answered once the limit is crossed, long before the client is done.
  const chunked = await connect(url)
  chunked.write('POST /api/user HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n')
  let sent = 0
  const chunk = 'x'.repeat(1024)
  while (sent < 1_000_000 && chunked.received() === '' && !chunked.socket.destroyed) {
    chunked.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`)
    sent += chunk.length
    await new Promise((resolve) => setTimeout(resolve, 2))
  }
  await Promise.race([chunked.closed, new Promise((resolve) => setTimeout(resolve, 2000))])
  t.equal(parse(chunked.received()).status, 413, `a chunked body: 413 after ${sent} bytes sent`)
  t.ok(sent < LIMIT * 10, 'the server stopped it near the limit')
  chunked.socket.destroy()
})

t.test('multipart: 415 on every JSON route', async (t) => {
  const app = await build(t)
  const me = await registerAndLogin(app)
  const boundary = '----fuzzboundary'
  const part = (name: string, value: string, file = false) =>
    `--${boundary}\r\nContent-Disposition: form-data; name="${name}"${file ? '; filename="a.bin"\r\nContent-Type: application/octet-stream' : ''}\r\n\r\n${value}\r\n`
  const payload = part('username', 'someone') + part('password', 'a password') + part('file', 'x'.repeat(10_000), true) + `--${boundary}--\r\n`
  const headers = { 'content-type': `multipart/form-data; boundary=${boundary}` }
  for (const route of [
    { method: 'POST' as const, url: '/api/user', headers },
    { method: 'POST' as const, url: '/api/auth/register', headers },
    { method: 'POST' as const, url: '/api/auth/login', headers },
    { method: 'PATCH' as const, url: `/api/user/${me.id}`, headers: { ...headers, ...me.auth } },
    { method: 'POST' as const, url: '/api/product', headers: { ...headers, ...me.auth } }
  ]) {
    assertProblem(t, await app.inject({ ...route, payload }), 415, 'UNSUPPORTED_MEDIA_TYPE')
  }
})

t.test('compressed bodies: 415, never decompressed', async (t) => {
  const app = await build(t)
  const user = newUser()
  const bomb = gzipSync(Buffer.alloc(50 * 1024 * 1024)) // 50 MB of zeros in ~50 KB
  t.ok(bomb.length < 100_000, `a gzip bomb of ${bomb.length} bytes`)
  for (const [coding, payload] of [
    ['gzip', gzipSync(JSON.stringify(user))],
    ['gzip', bomb],
    ['deflate', Buffer.from(JSON.stringify(user))],
    ['br', Buffer.from(JSON.stringify(user))],
    ['identity, gzip', gzipSync(JSON.stringify(user))]
  ] as const) {
    const before = process.memoryUsage().rss
    const res = await app.inject({ method: 'POST', url: '/api/user', payload, headers: { 'content-type': 'application/json', 'content-encoding': coding } })
    assertProblem(t, res, 415, 'UNSUPPORTED_MEDIA_TYPE')
    t.equal(res.headers['accept-encoding'], 'identity', `Content-Encoding ${coding}: 415 with Accept-Encoding: identity`)
    t.ok(process.memoryUsage().rss - before < 20 * 1024 * 1024, 'and no memory spent inflating it')
  }
  const plain = await app.inject({ method: 'POST', url: '/api/user', payload: user, headers: { 'content-encoding': 'identity' } })
  t.equal(plain.statusCode, 201, 'Content-Encoding: identity is a plain body')
})

t.test('malformed HTTP is refused in problem details, and the server keeps serving', async (t) => {
  const app = await build(t)
  const url = await app.listen({ host: '127.0.0.1', port: 0 })
  const cases: [string, string, number, string][] = [
    ['headers over 16 KB', `GET /health/live HTTP/1.1\r\nHost: localhost\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431, 'HEADERS_TOO_LARGE'],
    ['a garbage request line', 'HELLO\r\n\r\n', 400, 'BAD_REQUEST'],
    ['a NUL in a header', 'GET /health/live HTTP/1.1\r\nHost: localhost\r\nX-A: a\u0000b\r\n\r\n', 400, 'BAD_REQUEST'],
    ['Content-Length and Transfer-Encoding both (smuggling)', 'POST /api/user HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /health/live HTTP/1.1\r\nHost: localhost\r\n\r\n', 400, 'BAD_REQUEST'],
    ['two Content-Length values', 'POST /api/user HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}', 400, 'BAD_REQUEST'],
    ['a bad chunk size', 'POST /api/user HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n', 400, 'BAD_REQUEST']
  ]
  for (const [what, request, status, code] of cases) {
    const c = await connect(url)
    c.write(request)
    await Promise.race([c.closed, new Promise((resolve) => setTimeout(resolve, 3000))])
    const answers = c.received().match(/^HTTP\/1\.1 /gm) ?? []
    const answer = parse(c.received())
    t.equal(answer.status, status, `${what}: ${status}`)
    t.ok(Value.Check(Problem, answer.body) && answer.body.code === code, `${what}: problem details, code ${code}`)
    t.equal(answers.length, 1, `${what}: one answer, nothing smuggled through`)
    c.socket.destroy()
  }
  t.equal((await fetch(`${url}/health/live`)).status, 200, 'the server still serves')
})
