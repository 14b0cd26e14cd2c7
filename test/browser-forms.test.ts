/**
 * Browser clients, part 3: an HTML form on a page of the service, posted the way Chromium
 * posts it. Under a `no-referrer` policy Chromium sends `Origin: null` with
 * `Sec-Fetch-Site: same-origin` on a same-origin form post (the Fetch standard, "append a
 * request `Origin` header"); that must pass the origin check, and `null` from anywhere else
 * must not. Then the form's outcomes: 200, 401 for a wrong password, and the 303 of `redirect`.
 * A refusal of a navigation (`Sec-Fetch-Dest: document`) is the problem as an HTML page; of
 * anything else, the JSON problem.
 */
import t, { type Test } from 'tap'
import { assertProblem, assertProblemPage, type Answer } from './helpers/assertions.js'
import { build, newUser, type TestApp } from './helpers/build.js'
import { ACCESS, REFRESH, SELF, browser, cookie } from './helpers/browser.js'

const FORM = 'application/x-www-form-urlencoded'
/** What Chromium sends with a form post from a same-origin page whose referrer policy is `no-referrer`. */
const CHROMIUM_NULL = { host: 'localhost', origin: 'null', 'sec-fetch-site': 'same-origin', 'sec-fetch-mode': 'navigate', 'sec-fetch-dest': 'document' }

async function registered (app: TestApp) {
  const user = newUser()
  const created = await app.inject({ method: 'POST', url: '/api/user', payload: user })
  return { ...user, id: created.json().id as number }
}

/** The refusal in the shape the request asked for: a page for a navigation, else JSON. */
const assertRefused = (t: Test, res: Answer, sent: Record<string, string>, status: number, code: string): void => {
  if (sent['sec-fetch-dest'] === 'document') assertProblemPage(t, res, status, code)
  else assertProblem(t, res, status, code)
}

const post = async (app: TestApp, fields: Record<string, string>, headers: Record<string, string> = CHROMIUM_NULL) =>
  await app.inject({ method: 'POST', url: '/api/auth/login', headers: { ...headers, 'content-type': FORM }, payload: new URLSearchParams(fields).toString() })

t.test('Origin: null passes only with Sec-Fetch-Site: same-origin', async (t) => {
  const app = await build(t)
  const u = await registered(app)

  const ok = await post(app, { username: u.username, password: u.password })
  t.equal(ok.statusCode, 200, `Chromium's same-origin form post logs in (${ok.body.slice(0, 200)})`)
  t.match(ok.json(), { mode: 'cookie', userId: u.id })
  t.ok(cookie(ok, ACCESS) !== undefined && cookie(ok, REFRESH) !== undefined, 'both cookies set')

  const hostile: Array<[string, Record<string, string>]> = [
    ['Sec-Fetch-Site: cross-site', { ...CHROMIUM_NULL, 'sec-fetch-site': 'cross-site' }],
    ['Sec-Fetch-Site: same-site (a sibling subdomain)', { ...CHROMIUM_NULL, 'sec-fetch-site': 'same-site' }],
    ['Sec-Fetch-Site: none', { ...CHROMIUM_NULL, 'sec-fetch-site': 'none' }],
    ['no Sec-Fetch-Site (a browser without Fetch Metadata, or a sandboxed frame)', { host: 'localhost', origin: 'null' }],
    ['Sec-Fetch-Site: same-origin but Origin "Null"', { ...CHROMIUM_NULL, origin: 'Null' }]
  ]
  for (const [name, headers] of hostile) {
    const res = await post(app, { username: u.username, password: u.password }, headers)
    assertRefused(t, res, headers, 403, 'CSRF_REJECTED')
    t.same(res.cookies, [], `${name}: refused, no cookie`)
  }

  t.test('a cookie-authenticated change: the same rule', async (t) => {
    const me = await browser(app)
    const patch = async (headers: Record<string, string>, names: string) =>
      await app.inject({ method: 'PATCH', url: `/api/user/${me.id}`, headers: { ...headers, cookie: `${ACCESS}=${me.access}` }, payload: { names } })
    t.equal((await patch({ ...CHROMIUM_NULL, 'sec-fetch-mode': 'cors', 'sec-fetch-dest': 'empty' }, 'Same origin')).statusCode, 200, 'Origin null, same-origin: allowed')
    for (const [, headers] of hostile) assertRefused(t, await patch(headers, 'Hacked'), headers, 403, 'CSRF_REJECTED')
    const refresh = await app.inject({ method: 'POST', url: '/api/auth/refresh-token', headers: { host: 'localhost', origin: 'null', 'sec-fetch-site': 'cross-site', cookie: `${REFRESH}=${me.refresh}` } })
    assertProblem(t, refresh, 403, 'CSRF_REJECTED')
    t.equal((await app.inject({ method: 'GET', url: `/api/user/${me.id}`, headers: { cookie: `${ACCESS}=${me.access}` } })).json().names, 'Same origin', 'no refused request changed anything')
  })
})

