/**
 * Browser clients, part 2: the origin check against CSRF, refresh and logout by cookie,
 * COOKIE_SECURE=false, and the whole flow over real HTTP (part 1: browser-sessions.test.ts). Through `inject` where cookies
 * are enough, and one whole flow over real HTTP with fetch.
 */
import t from 'tap'
import { assertProblem } from './helpers/assertions.js'
import { build, newUser } from './helpers/build.js'
import { ACCESS, REFRESH, SELF, browser, cookie, formLogin, type Browser } from './helpers/browser.js'

t.test('CSRF: cookie-authenticated changes are checked by origin', async (t) => {
  const app = await build(t, { env: { CSRF_TRUSTED_ORIGINS: 'https://app.example.com,http://localhost:5173' } })
  const patch = async (me: Browser, headers: Record<string, string>, names = 'Renamed') =>
    await app.inject({ method: 'PATCH', url: `/api/user/${me.id}`, headers: { host: 'localhost', cookie: `${ACCESS}=${me.access}`, ...headers }, payload: { names } })

  const me = await browser(app)
  t.equal((await patch(me, { origin: SELF })).statusCode, 200, 'same origin')
  t.equal((await patch(me, { origin: SELF, 'sec-fetch-site': 'same-origin' })).statusCode, 200, 'same origin with Fetch Metadata')
  t.equal((await patch(me, { origin: 'https://app.example.com', 'sec-fetch-site': 'same-site' })).statusCode, 200, 'a trusted origin')
  t.equal((await patch(me, { origin: 'http://localhost:5173' })).statusCode, 200, 'another trusted origin')

  const refusals: Array<[string, Record<string, string>]> = [
    ['a cross-site Origin', { origin: 'https://evil.example' }],
    ['no Origin', {}],
    ['Origin null', { origin: 'null' }],
    ['Sec-Fetch-Site: cross-site, even with a good Origin', { origin: SELF, 'sec-fetch-site': 'cross-site' }],
    ['a sibling subdomain (same site, not trusted)', { origin: 'https://evil.example.com', 'sec-fetch-site': 'same-site' }],
    ['the right host on another scheme', { origin: 'https://localhost' }],
    ['a trusted origin with a path', { origin: 'https://app.example.com/' }],
    ['a trusted origin as a prefix', { origin: 'https://app.example.com.evil.example' }]
  ]
  for (const [name, headers] of refusals) {
    const res = await patch(me, headers, 'Hacked')
    t.equal(res.statusCode, 403, name)
    assertProblem(t, res, 403, 'CSRF_REJECTED')
  }
  const record = await app.inject({ method: 'GET', url: `/api/user/${me.id}`, headers: { cookie: `${ACCESS}=${me.access}` } })
  t.equal(record.json().names, 'Renamed', 'no refused request changed anything')

  t.test('safe methods are not checked; header-token requests are exempt', async (t) => {
    const get = await app.inject({ method: 'GET', url: `/api/user/${me.id}`, headers: { cookie: `${ACCESS}=${me.access}`, origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' } })
    t.equal(get.statusCode, 200, 'GET by cookie from anywhere (SameSite=Strict keeps browsers from sending it cross-site)')
    const login = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: me.username, password: me.password } })
    const token = login.json().token
    const res = await app.inject({ method: 'PATCH', url: `/api/user/${me.id}`, headers: { authorization: `Bearer ${token}`, origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' }, payload: { names: 'From the API' } })
    t.equal(res.statusCode, 200, 'a bearer token is not a CSRF vector')
  })

  t.test('POST, DELETE, logout and refresh by cookie are checked too', async (t) => {
    const evil = { host: 'localhost', origin: 'https://evil.example' }
    assertProblem(t, await app.inject({ method: 'POST', url: '/api/product', headers: { ...evil, cookie: `${ACCESS}=${me.access}` }, payload: { title: 'x', amount: 1 } }), 403, 'CSRF_REJECTED')
    assertProblem(t, await app.inject({ method: 'DELETE', url: `/api/user/${me.id}`, headers: { ...evil, cookie: `${ACCESS}=${me.access}` }, payload: { password: me.password } }), 403, 'CSRF_REJECTED')
    assertProblem(t, await app.inject({ method: 'POST', url: '/api/auth/logout', headers: { ...evil, cookie: `${ACCESS}=${me.access}` } }), 403, 'CSRF_REJECTED')
    assertProblem(t, await app.inject({ method: 'POST', url: '/api/auth/refresh-token', headers: { ...evil, cookie: `${REFRESH}=${me.refresh}` } }), 403, 'CSRF_REJECTED')
    assertProblem(t, await app.inject({ method: 'POST', url: '/api/auth/refresh-token', headers: { host: 'localhost', cookie: `${REFRESH}=${me.refresh}` } }), 403, 'CSRF_REJECTED')
    const product = await app.inject({ method: 'POST', url: '/api/product', headers: { host: 'localhost', origin: SELF, cookie: `${ACCESS}=${me.access}` }, payload: { title: 'x', amount: 1 } })
    t.equal(product.statusCode, 201, 'the same from the own origin')
    t.equal((await app.inject({ method: 'GET', url: `/api/user/${me.id}`, headers: { cookie: `${ACCESS}=${me.access}` } })).statusCode, 200, 'the session survived the refused logout')
  })

  t.test('a cross-site form login is refused (login CSRF)', async (t) => {
    assertProblem(t, (await formLogin(app, { origin: 'https://evil.example' })).res, 403, 'CSRF_REJECTED')
    assertProblem(t, (await formLogin(app, { 'sec-fetch-site': 'cross-site' })).res, 403, 'CSRF_REJECTED')
    t.equal((await formLogin(app, { origin: SELF })).res.statusCode, 200, 'from the own origin')
    t.equal((await formLogin(app)).res.statusCode, 200, 'without Origin (not a browser): allowed')
  })
})

t.test('refresh and logout by cookie', async (t) => {
  const app = await build(t)
  const headers = (cookie: string) => ({ host: 'localhost', origin: SELF, cookie })

  const me = await browser(app)
  const res = await app.inject({ method: 'POST', url: '/api/auth/refresh-token', headers: headers(`${REFRESH}=${me.refresh}`) })
  t.equal(res.statusCode, 200, res.body)
  t.match(res.json(), { mode: 'cookie', userId: me.id })
  t.notOk(res.json().refreshToken, 'no token in the body')
  const access = cookie(res, ACCESS)!
  const refresh = cookie(res, REFRESH)!
  t.match(refresh, { path: '/api/auth/refresh-token', httpOnly: true, secure: true, sameSite: 'Strict' })
  t.not(refresh.value, me.refresh, 'rotated')
  t.equal((await app.inject({ method: 'GET', url: `/api/user/${me.id}`, headers: { cookie: `${ACCESS}=${access.value}` } })).statusCode, 200)

  t.test('a reused refresh cookie revokes the family and clears the cookies', async (t) => {
    const reuse = await app.inject({ method: 'POST', url: '/api/auth/refresh-token', headers: headers(`${REFRESH}=${me.refresh}`) })
    assertProblem(t, reuse, 401, 'REFRESH_TOKEN_REUSED')
    for (const name of [ACCESS, REFRESH]) {
      const cleared = cookie(reuse, name)
      t.ok(cleared !== undefined && cleared.value === '' && (cleared.maxAge === 0 || (cleared.expires !== undefined && cleared.expires.getTime() <= Date.now())), `${name} cleared`)
    }
    assertProblem(t, await app.inject({ method: 'GET', url: `/api/user/${me.id}`, headers: { cookie: `${ACCESS}=${access.value}` } }), 401, 'UNAUTHORIZED')
  })

  t.test('logout by cookie clears both cookies on their paths and ends the session', async (t) => {
    const b = await browser(app)
    const out = await app.inject({ method: 'POST', url: '/api/auth/logout', headers: headers(`${ACCESS}=${b.access}`) })
    t.equal(out.statusCode, 204)
    const raw = ([] as string[]).concat(out.headers['set-cookie'] ?? [])
    t.ok(raw.some((c) => c.startsWith(`${ACCESS}=;`) && /Path=\/api(;|$)/.test(c) && /Expires=Thu, 01 Jan 1970/.test(c)), 'access cookie expired on /api')
    t.ok(raw.some((c) => c.startsWith(`${REFRESH}=;`) && /Path=\/api\/auth\/refresh-token/.test(c)), 'refresh cookie expired on its path')
    assertProblem(t, await app.inject({ method: 'GET', url: `/api/user/${b.id}`, headers: { cookie: `${ACCESS}=${b.access}` } }), 401, 'UNAUTHORIZED')
    assertProblem(t, await app.inject({ method: 'POST', url: '/api/auth/refresh-token', headers: headers(`${REFRESH}=${b.refresh}`) }), 401, 'INVALID_REFRESH_TOKEN')
  })

  t.test('a password change by cookie sets new cookies', async (t) => {
    const b = await browser(app)
    const changed = await app.inject({ method: 'PATCH', url: `/api/user/${b.id}`, headers: headers(`${ACCESS}=${b.access}`), payload: { password: 'a brand new secret', currentPassword: b.password } })
    t.equal(changed.statusCode, 200, changed.body)
    t.match(changed.json(), { user: { id: b.id }, mode: 'cookie' })
    t.notOk(changed.json().token, 'no token in the body')
    const next = cookie(changed, ACCESS)!.value
    t.equal((await app.inject({ method: 'GET', url: `/api/user/${b.id}`, headers: { cookie: `${ACCESS}=${next}` } })).statusCode, 200, 'the new cookie works')
    assertProblem(t, await app.inject({ method: 'GET', url: `/api/user/${b.id}`, headers: { cookie: `${ACCESS}=${b.access}` } }), 401, 'UNAUTHORIZED')
    assertProblem(t, await app.inject({ method: 'POST', url: '/api/auth/refresh-token', headers: headers(`${REFRESH}=${b.refresh}`) }), 401, 'INVALID_REFRESH_TOKEN')
  })

  t.test('hostile refresh cookies: 401, never 500', async (t) => {
    for (const value of ['x', '%00', 'A'.repeat(43).replace(/A$/, '='), 'A'.repeat(4000), '"' + 'A'.repeat(43) + '"', '\u00e9'.repeat(43)]) {
      assertProblem(t, await app.inject({ method: 'POST', url: '/api/auth/refresh-token', headers: headers(`${REFRESH}=${encodeURIComponent(value)}`) }), 401, 'INVALID_REFRESH_TOKEN')
    }
  })
})

t.test('COOKIE_SECURE=false (local plain HTTP): no Secure attribute, no __Secure- prefix', async (t) => {
  const app = await build(t, { env: { COOKIE_SECURE: 'false' } })
  const u = newUser()
  await app.inject({ method: 'POST', url: '/api/user', payload: u })
  const res = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: u.username, password: u.password, mode: 'cookie' } })
  t.same(res.cookies.map((c) => c.name).sort(), ['access_token', 'refresh_token'])
  for (const c of res.cookies) {
    t.notOk(c.secure, `${c.name}: not Secure`)
    t.ok(c.httpOnly, `${c.name}: still HttpOnly`)
    t.equal(c.sameSite, 'Strict')
  }
})

