/** HTTP-level behaviour shared by every route: error shape, limits, headers, logs, docs. */
import { Writable } from 'node:stream'
import t from 'tap'
import { assertProblem } from './helpers/assertions.js'
import { expectedMigrations, pendingMigrations } from '../src/db/pending.js'
import { migrateDeploy } from '../src/db/migrate.js'
import { build, injectAs, newUser, registerAndLogin } from './helpers/build.js'
import { createEmptyDatabase } from './helpers/database.js'

t.test('bad requests answer precise 4xx problem details', async (t) => {
  const app = await build(t, { env: { BODY_LIMIT: '4096' } })
  const json = { 'content-type': 'application/json' }

  t.test('malformed JSON: 400 MALFORMED_JSON', async (t) => {
    for (const payload of ['{', '{"username": "a",}', 'nul', '"unterminated', '{"a":1}{"b":2}']) {
      assertProblem(t, await app.inject({ method: 'POST', url: '/api/user', headers: json, payload }), 400, 'MALFORMED_JSON')
    }
  })
  t.test('empty JSON body: 400', async (t) => {
    assertProblem(t, await app.inject({ method: 'POST', url: '/api/user', headers: json, payload: '' }), 400, 'MALFORMED_JSON')
  })
  t.test('prototype poisoning: 400', async (t) => {
    const body = JSON.stringify(newUser())
    for (const key of ['__proto__', 'constructor']) {
      const payload = body.replace('{', `{"${key}":{"prototype":{"admin":true},"admin":true},`)
      const res = await app.inject({ method: 'POST', url: '/api/user', headers: json, payload })
      t.equal(res.statusCode, 400, key)
      t.match(res.headers['content-type'], /problem\+json/)
    }
    t.equal(({} as Record<string, unknown>).admin, undefined, 'Object.prototype untouched')
  })
  t.test('unsupported content type: 415', async (t) => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/xml']) {
      assertProblem(t, await app.inject({ method: 'POST', url: '/api/user', headers: { 'content-type': type }, payload: 'username=a' }), 415, 'UNSUPPORTED_MEDIA_TYPE')
    }
  })
  t.test('body over the limit: 413, before any work', async (t) => {
    const res = await app.inject({ method: 'POST', url: '/api/user', headers: json, payload: JSON.stringify({ ...newUser(), pad: 'x'.repeat(5000) }) })
    assertProblem(t, res, 413, 'PAYLOAD_TOO_LARGE')
  })
  t.test('unknown route: 404 NOT_FOUND; a known path asked with a method it lacks: 405', async (t) => {
    const res = await app.inject({ method: 'GET', url: '/api/nothing-here?x=1' })
    const problem = assertProblem(t, res, 404, 'NOT_FOUND')
    t.equal(problem.instance, '/api/nothing-here', 'instance is the path, without the query')
    const put = assertProblem(t, await app.inject({ method: 'PUT', url: '/api/product' }), 405, 'METHOD_NOT_ALLOWED')
    t.equal(put.detail, 'PUT is not allowed on /api/product; allowed: GET, HEAD, POST')
  })
  t.test('validation errors name the part and the field', async (t) => {
    const problem = assertProblem(t, await app.inject({ method: 'POST', url: '/api/user', payload: { ...newUser(), email: 5 } }), 400, 'VALIDATION_FAILED')
    t.same(problem.errors, [{ in: 'body', field: '/email', message: 'must be string' }])
    t.equal(problem.detail, 'Invalid request body: /email must be string')
    const query = assertProblem(t, await app.inject({ method: 'GET', url: '/api/product?limit=0x10' }), 400, 'VALIDATION_FAILED')
    t.same(query.errors, [{ in: 'querystring', field: '/limit', message: 'must be a decimal integer' }])
  })
})

