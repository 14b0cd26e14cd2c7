/**
 * Brute force on login: the per-client limit (RATE_LIMIT_AUTH_*) and the per-account
 * limit on failed logins (LOGIN_FAILURES_*), each answering 429 with Retry-After in
 * problem details. The per-account limit holds across clients, does not count successful
 * logins, treats unknown names like real ones, and ends with its window.
 */
import t from 'tap'
import { assertProblem } from '../helpers/assertions.js'
import { build, newUser, registerAndLogin } from '../helpers/build.js'

const login = (username: string, password: string, client = '10.0.0.1') =>
  ({ method: 'POST' as const, url: '/api/auth/login', payload: { username, password }, remoteAddress: client })

t.test('per client: the login limit answers 429 with Retry-After', async (t) => {
  const app = await build(t, { env: { RATE_LIMIT_AUTH_MAX: '3', RATE_LIMIT_AUTH_WINDOW_MS: '60000' } })
  for (let i = 1; i <= 3; i++) {
    t.equal((await app.inject(login(`nobody${i}`, 'wrong password', '10.0.0.7'))).statusCode, 401, `attempt ${i}: 401`)
  }
  const limited = await app.inject(login('nobody4', 'wrong password', '10.0.0.7'))
  assertProblem(t, limited, 429, 'RATE_LIMITED')
  const retry = Number(limited.headers['retry-after'])
  t.ok(retry >= 1 && retry <= 60, `Retry-After ${retry} s`)
  t.equal((await app.inject(login('nobody5', 'wrong password', '10.0.0.8'))).statusCode, 401, 'another client is not limited')
})

t.test('per account: failed logins lock the account for every client', async (t) => {
  const app = await build(t, { env: { LOGIN_FAILURES_MAX: '3', LOGIN_FAILURES_WINDOW_MS: '60000' } })
  const victim = await registerAndLogin(app)
  const other = await registerAndLogin(app)

  for (let i = 1; i <= 3; i++) {
    const res = await app.inject(login(victim.username, `guess number ${i}`, `10.1.0.${i}`))
    t.equal(res.statusCode, 401, `failed login ${i} from client ${i}: 401`)
  }
  const locked = await app.inject(login(victim.username, victim.password, '10.1.0.99'))
  const body = assertProblem(t, locked, 429, 'RATE_LIMITED')
  const retry = Number(locked.headers['retry-after'])
  t.ok(retry >= 55 && retry <= 60, `Retry-After ${retry} s, the rest of the window`)
  t.match(body.detail, /failed logins/, 'the detail says why')
  t.notOk(locked.body.includes('token'), 'no token, even with the right password')

  const upper = await app.inject(login(victim.username.toUpperCase(), victim.password, '10.1.0.98'))
  t.equal(upper.statusCode, 429, 'the same name in another case is the same account')
  t.equal((await app.inject(login(other.username, other.password, '10.1.0.1'))).statusCode, 200, 'other accounts log in, from the same clients')
  for (let i = 0; i < 5; i++) {
    t.equal((await app.inject(login(other.username, other.password))).statusCode, 200, `successful login ${i + 1} does not count`)
  }
})

t.test('per account: an unknown name is limited exactly like a real one', async (t) => {
  const app = await build(t, { env: { LOGIN_FAILURES_MAX: '3', LOGIN_FAILURES_WINDOW_MS: '60000' } })
  const ghost = newUser().username
  const real = await registerAndLogin(app)
  const statuses = async (username: string) => {
    const out: number[] = []
    for (let i = 0; i < 5; i++) out.push((await app.inject(login(username, 'not the password', `10.2.0.${i}`))).statusCode)
    return out
  }
  const unknown = await statuses(ghost)
  t.same(unknown, [401, 401, 401, 429, 429], 'unknown name: 3 failures, then 429')
  t.same(await statuses(real.username), unknown, 'a real account answers the same sequence: the limit reveals nothing')
})

t.test('per account: the lock ends with its window', async (t) => {
  const app = await build(t, { env: { LOGIN_FAILURES_MAX: '2', LOGIN_FAILURES_WINDOW_MS: '1000' } })
  const me = await registerAndLogin(app)
  await app.inject(login(me.username, 'wrong password 1'))
  await app.inject(login(me.username, 'wrong password 2'))
  t.equal((await app.inject(login(me.username, me.password))).statusCode, 429, 'locked')
  await new Promise((resolve) => setTimeout(resolve, 1100))
  t.equal((await app.inject(login(me.username, me.password))).statusCode, 200, 'the right password works once the window has passed')
})
