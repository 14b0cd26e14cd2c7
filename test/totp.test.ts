/**
 * TOTP as a second factor, with codes computed by otplib (a second, independent
 * implementation) and RFC 6238's test vectors: step boundaries under a fake clock, enrolment,
 * the login's second step, replay, recovery codes (single use, regenerated), a race of two
 * logins with one code, wrong codes counted per account, disabling, the admin reset, the
 * recent sign-in requirement and a password reset that does not bypass the factor.
 */
import { PassThrough } from 'node:stream'
import { generateSync } from 'otplib'
import t from 'tap'
import { MemoryChallengeStore } from '../src/modules/identity/challenges.js'
import { newLinkToken } from '../src/lib/link-token.js'
import { codeStep } from '../src/modules/identity/totp.js'
import { assertProblem } from './helpers/assertions.js'
import { build, injectAs, TEST_ENV, verifiedUser, type Session, type TestApp } from './helpers/build.js'
import { sqlClient } from './helpers/database.js'

const ADMIN_KEY = TEST_ENV.ADMIN_API_KEYS!.split(',')[0]!
/** RFC 6238 appendix B's SHA-1 key. */
const RFC_SECRET = Buffer.from('12345678901234567890')

t.test('RFC 6238 vectors and step boundaries (fake clock)', async (t) => {
  // The vectors' 8 digits, truncated to the 6 that apps show.
  for (const [seconds, code] of [[59, '287082'], [1111111109, '081804'], [1111111111, '050471'], [1234567890, '005924'], [2000000000, '279037'], [20000000000, '353130']] as const) {
    t.equal(codeStep(RFC_SECRET, code, seconds * 1000), Math.floor(seconds / 30), `T=${seconds}: ${code}`)
  }
  // The code of step 1 (30 s - 59.999 s) is good from step 0 to step 2, never outside.
  const step1 = '287082'
  t.equal(codeStep(RFC_SECRET, step1, 29_999), 1, 'one step early: accepted')
  t.equal(codeStep(RFC_SECRET, step1, 30_000), 1, 'its own step starts')
  t.equal(codeStep(RFC_SECRET, step1, 89_999), 1, 'one step late: accepted')
  t.equal(codeStep(RFC_SECRET, step1, 90_000), null, 'two steps late: refused')
  t.equal(codeStep(RFC_SECRET, '287083', 59_000), null, 'a wrong code')
  t.equal(codeStep(RFC_SECRET, '28708', 59_000), null, 'five digits')
})

t.test('the challenge store: single use, expiry, bounded by refusing (never evicting)', async (t) => {
  let clock = 0
  const store = new MemoryChallengeStore({ maxKeys: 3, perOwner: 2 }, () => clock)
  const refusal = async (put: Promise<void>): Promise<unknown> => await put.then(() => 'kept', (error: unknown) => error)
  await store.put('a', '1', 1000)
  t.equal(await store.peek('a'), '1', 'peek reads')
  t.equal(await store.take('a'), '1', 'take reads once')
  t.equal(await store.take('a'), null, 'then nothing')
  await store.put('b', '2', 1000)
  clock = 1000
  t.equal(await store.take('b'), null, 'expired at its ttl')
  for (const key of ['c', 'd', 'e']) await store.put(key, key, 10_000)
  t.match(await refusal(store.put('f', 'f', 10_000)), { reason: 'full', retryAfterMs: 10_000 }, 'full: refused, with the wait until the oldest expires')
  t.equal(await store.peek('c'), 'c', 'the oldest stays')
  clock = 11_000
  await store.put('x1', '1', 10_000, 'client-a')
  await store.put('x2', '2', 10_000, 'client-a')
  t.match(await refusal(store.put('x3', '3', 10_000, 'client-a')), { reason: 'owner' }, "past its owner's share: refused")
  await store.put('y1', '1', 10_000, 'client-b')
  t.equal(await store.take('x1'), '1', "a used value still counts in its owner's share until it expires")
  t.match(await refusal(store.put('x3', '3', 10_000, 'client-a')), { reason: 'owner', retryAfterMs: 10_000 }, 'until its oldest expires')
  clock = 21_000
  await store.put('x3', '3', 10_000, 'client-a')
  t.equal(await store.peek('x3'), '3', 'once its oldest expired, the owner may again')
})

