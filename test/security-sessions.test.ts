/**
 * /api/security/sessions: the account's signed-in devices and ending them, one at a time
 * or all but this one, at once and on every replica (two apps on one database).
 */
import t from 'tap'
import { assertProblem } from './helpers/assertions.js'
import { build, registerAndLogin } from './helpers/build.js'
import { ACCESS, browser, SELF } from './helpers/browser.js'

const PHONE = 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1'
const LAPTOP = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Safari/537.36'

const app = await build(t)
// A second replica: another app on the same database.
const other = await build(t, { databaseUrl: app.databaseUrl })

interface Device { token: string, refreshToken: string, auth: { authorization: string } }

/** Another login of `user`, from `userAgent` at `address`. */
async function signIn (user: { username: string, password: string }, userAgent: string, address: string): Promise<Device> {
  const res = await app.inject({ method: 'POST', url: '/api/auth/login', headers: { 'user-agent': userAgent }, remoteAddress: address, payload: { username: user.username, password: user.password } })
  t.equal(res.statusCode, 200)
  const { token, refreshToken } = res.json()
  return { token, refreshToken, auth: { authorization: `Bearer ${token}` } }
}
const sessionsOf = async (auth: { authorization: string }, on = app) => await on.inject({ url: '/api/security/sessions', headers: auth })
const sid = (token: string): string => JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()).sid

t.test('lists the live sessions: device, address, how and when; this one marked', async (t) => {
  const user = await registerAndLogin(app)
  const phone = await signIn(user, PHONE, '203.0.113.7')
  const laptop = await signIn(user, LAPTOP, '198.51.100.4')
  const res = await sessionsOf(laptop.auth)
  t.equal(res.statusCode, 200)
  t.equal(res.headers['cache-control'], 'no-store')
  const items = res.json().items as Array<Record<string, unknown>>
  t.equal(items.length, 3, 'the first login and the two devices')
  t.match(items.find((s) => s.id === sid(phone.token)), { current: false, browser: 'Safari 17', os: 'iOS 17.4', ip: '203.0.113.7', userAgent: PHONE, methods: ['password'], createdAt: String, lastUsedAt: String })
  t.match(items.find((s) => s.id === sid(laptop.token)), { current: true, browser: 'Chrome 156', os: 'Linux', ip: '198.51.100.4' })
  t.equal(items.filter((s) => s.current).length, 1, 'one is this one')

  // A refresh is a use: the phone's session moves to the top.
  await new Promise((resolve) => setTimeout(resolve, 10))
  const refreshed = await app.inject({ method: 'POST', url: '/api/auth/refresh-token', payload: { refreshToken: phone.refreshToken } })
  t.equal(refreshed.statusCode, 200)
  const after = (await sessionsOf(laptop.auth)).json().items as Array<{ id: string, lastUsedAt: string }>
  t.equal(after[0]!.id, sid(phone.token), 'the most recently used first')
  t.ok(Date.parse(after[0]!.lastUsedAt) > Date.parse(items.find((s) => s.id === sid(phone.token))!.lastUsedAt as string), 'its lastUsedAt moved on')

  const stranger = await registerAndLogin(app)
  t.same((await sessionsOf(stranger.auth)).json().items.map((s: { id: string }) => s.id), [stranger.sid], 'another account sees only its own')
  assertProblem(t, await app.inject({ url: '/api/security/sessions' }), 401, 'UNAUTHORIZED')
})

t.test('ending one session: its tokens stop at once, on every replica; not another account\'s', async (t) => {
  const user = await registerAndLogin(app)
  const phone = await signIn(user, PHONE, '203.0.113.7')
  t.equal((await other.inject({ url: '/api/user/' + user.id, headers: phone.auth })).statusCode, 200, 'the phone works on the other replica')

  const stranger = await registerAndLogin(app)
  assertProblem(t, await app.inject({ method: 'DELETE', url: `/api/security/sessions/${sid(phone.token)}`, headers: stranger.auth }), 404, 'NOT_FOUND')
  t.equal((await app.inject({ url: '/api/user/' + user.id, headers: phone.auth })).statusCode, 200, 'another account cannot end it')
  for (const id of ['not-a-uuid', '1']) assertProblem(t, await app.inject({ method: 'DELETE', url: `/api/security/sessions/${id}`, headers: user.auth }), 400, 'VALIDATION_FAILED')

  const ended = await app.inject({ method: 'DELETE', url: `/api/security/sessions/${sid(phone.token)}`, headers: user.auth })
  t.equal(ended.statusCode, 204)
  assertProblem(t, await other.inject({ url: '/api/user/' + user.id, headers: phone.auth }), 401, 'UNAUTHORIZED')
  assertProblem(t, await app.inject({ url: '/api/user/' + user.id, headers: phone.auth }), 401, 'UNAUTHORIZED')
  t.equal((await other.inject({ method: 'POST', url: '/api/auth/refresh-token', payload: { refreshToken: phone.refreshToken } })).statusCode, 401, 'its refresh token too')
  assertProblem(t, await app.inject({ method: 'DELETE', url: `/api/security/sessions/${sid(phone.token)}`, headers: user.auth }), 404, 'NOT_FOUND')
  t.same((await sessionsOf(user.auth, other)).json().items.map((s: { id: string }) => s.id), [user.sid], 'gone from the list')
  t.equal((await app.inject({ url: '/api/user/' + user.id, headers: user.auth })).statusCode, 200, 'the session that ended it goes on')
})

