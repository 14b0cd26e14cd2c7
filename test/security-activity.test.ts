/**
 * GET /api/security/activity beyond sign-ins and settings: wrong second-step codes, refused
 * passkeys, a recovery code spent, a password reset asked for and completed (through the
 * e-mailed link, over SMTP), a new address confirmed; repeated attempts merged so that they
 * never push the owner's events out; the bound of EVENTS_KEPT under concurrent events.
 */
import { readFile } from 'node:fs/promises'
import type { PublicKeyCredentialCreationOptionsJSON, PublicKeyCredentialRequestOptionsJSON } from '@simplewebauthn/server'
import { generateSync } from 'otplib'
import t from 'tap'
import { EVENTS_KEPT } from '../src/modules/identity/activity.js'
import { ACTIVITY_KINDS } from '../src/modules/identity/session-routes.js'
import { build, injectAs, newUser, registerAndLogin, verifiedUser, type Session, type TestApp } from './helpers/build.js'
import { sqlClient } from './helpers/database.js'
import { startSmtpSink, type Received, type SmtpSink } from './helpers/smtp-sink.js'
import { SoftAuthenticator } from './helpers/soft-authenticator.js'

const ORIGIN = 'https://shop.example.com'
const PHONE = 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1'
const from = (ip: string) => ({ headers: { 'user-agent': PHONE }, remoteAddress: ip })

let sink: SmtpSink
let app: TestApp
t.before(async () => {
  sink = await startSmtpSink(t)
  app = await build(t, { env: { SMTP_URL: sink.url, PUBLIC_URL: ORIGIN, LOGIN_FAILURES_MAX: '100' }, tuning: { mail: { pollMs: 100, retryBaseMs: 100 } } })
})

interface Event { kind: string, detail: string | null, ip: string | null, browser: string | null, count: number, firstAt: string, createdAt: string }
const activityOf = async (session: Session): Promise<Event[]> => {
  const res = await injectAs(app, session, { url: '/api/security/activity' })
  if (res.statusCode !== 200) throw new Error(`activity: ${res.statusCode} ${res.body}`)
  return res.json().items
}
const kinds = (events: Event[]) => events.map((e) => e.kind)

/** The value `find` resolves to once it is not undefined. */
async function until<T> (find: () => Promise<T | undefined> | T | undefined): Promise<T> {
  const deadline = Date.now() + 10_000
  for (;;) {
    const found = await find()
    if (found !== undefined) return found
    if (Date.now() > deadline) throw new Error('timed out')
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

/** The first e-mail to `email` with `subject` whose text has `link`: the link's token. */
async function tokenMailed (email: string, subject: string, link: RegExp): Promise<string> {
  const mail = await until(() => sink.received.find((r: Received) => r.mail.subject === subject && !Array.isArray(r.mail.to) && r.mail.to?.text.toLowerCase() === email.toLowerCase()))
  return link.exec(mail.mail.text ?? '')![1]!
}

const totpCode = (secret: string) => generateSync({ secret, epoch: Math.floor(Date.now() / 1000) })

async function enrolTotp (user: Session): Promise<{ secret: string, recoveryCodes: string[] }> {
  const started = await injectAs(app, user, { method: 'POST', url: '/api/security/totp', payload: { currentPassword: user.password } })
  const { secret } = started.json() as { secret: string }
  const confirmed = await injectAs(app, user, { method: 'POST', url: '/api/security/totp/confirm', payload: { code: totpCode(secret), currentPassword: user.password } })
  if (confirmed.statusCode !== 200) throw new Error(`confirm: ${confirmed.statusCode} ${confirmed.body}`)
  return { secret, recoveryCodes: confirmed.json().recoveryCodes }
}

async function mfaToken (user: Session): Promise<string> {
  const res = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: user.username, password: user.password } })
  if (res.statusCode !== 202) throw new Error(`login: ${res.statusCode} ${res.body}`)
  return res.json().mfaToken
}

async function addPasskey (user: Session, authenticator: SoftAuthenticator): Promise<void> {
  const options = await injectAs(app, user, { method: 'POST', url: '/api/security/passkey/options', payload: { currentPassword: user.password } })
  const response = authenticator.register(options.json() as PublicKeyCredentialCreationOptionsJSON, ORIGIN)
  const added = await injectAs(app, user, { method: 'POST', url: '/api/security/passkeys', payload: { response, currentPassword: user.password } })
  if (added.statusCode !== 201) throw new Error(`passkey: ${added.statusCode} ${added.body}`)
}

