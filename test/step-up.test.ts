/**
 * Proof for lasting changes, pre-hijacked addresses and security notices (docs/api.md):
 * a bare access token (stolen) adds no passkey, turns no TOTP on, replaces no recovery codes
 * and moves the account to no other address without the current password; no factor is added
 * before the address is verified, and the first proof of the address (its verification link,
 * or a reset link) ends every session made before it; the address is told of each change of
 * a factor, over real SMTP.
 */
import { generateSync } from 'otplib'
import t from 'tap'
import { assertProblem } from './helpers/assertions.js'
import { build, markVerified, registerAndLogin, verifiedUser, type Session, type TestApp } from './helpers/build.js'
import { sqlClient } from './helpers/database.js'
import { startSmtpSink, type Received, type SmtpSink } from './helpers/smtp-sink.js'
import { SoftAuthenticator } from './helpers/soft-authenticator.js'

const PUBLIC_URL = 'https://shop.example.com'
const RESET_LINK = /https:\/\/shop\.example\.com\/reset-password#token=([A-Za-z0-9_-]+)/
const VERIFY_LINK = /https:\/\/shop\.example\.com\/verify-email#token=([A-Za-z0-9_-]+)/

let sink: SmtpSink
let app: TestApp
let origin: string

t.before(async () => {
  sink = await startSmtpSink(t)
  app = await build(t, {
    env: { SMTP_URL: sink.url, PUBLIC_URL, MAIL_FROM: 'Shop <no-reply@shop.example.com>', LOGIN_FAILURES_MAX: '5' },
    // Each change here is told by mail, more than the 5 an hour one address gets (test/mail-limits.test.ts).
    tuning: { mail: { pollMs: 100, retryBaseMs: 100, perAddress: { max: 100, timeWindow: 3_600_000 } } }
  })
  origin = app.config.auth.webauthnOrigins[0]!
})