t.test('a method a path does not route is a 405 with Allow, whoever asks; an unknown path a 404; HEAD answers as GET does, without a body', async (t) => {
  // No route of the service answers OPTIONS: the CORS plugin's answers only a listed origin's
  // preflight (test/cors.test.ts), so on a known path any other OPTIONS is a 405 like any
  // other method it lacks, and Allow never lists it.
  const app = await build(t)
  const me = await registerAndLogin(app)
  const product = (await injectAs(app, me, { method: 'POST', url: '/api/product', payload: { title: 'p', amount: 1 } })).json().id as number
  const doc = (await app.inject('/docs/json')).json() as { paths: Record<string, Record<string, unknown>> }
  const routed = new Map(Object.entries(doc.paths).map(([path, operations]) => [path, Object.keys(operations).map((m) => m.toUpperCase())]))
  // `/`: the web app (WEB_APP, on by default).
  for (const path of ['/health/live', '/health/ready', '/metrics', '/docs', '/docs/json', '/']) routed.set(path, ['GET'])
  // Paths of no route at all: every method is a 404 there.
  for (const path of ['/nothing', '/api/nothing', '/api/user/{id}/extra']) routed.set(path, [])
  t.ok(routed.has('/api/product/{id}') && routed.has('/api/admin/users'), 'the document lists the routes')
  t.notOk(routed.get('/api/user')?.includes('GET'), 'no route lists the users')
  const idFor = (path: string) => path.startsWith('/api/product') || path.startsWith('/api/admin/products') ? product : me.id

  for (const [template, methods] of routed) {
    const url = template.replace('{id}', String(idFor(template)))
    const allow = methods.length === 0 ? undefined : [...methods, ...(methods.includes('GET') ? ['HEAD'] : [])].sort().join(', ')
    for (const auth of [{}, me.auth]) {
      const who = Object.keys(auth).length === 0 ? 'anonymous' : 'with a token'
      for (const method of ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const) {
        if (methods.includes(method)) continue
        const res = await app.inject({ method, url, headers: auth })
        if (allow === undefined) {
          assertProblem(t, res, 404, 'NOT_FOUND')
          t.equal(res.headers.allow, undefined, `${method} ${template} ${who}: no Allow header`)
        } else {
          const problem = assertProblem(t, res, 405, 'METHOD_NOT_ALLOWED')
          t.equal(res.headers.allow, allow, `${method} ${template} ${who}: Allow lists the path's methods`)
          t.equal(problem.instance, url.split('?')[0])
        }
      }
      const get = await app.inject({ method: 'GET', url, headers: auth })
      const head = await app.inject({ method: 'HEAD', url, headers: auth })
      t.same([head.statusCode, head.headers['content-type'], head.body], [get.statusCode, get.headers['content-type'], ''], `HEAD ${template} ${who}: GET's status (${get.statusCode}) and type, no body`)
    }
  }
})

t.test('a failing dependency is a 500 with a generic detail, logged once with its stack', async (t) => {
  const lines: string[] = []
  const logStream = new Writable({ write (chunk, _enc, done) { lines.push(...String(chunk).trim().split('\n')); done() } })
  const app = await build(t, { env: { LOG_LEVEL: 'info' }, logStream })
  app.productsRepository.page = (async () => { throw new Error('boom: secret internals') }) as never
  const res = await app.inject({ method: 'GET', url: '/api/product' })
  const problem = assertProblem(t, res, 500, 'INTERNAL')
  t.notMatch(res.body, /boom|secret internals/, 'the cause stays in the logs')
  const errors = lines.map((l) => JSON.parse(l)).filter((l) => l.level >= 50)
  t.equal(errors.length, 1, 'one error log')
  t.match(errors[0], { reqId: problem.requestId, err: { message: 'boom: secret internals' } })
  t.match(errors[0].err.stack, /boom/)
})

