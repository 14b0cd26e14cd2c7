/**
 * E-mail verification through HTTP, delivered over real SMTP (test/helpers/smtp-sink.ts):
 * registration e-mails a link, following it sets `emailVerifiedAt`; tokens work once; a
 * change of address is pending until the link e-mailed to the new address is followed (the
 * current one is told, with no link), a newer change replaces it, an address taken meanwhile
 * is 409; resends are limited; REQUIRE_VERIFIED_EMAIL refuses login until verified.
 */
import t from 'tap'
import { assertProblem } from './helpers/assertions.js'
import { build, newUser, registerAndLogin, type Session, type TestApp } from './helpers/build.js'
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

/** Gives `user` a new session: an address's first verification ends the earlier ones (docs/api.md). */
async function signInAgain (user: Session): Promise<void> {
  const login = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: user.username, password: user.password } })
  user.auth = { authorization: `Bearer ${login.json().token as string}` }
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
  t.equal((await app.inject({ url: `/api/user/${user.id}`, headers: user.auth })).statusCode, 401, 'the first proof of the address ends the sessions made before it')
  await signInAgain(user)
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

const NOTICE_SUBJECT = 'A change of your e-mail address was asked for'
const patchEmail = async (user: Session, email: string) => await app.inject({ method: 'PATCH', url: `/api/user/${user.id}`, headers: user.auth, payload: { email, currentPassword: user.password } })
const me = async (user: Session) => (await app.inject({ url: `/api/user/${user.id}`, headers: user.auth })).json()
const loginAs = async (identity: string, password: string) => await app.inject({ method: 'POST', url: '/api/auth/login', payload: { identity, password } })

t.test('a change of address waits for the new one: it gets the link, the current one is told; following the link makes the change', async (t) => {
  const user = await registerAndLogin(app)
  const [first] = await verificationsTo(user.email, 1)
  t.equal((await verify(tokenOf(first!))).statusCode, 204)
  await signInAgain(user)
  const moved = newUser().email
  const changed = await patchEmail(user, moved)
  t.equal(changed.statusCode, 200)
  t.match(changed.json().user, { email: user.email, pendingEmail: moved }, 'the answer: the address unchanged, the new one pending')
  t.ok(changed.json().user.emailVerifiedAt, 'the current address stays verified')
  t.match(await me(user), { email: user.email, pendingEmail: moved })
  const [link] = await verificationsTo(moved, 1)
  const notice = await until(() => sink.received.find((r) => r.mail.subject === NOTICE_SUBJECT && !Array.isArray(r.mail.to) && r.mail.to?.text === user.email))
  t.match(notice.mail.text, moved, 'the current address is told the new one')
  t.notMatch(notice.mail.text, /token=/, 'and gets no link')
  t.notMatch(String(notice.mail.html), /token=/)
  t.match(notice.mail.text, /If you did not ask for this/)
  t.equal(notice.mail.headers.get('auto-submitted'), 'auto-generated')
  t.equal(sink.received.filter((r) => r.mail.subject === 'Verify your e-mail address' && !Array.isArray(r.mail.to) && r.mail.to?.text === user.email).length, 1, 'no link to the current address')

  assertProblem(t, await loginAs(moved, user.password), 401, 'UNAUTHORIZED')
  t.equal((await loginAs(user.email, user.password)).statusCode, 200, 'login by the current one')

  t.equal((await verify(tokenOf(link!))).statusCode, 204)
  const after = await me(user)
  t.match(after, { email: moved, pendingEmail: null }, 'the new address is the account\'s')
  t.ok(Date.parse(after.emailVerifiedAt) > Date.parse(changed.json().user.emailVerifiedAt), `verified anew at ${after.emailVerifiedAt}`)
  t.equal((await loginAs(moved, user.password)).statusCode, 200, 'login by the new address')
  assertProblem(t, await loginAs(user.email, user.password), 401, 'UNAUTHORIZED')
  assertProblem(t, await verify(tokenOf(link!)), 400, 'VERIFICATION_TOKEN_INVALID')

  // The same address again (another case): nothing pending, no e-mail.
  const same = await patchEmail(user, moved.toUpperCase())
  t.match(same.json().user, { pendingEmail: null }, 'nothing pending')
  t.ok(same.json().user.emailVerifiedAt, 'still verified')
})