t.test('a wrong TOTP code and a wrong recovery code at the second step; a recovery code spent, with the codes left', async (t) => {
  const user = await verifiedUser(app)
  const { recoveryCodes } = await enrolTotp(user)
  const wrongCode = await app.inject({ method: 'POST', url: '/api/auth/mfa/totp', ...from('203.0.113.21'), payload: { mfaToken: await mfaToken(user), code: '000000' } })
  t.equal(wrongCode.statusCode, 401)
  const wrongRecovery = await app.inject({ method: 'POST', url: '/api/auth/mfa/totp', ...from('203.0.113.22'), payload: { mfaToken: await mfaToken(user), recoveryCode: 'aaaa-bbbb-cccc-dddd' } })
  t.equal(wrongRecovery.statusCode, 401)
  const used = await app.inject({ method: 'POST', url: '/api/auth/mfa/totp', ...from('203.0.113.23'), payload: { mfaToken: await mfaToken(user), recoveryCode: recoveryCodes[0] } })
  t.equal(used.statusCode, 200)
  const events = await activityOf(user)
  t.same(kinds(events).slice(0, 4), ['sign-in', 'recovery-code-used', 'second-step-failed', 'second-step-failed'], 'newest first')
  t.match(events[1], { detail: '9', ip: '203.0.113.23', browser: 'Safari 17', count: 1 }, 'the codes left')
  t.match(events[2], { detail: 'recoveryCode', ip: '203.0.113.22' })
  t.match(events[3], { detail: 'totp', ip: '203.0.113.21', browser: 'Safari 17' })
  t.match(events[0], { detail: 'password+recoveryCode' })
})

t.test('a refused passkey: at the second step, and at a passwordless sign-in when the passkey is the account\'s', async (t) => {
  const user = await verifiedUser(app)
  const authenticator = new SoftAuthenticator()
  await addPasskey(user, authenticator)
  await enrolTotp(user)
  const token = await mfaToken(user)
  const stepOptions = (await app.inject({ method: 'POST', url: '/api/auth/mfa/passkey/options', payload: { mfaToken: token } })).json() as PublicKeyCredentialRequestOptionsJSON
  const phished = authenticator.authenticate(stepOptions, 'https://shop.example.net')
  const step = await app.inject({ method: 'POST', url: '/api/auth/mfa/passkey', ...from('203.0.113.31'), payload: { mfaToken: token, response: phished } })
  t.equal(step.statusCode, 401)

  const options = (await app.inject({ method: 'POST', url: '/api/auth/passkey/options' })).json() as PublicKeyCredentialRequestOptionsJSON
  const noVerification = authenticator.authenticate(options, ORIGIN, { userVerification: false })
  const signIn = await app.inject({ method: 'POST', url: '/api/auth/passkey/login', ...from('203.0.113.32'), payload: { response: noVerification } })
  t.equal(signIn.statusCode, 401)
  const events = await activityOf(user)
  t.same(kinds(events).slice(0, 2), ['passkey-sign-in-failed', 'second-step-failed'])
  t.match(events[0], { detail: null, ip: '203.0.113.32' })
  t.match(events[1], { detail: 'passkey', ip: '203.0.113.31' })

  const unknown = new SoftAuthenticator()
  await addPasskey(await verifiedUser(app), unknown)
  unknown.credentials[0]!.id = 'bm90LWEtcGFzc2tleS1vZi1hbnlvbmU'
  const nobody = await app.inject({ method: 'POST', url: '/api/auth/passkey/login', payload: { response: unknown.authenticate((await app.inject({ method: 'POST', url: '/api/auth/passkey/options' })).json(), ORIGIN) } })
  t.equal(nobody.statusCode, 401, 'a passkey unknown here names no account: nothing to record, nothing fails')
})

t.test('a password reset: asked for (the address that asked), completed through the e-mailed link (the address that followed it)', async (t) => {
  const user = await registerAndLogin(app)
  const asked = await app.inject({ method: 'POST', url: '/api/auth/password-reset', ...from('198.51.100.41'), payload: { email: user.email.toUpperCase() } })
  t.equal(asked.statusCode, 202)
  const nobody = await app.inject({ method: 'POST', url: '/api/auth/password-reset', payload: { email: newUser().email } })
  t.equal(nobody.statusCode, 202, 'an address of no account: the same answer')
  const token = await tokenMailed(user.email, 'Reset your password', /reset-password#token=([A-Za-z0-9_-]+)/)
  const done = await app.inject({ method: 'POST', url: '/api/auth/password-reset/confirm', ...from('198.51.100.42'), payload: { token, password: 'a reset password' } })
  t.equal(done.statusCode, 204)
  const login = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: user.username, password: 'a reset password' } })
  const events = await activityOf({ ...user, auth: { authorization: `Bearer ${login.json().token as string}` } })
  t.same(kinds(events), ['sign-in', 'password-reset-completed', 'password-reset-requested', 'sign-in'])
  t.match(events[1], { ip: '198.51.100.42', browser: 'Safari 17' })
  t.match(events[2], { ip: '198.51.100.41', browser: 'Safari 17', count: 1 })
})

