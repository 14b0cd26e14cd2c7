/**
 * E-mail verification through HTTP, delivered over real SMTP (test/helpers/smtp-sink.ts):
 * registration e-mails a link, following it sets `emailVerifiedAt`; tokens work once; a
 * change of address starts unverified, e-mails the new one (an old link then verifies
 * nothing) and tells the old one; resends are limited; REQUIRE_VERIFIED_EMAIL refuses login until verified.
 */
import t from 'tap'
import { assertProblem } from './helpers/assertions.js'
import { build, newUser, registerAndLogin, type TestApp } from './helpers/build.js'
import { startSmtpSink, type Received, type SmtpSink } from './helpers/smtp-sink.js'

const PUBLIC_URL = 'https://shop.example.com'
const LINK = /https:\/\/shop\.example\.com\/verify-email#token=([A-Za-z0-9_-]+)/
const FAST = { mail: { pollMs: 100, retryBaseMs: 100 } }

let sink: SmtpSink
let app: TestApp

t.before(async () => {
  sink = await startSmtpSink(t)
  app = await build(t, { env: { SMTP_URL: sink.url, PUBLIC_URL }, tuning: FAST })
})

/** The verification e-mails to `email`, once there are `count`. */
async function verificationsTo (email: string, count: number): Promise<Received[]> {
  const deadline = Date.now() + 10_000
  for (;;) {
    const found = sink.received.filter((r) => r.mail.subject === 'Verify your e-mail address' && !Array.isArray(r.mail.to) && r.mail.to?.value[0]?.address?.toLowerCase() === email.toLowerCase())
    if (found.length >= count) return found
    if (Date.now() > deadline) throw new Error(`waited for ${count} verification e-mails to ${email}, got ${found.length}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

/** The first value `find` returns, waiting for it. */
async function until<T> (find: () => T | undefined): Promise<T> {
  const deadline = Date.now() + 10_000
  for (;;) {
    const found = find()
    if (found !== undefined) return found
    if (Date.now() > deadline) throw new Error('timed out')
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

function tokenOf (received: Received): string {
  return LINK.exec(received.mail.text ?? '')![1]!
}

const verify = async (token: string) => await app.inject({ method: 'POST', url: '/api/auth/verify-email', payload: { token } })

t.test('registration e-mails a link; following it verifies the address, once', async (t) => {
  const user = await registerAndLogin(app)
  const me = await app.inject({ url: `/api/user/${user.id}`, headers: user.auth })
  t.equal(me.json().emailVerifiedAt, null, 'not verified at first')
  const [mail] = await verificationsTo(user.email, 1)
  t.equal(mail!.mail.headers.get('auto-submitted'), 'auto-generated')
  t.match(String(mail!.mail.html), /<a href="https:\/\/shop\.example\.com\/verify-email#token=/)
  const token = tokenOf(mail!)
  t.equal((await verify(token)).statusCode, 204)
  const after = (await app.inject({ url: `/api/user/${user.id}`, headers: user.auth })).json()
  t.ok(Date.parse(after.emailVerifiedAt) > 0, `verified at ${after.emailVerifiedAt}`)
  assertProblem(t, await verify(token), 400, 'VERIFICATION_TOKEN_INVALID')
  assertProblem(t, await verify('A'.repeat(43)), 400, 'VERIFICATION_TOKEN_INVALID')
  // Resend when verified: accepted, nothing sent.
  const resent = await app.inject({ method: 'POST', url: '/api/auth/verify-email/resend', headers: user.auth })
  t.equal(resent.statusCode, 202)
  await new Promise((resolve) => setTimeout(resolve, 400))
  await app.mail.idle()
  t.equal((await verificationsTo(user.email, 1)).length, 1, 'no second e-mail to a verified address')
})

t.test('a change of address starts unverified, e-mails the new one and tells the old one; the old link verifies nothing', async (t) => {
  const user = await registerAndLogin(app)
  const [first] = await verificationsTo(user.email, 1)
  t.equal((await verify(tokenOf(first!))).statusCode, 204)
  const moved = newUser().email
  const changed = await app.inject({ method: 'PATCH', url: `/api/user/${user.id}`, headers: user.auth, payload: { email: moved } })
  t.equal(changed.statusCode, 200)
  t.equal(changed.json().user.email, moved)
  t.equal(changed.json().user.emailVerifiedAt, null, 'the new address is not verified')
  const [second] = await verificationsTo(moved, 1)
  const notice = await until(() => sink.received.find((r) => r.mail.subject === 'Your e-mail address was changed' && !Array.isArray(r.mail.to) && r.mail.to?.text === user.email))
  t.match(notice.mail.text, moved, 'the old address is told the new one')
  t.notMatch(notice.mail.text, /token=/, 'and gets no link')
  t.equal(notice.mail.headers.get('auto-submitted'), 'auto-generated')

  // A link to the old address, asked for before the change, is worth nothing after it.
  const again = await registerAndLogin(app)
  const [oldLink] = await verificationsTo(again.email, 1)
  t.equal((await app.inject({ method: 'PATCH', url: `/api/user/${again.id}`, headers: again.auth, payload: { email: newUser().email } })).statusCode, 200)
  assertProblem(t, await verify(tokenOf(oldLink!)), 400, 'VERIFICATION_TOKEN_INVALID')

  t.equal((await verify(tokenOf(second!))).statusCode, 204)
  t.ok((await app.inject({ url: `/api/user/${user.id}`, headers: user.auth })).json().emailVerifiedAt, 'the new address verified')
  // The same address again (another case): nothing changes, no e-mail.
  t.equal((await app.inject({ method: 'PATCH', url: `/api/user/${user.id}`, headers: user.auth, payload: { email: moved.toUpperCase() } })).json().user.emailVerifiedAt !== null, true, 'still verified')
})

t.test('resend: 202, at most 3 an hour per user, then 429 with Retry-After', async (t) => {
  const user = await registerAndLogin(app)
  const statuses = []
  for (let i = 0; i < 4; i++) statuses.push(await app.inject({ method: 'POST', url: '/api/auth/verify-email/resend', headers: user.auth }))
  t.same(statuses.map((r) => r.statusCode), [202, 202, 202, 429])
  t.ok(Number(statuses[3]!.headers['retry-after']) > 0)
  assertProblem(t, statuses[3]!, 429, 'RATE_LIMITED')
  await verificationsTo(user.email, 4)
  assertProblem(t, await app.inject({ method: 'POST', url: '/api/auth/verify-email/resend' }), 401, 'UNAUTHORIZED')
})

t.test('REQUIRE_VERIFIED_EMAIL=true: login refused (after the password) until the address is verified', async (t) => {
  const strict = await build(t, { databaseUrl: app.databaseUrl, env: { SMTP_URL: sink.url, PUBLIC_URL, REQUIRE_VERIFIED_EMAIL: 'true' }, tuning: FAST })
  const body = newUser()
  t.equal((await strict.inject({ method: 'POST', url: '/api/user', payload: body })).statusCode, 201)
  const login = (password: string) => strict.inject({ method: 'POST', url: '/api/auth/login', payload: { username: body.username, password } })
  assertProblem(t, await login('a wrong password'), 401, 'UNAUTHORIZED')
  assertProblem(t, await login(body.password), 403, 'EMAIL_NOT_VERIFIED')
  const [mail] = await verificationsTo(body.email, 1)
  t.equal((await verify(tokenOf(mail!))).statusCode, 204)
  t.equal((await login(body.password)).statusCode, 200, 'verified: logged in')
})