let now = Date.parse('2026-11-26T12:00:10Z')
const logs: string[] = []
const logStream = new PassThrough()
logStream.on('data', (chunk: Buffer) => logs.push(...chunk.toString().split('\n').filter(Boolean)))
let app: TestApp
t.before(async () => {
  app = await build(t, { env: { LOGIN_FAILURES_MAX: '6', LOG_LEVEL: 'warn' }, logStream, tuning: { clock: () => now } })
})

/** The code otplib computes for `secret` (base32) at the fake clock, `steps` steps on. */
const codeAt = (secret: string, steps = 0): string => generateSync({ secret, epoch: Math.floor(now / 1000) + steps * 30 })

async function enrol (session: Session): Promise<{ secret: string, recoveryCodes: string[] }> {
  const started = await injectAs(app, session, { method: 'POST', url: '/api/security/totp', payload: { currentPassword: session.password } })
  if (started.statusCode !== 200) throw new Error(`setup: ${started.statusCode} ${started.body}`)
  const { secret } = started.json() as { secret: string }
  const confirmed = await injectAs(app, session, { method: 'POST', url: '/api/security/totp/confirm', payload: { code: codeAt(secret), currentPassword: session.password } })
  if (confirmed.statusCode !== 200) throw new Error(`confirm: ${confirmed.statusCode} ${confirmed.body}`)
  return { secret, recoveryCodes: confirmed.json().recoveryCodes }
}

async function login (session: Session, password = session.password) {
  return await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: session.username, password } })
}

async function secondStep (session: Session): Promise<string> {
  const res = await login(session)
  if (res.statusCode !== 202) throw new Error(`login: ${res.statusCode} ${res.body}`)
  return res.json().mfaToken
}

const complete = async (payload: Record<string, string>) => await app.inject({ method: 'POST', url: '/api/auth/mfa/totp', payload })

t.test('enrolment: the secret as URI and QR code, on only after a first valid code', async (t) => {
  const user = await verifiedUser(app)
  const started = await injectAs(app, user, { method: 'POST', url: '/api/security/totp', payload: { currentPassword: user.password } })
  t.equal(started.statusCode, 200)
  t.equal(started.headers['cache-control'], 'no-store', 'the secret is never cached')
  const { secret, uri, qrCode } = started.json()
  t.match(secret, /^[A-Z2-7]{32}$/, '160-bit base32 secret')
  const parsed = new URL(uri)
  t.equal(parsed.protocol, 'otpauth:')
  t.equal(parsed.searchParams.get('secret'), secret)
  t.equal(parsed.searchParams.get('period'), '30')
  t.match(decodeURIComponent(parsed.pathname), user.username)
  t.match(Buffer.from(qrCode.replace('data:image/svg+xml;base64,', ''), 'base64').toString(), /^<svg /, 'the QR code is an SVG image')

  t.equal((await login(user)).statusCode, 200, 'pending: login still signs in at once')
  assertProblem(t, await injectAs(app, user, { method: 'POST', url: '/api/security/totp/confirm', payload: { code: codeAt(secret, 2), currentPassword: user.password } }), 400, 'TOTP_CODE_INVALID')
  const confirmed = await injectAs(app, user, { method: 'POST', url: '/api/security/totp/confirm', payload: { code: codeAt(secret), currentPassword: user.password } })
  t.equal(confirmed.statusCode, 200)
  const codes = confirmed.json().recoveryCodes as string[]
  t.equal(codes.length, 10)
  t.equal(new Set(codes).size, 10)
  for (const code of codes) t.match(code, /^[a-z2-7]{4}-[a-z2-7]{4}-[a-z2-7]{4}-[a-z2-7]{4}$/)
  assertProblem(t, await injectAs(app, user, { method: 'POST', url: '/api/security/totp', payload: { currentPassword: user.password } }), 409, 'TOTP_ENABLED')
  assertProblem(t, await injectAs(app, user, { method: 'POST', url: '/api/security/totp/confirm', payload: { code: codeAt(secret), currentPassword: user.password } }), 409, 'TOTP_NOT_PENDING')

  const overview = await injectAs(app, user, { method: 'GET', url: '/api/security' })
  t.equal(overview.json().totp.enabled, true)
  t.equal(overview.json().recoveryCodesLeft, 10)
  t.same(overview.json().session.methods, ['password'])
})