/** The messages to `email` with `subject`, once there are `count` of them. */
async function mailsTo (email: string, subject: string | RegExp, count = 1): Promise<Received[]> {
  const deadline = Date.now() + 10_000
  for (;;) {
    const found = sink.received.filter((r) => !Array.isArray(r.mail.to) && r.mail.to?.value[0]?.address?.toLowerCase() === email.toLowerCase() &&
      (typeof subject === 'string' ? r.mail.subject === subject : subject.test(r.mail.subject ?? '')))
    if (found.length >= count) return found
    if (Date.now() > deadline) throw new Error(`waited for ${count} "${String(subject)}" to ${email}, got ${found.length}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

const post = async (session: Session, url: string, payload?: Record<string, unknown>) => await app.inject({ method: 'POST', url, headers: session.auth, ...(payload === undefined ? {} : { payload }) })
const code = (secret: string, steps = 0) => generateSync({ secret, epoch: Math.floor(Date.now() / 1000) + 30 * steps })

/** A passkey of `authenticator` added with the password: the answers of the options and of the registration. */
async function addPasskey (session: Session, authenticator: SoftAuthenticator, password: string | undefined = session.password) {
  const proof = password === undefined ? {} : { currentPassword: password }
  const options = await post(session, '/api/security/passkey/options', proof)
  if (options.statusCode !== 200) return { options, added: undefined }
  const added = await post(session, '/api/security/passkeys', { response: authenticator.register(options.json(), origin), ...proof })
  return { options, added }
}

async function passwordless (authenticator: SoftAuthenticator) {
  const options = (await app.inject({ method: 'POST', url: '/api/auth/passkey/options' })).json()
  return await app.inject({ method: 'POST', url: '/api/auth/passkey/login', payload: { response: authenticator.authenticate(options, origin) } })
}

t.test('a bare access token makes no lasting change without the current password', async (t) => {
  const victim = await verifiedUser(app)
  const stolen = { ...victim, password: 'not the password' }
  const attacker = new SoftAuthenticator()

  // Passkey: the options and the registration each need the password.
  assertProblem(t, await post(victim, '/api/security/passkey/options', {}), 400, 'BAD_REQUEST')
  assertProblem(t, await post(victim, '/api/security/passkey/options', { currentPassword: stolen.password }), 403, 'WRONG_PASSWORD')
  const options = await post(victim, '/api/security/passkey/options', { currentPassword: victim.password })
  t.equal(options.statusCode, 200)
  assertProblem(t, await post(victim, '/api/security/passkeys', { response: attacker.register(options.json(), origin) }), 400, 'BAD_REQUEST')
  assertProblem(t, await passwordless(attacker), 401, 'PASSKEY_REFUSED')

  // TOTP: starting and confirming the enrolment.
  assertProblem(t, await post(victim, '/api/security/totp', {}), 400, 'BAD_REQUEST')
  const started = await post(victim, '/api/security/totp', { currentPassword: victim.password })
  t.equal(started.statusCode, 200)
  assertProblem(t, await post(victim, '/api/security/totp/confirm', { code: code(started.json().secret) }), 400, 'BAD_REQUEST')
  assertProblem(t, await post(victim, '/api/security/totp/confirm', { code: code(started.json().secret), currentPassword: stolen.password }), 403, 'WRONG_PASSWORD')
  t.equal((await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: victim.username, password: victim.password } })).statusCode, 200, 'TOTP is still off: the owner signs in with the password alone')

  // The address: a new one needs the password; the current one (cancelling a change) does not.
  const elsewhere = `moved-${victim.email}`
  assertProblem(t, await app.inject({ method: 'PATCH', url: `/api/user/${victim.id}`, headers: victim.auth, payload: { email: elsewhere } }), 400, 'BAD_REQUEST')
  assertProblem(t, await app.inject({ method: 'PATCH', url: `/api/user/${victim.id}`, headers: victim.auth, payload: { email: elsewhere, currentPassword: stolen.password } }), 403, 'WRONG_PASSWORD')
  t.equal((await app.inject({ method: 'GET', url: `/api/user/${victim.id}`, headers: victim.auth })).json().pendingEmail, null, 'no change is pending')
  t.equal((await app.inject({ method: 'PATCH', url: `/api/user/${victim.id}`, headers: victim.auth, payload: { email: victim.email.toUpperCase() } })).statusCode, 200, 'the current address needs no password')

  // Wrong passwords are the account's guesses: past LOGIN_FAILURES_MAX (5, three spent above), 429 even for the right one.
  assertProblem(t, await post(victim, '/api/security/recovery-codes', { currentPassword: stolen.password }), 403, 'WRONG_PASSWORD')
  assertProblem(t, await post(victim, '/api/security/passkey/options', { currentPassword: stolen.password }), 403, 'WRONG_PASSWORD')
  assertProblem(t, await post(victim, '/api/security/passkey/options', { currentPassword: victim.password }), 429, 'RATE_LIMITED')
})

t.test('with the password: each change works, and the address is told of it', async (t) => {
  const me = await verifiedUser(app)
  const key = new SoftAuthenticator()
  const { added } = await addPasskey(me, key)
  t.equal(added?.statusCode, 201, added?.body ?? '')
  t.equal((await passwordless(key)).statusCode, 200, 'the passkey signs in')
  const [passkeyNotice] = await mailsTo(me.email, 'A passkey was added to your account')
  t.match(passkeyNotice!.mail.text ?? '', `"${added!.json().name as string}"`, 'the notice names the passkey')
  t.match(passkeyNotice!.mail.text ?? '', /reset your password/)

  const started = await post(me, '/api/security/totp', { currentPassword: me.password })
  const confirmed = await post(me, '/api/security/totp/confirm', { code: code(started.json().secret), currentPassword: me.password })
  t.equal(confirmed.statusCode, 200, confirmed.body)
  await mailsTo(me.email, 'Two-step login was turned on')
  const replaced = await post(me, '/api/security/recovery-codes', { currentPassword: me.password })
  t.equal(replaced.statusCode, 200, replaced.body)
  await mailsTo(me.email, 'New recovery codes were made')
  const off = await post(me, '/api/security/totp/disable', { password: me.password })
  t.equal(off.statusCode, 204, off.body)
  await mailsTo(me.email, 'Two-step login was turned off')

  const moved = `moved-${me.email}`
  const changed = await app.inject({ method: 'PATCH', url: `/api/user/${me.id}`, headers: me.auth, payload: { email: moved, currentPassword: me.password } })
  t.equal(changed.statusCode, 200, changed.body)
  t.equal(changed.json().user.pendingEmail, moved)
  await mailsTo(me.email, 'A change of your e-mail address was asked for')

  const refused = await addPasskey(me, new SoftAuthenticator(), 'not the password')
  assertProblem(t, refused.options, 403, 'WRONG_PASSWORD')
  await app.mail.idle()
  t.equal(sink.received.filter((r) => /passkey was added/.test(r.mail.subject ?? '') && !Array.isArray(r.mail.to) && r.mail.to?.value[0]?.address === me.email).length, 1, 'a refused change tells nothing')
})

t.test('pre-hijacking: no factor before the address is verified; its first proof ends every earlier session', async (t) => {
  // The attacker registers with the victim's address, which they cannot verify.
  const victimEmail = `victim-${Date.now()}@example.com`
  const attacker = await registerAndLogin(app, { email: victimEmail })
  const { options } = await addPasskey(attacker, new SoftAuthenticator())
  assertProblem(t, options, 403, 'EMAIL_NOT_VERIFIED')
  assertProblem(t, await post(attacker, '/api/security/totp', { currentPassword: attacker.password }), 403, 'EMAIL_NOT_VERIFIED')
  // A session of the attacker that will also be the victim's account's, and a second step begun.
  const ticketless = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: attacker.username, password: attacker.password } })
  t.equal(ticketless.statusCode, 200)

  // The victim cannot register (409), resets the password by the e-mailed link.
  t.equal((await app.inject({ method: 'POST', url: '/api/user', payload: { username: `v${Date.now()}`, email: victimEmail, password: 'the victim password' } })).statusCode, 409)
  t.equal((await app.inject({ method: 'POST', url: '/api/auth/password-reset', payload: { email: victimEmail } })).statusCode, 202)
  const [reset] = await mailsTo(victimEmail, 'Reset your password')
  const token = RESET_LINK.exec(reset!.mail.text ?? '')![1]!
  t.equal((await app.inject({ method: 'POST', url: '/api/auth/password-reset/confirm', payload: { token, password: 'the victim password' } })).statusCode, 204)

  assertProblem(t, await app.inject({ url: `/api/user/${attacker.id}`, headers: attacker.auth }), 401, 'UNAUTHORIZED')
  assertProblem(t, await app.inject({ url: '/api/security', headers: { authorization: `Bearer ${ticketless.json().token as string}` } }), 401, 'UNAUTHORIZED')
  t.equal((await app.inject({ method: 'POST', url: '/api/auth/refresh-token', payload: { refreshToken: attacker.refreshToken } })).statusCode, 401, 'nor can it be refreshed')
  const login = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: victimEmail, password: 'the victim password' } })
  t.equal(login.statusCode, 200)
  const owner = { ...attacker, password: 'the victim password', auth: { authorization: `Bearer ${login.json().token as string}` } }
  t.not((await app.inject({ url: `/api/user/${attacker.id}`, headers: owner.auth })).json().emailVerifiedAt, null, 'the reset link proved the address: verified')
  const { added } = await addPasskey(owner, new SoftAuthenticator())
  t.equal(added?.statusCode, 201, 'the owner may add factors now')
})

t.test('the first verification of an address ends earlier sessions; later ones do not', async (t) => {
  const me = await registerAndLogin(app)
  const [mail] = await mailsTo(me.email, 'Verify your e-mail address')
  const token = VERIFY_LINK.exec(mail!.mail.text ?? '')![1]!
  t.equal((await app.inject({ method: 'POST', url: '/api/auth/verify-email', payload: { token } })).statusCode, 204)
  assertProblem(t, await app.inject({ url: `/api/user/${me.id}`, headers: me.auth }), 401, 'UNAUTHORIZED')
  const again = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: me.username, password: me.password } })
  const session = { ...me, auth: { authorization: `Bearer ${again.json().token as string}` } }
  const moved = `moved-${me.email}`
  t.equal((await app.inject({ method: 'PATCH', url: `/api/user/${me.id}`, headers: session.auth, payload: { email: moved, currentPassword: me.password } })).statusCode, 200)
  const [change] = await mailsTo(moved, 'Verify your e-mail address')
  t.equal((await app.inject({ method: 'POST', url: '/api/auth/verify-email', payload: { token: VERIFY_LINK.exec(change!.mail.text ?? '')![1]! } })).statusCode, 204)
  t.equal((await app.inject({ url: `/api/user/${me.id}`, headers: session.auth })).json().email, moved, 'a verified account moving to a new address keeps its sessions')
})

t.test('factors made on an unverified address before this rule go with its first proof; a verified account keeps them on a reset', async (t) => {
  const db = await sqlClient(t, app.databaseUrl)
  const legacy = await verifiedUser(app)
  const key = new SoftAuthenticator()
  t.equal((await addPasskey(legacy, key)).added?.statusCode, 201)
  await db.query('UPDATE users SET email_verified_at = NULL WHERE id = $1', [legacy.id])
  const kept = await verifiedUser(app)
  const keptKey = new SoftAuthenticator()
  t.equal((await addPasskey(kept, keptKey)).added?.statusCode, 201)

  for (const user of [legacy, kept]) {
    await app.inject({ method: 'POST', url: '/api/auth/password-reset', payload: { email: user.email } })
    const [reset] = await mailsTo(user.email, 'Reset your password')
    t.equal((await app.inject({ method: 'POST', url: '/api/auth/password-reset/confirm', payload: { token: RESET_LINK.exec(reset!.mail.text ?? '')![1]!, password: 'a new password here' } })).statusCode, 204)
  }
  assertProblem(t, await passwordless(key), 401, 'PASSKEY_REFUSED')
  t.equal((await passwordless(keptKey)).statusCode, 200, 'a verified account\'s passkey still signs in after a reset')
})

t.test('markVerified keeps the session (the helper other tests use)', async (t) => {
  const me = await registerAndLogin(app)
  await markVerified(app, me.id)
  t.equal((await app.inject({ url: `/api/user/${me.id}`, headers: me.auth })).statusCode, 200)
})
