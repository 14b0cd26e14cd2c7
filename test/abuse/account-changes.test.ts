/**
 * Changes of one's own record with a stolen or scripted token: PATCH and DELETE
 * /api/user/:id need the current password (OWASP ASVS) and are limited per user
 * (src/modules/users/routes.ts, ACCOUNT_CHANGES), per client when they cost bcrypt (RATE_LIMIT_AUTH_MAX), and their
 * current-password checks take guesses from the account's login budget (LOGIN_FAILURES_*).
 * Before: 60 concurrent password changes with one token ran 180 hashes, and 100 username
 * guesses told which names exist (409), with no 429.
 */
import t from 'tap'
import { assertProblem } from '../helpers/assertions.js'
import { build, injectAs, newUser, registerAndLogin } from '../helpers/build.js'

/** Counts the bcrypt computations the app runs (the real ones still run). */
function countBcrypt (app: { passwords: Record<'hash' | 'verify' | 'verifyDummy', (...args: any[]) => Promise<any>> }) {
  const counter = { count: 0 }
  for (const name of ['hash', 'verify', 'verifyDummy'] as const) {
    const original = app.passwords[name]
    app.passwords[name] = async (...args) => { counter.count++; return await original(...args) }
  }
  return counter
}

const statusCounts = (statuses: number[]) => Object.entries(statuses.reduce<Record<number, number>>((acc, s) => ({ ...acc, [s]: (acc[s] ?? 0) + 1 }), {})).map(([s, n]) => `${n}x${s}`).join(' ')

t.test('60 concurrent password changes with one token: bounded bcrypt work', async (t) => {
  // Per-client limit high (TEST_ENV): the token can be used from many addresses.
  const app = await build(t, { env: { LOGIN_FAILURES_MAX: '10' }, tuning: { accountChanges: { max: 10 } } })
  const me = await registerAndLogin(app)
  const bcrypt = countBcrypt(app)
  const wrong = await Promise.all(Array.from({ length: 60 }, (_, i) =>
    injectAs(app, me, { method: 'PATCH', url: `/api/user/${me.id}`, payload: { password: `new password ${i}`, currentPassword: `guess ${i}` }, remoteAddress: `10.8.${i}.1` })))
  const statuses = wrong.map((res) => res.statusCode)
  t.comment(`wrong current password: ${statusCounts(statuses)}, ${bcrypt.count} bcrypt computations`)
  t.ok(statuses.every((s) => s === 403 || s === 429), 'only 403 and 429')
  t.ok(statuses.filter((s) => s === 403).length <= 10, 'at most 10 evaluated')
  t.ok(bcrypt.count <= 10, `${bcrypt.count} bcrypt computations (at most 10, no hash of a new password)`)
  for (const res of wrong.filter((r) => r.statusCode === 429)) t.ok(Number(res.headers['retry-after']) > 0, 'Retry-After')

  const other = await registerAndLogin(app)
  bcrypt.count = 0
  const right = await Promise.all(Array.from({ length: 60 }, (_, i) =>
    injectAs(app, other, { method: 'PATCH', url: `/api/user/${other.id}`, payload: { password: `new password ${i}`, currentPassword: other.password }, remoteAddress: `10.9.${i}.1` })))
  const served = right.map((res) => res.statusCode)
  t.comment(`right current password: ${statusCounts(served)}, ${bcrypt.count} bcrypt computations`)
  // A 401 is refused by the token check before any budget: a change that came first revoked it.
  t.ok(served.filter((s) => s === 200).length <= 10, 'at most 10 changes evaluated per user and window')
  t.ok(bcrypt.count <= 20, `${bcrypt.count} bcrypt computations (at most 10 checks and 10 hashes; before: 180)`)
  t.ok(served.every((s) => [200, 401, 429].includes(s)), 'only 200, 401 (token revoked by a change that came first) and 429')
})

t.test('username guesses through PATCH are limited per user', async (t) => {
  const app = await build(t, { tuning: { accountChanges: { max: 10 } } })
  const me = await registerAndLogin(app)
  const taken = await registerAndLogin(app)
  const guesses = Array.from({ length: 100 }, (_, i) => i === 50 ? taken.username : newUser().username)
  const statuses: number[] = []
  for (const [i, username] of guesses.entries()) {
    statuses.push((await injectAs(app, me, { method: 'PATCH', url: `/api/user/${me.id}`, payload: { username }, remoteAddress: `10.10.${i}.1` })).statusCode)
  }
  t.comment(statusCounts(statuses))
  t.same(statuses.slice(0, 10), Array(10).fill(200), 'ten changes are served')
  t.same(statuses.slice(10), Array(90).fill(429), 'then 429 for the rest of the window: the 51st guess (a taken name) is not answered 409')
  const limited = await injectAs(app, me, { method: 'PATCH', url: `/api/user/${me.id}`, payload: { email: newUser().email, currentPassword: me.password } })
  const body = assertProblem(t, limited, 429, 'RATE_LIMITED')
  t.match(body.detail, /changes to this account/)
  t.ok(Number(limited.headers['retry-after']) > 0, 'Retry-After')
  t.equal((await injectAs(app, taken, { method: 'PATCH', url: `/api/user/${taken.id}`, payload: { username: newUser().username } })).statusCode, 200, 'other users are not limited')
})

t.test('a wrong current password counts toward the account lock, like a failed login', async (t) => {
  const app = await build(t, { env: { LOGIN_FAILURES_MAX: '3' }, tuning: { accountChanges: { max: 100 } } })
  const me = await registerAndLogin(app)
  for (let i = 0; i < 3; i++) {
    assertProblem(t, await injectAs(app, me, { method: 'PATCH', url: `/api/user/${me.id}`, payload: { password: 'a brand new secret', currentPassword: `guess ${i}` } }), 403, 'WRONG_PASSWORD')
  }
  const login = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: me.username, password: me.password } })
  assertProblem(t, login, 429, 'RATE_LIMITED')
  assertProblem(t, await injectAs(app, me, { method: 'DELETE', url: `/api/user/${me.id}`, payload: { password: me.password } }), 429, 'RATE_LIMITED')
  t.equal((await injectAs(app, me, { method: 'PATCH', url: `/api/user/${me.id}`, payload: { username: newUser().username } })).statusCode, 200, 'a change without a password is not a guess')
})

t.test('password changes and deletions spend the per-client auth budget; other changes do not', async (t) => {
  const app = await build(t, { env: { RATE_LIMIT_AUTH_MAX: '4' }, tuning: { accountChanges: { max: 100 } } })
  const me = await registerAndLogin(app) // registration and login: 2 of 4
  const patch = async (payload: object) => await injectAs(app, me, { method: 'PATCH', url: `/api/user/${me.id}`, payload })
  for (let i = 0; i < 3; i++) t.equal((await patch({ username: newUser().username })).statusCode, 200, `rename ${i + 1}: no bcrypt, no budget`)
  assertProblem(t, await patch({ password: 'a brand new secret', currentPassword: 'wrong one' }), 403, 'WRONG_PASSWORD')
  const fresh = await patch({ password: 'a brand new secret', currentPassword: me.password })
  t.equal(fresh.statusCode, 200, 'the fourth bcrypt-costing request')
  const limited = await app.inject({ method: 'DELETE', url: `/api/user/${me.id}`, payload: { password: 'a brand new secret' }, headers: { authorization: `Bearer ${fresh.json().token}` } })
  assertProblem(t, limited, 429, 'RATE_LIMITED')
  t.ok(Number(limited.headers['retry-after']) > 0, 'Retry-After')
})
