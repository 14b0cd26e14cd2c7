/**
 * Brute force on login: the per-client limit (RATE_LIMIT_AUTH_*) and the per-account
 * limit on failed logins (LOGIN_FAILURES_*), each answering 429 with Retry-After in
 * problem details. The per-account limit holds across clients, does not count successful
 * logins, treats unknown names like real ones, and ends with its window.
 */
import pg from 'pg'
import t from 'tap'
import { assertProblem } from '../helpers/assertions.js'
import { build, newUser, registerAndLogin } from '../helpers/build.js'

const login = (username: string, password: string, client = '10.0.0.1') =>
  ({ method: 'POST' as const, url: '/api/auth/login', payload: { username, password }, remoteAddress: client })

t.test('per client: the login limit answers 429 with Retry-After', async (t) => {
  const app = await build(t, { env: { RATE_LIMIT_AUTH_MAX: '3' } })
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

/** Counts the bcrypt verifications the app runs (the real ones still run). */
function countVerifications (app: { passwords: { verify: (...args: any[]) => Promise<boolean>, verifyDummy: (...args: any[]) => Promise<false> } }) {
  const counter = { count: 0 }
  const { verify, verifyDummy } = app.passwords
  app.passwords.verify = async (...args) => { counter.count++; return await verify(...args) }
  app.passwords.verifyDummy = async (...args) => { counter.count++; return await verifyDummy(...args) }
  return counter
}

t.test('per account, concurrent: at most LOGIN_FAILURES_MAX guesses are evaluated, however many arrive at once', async (t) => {
  // The per-client limit is high (TEST_ENV): an attacker with many addresses.
  const app = await build(t, { env: { LOGIN_FAILURES_MAX: '10', LOGIN_FAILURES_WINDOW_MS: '60000' } })
  const victim = await registerAndLogin(app)
  const verifications = countVerifications(app)
  const requests = Array.from({ length: 40 }, (_, i) => app.inject(login(victim.username, `wrong guess ${i}`, `10.3.${i}.1`)))
  requests.push(app.inject(login(victim.username, victim.password, '10.3.99.1')))
  const answers = await Promise.all(requests)
  const statuses = answers.map((res) => res.statusCode)
  const evaluated = statuses.filter((status) => status !== 429).length
  t.comment(`statuses: ${statuses.join(',')}`)
  t.ok(evaluated <= 10, `${evaluated} guesses evaluated (at most 10)`)
  t.ok(verifications.count <= 10, `${verifications.count} bcrypt verifications (at most 10)`)
  t.ok(statuses.every((status) => [401, 429, 200].includes(status)), 'only 401, 429 and 200')
  for (const res of answers.filter((r) => r.statusCode === 429)) assertProblem(t, res, 429, 'RATE_LIMITED')
  t.ok(answers.filter((r) => r.statusCode === 429).every((r) => Number(r.headers['retry-after']) > 0), 'every 429 has Retry-After')
  const wrong = statuses.slice(0, 40).filter((status) => status === 401).length
  t.ok(wrong <= 10, `${wrong} wrong guesses answered 401`)
  const after = await app.inject(login(victim.username, victim.password, '10.3.100.1'))
  if (wrong === 10) t.equal(after.statusCode, 429, 'locked after 10 failures: the right password does not get through')
})

t.test('per account: a right guess gives its reservation back (concurrent successful logins are never limited)', async (t) => {
  const app = await build(t, { env: { LOGIN_FAILURES_MAX: '3', LOGIN_FAILURES_WINDOW_MS: '60000' } })
  const me = await registerAndLogin(app)
  const statuses = (await Promise.all(Array.from({ length: 3 }, () => app.inject(login(me.username, me.password))))).map((r) => r.statusCode)
  t.same(statuses, [200, 200, 200], 'three at once, each within the budget')
  for (let i = 0; i < 6; i++) t.equal((await app.inject(login(me.username, me.password))).statusCode, 200, `login ${i + 1} in a row`)
})

t.test('per account: one counter per account, whatever the spelling (database folding, username or e-mail)', async (t) => {
  const app = await build(t, { env: { LOGIN_FAILURES_MAX: '3', LOGIN_FAILURES_WINDOW_MS: '60000' } })
  const tag = Math.random().toString(36).slice(2, 8)
  const me = await registerAndLogin(app, { username: `rti_${tag}`, email: `rti_${tag}@example.com` })
  const db = new pg.Client({ connectionString: app.databaseUrl })
  await db.connect()
  const { rows: [info] } = await db.query('SELECT datcollate, datctype, $1::citext = $2::citext AS folds FROM pg_database WHERE datname = current_database()', [`rtİ_${tag}`, `rti_${tag}`])
  await db.end()
  t.comment(`database collation ${info.datcollate}, ctype ${info.datctype}: 'İ' ${info.folds ? 'folds' : 'does not fold'} to 'i'`)

  if (info.folds) {
    t.equal((await app.inject(login(`rtİ_${tag}`, me.password))).statusCode, 200, 'the dotted capital I names the account (citext)')
    t.equal((await app.inject(login(`rtİ_${tag}`, 'wrong password 1', '10.4.0.1'))).statusCode, 401)
  } else {
    t.equal((await app.inject(login(me.username, 'wrong password 1', '10.4.0.1'))).statusCode, 401)
  }
  t.equal((await app.inject(login(me.email.toUpperCase(), 'wrong password 2', '10.4.0.2'))).statusCode, 401, 'a failure through the e-mail')
  t.equal((await app.inject(login(me.username.toUpperCase(), 'wrong password 3', '10.4.0.3'))).statusCode, 401, 'a failure in upper case')
  t.equal((await app.inject(login(me.username, me.password, '10.4.0.4'))).statusCode, 429, 'three failures under three spellings lock the one account')
  t.equal((await app.inject({ ...login('', me.password, '10.4.0.5'), payload: { identity: me.email, password: me.password } })).statusCode, 429, 'by e-mail too')

  // Unknown names: every spelling the database folds alike shares one counter, too.
  const ghost = `ghi_${tag}`
  const spellings = info.folds ? [`ghİ_${tag}`, `GHİ_${tag}`, `GHI_${tag}`] : [ghost, ghost.toUpperCase(), ghost]
  for (const [i, name] of spellings.entries()) t.equal((await app.inject(login(name, 'not the password', `10.5.0.${i}`))).statusCode, 401, `unknown ${name}: 401`)
  t.equal((await app.inject(login(ghost, 'not the password', '10.5.0.9'))).statusCode, 429, 'unknown name: locked under every spelling')
})