t.test('a wrong password on a form is 401, as in JSON', async (t) => {
  const app = await build(t)
  const u = await registered(app)
  for (const headers of [CHROMIUM_NULL as Record<string, string>, { host: 'localhost', origin: SELF, 'sec-fetch-site': 'same-origin' }, { host: 'localhost' }]) {
    const res = await post(app, { username: u.username, password: 'not the password' }, headers)
    assertRefused(t, res, headers, 401, 'UNAUTHORIZED')
    t.same(res.cookies, [], 'no cookie')
  }
})

t.test('redirect: a 303 to a path of this service after a form login, never elsewhere', async (t) => {
  const app = await build(t)
  const u = await registered(app)

  for (const path of ['/docs', '/', '/app/products?sort=title&page=2#top', '/a/../b', '/%2F%2Fevil.com']) {
    const res = await post(app, { username: u.username, password: u.password, redirect: path })
    t.equal(res.statusCode, 303, `${path}: 303`)
    t.equal(res.headers.location, path, `${path}: Location is the path as sent`)
    t.equal(res.headers['cache-control'], 'no-store')
    t.equal(res.body, '', 'no body')
    t.ok(cookie(res, ACCESS) !== undefined && cookie(res, REFRESH) !== undefined, `${path}: both cookies set`)
    t.equal(new URL(path, SELF).origin, SELF, `${path} resolves on this origin`)
  }
  const json = await app.inject({ method: 'POST', url: '/api/auth/login', headers: { host: 'localhost', origin: SELF }, payload: { username: u.username, password: u.password, mode: 'cookie', redirect: '/docs' } })
  t.equal(json.statusCode, 303, 'JSON in cookie mode may ask for it too')

  const elsewhere = ['//evil.com', '//evil.com/docs', 'https://evil.com', 'http:evil.com', 'javascript:alert(1)', '/\\evil.com', '\\\\evil.com', '/docs\\..\\', '/\t/evil.com',
    '/\n/evil.com', ' /docs', '/docs ', '/d\u00f6cs', 'docs', '', '/' + 'a'.repeat(2048), 'data:text/html,x']
  for (const path of elsewhere) {
    const res = await post(app, { username: u.username, password: u.password, redirect: path })
    const page = assertProblemPage(t, res, 400, 'VALIDATION_FAILED')
    t.match(page, '<li><code>/redirect</code>', `${JSON.stringify(path)}: refused naming the field`)
    t.notOk(res.headers.location, 'no Location')
    t.same(res.cookies, [], 'no cookie')
  }

  const token = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: u.username, password: u.password, redirect: '/docs' } })
  assertProblem(t, token, 400, 'BAD_REQUEST')
  t.notOk(token.json().token, 'token mode with redirect: refused, no tokens')

  const wrong = await post(app, { username: u.username, password: 'not the password', redirect: '/docs' })
  assertProblemPage(t, wrong, 401, 'UNAUTHORIZED')
  t.notOk(wrong.headers.location, 'a failed login answers its problem, not the redirect')
  const cross = await post(app, { username: u.username, password: u.password, redirect: '/docs' }, { ...CHROMIUM_NULL, 'sec-fetch-site': 'cross-site' })
  assertProblemPage(t, cross, 403, 'CSRF_REJECTED')
})