t.test('sign out everywhere else: every session but this one ends', async (t) => {
  const user = await registerAndLogin(app)
  const devices = [await signIn(user, PHONE, '203.0.113.7'), await signIn(user, LAPTOP, '198.51.100.4')]
  const stranger = await registerAndLogin(app)
  const res = await other.inject({ method: 'DELETE', url: '/api/security/sessions', headers: user.auth })
  t.equal(res.statusCode, 200)
  t.same(res.json(), { ended: 2 })
  for (const device of devices) assertProblem(t, await app.inject({ url: '/api/user/' + user.id, headers: device.auth }), 401, 'UNAUTHORIZED')
  t.equal((await app.inject({ url: '/api/user/' + user.id, headers: user.auth })).statusCode, 200, 'this one stays')
  t.equal((await app.inject({ url: '/api/user/' + stranger.id, headers: stranger.auth })).statusCode, 200, 'another account\'s stays')
  t.same((await app.inject({ method: 'DELETE', url: '/api/security/sessions', headers: user.auth })).json(), { ended: 0 }, 'none left to end')
})

t.test('a cookie session ends others only from the service\'s own origin', async (t) => {
  const page = await browser(app)
  const phone = await signIn(page, PHONE, '203.0.113.7')
  const cookies = { [ACCESS]: page.access }
  assertProblem(t, await app.inject({ method: 'DELETE', url: '/api/security/sessions', cookies, headers: { host: 'localhost', origin: 'https://elsewhere.example' } }), 403, 'CSRF_REJECTED')
  t.equal((await app.inject({ url: '/api/user/' + page.id, headers: phone.auth })).statusCode, 200, 'nothing was ended')
  const res = await app.inject({ method: 'DELETE', url: '/api/security/sessions', cookies, headers: { host: 'localhost', origin: SELF } })
  t.same([res.statusCode, res.json()], [200, { ended: 1 }], 'from its own page it does')
  assertProblem(t, await app.inject({ url: '/api/user/' + page.id, headers: phone.auth }), 401, 'UNAUTHORIZED')
})

t.test('the account\'s activity: sign-ins, wrong passwords, a new password, sessions ended; newest first, bounded', async (t) => {
  const user = await registerAndLogin(app)
  const wrong = await app.inject({ method: 'POST', url: '/api/auth/login', headers: { 'user-agent': PHONE }, remoteAddress: '203.0.113.9', payload: { username: user.username, password: 'not the password' } })
  t.equal(wrong.statusCode, 401)
  const phone = await signIn(user, PHONE, '203.0.113.7')
  const changed = await app.inject({ method: 'PATCH', url: `/api/user/${user.id}`, headers: { ...phone.auth, 'user-agent': PHONE }, remoteAddress: '203.0.113.7', payload: { password: 'a brand new password', currentPassword: user.password } })
  t.equal(changed.statusCode, 200)
  const renewed = { authorization: `Bearer ${changed.json().token as string}` }
  const laptop = await signIn({ username: user.username, password: 'a brand new password' }, LAPTOP, '198.51.100.4')
  t.equal((await app.inject({ method: 'DELETE', url: '/api/security/sessions', headers: { ...laptop.auth, 'user-agent': LAPTOP }, remoteAddress: '198.51.100.4' })).statusCode, 200)

  const res = await app.inject({ url: '/api/security/activity', headers: laptop.auth })
  t.equal(res.statusCode, 200)
  t.equal(res.headers['cache-control'], 'no-store')
  const items = res.json().items as Array<Record<string, unknown>>
  t.same(items.map((e) => e.kind), ['other-sessions-ended', 'sign-in', 'password-changed', 'sign-in', 'sign-in-failed', 'sign-in'], 'newest first')
  t.match(items[4], { kind: 'sign-in-failed', ip: '203.0.113.9', browser: 'Safari 17', os: 'iOS 17.4', createdAt: String }, 'the wrong password, from where')
  t.match(items[3], { kind: 'sign-in', detail: 'password', ip: '203.0.113.7' })
  t.match(items[0], { kind: 'other-sessions-ended', ip: '198.51.100.4', browser: 'Chrome 156' })
  assertProblem(t, await app.inject({ url: '/api/user/' + user.id, headers: renewed }), 401, 'UNAUTHORIZED')

  const stranger = await registerAndLogin(app)
  t.same((await app.inject({ url: '/api/security/activity', headers: stranger.auth })).json().items.map((e: { kind: string }) => e.kind), ['sign-in'], 'another account sees its own')
  assertProblem(t, await app.inject({ url: '/api/security/activity' }), 401, 'UNAUTHORIZED')

  for (let i = 0; i < 60; i++) await app.identity.activity.record(stranger.id, 'session-ended', { userAgent: null, ip: `192.0.2.${i}` })
  const bounded = (await app.inject({ url: '/api/security/activity', headers: stranger.auth })).json().items as Array<{ ip: string }>
  t.equal(bounded.length, 50, 'the newest 50 kept')
  t.equal(bounded[0]!.ip, '192.0.2.59', 'the newest first')
  const stored = await app.inject({ url: '/api/security/activity', headers: laptop.auth })
  t.equal(stored.json().items.length, 6, 'each account\'s bound is its own')
})