t.test('the browser flow over real HTTP', async (t) => {
  const app = await build(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const origin = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`
  const u = newUser()
  await fetch(`${origin}/api/user`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(u) })
  const login = await fetch(`${origin}/api/auth/login`, { method: 'POST', body: new URLSearchParams({ username: u.username, password: u.password }) })
  t.equal(login.status, 200)
  const set = login.headers.getSetCookie()
  t.equal(set.length, 2)
  const jar = Object.fromEntries(set.map((c) => c.split(';')[0]!.split('=') as [string, string]))
  const { userId } = await login.json() as { userId: number }
  const me = await fetch(`${origin}/api/user/${userId}`, { headers: { cookie: `${ACCESS}=${jar[ACCESS]}` } })
  t.equal(me.status, 200)
  const refreshed = await fetch(`${origin}/api/auth/refresh-token`, { method: 'POST', headers: { origin, 'sec-fetch-site': 'same-origin', cookie: `${REFRESH}=${jar[REFRESH]}` } })
  t.equal(refreshed.status, 200)
  const csrf = await fetch(`${origin}/api/auth/logout`, { method: 'POST', headers: { origin: 'https://evil.example', cookie: `${ACCESS}=${jar[ACCESS]}` } })
  t.equal(csrf.status, 403)
  t.match((await csrf.json() as { code: string }).code, 'CSRF_REJECTED')
  const out = await fetch(`${origin}/api/auth/logout`, { method: 'POST', headers: { origin, cookie: `${ACCESS}=${jar[ACCESS]}` } })
  t.equal(out.status, 204)
  t.equal(out.headers.getSetCookie().length, 2, 'both cookies cleared')
  t.equal((await fetch(`${origin}/api/user/${userId}`, { headers: { cookie: `${ACCESS}=${jar[ACCESS]}` } })).status, 401, 'the old access cookie is dead')
})