t.test('login with TOTP on: a second step, completed once by a fresh code', async (t) => {
  const user = await verifiedUser(app)
  const { secret } = await enrol(user)
  const first = await login(user)
  t.equal(first.statusCode, 202, 'the right password alone is not a session')
  t.equal(first.headers['set-cookie'], undefined, 'no cookies')
  const body = first.json()
  t.same(Object.keys(body).sort(), ['expiresIn', 'methods', 'mfaToken'], 'no tokens in the body')
  t.same(body.methods, ['totp', 'recoveryCode', 'recovery-code'], 'recovery-code: the deprecated name, after the new one')
  t.equal(body.expiresIn, 300)

  assertProblem(t, await complete({ mfaToken: body.mfaToken, code: codeAt(secret) }), 401, 'MFA_CODE_INVALID')
  now += 30_000
  const done = await complete({ mfaToken: body.mfaToken, code: codeAt(secret) })
  t.equal(done.statusCode, 200, done.body)
  t.equal(done.json().mode, 'token')
  const session = { ...user, auth: { authorization: `Bearer ${done.json().token}` } }
  t.same((await injectAs(app, session, { method: 'GET', url: '/api/security' })).json().session.methods, ['password', 'totp'], 'the session knows it used TOTP')
  assertProblem(t, await complete({ mfaToken: body.mfaToken, code: codeAt(secret, 1) }), 401, 'MFA_TOKEN_INVALID')

  // The same code in a new login: replay.
  const again = await secondStep(user)
  assertProblem(t, await complete({ mfaToken: again, code: codeAt(secret) }), 401, 'MFA_CODE_INVALID')
  // An earlier step's code, still inside the window, is refused once a later one was used.
  assertProblem(t, await complete({ mfaToken: again, code: codeAt(secret, -1) }), 401, 'MFA_CODE_INVALID')
  t.equal((await complete({ mfaToken: again, code: codeAt(secret, 1) })).statusCode, 200, 'the next step\'s code, one step early')

  assertProblem(t, await complete({ mfaToken: 'A'.repeat(43), code: '123456' }), 401, 'MFA_TOKEN_INVALID')
  assertProblem(t, await complete({ mfaToken: again, code: '123456', recoveryCode: 'aaaa-bbbb-cccc-dddd' }), 400, 'BAD_REQUEST')
  assertProblem(t, await login(user, 'wrong password'), 401, 'UNAUTHORIZED')
})

t.test('two logins race with one code: one wins', async (t) => {
  const user = await verifiedUser(app)
  const { secret } = await enrol(user)
  now += 30_000
  const tickets = await Promise.all(Array.from({ length: 6 }, async () => await secondStep(user)))
  const code = codeAt(secret)
  const answers = await Promise.all(tickets.map(async (mfaToken) => await complete({ mfaToken, code })))
  t.same(answers.map((a) => a.statusCode).sort(), [200, 401, 401, 401, 401, 401], 'one 200, the rest refused')
})

t.test('recovery codes: each works once; regenerated, the old ones stop', async (t) => {
  const user = await verifiedUser(app)
  const { recoveryCodes } = await enrol(user)
  const ticket = await secondStep(user)
  // Typed loosely: upper case, spaces for hyphens.
  const typed = recoveryCodes[0]!.toUpperCase().replaceAll('-', ' ')
  const done = await complete({ mfaToken: ticket, recoveryCode: typed })
  t.equal(done.statusCode, 200, done.body)
  const session = { ...user, auth: { authorization: `Bearer ${done.json().token}` } }
  const overview = (await injectAs(app, session, { method: 'GET', url: '/api/security' })).json()
  t.same(overview.session.methods, ['password', 'recoveryCode', 'recovery-code'])
  t.equal(overview.recoveryCodesLeft, 9)
  assertProblem(t, await complete({ mfaToken: await secondStep(user), recoveryCode: recoveryCodes[0]! }), 401, 'MFA_CODE_INVALID')

  const regenerated = await injectAs(app, session, { method: 'POST', url: '/api/security/recovery-codes', payload: { currentPassword: session.password } })
  t.equal(regenerated.statusCode, 200)
  t.equal(regenerated.json().recoveryCodes.length, 10)
  assertProblem(t, await complete({ mfaToken: await secondStep(user), recoveryCode: recoveryCodes[1]! }), 401, 'MFA_CODE_INVALID')
  t.equal((await complete({ mfaToken: await secondStep(user), recoveryCode: regenerated.json().recoveryCodes[1] })).statusCode, 200)
})