t.test('logs never hold passwords, tokens or cookies', async (t) => {
  const lines: string[] = []
  const logStream = new Writable({ write (chunk, _enc, done) { lines.push(String(chunk)); done() } })
  const app = await build(t, { env: { LOG_LEVEL: 'trace' }, logStream })
  const me = await registerAndLogin(app)
  await injectAs(app, me, { method: 'GET', url: `/api/user/${me.id}`, headers: { cookie: 'session=cookie-secret-value' } })
  await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: me.username, password: 'wrong password here' } })
  app.log.info({ password: 'logged-password', user: { password: 'nested-password', passwordHash: '$2b$04$abc' }, token: me.token }, 'an object with secrets')
  const log = lines.join('')
  t.ok(log.includes('"password":"[redacted]"'), 'password fields are redacted, not dropped silently')
  for (const secret of [me.password, me.token, 'cookie-secret-value', 'logged-password', 'nested-password', '$2b$04$abc', 'wrong password here']) {
    t.notOk(log.includes(secret), `not in the logs: ${secret.slice(0, 12)}…`)
  }
})

t.test('one `request completed` line per request, in the JSON pino writes, whatever the request holds', async (t) => {
  const lines: string[] = []
  const logStream = new Writable({ write (chunk, _enc, done) { lines.push(...String(chunk).trim().split('\n')); done() } })
  const app = await build(t, { env: { LOG_LEVEL: 'info' }, logStream })
  const hostile = 'a"b\\c\u2028é}{'
  const url = `/health/live?q=${hostile}`
  const res = await app.inject({ method: 'GET', url, headers: { host: hostile, 'accept-version': hostile } })
  const completed = lines.map((l) => JSON.parse(l)).filter((l) => l.msg === 'request completed')
  t.equal(completed.length, 1, 'one line, and it is JSON')
  const line = completed[0]
  t.same(Object.keys(line), ['level', 'time', 'pid', 'hostname', 'reqId', 'req', 'res', 'responseTime', 'msg'], 'pino\'s fields, in pino\'s order')
  t.match(line, { level: 30, time: Number, pid: process.pid, hostname: String, reqId: res.headers['x-request-id'], res: { statusCode: 200 }, responseTime: Number })
  // The URL as it reached Fastify (light-my-request percent-encodes as browsers do); the headers as sent.
  const reached = new URL(url, 'http://localhost')
  t.same(line.req, { method: 'GET', url: reached.pathname + reached.search, version: hostile, host: hostile, remoteAddress: '127.0.0.1' }, 'quotes, backslashes and line separators arrive as sent')
  t.ok(Math.abs(line.time - Date.now()) < 60_000 && line.responseTime >= 0)

  const quiet: string[] = []
  const quietApp = await build(t, { env: { LOG_LEVEL: 'warn' }, logStream: new Writable({ write (chunk, _enc, done) { quiet.push(String(chunk)); done() } }) })
  await quietApp.inject({ method: 'GET', url: '/health/live' })
  t.notOk(quiet.join('').includes('request completed'), 'LOG_LEVEL=warn: no request line')
})

t.test('every response carries security headers and its request id', async (t) => {
  const app = await build(t)
  const a = await app.inject({ method: 'GET', url: '/health/live' })
  const b = await app.inject({ method: 'GET', url: '/health/live' })
  t.match(a.headers['x-request-id'], /^[0-9a-f-]{36}$/)
  t.not(a.headers['x-request-id'], b.headers['x-request-id'])
  const own = await app.inject({ method: 'GET', url: '/health/live', headers: { 'x-request-id': 'forged\nline' } })
  t.not(own.headers['x-request-id'], 'forged\nline', 'an invalid client-sent id is not used (test/operations/behind-proxy.test.ts)')
  t.equal(a.headers['x-content-type-options'], 'nosniff')
  t.match(a.headers['content-security-policy'], /default-src 'self'/)
  t.match(a.headers['content-security-policy'], /script-src 'self'/, 'a strict CSP')
  t.notMatch(a.headers['content-security-policy'], /upgrade-insecure-requests/, 'plain HTTP by default: the OpenAPI page loads over http on a LAN address')
  t.notOk(a.headers['strict-transport-security'], 'no HSTS unless HTTPS_ONLY')
  t.equal(a.headers['x-frame-options'], 'SAMEORIGIN')
  t.equal(a.headers['referrer-policy'], 'strict-origin-when-cross-origin', 'browsers send the page\'s origin on form posts (src/modules/identity/csrf.ts)')
  t.notOk(a.headers['x-powered-by'])
  // The whole set helmet's defaults send (src/plugins/security-headers.ts), also on errors.
  const names = ['content-security-policy', 'cross-origin-opener-policy', 'cross-origin-resource-policy', 'origin-agent-cluster',
    'referrer-policy', 'x-content-type-options', 'x-dns-prefetch-control', 'x-download-options', 'x-frame-options',
    'x-permitted-cross-domain-policies', 'x-xss-protection']
  const security = (headers: Record<string, unknown>): Record<string, unknown> => Object.fromEntries(names.map((name) => [name, headers[name]]))
  t.notOk(Object.values(security(a.headers)).includes(undefined), 'every helmet header is present')
  for (const [url, status] of [['/nowhere', 404], ['/api/user/abc', 401]] as const) {
    const res = await app.inject({ method: 'GET', url })
    t.equal(res.statusCode, status)
    t.same(security(res.headers), security(a.headers), `the same security headers on a ${status}`)
  }
})