t.test('an unverified address stays verifiable while a change is pending', async (t) => {
  const user = await registerAndLogin(app)
  const [own] = await verificationsTo(user.email, 1)
  const moved = newUser().email
  t.equal((await patchEmail(user, moved)).statusCode, 200)
  const [link] = await verificationsTo(moved, 1)
  t.equal((await verify(tokenOf(own!))).statusCode, 204, 'the registration link verifies the current address')
  await signInAgain(user)
  t.match(await me(user), { email: user.email, pendingEmail: moved })
  t.equal((await verify(tokenOf(link!))).statusCode, 204, 'the change\'s link still works')
  t.match(await me(user), { email: moved, pendingEmail: null })
})

t.test('a newer change replaces the pending one: its link stops working; the current address cancels it', async (t) => {
  const user = await registerAndLogin(app)
  const [b, c] = [newUser().email, newUser().email]
  t.equal((await patchEmail(user, b)).statusCode, 200)
  const [linkB] = await verificationsTo(b, 1)
  t.match((await patchEmail(user, c)).json().user, { email: user.email, pendingEmail: c })
  const [linkC] = await verificationsTo(c, 1)
  assertProblem(t, await verify(tokenOf(linkB!)), 400, 'VERIFICATION_TOKEN_INVALID')
  t.match(await me(user), { email: user.email, pendingEmail: c }, 'nothing changed')

  // Saving the current address drops the pending change.
  t.match((await patchEmail(user, user.email)).json().user, { email: user.email, pendingEmail: null })
  assertProblem(t, await verify(tokenOf(linkC!)), 400, 'VERIFICATION_TOKEN_INVALID')
  t.match(await me(user), { email: user.email, pendingEmail: null })
})

t.test('a new password drops a pending change: its link verifies nothing', async (t) => {
  const user = await registerAndLogin(app)
  const moved = newUser().email
  t.equal((await patchEmail(user, moved)).statusCode, 200)
  const [link] = await verificationsTo(moved, 1)
  const changed = await app.inject({ method: 'PATCH', url: `/api/user/${user.id}`, headers: user.auth, payload: { password: 'another secret phrase', currentPassword: user.password } })
  t.equal(changed.statusCode, 200)
  t.match(changed.json().user, { email: user.email, pendingEmail: null })
  assertProblem(t, await verify(tokenOf(link!)), 400, 'VERIFICATION_TOKEN_INVALID')
  t.equal((await app.inject({ url: `/api/user/${user.id}`, headers: { authorization: `Bearer ${changed.json().token}` } })).json().email, user.email)
})

t.test('an address another account has: 409 CONFLICT when asked for, and when confirmed after it was taken, changing nothing', async (t) => {
  const user = await registerAndLogin(app)
  const other = await registerAndLogin(app)
  assertProblem(t, await patchEmail(user, other.email.toUpperCase()), 409, 'CONFLICT')
  t.match(await me(user), { email: user.email, pendingEmail: null })

  const wanted = newUser().email
  t.equal((await patchEmail(user, wanted)).statusCode, 200)
  const [link] = await verificationsTo(wanted, 1)
  // Pending is not reserved: another account registers with it meanwhile.
  const taker = await registerAndLogin(app, { email: wanted.toUpperCase() })
  const refused = assertProblem(t, await verify(tokenOf(link!)), 409, 'CONFLICT')
  t.match(refused.detail, /email/)
  t.match(await me(user), { email: user.email, pendingEmail: wanted }, 'nothing changed')
  t.equal((await loginAs(user.email, user.password)).statusCode, 200, 'login by the current address still works')
  // Once the address is free again, the same link works.
  t.equal((await app.inject({ method: 'DELETE', url: `/api/user/${taker.id}`, headers: taker.auth, payload: { password: taker.password } })).statusCode, 204)
  t.equal((await verify(tokenOf(link!))).statusCode, 204)
  await signInAgain(user)
  t.match(await me(user), { email: wanted, pendingEmail: null })
})

t.test('two confirmations of one link at once: one wins', async (t) => {
  const user = await registerAndLogin(app)
  const moved = newUser().email
  t.equal((await patchEmail(user, moved)).statusCode, 200)
  const [link] = await verificationsTo(moved, 1)
  const token = tokenOf(link!)
  const answers = await Promise.all(Array.from({ length: 4 }, async () => await verify(token)))
  t.same(answers.map((r) => r.statusCode).sort(), [204, 400, 400, 400])
  await signInAgain(user)
  t.match(await me(user), { email: moved, pendingEmail: null })
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