t.test('wrong codes use the account\'s budget of guesses: 429 past it, even for a right code', async (t) => {
  const user = await verifiedUser(app)
  const { secret } = await enrol(user)
  now += 30_000
  const ticket = await secondStep(user)
  for (let i = 0; i < 6; i++) assertProblem(t, await complete({ mfaToken: ticket, code: String(100000 + i) }), 401, 'MFA_CODE_INVALID')
  const refused = await complete({ mfaToken: ticket, code: codeAt(secret) })
  assertProblem(t, refused, 429, 'RATE_LIMITED')
  t.ok(Number(refused.headers['retry-after']) > 0, 'Retry-After')
  assertProblem(t, await login(user), 429, 'RATE_LIMITED')
})

t.test('disable with a code or the password; then login signs in at once', async (t) => {
  const user = await verifiedUser(app)
  const { secret } = await enrol(user)
  now += 30_000
  assertProblem(t, await injectAs(app, user, { method: 'POST', url: '/api/security/totp/disable', payload: { code: codeAt(secret, 5) } }), 400, 'TOTP_CODE_INVALID')
  assertProblem(t, await injectAs(app, user, { method: 'POST', url: '/api/security/totp/disable', payload: { currentPassword: 'not it' } }), 403, 'WRONG_PASSWORD')
  assertProblem(t, await injectAs(app, user, { method: 'POST', url: '/api/security/totp/disable', payload: {} }), 400, 'BAD_REQUEST')
  t.equal((await injectAs(app, user, { method: 'POST', url: '/api/security/totp/disable', payload: { code: codeAt(secret) } })).statusCode, 204)
  t.equal((await login(user)).statusCode, 200)
  assertProblem(t, await injectAs(app, user, { method: 'POST', url: '/api/security/recovery-codes', payload: { currentPassword: user.password } }), 409, 'TOTP_NOT_ENABLED')
  const overview = (await injectAs(app, user, { method: 'GET', url: '/api/security' })).json()
  t.equal(overview.recoveryCodesLeft, 0, 'the recovery codes went with it')

  const other = await verifiedUser(app)
  await enrol(other)
  t.equal((await injectAs(app, other, { method: 'POST', url: '/api/security/totp/disable', payload: { currentPassword: other.password } })).statusCode, 204)
  t.equal((await login(other)).statusCode, 200)

  // `password`, the field's former name, works until its removal; not beside the new one.
  const former = await verifiedUser(app)
  await enrol(former)
  assertProblem(t, await injectAs(app, former, { method: 'POST', url: '/api/security/totp/disable', payload: { password: former.password, currentPassword: former.password } }), 400, 'BAD_REQUEST')
  assertProblem(t, await injectAs(app, former, { method: 'POST', url: '/api/security/totp/disable', payload: { password: 'not it' } }), 403, 'WRONG_PASSWORD')
  t.equal((await injectAs(app, former, { method: 'POST', url: '/api/security/totp/disable', payload: { password: former.password } })).statusCode, 204)
  t.equal((await login(former)).statusCode, 200)
})

t.test('the admin reset removes every factor, and is logged', async (t) => {
  const user = await verifiedUser(app)
  await enrol(user)
  t.equal((await login(user)).statusCode, 202)
  assertProblem(t, await app.inject({ method: 'DELETE', url: `/api/admin/users/${user.id}/factors` }), 401, 'API_KEY_MISSING')
  const reset = await app.inject({ method: 'DELETE', url: `/api/admin/users/${user.id}/factors`, headers: { authorization: `Bearer ${ADMIN_KEY}` } })
  t.equal(reset.statusCode, 204)
  t.equal((await login(user)).statusCode, 200, 'the password alone signs in again')
  const line = logs.map((l) => JSON.parse(l)).find((l) => l.event === 'factors-reset' && l.userId === user.id)
  t.ok(line, 'the reset is in the log')
  t.equal(line?.removed, true)
  assertProblem(t, await app.inject({ method: 'DELETE', url: '/api/admin/users/2147483000/factors', headers: { authorization: `Bearer ${ADMIN_KEY}` } }), 404, 'NOT_FOUND')
})

