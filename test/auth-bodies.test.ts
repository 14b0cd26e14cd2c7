/**
 * Refresh and logout take what clients post for "no fields": no body, `{}`, an HTML form
 * (empty or with the route's fields), and `Content-Type: application/json` with an empty body
 * (axios and ky send that for a bodiless POST). A non-empty body that is not JSON stays
 * 400 MALFORMED_JSON; other types stay 415.
 */
import t from 'tap'
import { assertProblem } from './helpers/assertions.js'
import { build, registerAndLogin, type TestApp } from './helpers/build.js'
import { ACCESS, REFRESH, SELF, browser, cookie } from './helpers/browser.js'

const FORM = 'application/x-www-form-urlencoded'
const JSON_TYPE = 'application/json'

/** Ways to say "no fields", as headers and payload. */
const EMPTY: Array<[string, Record<string, string>, string | undefined]> = [
  ['no body, no Content-Type', {}, undefined],
  ['application/json, empty body', { 'content-type': JSON_TYPE }, ''],
  ['application/json; charset=utf-8, empty body', { 'content-type': `${JSON_TYPE}; charset=utf-8` }, ''],
  ['{}', { 'content-type': JSON_TYPE }, '{}'],
  ['an empty form', { 'content-type': FORM }, '']
]

const inject = async (app: TestApp, url: string, headers: Record<string, string>, payload: string | undefined) =>
  await app.inject({ method: 'POST', url, headers, ...(payload === undefined ? {} : { payload }) })

t.test('refresh by cookie with each kind of empty body', async (t) => {
  const app = await build(t)
  const paths = (await app.inject({ url: '/docs/json' })).json().paths
  for (const path of ['/api/auth/refresh-token', '/api/auth/logout']) {
    const body = paths[path].post.requestBody
    t.equal(body.required, false, `the OpenAPI document: ${path} needs no body`)
    t.same(Object.keys(body.content).sort(), [JSON_TYPE, FORM], `the OpenAPI document: ${path} takes JSON and forms`)
  }
  t.equal(paths['/api/auth/login'].post.requestBody.required, true, 'login still needs one')
  for (const [name, headers, payload] of EMPTY) {
    const me = await browser(app)
    const res = await inject(app, '/api/auth/refresh-token', { host: 'localhost', origin: SELF, cookie: `${REFRESH}=${me.refresh}`, ...headers }, payload)
    t.equal(res.statusCode, 200, `${name}: refreshed (${res.body.slice(0, 160)})`)
    t.match(res.json(), { mode: 'cookie', userId: me.id })
    t.ok(cookie(res, ACCESS) !== undefined && cookie(res, REFRESH)?.value !== me.refresh, `${name}: new cookies`)
  }
  for (const [name, headers, payload] of EMPTY) {
    assertProblem(t, await inject(app, '/api/auth/refresh-token', headers, payload), 400, 'BAD_REQUEST')
    t.pass(`${name} without a cookie: 400, nothing to refresh`)
  }

  t.test('a form may carry the token, like JSON', async (t) => {
    const session = await registerAndLogin(app)
    const res = await inject(app, '/api/auth/refresh-token', { 'content-type': FORM }, new URLSearchParams({ refreshToken: session.refreshToken }).toString())
    t.equal(res.statusCode, 200, res.body)
    t.match(res.json(), { mode: 'token', refreshToken: String })
    const unknown = await inject(app, '/api/auth/refresh-token', { 'content-type': FORM }, 'refresh_token=x')
    t.match(assertProblem(t, unknown, 400, 'VALIDATION_FAILED').errors, [{ in: 'body' }], 'an unknown form field: 400')
  })

  t.test('what stays refused', async (t) => {
    const me = await browser(app)
    const headers = { host: 'localhost', origin: SELF, cookie: `${REFRESH}=${me.refresh}` }
    for (const broken of ['{', '{"refreshToken":', 'null,', ' ']) {
      assertProblem(t, await inject(app, '/api/auth/refresh-token', { ...headers, 'content-type': JSON_TYPE }, broken), 400, 'MALFORMED_JSON')
    }
    assertProblem(t, await inject(app, '/api/auth/refresh-token', { ...headers, 'content-type': 'text/plain' }, ''), 415, 'UNSUPPORTED_MEDIA_TYPE')
    assertProblem(t, await inject(app, '/api/auth/refresh-token', { ...headers, 'content-type': 'application/xml' }, '<a/>'), 415, 'UNSUPPORTED_MEDIA_TYPE')
    assertProblem(t, await inject(app, '/api/auth/refresh-token', { ...headers, 'content-type': 'multipart/form-data; boundary=b' }, '--b--\r\n'), 415, 'UNSUPPORTED_MEDIA_TYPE')
    assertProblem(t, await inject(app, '/api/auth/refresh-token', { host: 'localhost', origin: 'https://evil.example', cookie: `${REFRESH}=${me.refresh}`, 'content-type': FORM }, ''), 403, 'CSRF_REJECTED')
    const still = await inject(app, '/api/auth/refresh-token', headers, undefined)
    t.equal(still.statusCode, 200, 'none of those spent the refresh token')
  })
})