t.test('over real HTTP: the form post a browser sends, and the answer it reads', async (t) => {
  const app = await build(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const origin = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`
  const u = await registered(app)

  const docs = await fetch(`${origin}/docs`)
  t.equal(docs.headers.get('referrer-policy'), 'strict-origin-when-cross-origin', 'the service\'s pages let browsers send their origin')
  await docs.arrayBuffer()

  const form = (fields: Record<string, string>, headers: Record<string, string>) =>
    fetch(`${origin}/api/auth/login`, { method: 'POST', redirect: 'manual', headers: { origin: 'null', 'sec-fetch-site': 'same-origin', ...headers }, body: new URLSearchParams(fields) })
  const res = await form({ username: u.username, password: u.password, redirect: '/docs' }, {})
  t.equal(res.status, 303)
  t.equal(res.headers.get('location'), '/docs')
  t.equal(res.headers.getSetCookie().length, 2, 'both cookies')
  t.ok(res.headers.getSetCookie().every((c) => /; Secure/.test(c) && /; HttpOnly/.test(c)))
  await res.arrayBuffer()

  const wrong = await form({ username: u.username, password: 'not the password', redirect: '/docs' }, {})
  t.equal(wrong.status, 401)
  t.match(wrong.headers.get('content-type'), /^application\/problem\+json/)
  t.equal((await wrong.json() as { code: string }).code, 'UNAUTHORIZED')

  const cross = await form({ username: u.username, password: u.password }, { 'sec-fetch-site': 'cross-site' })
  t.equal(cross.status, 403)
  t.equal((await cross.json() as { code: string }).code, 'CSRF_REJECTED')
})

t.test('a navigation\'s error is a page: escaped, with a way back that stays on this host; fetches keep JSON', async (t) => {
  const app = await build(t)
  const navigate = { host: 'localhost', 'sec-fetch-site': 'same-origin', 'sec-fetch-mode': 'navigate', 'sec-fetch-dest': 'document' }
  const get = async (url: string, headers: Record<string, string>) => await app.inject({ method: 'GET', url, headers })

  // A form's field names come back in the field errors: a hostile page may pick them.
  const hostile = await post(app, { username: 'someone', password: 'a password', '"><script>alert(1)</script>': 'x' })
  const page = assertProblemPage(t, hostile, 400, 'VALIDATION_FAILED')
  t.notMatch(page, '<script>', 'what the client sent is text on the page, never markup')
  t.match(page, '<li><code>/&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;</code> is not allowed</li>', 'escaped')
  t.match(hostile.headers.vary, /Sec-Fetch-Dest/, 'Vary: Sec-Fetch-Dest (the representation depends on it)')
  t.match(page, '<a href="/">Go back</a>', 'no Referer: back to the app')

  const back = async (referer: string): Promise<string | undefined> => /<a href="([^"]*)">Go back<\/a>/.exec((await get('/nope', { ...navigate, referer })).body)?.[1]
  t.equal(await back('http://localhost/account?tab=2'), '/account?tab=2', 'a page of this host: back to it')
  for (const referer of ['http://evil.example/phish', 'http://localhost.evil.example/', 'http://localhost//evil.example/x', 'not a url']) {
    t.equal(await back(referer), '/', `${referer}: back to the app, never elsewhere`)
  }
  t.equal(await back('http://localhost/a"onmouseover="x'), '/a%22onmouseover=%22x', 'a quote cannot leave the attribute')

  const others: Array<Record<string, string>> = [{}, { ...navigate, 'sec-fetch-mode': 'cors', 'sec-fetch-dest': 'empty' }, { accept: 'text/html' }]
  for (const headers of others) {
    assertProblem(t, await get('/nope', headers), 404, 'NOT_FOUND')
  }
})
