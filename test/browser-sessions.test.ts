/**
 * Browser clients: form login, session cookies (attributes, paths, header-wins), the
 * origin check against CSRF, refresh and logout by cookie. Through `inject` where cookies
 * are enough, and one whole flow over real HTTP with fetch.
 */
import t from 'tap'
import { assertProblem } from './helpers/assertions.js'
import { build, newUser } from './helpers/build.js'
import { ACCESS, REFRESH, SELF, browser, cookie, formLogin } from './helpers/browser.js'

t.test('form login sets the session cookies, and the tokens stay out of the body', async (t) => {
  const app = await build(t)
  const { res, user } = await formLogin(app)
  t.equal(res.statusCode, 200, res.body)
  const body = res.json()
  t.match(body, { mode: 'cookie', userId: user.id, expiresIn: 900 })
  t.notOk(body.token, 'no access token in the body')
  t.notOk(body.refreshToken, 'no refresh token in the body')
  const raw = ([] as string[]).concat(res.headers['set-cookie'] ?? [])
  t.equal(raw.length, 2, 'two cookies')
  const access = raw.find((c) => c.startsWith(`${ACCESS}=`))!
  const refresh = raw.find((c) => c.startsWith(`${REFRESH}=`))!
  for (const [name, header, path, maxAge] of [['access', access, '/api', 900], ['refresh', refresh, '/api/auth/refresh-token', 30 * 86400]] as const) {
    t.match(header, /; HttpOnly/, `${name}: HttpOnly`)
    t.match(header, /; Secure/, `${name}: Secure`)
    t.match(header, /; SameSite=Strict/, `${name}: SameSite=Strict`)
    t.match(header, new RegExp(`; Path=${path.replace(/\//g, '\\/')}(;|$)`), `${name}: Path=${path}`)
    t.notMatch(header, /Domain=/i, `${name}: no Domain (host-only)`)
    const age = Number(/Max-Age=(\d+)/.exec(header)?.[1])
    t.ok(age > maxAge - 5 && age <= maxAge, `${name}: Max-Age ${age} ~ ${maxAge}`)
  }
  t.match(cookie(res, REFRESH)!.value, /^[A-Za-z0-9_-]{43}$/)

  t.test('"mode": "token" in a form, "mode": "cookie" in JSON', async (t) => {
    const u = newUser()
    await app.inject({ method: 'POST', url: '/api/user', payload: u })
    const form = await app.inject({ method: 'POST', url: '/api/auth/login', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: new URLSearchParams({ username: u.username, password: u.password, mode: 'token' }).toString() })
    t.match(form.json(), { mode: 'token', token: String, refreshToken: String })
    t.notOk(form.headers['set-cookie'])
    const json = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: u.username, password: u.password, mode: 'cookie' } })
    t.match(json.json(), { mode: 'cookie' })
    t.notOk(json.json().token)
    t.equal(json.cookies.length, 2)
    assertProblem(t, await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: u.username, password: u.password, mode: 'session' } }), 400, 'VALIDATION_FAILED')
  })

  t.test('bad forms: the same problems as JSON', async (t) => {
    const post = async (payload: string, type = 'application/x-www-form-urlencoded') => await app.inject({ method: 'POST', url: '/api/auth/login', headers: { 'content-type': type }, payload })
    assertProblem(t, await post(`username=${user.username}&password=wrong+password`), 401, 'UNAUTHORIZED')
    assertProblem(t, await post(`username=${user.username}`), 400, 'VALIDATION_FAILED')
    assertProblem(t, await post('username=a&username=b&password=x'), 400, 'VALIDATION_FAILED')
    assertProblem(t, await post(`username=${user.username}&password=x&admin=1`), 400, 'VALIDATION_FAILED')
    assertProblem(t, await post('username=a%00b&password=x'), 400, 'VALIDATION_FAILED')
    assertProblem(t, await post(`username=${'a'.repeat(2_000_000)}&password=x`), 413, 'PAYLOAD_TOO_LARGE')
  })

  t.test('only login, refresh and logout read forms: other routes still answer 415', async (t) => {
    const form = 'username=someone&email=a%40b.c&password=long+enough+password'
    assertProblem(t, await app.inject({ method: 'POST', url: '/api/user', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: form }), 415, 'UNSUPPORTED_MEDIA_TYPE')
    // Refresh reads the form like JSON (test/auth-bodies.test.ts): an unknown token is a 401, not a 415.
    assertProblem(t, await app.inject({ method: 'POST', url: '/api/auth/refresh-token', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'refreshToken=x' }), 401, 'INVALID_REFRESH_TOKEN')
  })
})

t.test('the access cookie authenticates; the Authorization header wins over it', async (t) => {
  const app = await build(t)
  const me = await browser(app)
  const other = await browser(app)
  const get = async (headers: Record<string, string>) => await app.inject({ method: 'GET', url: `/api/user/${me.id}`, headers })
  t.equal((await get({ cookie: `${ACCESS}=${me.access}` })).statusCode, 200, 'cookie alone')
  t.equal((await get({ cookie: `other=1; ${ACCESS}=${me.access}; more=2` })).statusCode, 200, 'among other cookies')
  assertProblem(t, await get({ cookie: `${ACCESS}=${me.access}`, authorization: 'Bearer garbage' }), 401, 'UNAUTHORIZED')
  assertProblem(t, await get({ cookie: `${ACCESS}=${me.access}`, authorization: '' }), 401, 'UNAUTHORIZED')
  t.equal((await get({ cookie: `${ACCESS}=garbage`, authorization: `Bearer ${me.access}` })).statusCode, 200, 'a good header with a bad cookie')
  assertProblem(t, await get({ cookie: `${ACCESS}=${other.access}` }), 403, 'FORBIDDEN')
  for (const value of ['garbage', '', 'a.b.c', '%E0%A4%A', '"quoted"', 'x'.repeat(4000), me.refresh]) {
    const res = await get({ cookie: `${ACCESS}=${value}` })
    assertProblem(t, res, 401, 'UNAUTHORIZED')
  }

  t.test('a cookie of another name or meant for another path is not accepted', async (t) => {
    assertProblem(t, await get({ cookie: `${REFRESH}=${me.refresh}` }), 401, 'UNAUTHORIZED')
    assertProblem(t, await get({ cookie: `access_token=${me.access}` }), 401, 'UNAUTHORIZED')
    assertProblem(t, await get({ cookie: `__Host-access_token=${me.access}` }), 401, 'UNAUTHORIZED')
    // The access cookie sent to the refresh route is not a refresh token.
    const res = await app.inject({ method: 'POST', url: '/api/auth/refresh-token', headers: { host: 'localhost', origin: SELF, cookie: `${ACCESS}=${me.access}` } })
    assertProblem(t, res, 400, 'BAD_REQUEST')
    const swapped = await app.inject({ method: 'POST', url: '/api/auth/refresh-token', headers: { host: 'localhost', origin: SELF, cookie: `${REFRESH}=${me.access}` } })
    assertProblem(t, swapped, 401, 'INVALID_REFRESH_TOKEN')
  })
})