t.test('logout with each kind of empty body', async (t) => {
  const app = await build(t)
  for (const [name, headers, payload] of EMPTY) {
    const me = await registerAndLogin(app)
    const res = await inject(app, '/api/auth/logout', { ...me.auth, ...headers }, payload)
    t.equal(res.statusCode, 204, `${name}: logged out (${res.body.slice(0, 160)})`)
    assertProblem(t, await app.inject({ url: `/api/user/${me.id}`, headers: me.auth }), 401, 'UNAUTHORIZED')
  }

  t.test('an HTML logout button: a form posted by cookie, as Chromium posts it', async (t) => {
    const me = await browser(app)
    const res = await inject(app, '/api/auth/logout', { host: 'localhost', origin: 'null', 'sec-fetch-site': 'same-origin', cookie: `${ACCESS}=${me.access}`, 'content-type': FORM }, '')
    t.equal(res.statusCode, 204, res.body)
    t.equal(cookie(res, ACCESS)?.value, '', 'cookies cleared')
    const cross = await browser(app)
    const refused = await inject(app, '/api/auth/logout', { host: 'localhost', origin: 'null', 'sec-fetch-site': 'cross-site', cookie: `${ACCESS}=${cross.access}`, 'content-type': FORM }, '')
    assertProblem(t, refused, 403, 'CSRF_REJECTED')
  })

  t.test('what stays refused, and leaves the session alive', async (t) => {
    const me = await registerAndLogin(app)
    const refusals: Array<[number, string, Record<string, string>, string]> = [
      [400, 'VALIDATION_FAILED', { 'content-type': JSON_TYPE }, '{"everywhere":true}'],
      [400, 'VALIDATION_FAILED', { 'content-type': FORM }, 'everywhere=true'],
      [400, 'MALFORMED_JSON', { 'content-type': JSON_TYPE }, '{'],
      [400, 'MALFORMED_JSON', { 'content-type': JSON_TYPE }, ' '],
      [415, 'UNSUPPORTED_MEDIA_TYPE', { 'content-type': 'text/plain' }, 'bye'],
      [415, 'UNSUPPORTED_MEDIA_TYPE', { 'content-type': 'multipart/form-data; boundary=b' }, '--b--\r\n']
    ]
    for (const [status, code, headers, payload] of refusals) assertProblem(t, await inject(app, '/api/auth/logout', { ...me.auth, ...headers }, payload), status, code)
    t.equal((await app.inject({ url: `/api/user/${me.id}`, headers: me.auth })).statusCode, 200, 'the session lives')
  })
})

t.test('over real HTTP: what fetch, axios and ky send for a bodiless POST', async (t) => {
  const app = await build(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const origin = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`
  const me = await registerAndLogin(app)
  const refreshed = await fetch(`${origin}/api/auth/refresh-token`, { method: 'POST', headers: { 'content-type': JSON_TYPE }, body: JSON.stringify({ refreshToken: me.refreshToken }) })
  t.equal(refreshed.status, 200)
  const { token } = await refreshed.json() as { token: string }

  const logout = await fetch(`${origin}/api/auth/logout`, { method: 'POST', headers: { 'content-type': JSON_TYPE, authorization: `Bearer ${token}` }, body: '' })
  t.equal(logout.status, 204, 'Content-Type: application/json, Content-Length: 0')
  t.equal((await fetch(`${origin}/api/user/${me.id}`, { headers: { authorization: `Bearer ${token}` } })).status, 401, 'the session ended')

  const other = await registerAndLogin(app)
  const chunked = await fetch(`${origin}/api/auth/logout`, {
    method: 'POST',
    headers: { 'content-type': JSON_TYPE, authorization: `Bearer ${other.token}` },
    body: new ReadableStream({ start (controller) { controller.close() } }),
    duplex: 'half'
  } as RequestInit)
  t.equal(chunked.status, 204, 'an empty chunked body')
})
