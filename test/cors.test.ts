/**
 * CORS for the front-ends of CORS_ORIGINS, over real HTTP (app.listen + fetch, with the
 * Origin, Sec-Fetch-Site and preflight headers a browser would send): listed origins get the
 * headers, credentials and expose list, others none; preflights on every path; the CSRF
 * check trusts the same list, cross-site too; SameSite=None cookies for a front-end on
 * another site; the settings that cannot work stop the start.
 */
import { connect } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { ALLOWED_HEADERS, EXPOSED_HEADERS, MAX_AGE_SECONDS, METHODS } from '../src/plugins/cors.js'
import { assertProblem, type Answer } from './helpers/assertions.js'
import { build, newUser, TEST_SECRET, type TestApp } from './helpers/build.js'
import { runToExit } from './helpers/local-start.js'

const SAME_SITE = 'http://localhost:5173'
const CROSS_SITE = 'https://app.example.org'
const UNLISTED = 'https://evil.example'

async function listen (t: Tap, env: Record<string, string>): Promise<{ app: TestApp, base: string }> {
  const app = await build(t, { env })
  await app.listen({ port: 0, host: '127.0.0.1' })
  return { app, base: `http://127.0.0.1:${(app.server.address() as { port: number }).port}` }
}

type Tap = Parameters<typeof build>[0]

/** A fetch answer in the shape assertProblem reads. */
async function answer (res: Response): Promise<Answer & { raw: Response }> {
  const body = await res.text()
  return { raw: res, statusCode: res.status, headers: Object.fromEntries(res.headers), body, json: () => JSON.parse(body) }
}

const list = (value: string | null) => (value ?? '').split(',').map((s) => s.trim().toLowerCase()).filter((s) => s !== '')
const corsHeaders = (res: Response) => [...res.headers.keys()].filter((name) => name.startsWith('access-control-'))