t.test('a password reset does not bypass the second factor', async (t) => {
  const user = await verifiedUser(app)
  const { recoveryCodes } = await enrol(user)
  const pending = await secondStep(user)
  const { token, digest } = newLinkToken()
  await app.usersRepository.createResetToken(user.id, digest, 600_000)
  const confirmed = await app.inject({ method: 'POST', url: '/api/auth/password-reset/confirm', payload: { token, password: 'a brand new password' } })
  t.equal(confirmed.statusCode, 204)
  const res = await login(user, 'a brand new password')
  t.equal(res.statusCode, 202, 'the new password still leads to the second step')
  t.notOk('token' in res.json(), 'and no session')
  assertProblem(t, await complete({ mfaToken: pending, recoveryCode: recoveryCodes[0]! }), 401, 'MFA_TOKEN_INVALID')
  t.equal((await complete({ mfaToken: res.json().mfaToken, recoveryCode: recoveryCodes[0]! })).statusCode, 200, 'a second step begun before the reset is void (and spent no code); one after it completes')
})

t.test('RECENT_SIGN_IN_MAX_AGE: sensitive changes need a recent sign-in with the second factor', async (t) => {
  const strict = await build(t, { env: { RECENT_SIGN_IN_MAX_AGE: '10m' } })
  const db = await sqlClient(t, strict.databaseUrl)
  const user = await verifiedUser(strict)
  t.equal((await injectAs(strict, user, { method: 'POST', url: '/api/security/totp', payload: { currentPassword: user.password } })).statusCode, 200, 'a fresh password session may enrol (the account has no second factor)')
  await db.query("UPDATE sessions SET created_at = now() - interval '11 minutes' WHERE id = $1", [user.sid])
  const old = await injectAs(strict, user, { method: 'POST', url: '/api/security/totp', payload: { currentPassword: user.password } })
  assertProblem(t, old, 403, 'RECENT_SIGN_IN_REQUIRED')
  t.match(old.json().detail, /last 10 min/)
  assertProblem(t, await injectAs(strict, user, { method: 'PATCH', url: `/api/user/${user.id}`, payload: { password: 'another password!', currentPassword: user.password } }), 403, 'RECENT_SIGN_IN_REQUIRED')
  assertProblem(t, await injectAs(strict, user, { method: 'DELETE', url: `/api/user/${user.id}`, payload: { password: user.password } }), 403, 'RECENT_SIGN_IN_REQUIRED')
  t.equal((await injectAs(strict, user, { method: 'PATCH', url: `/api/user/${user.id}`, payload: { names: 'Still fine' } })).statusCode, 200, 'a change of display name is not sensitive')
  t.equal((await injectAs(strict, user, { method: 'GET', url: '/api/security' })).statusCode, 200, 'reading is not a change')

  // TOTP on, then a session made with the password alone (before it was on) is not strong.
  const fresh = await verifiedUser(strict)
  const started = await injectAs(strict, fresh, { method: 'POST', url: '/api/security/totp', payload: { currentPassword: fresh.password } })
  const secret = started.json().secret as string
  const code = generateSync({ secret, epoch: Math.floor(Date.now() / 1000) })
  t.equal((await injectAs(strict, fresh, { method: 'POST', url: '/api/security/totp/confirm', payload: { code, currentPassword: fresh.password } })).statusCode, 200)
  const weak = await injectAs(strict, fresh, { method: 'POST', url: '/api/security/recovery-codes', payload: { currentPassword: fresh.password } })
  assertProblem(t, weak, 403, 'RECENT_SIGN_IN_REQUIRED')
  t.match(weak.json().detail, /second factor/)
  const ticket = (await strict.inject({ method: 'POST', url: '/api/auth/login', payload: { username: fresh.username, password: fresh.password } })).json().mfaToken
  const recovery = (await strict.inject({ method: 'POST', url: '/api/security/totp/confirm' })).statusCode
  t.equal(recovery, 401, 'unauthenticated: 401')
  const codes = await db.query('SELECT count(*)::int AS n FROM recovery_codes r JOIN users u ON u.id = r.user_id WHERE u.username = $1', [fresh.username])
  t.equal(codes.rows[0].n, 10)
  const strong = await strict.inject({ method: 'POST', url: '/api/auth/mfa/totp', payload: { mfaToken: ticket, code: generateSync({ secret, epoch: Math.floor(Date.now() / 1000) + 30 }) } })
  t.equal(strong.statusCode, 200, strong.body)
  t.equal((await strict.inject({ method: 'POST', url: '/api/security/recovery-codes', headers: { authorization: `Bearer ${strong.json().token}` }, payload: { currentPassword: fresh.password } })).statusCode, 200, 'a session with the second factor may')
})
