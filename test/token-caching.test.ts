/**
 * Answers that carry credentials are never stored by a cache: every answer with a token in
 * its body or a session cookie in `Set-Cookie` (set or cleared) is `Cache-Control: no-store`,
 * on every route and in both modes (token, cookie). A shared cache that kept one would hand
 * a user's tokens to the next client.
 */
import type { LightMyRequestResponse } from 'fastify'
import t from 'tap'
import { build, newUser, registerAndLogin } from './helpers/build.js'
import { ACCESS, REFRESH, SELF, browser } from './helpers/browser.js'

const FORM = { 'content-type': 'application/x-www-form-urlencoded', host: 'localhost', origin: SELF }
const COOKIE = (cookie: string): Record<string, string> => ({ host: 'localhost', origin: SELF, cookie })

t.test('Cache-Control: no-store on every answer that carries a token or sets a session cookie', async (t) => {
  const app = await build(t)
  const answers: Array<[string, LightMyRequestResponse]> = []
  const check = (what: string, res: LightMyRequestResponse, status: number): void => {
    t.equal(res.statusCode, status, `${what}: ${status} (${res.body.slice(0, 120)})`)
    answers.push([what, res])
  }

  // Token mode: the tokens are in the body.
  const tokens = await registerAndLogin(app)
  check('JSON login (token mode)', await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: tokens.username, password: tokens.password } }), 200)
  const form = newUser()
  await app.inject({ method: 'POST', url: '/api/user', payload: form })
  check('form login with mode=token', await app.inject({ method: 'POST', url: '/api/auth/login', headers: FORM, payload: new URLSearchParams({ username: form.username, password: form.password, mode: 'token' }).toString() }), 200)
  const refreshed = await app.inject({ method: 'POST', url: '/api/auth/refresh-token', payload: { refreshToken: tokens.refreshToken } })
  check('refresh by body (token mode)', refreshed, 200)
  check('password change by bearer token (new tokens in the body)', await app.inject({
    method: 'PATCH', url: `/api/user/${tokens.id}`, headers: { authorization: `Bearer ${refreshed.json().token as string}` }, payload: { password: 'another long secret', currentPassword: tokens.password }
  }), 200)

  // Cookie mode: the tokens are in Set-Cookie.
  check('JSON login with mode=cookie', await app.inject({ method: 'POST', url: '/api/auth/login', headers: { host: 'localhost', origin: SELF }, payload: { username: form.username, password: form.password, mode: 'cookie' } }), 200)
  check('form login (cookie mode)', await app.inject({ method: 'POST', url: '/api/auth/login', headers: FORM, payload: new URLSearchParams({ username: form.username, password: form.password }).toString() }), 200)
  const me = await browser(app)
  const byCookie = await app.inject({ method: 'POST', url: '/api/auth/refresh-token', headers: COOKIE(`${REFRESH}=${me.refresh}`) })
  check('refresh by cookie', byCookie, 200)
  const access = byCookie.cookies.find((c) => c.name === ACCESS)!.value
  const changed = await app.inject({ method: 'PATCH', url: `/api/user/${me.id}`, headers: COOKIE(`${ACCESS}=${access}`), payload: { password: 'a brand new secret', currentPassword: me.password } })
  check('password change by cookie (new cookies)', changed, 200)

  // Cookies cleared: a cached Set-Cookie would end (or replay) someone's session.
  check('refresh by cookie with a used token (401, cookies cleared)', await app.inject({ method: 'POST', url: '/api/auth/refresh-token', headers: COOKIE(`${REFRESH}=${me.refresh}`) }), 401)
  const other = await browser(app)
  check('logout (cookies cleared)', await app.inject({ method: 'POST', url: '/api/auth/logout', headers: COOKIE(`${ACCESS}=${other.access}`) }), 204)
  const gone = await browser(app)
  check('account deletion (cookies cleared)', await app.inject({ method: 'DELETE', url: `/api/user/${gone.id}`, headers: COOKIE(`${ACCESS}=${gone.access}`), payload: { password: gone.password } }), 204)

  for (const [what, res] of answers) {
    const carries = /"(token|refreshToken)":/.test(res.body) || res.headers['set-cookie'] !== undefined
    t.ok(carries, `${what}: carries a token or sets a cookie`)
    t.equal(res.headers['cache-control'], 'no-store', `${what}: Cache-Control: no-store`)
  }
})