t.test('HTTPS_ONLY: the CSP upgrades insecure requests and HSTS is sent', async (t) => {
  const app = await build(t, { env: { HTTPS_ONLY: 'true' } })
  const res = await app.inject({ method: 'GET', url: '/docs' })
  t.match(res.headers['content-security-policy'], /upgrade-insecure-requests/)
  t.match(res.headers['strict-transport-security'], /max-age=31536000/)
})

t.test('health and OpenAPI', async (t) => {
  const app = await build(t)
  t.same((await app.inject({ method: 'GET', url: '/health/live' })).json(), { status: 'ok' })
  t.same((await app.inject({ method: 'GET', url: '/health/ready' })).json(), { status: 'ok' })
  const page = await app.inject({ method: 'GET', url: '/docs' })
  t.equal(page.statusCode, 200)
  t.match(page.body, /swagger-ui/i)
  const doc = (await app.inject({ method: 'GET', url: '/docs/json' })).json()
  t.equal(doc.openapi.slice(0, 2), '3.')
  for (const path of ['/api/auth/register', '/api/auth/login', '/api/user', '/api/user/{id}', '/api/product', '/api/product/{id}', '/health/ready']) {
    t.ok(doc.paths[path], `documents ${path}`)
  }
  t.same(doc.paths['/api/user/{id}'].get.security, [{ bearerAuth: [] }, { cookieAuth: [] }], 'a bearer token or the session cookie')
  t.match(doc.components.securitySchemes.cookieAuth, { type: 'apiKey', in: 'cookie', name: '__Secure-access_token' })
  for (const path of ['/api/auth/refresh-token', '/api/auth/logout']) t.ok(doc.paths[path]?.post, `documents ${path}`)
  t.ok(doc.paths['/api/auth/refresh-token'].post.responses['401'], 'refresh documents its 401')
  t.ok(doc.paths['/api/user/{id}'].get.responses['403'], 'error responses documented')
  t.notMatch(JSON.stringify(doc.paths['/api/user/{id}'].get.responses['200']), /passwordHash/)
})

t.test('/health/ready: 503 while a migration is pending on a database that answers, 200 once applied', async (t) => {
  const url = await createEmptyDatabase(t)
  const app = await build(t, { databaseUrl: url })
  const before = await app.inject({ method: 'GET', url: '/health/ready' })
  assertProblem(t, before, 503, 'SERVICE_UNAVAILABLE')
  t.match(before.json().detail, /not up to date: \d+ migration\(s\) pending/, 'says why (no _prisma_migrations table yet)')
  t.same(await pendingMigrations(url), await expectedMigrations(), 'the start sees the same pending list (src/db/pending.ts)')
  await migrateDeploy(url)
  t.same(await pendingMigrations(url), [], 'none pending after migrate deploy')
  t.equal((await app.inject({ method: 'GET', url: '/health/ready' })).statusCode, 200)
})
