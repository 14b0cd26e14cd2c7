/**
 * A cookie login the browser would silently drop is refused instead: `Secure` (`__Secure-`)
 * cookies over plain HTTP to a host that is not loopback (Chromium: InvalidPrefix, and the
 * login answered 200). Browsers keep them from HTTPS and from http://localhost, *.localhost,
 * 127.0.0.0/8 and [::1]; behind a TLS proxy, TRUST_PROXY lets the service see
 * X-Forwarded-Proto: https.
 */
import t from 'tap'
import { assertProblem } from './helpers/assertions.js'
import { build, newUser, type TestApp } from './helpers/build.js'
import { ACCESS } from './helpers/browser.js'

const FORM = 'application/x-www-form-urlencoded'

async function registered (app: TestApp) {
  const user = newUser()
  await app.inject({ method: 'POST', url: '/api/user', payload: user })
  return user
}

const formLogin = async (app: TestApp, user: { username: string, password: string }, headers: Record<string, string>) =>
  await app.inject({ method: 'POST', url: '/api/auth/login', headers: { 'content-type': FORM, ...headers }, payload: new URLSearchParams({ username: user.username, password: user.password }).toString() })

t.test('COOKIE_SECURE=true over plain HTTP: loopback hosts log in, others get INSECURE_COOKIE_CONTEXT', async (t) => {
  const app = await build(t)
  const u = await registered(app)
  for (const host of ['localhost', 'localhost:3000', 'LOCALHOST', 'app.localhost:8080', '127.0.0.1', '127.0.0.1:3000', '127.8.9.10', '[::1]:3000']) {
    const res = await formLogin(app, u, { host, origin: `http://${host}` })
    t.equal(res.statusCode, 200, `http://${host}: 200 (${res.body.slice(0, 120)})`)
    t.ok(res.cookies.some((c) => c.name === ACCESS && c.secure === true), `http://${host}: the Secure cookie is set`)
  }
  for (const host of ['192.168.1.20:3000', 'api.example.com', 'localhost.example.com', '127.0.0.1.nip.io', '10.0.0.5', '[::2]:3000', 'myhost']) {
    const res = await formLogin(app, u, { host, origin: `http://${host}` })
    const body = assertProblem(t, res, 400, 'INSECURE_COOKIE_CONTEXT')
    t.match(body.detail, /HTTPS/, 'the detail names HTTPS')
    t.match(body.detail, /TRUST_PROXY/, 'and TRUST_PROXY')
    t.match(body.detail, /COOKIE_SECURE=false/, 'and COOKIE_SECURE=false')
    t.same(res.cookies, [], `http://${host}: no cookie`)
  }
  const wrong = await formLogin(app, { username: u.username, password: 'not the password' }, { host: 'api.example.com' })
  assertProblem(t, wrong, 400, 'INSECURE_COOKIE_CONTEXT')
  t.pass('checked before the password: the answer says nothing of it')

  const json = await app.inject({ method: 'POST', url: '/api/auth/login', headers: { host: 'api.example.com' }, payload: { username: u.username, password: u.password, mode: 'cookie' } })
  assertProblem(t, json, 400, 'INSECURE_COOKIE_CONTEXT')
  const token = await app.inject({ method: 'POST', url: '/api/auth/login', headers: { host: 'api.example.com' }, payload: { username: u.username, password: u.password } })
  t.equal(token.statusCode, 200, 'token mode needs no cookie: unaffected')

  const forwarded = await formLogin(app, u, { host: 'api.example.com', 'x-forwarded-proto': 'https' })
  assertProblem(t, forwarded, 400, 'INSECURE_COOKIE_CONTEXT')
  t.pass('X-Forwarded-Proto is not believed without TRUST_PROXY')
})

t.test('behind a TLS proxy named by TRUST_PROXY, X-Forwarded-Proto: https is HTTPS', async (t) => {
  const app = await build(t, { env: { TRUST_PROXY: 'true' } })
  const u = await registered(app)
  const res = await formLogin(app, u, { host: 'api.example.com', origin: 'https://api.example.com', 'x-forwarded-proto': 'https' })
  t.equal(res.statusCode, 200, res.body.slice(0, 200))
  t.ok(res.cookies.some((c) => c.name === ACCESS), 'cookies set')
  assertProblem(t, await formLogin(app, u, { host: 'api.example.com', 'x-forwarded-proto': 'http' }), 400, 'INSECURE_COOKIE_CONTEXT')
})

t.test('COOKIE_SECURE=false: plain-HTTP cookies from any host', async (t) => {
  const app = await build(t, { env: { COOKIE_SECURE: 'false' } })
  const u = await registered(app)
  const res = await formLogin(app, u, { host: '192.168.1.20:3000', origin: 'http://192.168.1.20:3000' })
  t.equal(res.statusCode, 200, res.body.slice(0, 200))
  t.same(res.cookies.map((c) => c.name).sort(), ['access_token', 'refresh_token'])
})

t.test('over real HTTP, on a non-loopback Host', async (t) => {
  const app = await build(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const port = (app.server.address() as { port: number }).port
  const u = await registered(app)
  // Node's fetch will not let a caller set Host: a raw request as a browser at http://192.168.1.20:<port> sends it.
  const { request } = await import('node:http')
  const body = new URLSearchParams({ username: u.username, password: u.password }).toString()
  const answer = await new Promise<{ status: number, cookies: string[], text: string }>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/api/auth/login', headers: { host: `192.168.1.20:${port}`, origin: `http://192.168.1.20:${port}`, 'content-type': FORM, 'content-length': Buffer.byteLength(body) } }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => { text += chunk })
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, cookies: res.headers['set-cookie'] ?? [], text }) })
    })
    req.on('error', reject)
    req.end(body)
  })
  t.equal(answer.status, 400)
  t.equal(JSON.parse(answer.text).code, 'INSECURE_COOKIE_CONTEXT')
  t.same(answer.cookies, [], 'no Set-Cookie')
  const local = await fetch(`http://127.0.0.1:${port}/api/auth/login`, { method: 'POST', body: new URLSearchParams({ username: u.username, password: u.password }) })
  t.equal(local.status, 200, 'http://127.0.0.1: browsers keep Secure cookies from loopback')
  t.equal(local.headers.getSetCookie().length, 2)
})