t.test('a new address confirmed by its link: the address, and who followed the link', async (t) => {
  const user = await verifiedUser(app)
  const moved = newUser().email
  t.equal((await injectAs(app, user, { method: 'PATCH', url: `/api/user/${user.id}`, payload: { email: moved, currentPassword: user.password } })).statusCode, 200)
  const token = await tokenMailed(moved, 'Verify your e-mail address', /verify-email#token=([A-Za-z0-9_-]+)/)
  t.equal((await app.inject({ method: 'POST', url: '/api/auth/verify-email', ...from('192.0.2.51'), payload: { token } })).statusCode, 204)
  const events = await activityOf(user)
  t.match(events[0], { kind: 'email-changed', detail: moved, ip: '192.0.2.51', browser: 'Safari 17' })
})

t.test('repeated attempts are one item each: a flood of them pushes none of the owner\'s events out', async (t) => {
  const user = await registerAndLogin(app)
  const wrong = async (ip: string) => await app.inject({ method: 'POST', url: '/api/auth/login', ...from(ip), payload: { username: user.username, password: 'not the password' } })
  t.equal((await wrong('203.0.113.1')).statusCode, 401)
  for (let i = 0; i < 3; i++) {
    const reset = await app.inject({ method: 'POST', url: '/api/auth/password-reset', ...from('203.0.113.2'), payload: { email: user.email } })
    t.equal(reset.statusCode, 202)
  }
  await until(async () => (await activityOf(user)).find((e) => e.kind === 'password-reset-requested' && e.count === 3))
  for (let i = 2; i <= 60; i++) t.equal((await wrong(`203.0.113.${i + 100}`)).statusCode, 401)
  const events = await activityOf(user)
  t.same(kinds(events), ['sign-in-failed', 'password-reset-requested', 'sign-in'], 'one item per kind of attempt; the sign-in still there')
  t.match(events[0], { count: 60, ip: '203.0.113.160' }, 'how many, and the last one\'s address')
  t.ok(Date.parse(events[0]!.firstAt) < Date.parse(events[0]!.createdAt), 'since when')
  t.equal(events[1]!.count, 3, 'the reset requests the address budget let through')

  const again = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: user.username, password: user.password } })
  t.equal(again.statusCode, 200)
  t.equal((await wrong('203.0.113.99')).statusCode, 401)
  t.same(kinds(await activityOf(user)), ['sign-in-failed', 'sign-in', 'sign-in-failed', 'password-reset-requested', 'sign-in'], 'an event of the owner\'s ends the run: later attempts are a new item')
})

t.test(`the bound of ${EVENTS_KEPT} events and the merging hold under concurrent events`, async (t) => {
  const db = await sqlClient(t, app.databaseUrl)
  const user = await registerAndLogin(app)
  const device = { userAgent: null, ip: '192.0.2.1' }
  await Promise.all(Array.from({ length: 120 }, async () => { await app.identity.activity.record(user.id, 'session-ended', device) }))
  const { rows: [stored] } = await db.query('SELECT count(*)::int AS n FROM security_events WHERE user_id = $1', [user.id])
  t.equal(stored.n, EVENTS_KEPT, 'exactly the newest 50 rows, not one more')
  await Promise.all(Array.from({ length: 40 }, async () => { await app.identity.activity.record(user.id, 'sign-in-failed', device) }))
  const { rows } = await db.query('SELECT kind, count FROM security_events WHERE user_id = $1 ORDER BY id DESC LIMIT 2', [user.id])
  t.same(rows, [{ kind: 'sign-in-failed', count: 40 }, { kind: 'session-ended', count: 1 }], 'forty attempts at once: one row counting forty')
})

t.test('every kind is in docs/api.md and has words on the security page', async (t) => {
  const docs = await readFile(new URL('../docs/api.md', import.meta.url), 'utf8')
  const page = await readFile(new URL('../web/security.js', import.meta.url), 'utf8')
  for (const kind of Object.keys(ACTIVITY_KINDS)) {
    t.ok(docs.includes(`\`${kind}\``), `docs/api.md: ${kind}`)
    t.ok(page.includes(`'${kind}': `), `web/security.js: ${kind}`)
  }
})