/** Registers a user and logs in by JSON in the given mode, as a page of `origin` would. */
async function login (base: string, origin: string, site: string, mode: 'cookie' | 'token') {
  const user = newUser()
  const created = await fetch(`${base}/api/user`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(user) })
  const id = ((await created.json()) as { id: number }).id
  const res = await fetch(`${base}/api/auth/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin, 'sec-fetch-site': site },
    body: JSON.stringify({ username: user.username, password: user.password, mode })
  })
  return { id, res, body: (await res.json()) as { token?: string }, cookies: res.headers.getSetCookie() }
}

/** `name=value` pairs of Set-Cookie lines, for a Cookie header. */
const cookieHeader = (setCookies: string[]) => setCookies.map((c) => c.split(';')[0]).join('; ')

t.test('listed origins get CORS headers with credentials and the expose list; others none', async (t) => {
  const { base } = await listen(t, { CORS_ORIGINS: `${SAME_SITE},${CROSS_SITE}` })

  for (const origin of [SAME_SITE, CROSS_SITE]) {
    const res = await fetch(`${base}/api/product`, { headers: { origin } })
    t.equal(res.status, 200, `${origin}: GET /api/product`)
    t.equal(res.headers.get('access-control-allow-origin'), origin, 'the origin itself, never *')
    t.equal(res.headers.get('access-control-allow-credentials'), 'true')
    const exposed = list(res.headers.get('access-control-expose-headers'))
    t.same(exposed, EXPOSED_HEADERS.map((name) => name.toLowerCase()), 'the documented list')
    for (const name of ['location', 'link', 'retry-after', 'x-request-id', 'content-disposition', 'etag', 'content-range', 'www-authenticate', 'allow']) {
      t.ok(exposed.includes(name), `${name} exposed`)
    }
    t.ok(list(res.headers.get('vary')).includes('origin'), 'Vary: Origin')
    t.notOk(res.headers.has('access-control-allow-methods'), 'preflight headers only on preflights')
  }

  for (const [what, headers] of [['an unlisted origin', { origin: UNLISTED }], ['a listed origin with a trailing slash', { origin: `${CROSS_SITE}/` }], ['Origin: null', { origin: 'null' }], ['no Origin', {}]] as const) {
    const res = await fetch(`${base}/api/product`, { headers })
    t.equal(res.status, 200, `${what}: the answer itself is the same`)
    t.same(corsHeaders(res), [], `${what}: no CORS header at all`)
    t.ok(list(res.headers.get('vary')).includes('origin'), `${what}: Vary: Origin all the same (a cache must not serve this to a listed origin)`)
  }

  t.test('error answers carry the headers too, so a page can read them', async (t) => {
    const unauthorized = await answer(await fetch(`${base}/api/user/1`, { headers: { origin: CROSS_SITE } }))
    assertProblem(t, unauthorized, 401, 'UNAUTHORIZED')
    t.equal(unauthorized.raw.headers.get('access-control-allow-origin'), CROSS_SITE)
    const notAllowed = await answer(await fetch(`${base}/api/user/1`, { method: 'PUT', headers: { origin: CROSS_SITE } }))
    assertProblem(t, notAllowed, 405, 'METHOD_NOT_ALLOWED')
    t.equal(notAllowed.raw.headers.get('access-control-allow-origin'), CROSS_SITE)
    t.ok(list(notAllowed.raw.headers.get('access-control-expose-headers')).includes('allow'), 'a page reads the Allow of a 405')
    const missing = await answer(await fetch(`${base}/api/nothing/here`, { headers: { origin: CROSS_SITE } }))
    assertProblem(t, missing, 404, 'NOT_FOUND')
    t.equal(missing.raw.headers.get('access-control-allow-origin'), CROSS_SITE)
    t.equal(missing.raw.headers.get('access-control-allow-credentials'), 'true')
  })

  t.test('the CSV of the product list varies by Accept and by Origin', async (t) => {
    const res = await fetch(`${base}/api/product`, { headers: { origin: SAME_SITE, accept: 'text/csv' } })
    t.equal(res.status, 200)
    t.match(res.headers.get('content-type'), /^text\/csv/)
    const vary = list(res.headers.get('vary'))
    t.ok(vary.includes('origin') && vary.includes('accept'), `Vary: ${res.headers.get('vary')}`)
    t.equal(res.headers.get('access-control-allow-origin'), SAME_SITE)
  })
})

t.test('preflights: 204 on every path for a listed origin, 403 for others', async (t) => {
  const { base } = await listen(t, { CORS_ORIGINS: `${SAME_SITE},${CROSS_SITE}` })
  const preflight = async (path: string, method: string, origin: string | undefined, requestHeaders = 'authorization, content-type, x-request-id') =>
    await fetch(`${base}${path}`, {
      method: 'OPTIONS',
      headers: { ...(origin === undefined ? {} : { origin }), 'access-control-request-method': method, 'access-control-request-headers': requestHeaders }
    })

  const cases: Array<[string, string]> = [
    ['/api/user/1', 'PATCH'], ['/api/product/1', 'DELETE'], ['/api/product/1/image', 'POST'],
    ['/api/auth/login', 'POST'], ['/api/auth/refresh-token', 'POST'], ['/api/product/1/image', 'GET'],
    // A path no route serves: the preflight passes, and the real request then reads its 404.
    ['/api/nothing/here', 'PUT'], ['/', 'GET']
  ]
  for (const [path, method] of cases) {
    const res = await preflight(path, method, CROSS_SITE)
    t.equal(res.status, 204, `OPTIONS ${path} for ${method}`)
    t.equal(res.headers.get('content-length'), '0', 'an empty answer (Safari waits for a body otherwise)')
    t.equal(res.headers.get('access-control-allow-origin'), CROSS_SITE)
    t.equal(res.headers.get('access-control-allow-credentials'), 'true')
    t.same(list(res.headers.get('access-control-allow-methods')), METHODS.map((m) => m.toLowerCase()))
    const allowed = list(res.headers.get('access-control-allow-headers'))
    for (const name of ['authorization', 'content-type', 'x-request-id', 'if-none-match', 'range', 'traceparent']) t.ok(allowed.includes(name), `${name} allowed`)
    t.equal(res.headers.get('access-control-max-age'), String(MAX_AGE_SECONDS))
    t.ok(list(res.headers.get('vary')).includes('origin'), 'Vary: Origin')
  }
  t.equal(list((await preflight('/api/user/1', 'PATCH', SAME_SITE, 'x-anything-else')).headers.get('access-control-allow-headers')).length, ALLOWED_HEADERS.length,
    'the allowed headers are the fixed list, whatever is asked (the browser then refuses an unlisted one)')
  t.equal((await fetch(`${base}/api/user/1`, { method: 'OPTIONS', headers: { origin: SAME_SITE } })).status, 204, 'a listed origin without Access-Control-Request-Method: 204, not a plain-text 400')

  for (const origin of [UNLISTED, 'null', `${SAME_SITE}/`]) {
    const refused = await answer(await preflight('/api/user/1', 'PATCH', origin))
    assertProblem(t, refused, 403, 'CORS_ORIGIN_REFUSED')
    t.match(refused.json().detail, /is not listed in CORS_ORIGINS/, 'the developer\'s network panel says why')
    t.same(corsHeaders(refused.raw), [], `${origin}: no CORS header, so the browser fails the preflight`)
    t.ok(list(refused.raw.headers.get('vary')).includes('origin'), 'Vary: Origin')
  }
  assertProblem(t, await answer(await preflight('/api/nothing/here', 'GET', UNLISTED)), 403, 'CORS_ORIGIN_REFUSED')
  const plain = await answer(await fetch(`${base}/api/user/1`, { method: 'OPTIONS' }))
  assertProblem(t, plain, 405, 'METHOD_NOT_ALLOWED')
  t.equal(plain.raw.headers.get('allow'), 'DELETE, GET, HEAD, PATCH', 'an OPTIONS that is not a preflight: as any method the path does not serve; Allow does not list OPTIONS')
  t.same(corsHeaders(plain.raw), [], 'and no CORS header')
  assertProblem(t, await answer(await fetch(`${base}/api/nothing/here`, { method: 'OPTIONS' })), 404, 'NOT_FOUND')
})

t.test('with COOKIE_SAMESITE=strict, a same-site front-end uses cookies; any listed one the token mode', async (t) => {
  const { base } = await listen(t, { CORS_ORIGINS: `${SAME_SITE},${CROSS_SITE}` })
  const patch = async (id: number, headers: Record<string, string>, names: string) =>
    await answer(await fetch(`${base}/api/user/${id}`, { method: 'PATCH', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ names }) }))

  const me = await login(base, SAME_SITE, 'same-site', 'cookie')
  t.equal(me.res.status, 200, 'a cookie login from the listed same-site origin')
  t.equal(me.res.headers.get('access-control-allow-origin'), SAME_SITE)
  t.ok(me.cookies.length === 2 && me.cookies.every((c) => /SameSite=Strict/i.test(c) && /Secure/i.test(c) && /HttpOnly/i.test(c)), 'Strict cookies')
  const cookie = cookieHeader(me.cookies)

  const ok = await patch(me.id, { cookie, origin: SAME_SITE, 'sec-fetch-site': 'same-site' }, 'From the dev server')
  t.equal(ok.statusCode, 200, ok.body)
  t.equal(ok.raw.headers.get('access-control-allow-origin'), SAME_SITE, 'and the page reads the answer')

  for (const [what, headers] of [['an unlisted origin', { origin: UNLISTED }], ['an unlisted origin, cross-site', { origin: UNLISTED, 'sec-fetch-site': 'cross-site' }], ['an unlisted same-site origin', { origin: 'http://localhost:5174', 'sec-fetch-site': 'same-site' }]] as const) {
    const refused = await patch(me.id, { cookie, ...headers }, 'Hacked')
    assertProblem(t, refused, 403, 'CSRF_REJECTED')
    t.same(corsHeaders(refused.raw), [], `${what}: refused, and without CORS headers`)
  }
  const listedCrossSite = await patch(me.id, { cookie, origin: CROSS_SITE, 'sec-fetch-site': 'cross-site' }, 'Cross-site, listed')
  t.equal(listedCrossSite.statusCode, 200, 'a listed cross-site origin passes the origin check (with Strict cookies a browser never sends them, though)')
  const record = await fetch(`${base}/api/user/${me.id}`, { headers: { cookie } })
  t.equal(((await record.json()) as { names: string }).names, 'Cross-site, listed', 'no refused request changed anything')

  const other = await login(base, CROSS_SITE, 'cross-site', 'token')
  t.equal(other.res.status, 200)
  t.equal(other.res.headers.get('access-control-allow-origin'), CROSS_SITE)
  const byToken = await patch(other.id, { authorization: `Bearer ${other.body.token ?? ''}`, origin: CROSS_SITE, 'sec-fetch-site': 'cross-site' }, 'Token mode')
  t.equal(byToken.statusCode, 200, 'token mode from a cross-site front-end')
  t.equal(byToken.raw.headers.get('access-control-allow-origin'), CROSS_SITE)
})

t.test('COOKIE_SAMESITE=none: cookie mode for a listed front-end on another site', async (t) => {
  const { base } = await listen(t, { CORS_ORIGINS: CROSS_SITE, COOKIE_SAMESITE: 'none' })
  const me = await login(base, CROSS_SITE, 'cross-site', 'cookie')
  t.equal(me.res.status, 200, 'a cross-site cookie login from the listed origin')
  t.equal(me.res.headers.get('access-control-allow-origin'), CROSS_SITE)
  t.equal(me.res.headers.get('access-control-allow-credentials'), 'true', 'so fetch with credentials: "include" keeps the cookies')
  t.equal(me.cookies.length, 2)
  for (const c of me.cookies) t.ok(/; SameSite=None/i.test(c) && /; Secure/i.test(c) && /; HttpOnly/i.test(c), c.replace(/=[^;]+/, '=...'))
  const cookie = cookieHeader(me.cookies)
  const crossSite = { origin: CROSS_SITE, 'sec-fetch-site': 'cross-site' }

  const changed = await fetch(`${base}/api/user/${me.id}`, { method: 'PATCH', headers: { 'content-type': 'application/json', cookie, ...crossSite }, body: JSON.stringify({ names: 'Cross-site' }) })
  t.equal(changed.status, 200)
  t.equal(changed.headers.get('access-control-allow-origin'), CROSS_SITE)
  const refreshCookie = me.cookies.find((c) => /refresh_token/.test(c))!
  const refreshed = await fetch(`${base}/api/auth/refresh-token`, { method: 'POST', headers: { cookie: cookieHeader([refreshCookie]), ...crossSite } })
  t.equal(refreshed.status, 200, 'a cross-site refresh by cookie')
  t.ok(refreshed.headers.getSetCookie().every((c) => /SameSite=None/i.test(c)), 'new cookies, SameSite=None too')

  const forged = await answer(await fetch(`${base}/api/user/${me.id}`, { method: 'PATCH', headers: { 'content-type': 'application/json', cookie, origin: UNLISTED, 'sec-fetch-site': 'cross-site' }, body: JSON.stringify({ names: 'Hacked' }) }))
  assertProblem(t, forged, 403, 'CSRF_REJECTED')
  t.same(corsHeaders(forged.raw), [], 'an unlisted site is still refused: the origin check is the CSRF defence here')
  const form = await fetch(`${base}/api/auth/logout`, { method: 'POST', headers: { cookie, 'sec-fetch-site': 'cross-site' } })
  t.equal(form.status, 403, 'a cross-site change without Origin is refused')
})

t.test('a refusal written before Fastify (admission) carries the same CORS headers', async (t) => {
  // One request in progress per client, never cut: a held body keeps the place.
  const { app, base } = await listen(t, { CORS_ORIGINS: CROSS_SITE, LOAD_SHED_MAX_IN_FLIGHT_PER_CLIENT: '1', SLOW_CLIENT_WINDOW_MS: '0' })
  const port = (app.server.address() as { port: number }).port
  const held = connect(port, '127.0.0.1')
  t.teardown(() => { held.destroy() })
  held.write('POST /api/user HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{')
  let refused: Answer & { raw: Response } | undefined
  for (let tries = 0; tries < 200 && refused?.statusCode !== 429; tries += 1) {
    if (tries > 0) await sleep(50)
    refused = await answer(await fetch(`${base}/api/product`, { headers: { origin: CROSS_SITE } }))
  }
  assertProblem(t, refused!, 429, 'TOO_MANY_IN_PROGRESS')
  const headers = refused!.raw.headers
  t.equal(headers.get('access-control-allow-origin'), CROSS_SITE)
  t.equal(headers.get('access-control-allow-credentials'), 'true')
  t.same(list(headers.get('access-control-expose-headers')), EXPOSED_HEADERS.map((name) => name.toLowerCase()), 'Retry-After among them')
  t.ok(headers.has('retry-after'))
  t.ok(list(headers.get('vary')).includes('origin'))
  const unlisted = await fetch(`${base}/api/product`, { headers: { origin: UNLISTED } })
  t.equal(unlisted.status, 429)
  t.same(corsHeaders(unlisted), [], 'an unlisted origin: none')
  t.ok(list(unlisted.headers.get('vary')).includes('origin'))
})

t.test('settings that cannot work stop the start with a clear message (exit 78)', { timeout: 120_000 }, async (t) => {
  const base = { PATH: process.env.PATH ?? '', NODE_ENV: 'test', SECRET: TEST_SECRET, LOG_LEVEL: 'info', PORT: '0' }
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ CORS_ORIGINS: '*' }, /CORS_ORIGINS: \* is refused: each listed origin may send credentials and cookie-authenticated changes/],
    [{ COOKIE_SAMESITE: 'none', COOKIE_SECURE: 'false', CORS_ORIGINS: CROSS_SITE }, /COOKIE_SAMESITE=none requires COOKIE_SECURE=true/],
    [{ COOKIE_SAMESITE: 'none' }, /COOKIE_SAMESITE=none serves a front-end on another site, which must be listed in CORS_ORIGINS/]
  ]
  for (const [env, message] of cases) {
    const { code, output } = await runToExit(['src/server.ts'], { ...base, ...env })
    t.equal(code, 78, `${JSON.stringify(env)}: the configuration exit`)
    t.match(output, message)
    t.notMatch(output, /\n\s+at /, 'no stack trace')
  }
})
