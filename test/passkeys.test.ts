/**
 * Passkeys over real HTTP (the app listening, fetch), with the software authenticator of
 * test/helpers/soft-authenticator.ts (real P-256 keys and signatures): registration, the
 * list, rename and delete; passwordless sign-in; a passkey as the second step after a password
 * login with TOTP on (codes from otplib, not the service's otpauth); and what must be refused:
 * a counter that goes backwards (a cloned key), a wrong origin, a deleted passkey, a challenge
 * used twice, made up or expired (Redis's TTL cut short: nothing in the app shortens it), no
 * user verification, another user's passkey. Then two replicas:
 * the challenge of one is redeemed on the other through Redis, and is not without it.
 *
 * The service believes PUBLIC_URL's origin; the authenticator reports that origin in its
 * client data whichever address the request goes to, as a browser behind a proxy would.
 */
import { randomBytes } from 'node:crypto'
import type { PublicKeyCredentialCreationOptionsJSON, PublicKeyCredentialRequestOptionsJSON } from '@simplewebauthn/server'
import { generateSync } from 'otplib'
import t, { type Test } from 'tap'
import { assertProblem, type Answer } from './helpers/assertions.js'
import { build, markVerified, newUser, type BuildOptions, type TestApp } from './helpers/build.js'
import { createTestDatabase } from './helpers/database.js'
import { testRedis } from './helpers/redis.js'
import { SoftAuthenticator, type RegisterCall } from './helpers/soft-authenticator.js'

const ORIGIN = 'http://localhost:3000'
const ENV = { PUBLIC_URL: ORIGIN }

interface Reply extends Answer { status: number, data: any }

/** A listening app and a fetch client for it. */
async function start (t: Test, options: BuildOptions = {}) {
  const app: TestApp = await build(t, { ...options, env: { ...ENV, ...options.env } })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`
  const call = async (method: string, path: string, body?: unknown, token?: string): Promise<Reply> => {
    const headers: Record<string, string> = {}
    if (body !== undefined) headers['content-type'] = 'application/json'
    if (token !== undefined) headers.authorization = `Bearer ${token}`
    const res = await fetch(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
    const text = await res.text()
    let data: any
    try { data = JSON.parse(text) } catch { data = undefined }
    return { status: res.status, statusCode: res.status, headers: Object.fromEntries(res.headers), body: text, json: () => data, data }
  }
  return { app, base, call }
}
type Server = Awaited<ReturnType<typeof start>>

/** Registers a user (address verified: a factor needs it) and logs in with the password: its bearer token. */
async function signedUp ({ app, call }: Server) {
  const user = newUser()
  const created = await call('POST', '/api/user', user)
  if (created.status !== 201) throw new Error(`register: ${created.status} ${created.body}`)
  await markVerified(app, created.data.id)
  const login = await call('POST', '/api/auth/login', { username: user.username, password: user.password })
  if (login.status !== 200) throw new Error(`login: ${login.status} ${login.body}`)
  return { ...user, id: created.data.id as number, token: login.data.token as string }
}
type SignedUp = Awaited<ReturnType<typeof signedUp>>

/** Adds a passkey of `authenticator` to the signed-in user, with their password: the 201's body. */
async function addPasskey ({ call }: Server, me: SignedUp, authenticator: SoftAuthenticator, name?: string) {
  const { token, password: currentPassword } = me
  const options = await call('POST', '/api/security/passkey/options', { currentPassword }, token)
  if (options.status !== 200) throw new Error(`options: ${options.status} ${options.body}`)
  const response = authenticator.register(options.data as PublicKeyCredentialCreationOptionsJSON, ORIGIN)
  const added = await call('POST', '/api/security/passkeys', { response, currentPassword, ...(name === undefined ? {} : { name }) }, token)
  if (added.status !== 201) throw new Error(`add: ${added.status} ${added.body}`)
  return added.data as { id: string, name: string, createdAt: string, lastUsedAt: string | null, backedUp: boolean }
}

/** Passwordless sign-in: options, the authenticator's assertion (signed with `origin`), login. */
async function passwordless ({ call }: Server, authenticator: SoftAuthenticator, how: { origin?: string, credentialId?: string, userVerification?: boolean, crossOrigin?: boolean } = {}) {
  const options = await call('POST', '/api/auth/passkey/options', {})
  if (options.status !== 200) throw new Error(`options: ${options.status} ${options.body}`)
  const response = authenticator.authenticate(options.data as PublicKeyCredentialRequestOptionsJSON, how.origin ?? ORIGIN, how)
  return await call('POST', '/api/auth/passkey/login', { response })
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

const totpCode = (secret: string, offsetSteps = 0) => generateSync({ secret, epoch: Math.floor(Date.now() / 1000) + 30 * offsetSteps })

t.test('register a passkey, list, rename, delete', async (t) => {
  const server = await start(t)
  const { call } = server
  const me = await signedUp(server)
  const authenticator = new SoftAuthenticator()

  const options = await call('POST', '/api/security/passkey/options', { currentPassword: me.password }, me.token)
  t.equal(options.status, 200, options.body)
  const creation = options.data as PublicKeyCredentialCreationOptionsJSON
  t.equal(creation.rp.id, 'localhost', 'the RP id: the host of PUBLIC_URL')
  t.equal(creation.authenticatorSelection?.residentKey, 'required')
  t.equal(creation.authenticatorSelection?.userVerification, 'required')
  t.ok(creation.pubKeyCredParams.some((p) => p.alg === -7), 'ES256 accepted')
  const response = authenticator.register(creation, ORIGIN)
  const added = await call('POST', '/api/security/passkeys', { response, name: 'Laptop', currentPassword: me.password }, me.token)
  t.equal(added.status, 201, added.body)
  t.match(added.data, { id: UUID, name: 'Laptop', lastUsedAt: null, backedUp: false })
  t.not(added.data.id, response.id, "the API names it by the service's short id, not its credential id")
  t.ok(Date.parse(added.data.createdAt) > Date.now() - 60_000, 'createdAt')

  const security = await call('GET', '/api/security', undefined, me.token)
  t.equal(security.status, 200)
  t.same(security.data.passkeys.map((p: { id: string }) => p.id), [added.data.id], 'listed')
  t.same(security.data.totp, { enabled: false, enabledAt: null })

  const again = await call('POST', '/api/security/passkey/options', { currentPassword: me.password }, me.token)
  t.same((again.data as PublicKeyCredentialCreationOptionsJSON).excludeCredentials?.map((c) => c.id), [response.id], 'the next options exclude it')
  t.throws(() => authenticator.register(again.data, ORIGIN), /InvalidStateError/, 'so the same authenticator does not register twice')

  const second = await addPasskey(server, me, new SoftAuthenticator({ backedUp: true }))
  t.equal(second.backedUp, true, 'a synced passkey says so')
  t.equal(typeof second.name, 'string', 'a default name')

  const renamed = await call('PATCH', `/api/security/passkeys/${added.data.id}`, { name: 'Work laptop' }, me.token)
  t.equal(renamed.status, 200, renamed.body)
  t.equal(renamed.data.name, 'Work laptop')
  const blank = await call('PATCH', `/api/security/passkeys/${added.data.id}`, { name: ' \t ' }, me.token)
  t.equal(blank.status, 400, 'a blank name is refused')
  t.equal(blank.data.errors?.[0]?.field, '/name')
  assertProblem(t, await call('DELETE', `/api/security/passkeys/${response.id}`, undefined, me.token), 400, 'VALIDATION_FAILED')
  const deleted = await call('DELETE', `/api/security/passkeys/${added.data.id}`, undefined, me.token)
  t.equal(deleted.status, 204, deleted.body)
  const after = await call('GET', '/api/security', undefined, me.token)
  t.same(after.data.passkeys.map((p: { id: string }) => p.id), [second.id], 'one left')
  assertProblem(t, await call('DELETE', `/api/security/passkeys/${added.data.id}`, undefined, me.token), 404, 'NOT_FOUND')

  const phished = new SoftAuthenticator().register((await call('POST', '/api/security/passkey/options', { currentPassword: me.password }, me.token)).data, 'https://evil.example')
  const refused = await call('POST', '/api/security/passkeys', { response: phished, currentPassword: me.password }, me.token)
  t.match(assertProblem(t, refused, 400, 'PASSKEY_NOT_REGISTERED').detail, /origin/, 'a registration made on another origin')
})

t.test("another user's passkey: PATCH and DELETE answer 404", async (t) => {
  const server = await start(t)
  const alice = await signedUp(server)
  const bob = await signedUp(server)
  const key = await addPasskey(server, alice, new SoftAuthenticator())
  assertProblem(t, await server.call('PATCH', `/api/security/passkeys/${key.id}`, { name: 'mine now' }, bob.token), 404, 'NOT_FOUND')
  assertProblem(t, await server.call('DELETE', `/api/security/passkeys/${key.id}`, undefined, bob.token), 404, 'NOT_FOUND')
  const kept = await server.call('GET', '/api/security', undefined, alice.token)
  t.match(kept.data.passkeys, [{ id: key.id, name: key.name }], 'unchanged for its owner')
})

t.test('passwordless sign-in with a passkey', async (t) => {
  const server = await start(t)
  const me = await signedUp(server)
  const authenticator = new SoftAuthenticator()
  const key = await addPasskey(server, me, authenticator)

  const options = await server.call('POST', '/api/auth/passkey/options')
  t.equal(options.status, 200, options.body)
  t.equal(options.data.userVerification, 'required')
  t.same(options.data.allowCredentials ?? [], [], 'no allowCredentials: the authenticator offers its discoverable credential')
  const login = await passwordless(server, authenticator)
  t.equal(login.status, 200, login.body)
  t.equal(login.data.userId, me.id)
  t.equal(typeof login.data.token, 'string')
  const security = await server.call('GET', '/api/security', undefined, login.data.token)
  t.equal(security.status, 200, 'the session works')
  t.same(security.data.session.methods, ['passkey'])
  t.ok(security.data.passkeys[0].lastUsedAt !== null, 'lastUsedAt set')
  t.equal(security.data.passkeys[0].id, key.id)
})

t.test('a passkey as the second step after the password, with TOTP on', async (t) => {
  const server = await start(t)
  const { call } = server
  const me = await signedUp(server)

  const enrol = await call('POST', '/api/security/totp', { currentPassword: me.password }, me.token)
  t.equal(enrol.status, 200, enrol.body)
  t.match(enrol.data, { secret: /^[A-Z2-7]+=*$/, uri: /^otpauth:\/\/totp\//, qrCode: /^data:image\/svg\+xml;base64,/ })
  const wrong = await call('POST', '/api/security/totp/confirm', { code: totpCode(enrol.data.secret, 10), currentPassword: me.password }, me.token)
  t.equal(wrong.status, 400, 'a code of another time refused')
  const confirmed = await call('POST', '/api/security/totp/confirm', { code: totpCode(enrol.data.secret), currentPassword: me.password }, me.token)
  t.equal(confirmed.status, 200, confirmed.body)
  t.equal(confirmed.data.recoveryCodes.length, 10)
  t.equal((await call('GET', '/api/security', undefined, me.token)).data.totp.enabled, true)
  const again = await call('POST', '/api/security/totp', { currentPassword: me.password }, me.token)
  t.equal(again.status, 409, 'no second enrolment while on')
  t.equal(wrong.data.code, 'TOTP_CODE_INVALID', 'confirm with a wrong code: 400 TOTP_CODE_INVALID')
  t.equal(again.data.code, 'TOTP_ENABLED', 'an enrolment with TOTP on: 409 TOTP_ENABLED')

  const withoutPasskey = await call('POST', '/api/auth/login', { username: me.username, password: me.password })
  t.equal(withoutPasskey.status, 202, withoutPasskey.body)
  t.same(withoutPasskey.data.methods, ['totp', 'recoveryCode', 'recovery-code'], 'no passkey yet: not offered')
  const authenticator = new SoftAuthenticator()
  await addPasskey(server, me, authenticator)

  const first = await call('POST', '/api/auth/login', { username: me.username, password: me.password })
  t.equal(first.status, 202, first.body)
  t.notOk('token' in first.data || 'refreshToken' in first.data, 'no token yet')
  t.equal(first.headers['set-cookie'], undefined, 'no cookie')
  t.same(first.data.methods, ['totp', 'recoveryCode', 'recovery-code', 'passkey'])
  t.equal(first.data.expiresIn, 300)

  const options = await call('POST', '/api/auth/mfa/passkey/options', { mfaToken: first.data.mfaToken })
  t.equal(options.status, 200, options.body)
  t.same(options.data.allowCredentials.map((c: { id: string }) => c.id), [authenticator.credentials[0]!.id], "allowCredentials: the user's passkey")

  // Another account's passkey, offered anyway (an authenticator ignoring allowCredentials), does not complete this step.
  const other = await signedUp(server)
  const stranger = new SoftAuthenticator()
  await addPasskey(server, other, stranger)
  const foreign = await call('POST', '/api/auth/mfa/passkey', { mfaToken: first.data.mfaToken, response: stranger.authenticate({ ...options.data, allowCredentials: [] }, ORIGIN) })
  t.match(assertProblem(t, foreign, 401, 'PASSKEY_REFUSED').detail, /not registered/)

  const retry = await call('POST', '/api/auth/mfa/passkey/options', { mfaToken: first.data.mfaToken })
  const response = authenticator.authenticate(retry.data, ORIGIN)
  const done = await call('POST', '/api/auth/mfa/passkey', { mfaToken: first.data.mfaToken, response })
  t.equal(done.status, 200, `the ticket survives a refused attempt; the passkey completes it: ${done.body}`)
  t.equal(done.data.userId, me.id)
  const session = await call('GET', '/api/security', undefined, done.data.token)
  t.same(session.data.session.methods, ['password', 'passkey'], 'the session: password, then passkey')
  assertProblem(t, await call('POST', '/api/auth/mfa/passkey', { mfaToken: first.data.mfaToken, response }), 401, 'MFA_TOKEN_INVALID')
  assertProblem(t, await call('POST', '/api/auth/mfa/passkey/options', { mfaToken: first.data.mfaToken }), 401, 'MFA_TOKEN_INVALID')

  const beforeChange = await call('POST', '/api/auth/login', { username: me.username, password: me.password })
  const changed = await call('PATCH', `/api/user/${me.id}`, { password: 'a password changed meanwhile', currentPassword: me.password }, me.token)
  t.equal(changed.status, 200, 'the password changes between the two steps')
  me.password = 'a password changed meanwhile'
  assertProblem(t, await call('POST', '/api/auth/mfa/passkey/options', { mfaToken: beforeChange.data.mfaToken }), 401, 'MFA_TOKEN_INVALID')
  assertProblem(t, await call('POST', '/api/auth/mfa/totp', { mfaToken: beforeChange.data.mfaToken, code: totpCode(enrol.data.secret, 1) }), 401, 'MFA_TOKEN_INVALID')

  const byCode = await call('POST', '/api/auth/login', { username: me.username, password: me.password })
  const viaTotp = await call('POST', '/api/auth/mfa/totp', { mfaToken: byCode.data.mfaToken, code: totpCode(enrol.data.secret, 1) })
  t.equal(viaTotp.status, 200, `or a TOTP code (the next step's: the confirmation took this one): ${viaTotp.body}`)
})

t.test('refused: a counter that goes backwards (a cloned key), a wrong origin, a deleted passkey, no user verification', async (t) => {
  const server = await start(t)
  const me = await signedUp(server)
  const authenticator = new SoftAuthenticator()
  const key = await addPasskey(server, me, authenticator)
  const clone = authenticator.clone(authenticator.credentials[0]!.id)
  t.equal((await passwordless(server, authenticator)).status, 200, 'the original: counter 1')
  t.equal((await passwordless(server, authenticator)).status, 200, 'the original: counter 2')
  const refused = async (reply: Reply, reason: RegExp, what: string) => {
    t.match(assertProblem(t, reply, 401, 'PASSKEY_REFUSED').detail, reason, what)
  }
  await refused(await passwordless(server, clone), /counter/i, 'the clone signs counter 1 after the original signed 2')
  authenticator.credential(authenticator.credentials[0]!.id).signCount = 1
  await refused(await passwordless(server, authenticator), /counter/i, 'the counter set back to 2, once 2 was seen')
  authenticator.credential(authenticator.credentials[0]!.id).signCount = 100

  await refused(await passwordless(server, authenticator, { origin: 'http://localhost:3001' }), /origin/i, 'another port')
  await refused(await passwordless(server, authenticator, { origin: 'https://localhost.evil.example' }), /origin/i, 'another site')
  await refused(await passwordless(server, authenticator, { userVerification: false }), /verif/i, 'no user verification')
  t.equal((await passwordless(server, authenticator)).status, 200, 'the right one still signs in')

  t.equal((await server.call('DELETE', `/api/security/passkeys/${key.id}`, undefined, me.token)).status, 204)
  await refused(await passwordless(server, authenticator), /not registered/, 'deleted')
})

t.test('refused: a challenge used twice', async (t) => {
  const server = await start(t)
  const me = await signedUp(server)
  const authenticator = new SoftAuthenticator()
  await addPasskey(server, me, authenticator)
  const options = (await server.call('POST', '/api/auth/passkey/options', {})).data
  t.equal((await server.call('POST', '/api/auth/passkey/login', { response: authenticator.authenticate(options, ORIGIN) })).status, 200)
  const twice = await server.call('POST', '/api/auth/passkey/login', { response: authenticator.authenticate(options, ORIGIN) })
  t.match(assertProblem(t, twice, 401, 'PASSKEY_REFUSED').detail, /challenge/, 'a fresh assertion (counter 2) on a used challenge')
  const forged = { ...options, challenge: Buffer.from('a challenge the service never issued').toString('base64url') }
  t.match(assertProblem(t, await server.call('POST', '/api/auth/passkey/login', { response: authenticator.authenticate(forged, ORIGIN) }), 401, 'PASSKEY_REFUSED').detail, /challenge/, 'a made-up challenge')
})

t.test('an expired challenge', async (t) => {
  t.comment('No setting or test tuning shortens the challenge TTL (CHALLENGE_TTL_MS, 5 min, a constant of src/modules/identity/factors.ts): ' +
    "expiry is shown with Redis's own, the key's TTL checked and then cut short behind the app's back")
  const redis = await testRedis(t)
  if (redis === undefined) return
  const server = await start(t, { env: { REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix } })
  const me = await signedUp(server)
  const authenticator = new SoftAuthenticator()
  await addPasskey(server, me, authenticator)
  const options = (await server.call('POST', '/api/auth/passkey/options', {})).data
  const key = `${redis.prefix}challenges:webauthn:${options.challenge}`
  const ttl = await redis.client.pttl(key)
  t.ok(ttl > 290_000 && ttl <= 300_000, `the challenge is kept 5 min (PTTL ${ttl} ms)`)
  await redis.client.pexpire(key, 1)
  await new Promise((resolve) => setTimeout(resolve, 20))
  const late = await server.call('POST', '/api/auth/passkey/login', { response: authenticator.authenticate(options, ORIGIN) })
  t.match(assertProblem(t, late, 401, 'PASSKEY_REFUSED').detail, /challenge/)
})

t.test('replicas: options from one, verification on the other', async (t) => {
  t.test('with Redis: registration and sign-in succeed across replicas', async (t) => {
    const redis = await testRedis(t)
    if (redis === undefined) return
    const databaseUrl = await createTestDatabase(t)
    const env = { REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix }
    const a = await start(t, { env, databaseUrl })
    const b = await start(t, { env, databaseUrl })
    const me = await signedUp(a)
    const authenticator = new SoftAuthenticator()
    const creation = await a.call('POST', '/api/security/passkey/options', { currentPassword: me.password }, me.token)
    const added = await b.call('POST', '/api/security/passkeys', { response: authenticator.register(creation.data, ORIGIN), currentPassword: me.password }, me.token)
    t.equal(added.status, 201, `registered on B with A's options: ${added.body}`)
    const request = await a.call('POST', '/api/auth/passkey/options', {})
    const login = await b.call('POST', '/api/auth/passkey/login', { response: authenticator.authenticate(request.data, ORIGIN) })
    t.equal(login.status, 200, `signed in on B with A's challenge: ${login.body}`)
  })

  t.test('without Redis (each replica keeps its challenges in memory): the other replica does not know the challenge', async (t) => {
    const databaseUrl = await createTestDatabase(t)
    const a = await start(t, { databaseUrl })
    const b = await start(t, { databaseUrl })
    const me = await signedUp(a)
    const authenticator = new SoftAuthenticator()
    await addPasskey(a, me, authenticator)
    const request = await a.call('POST', '/api/auth/passkey/options', {})
    const response = authenticator.authenticate(request.data, ORIGIN)
    t.match(assertProblem(t, await b.call('POST', '/api/auth/passkey/login', { response }), 401, 'PASSKEY_REFUSED').detail, /challenge/, 'sign-in: B never issued the challenge')
    t.equal((await a.call('POST', '/api/auth/passkey/login', { response })).status, 200, 'A, which issued it, accepts the same assertion')
    const creation = await a.call('POST', '/api/security/passkey/options', { currentPassword: me.password }, me.token)
    const added = await b.call('POST', '/api/security/passkeys', { response: new SoftAuthenticator().register(creation.data, ORIGIN), currentPassword: me.password }, me.token)
    assertProblem(t, added, 400, 'PASSKEY_NOT_REGISTERED')
  })
})

/** A registration of `authenticator` made with fresh options, as `call` crafts it: the answer to POST /api/security/passkeys. */
async function registerWith ({ call }: Server, me: SignedUp, authenticator: SoftAuthenticator, how: RegisterCall = {}) {
  const options = await call('POST', '/api/security/passkey/options', { currentPassword: me.password }, me.token)
  if (options.status !== 200) throw new Error(`options: ${options.status} ${options.body}`)
  return await call('POST', '/api/security/passkeys', { response: authenticator.register(options.data, ORIGIN, how), currentPassword: me.password }, me.token)
}

const idOf = (bytes: number) => randomBytes(bytes).toString('base64url')

t.test('long credential ids: up to 1,023 bytes registered, renamed and deleted by the listed id; longer ones refused', async (t) => {
  const server = await start(t)
  const me = await signedUp(server)
  for (const bytes of [300, 1023]) {
    const authenticator = new SoftAuthenticator()
    const added = await registerWith(server, me, authenticator, { credentialId: idOf(bytes) })
    t.equal(added.status, 201, `a ${bytes}-byte credential id: ${added.body.slice(0, 200)}`)
    t.match(added.data.id, UUID, 'named by a short id')
    const listed = (await server.call('GET', '/api/security', undefined, me.token)).data.passkeys.find((p: { id: string }) => p.id === added.data.id)
    t.ok(listed, 'listed under that id')
    const renamed = await server.call('PATCH', `/api/security/passkeys/${listed.id}`, { name: 'Long id' }, me.token)
    t.equal(renamed.status, 200, `renamed (the 414 of the credential id in the path is gone): ${renamed.body}`)
    t.equal((await passwordless(server, authenticator)).status, 200, 'it signs in')
    const deleted = await server.call('DELETE', `/api/security/passkeys/${listed.id}`, undefined, me.token)
    t.equal(deleted.status, 204, 'deleted')
    t.match(assertProblem(t, await passwordless(server, authenticator), 401, 'PASSKEY_REFUSED').detail, /not registered/, 'and signs in no more')
  }
  const tooLong = await registerWith(server, me, new SoftAuthenticator(), { credentialId: idOf(1024) })
  t.match(assertProblem(t, tooLong, 400, 'PASSKEY_NOT_REGISTERED').detail, /1023 bytes/, '1,024 bytes: refused')
  t.same((await server.call('GET', '/api/security', undefined, me.token)).data.passkeys, [], 'nothing kept')
})

t.test('hostile registrations: the authenticator data is what is checked and kept; never a 500', async (t) => {
  const server = await start(t)
  const me = await signedUp(server)
  const huge = await registerWith(server, me, new SoftAuthenticator(), { credentialId: idOf(20_000), responseId: idOf(16) })
  t.match(assertProblem(t, huge, 400, 'PASSKEY_NOT_REGISTERED').detail, /1023 bytes/, 'a 20,000-byte id in the authenticator data behind a short JSON id: 400, not 500')
  const swapped = await registerWith(server, me, new SoftAuthenticator(), { credentialId: idOf(16), responseId: idOf(16) })
  t.match(assertProblem(t, swapped, 400, 'PASSKEY_NOT_REGISTERED').detail, /authenticator data/, 'another id in the JSON than in the authenticator data')
  const padded = await registerWith(server, me, new SoftAuthenticator(), { coseExtraBytes: 16_384 })
  t.match(assertProblem(t, padded, 400, 'PASSKEY_NOT_REGISTERED').detail, /public key is longer than 1024 bytes/, 'a COSE key with 16 kB of extra parameters')
  t.same((await server.call('GET', '/api/security', undefined, me.token)).data.passkeys, [], 'nothing kept')
  t.equal((await registerWith(server, me, new SoftAuthenticator())).status, 201, 'an honest one still registers')
})

t.test('at most 20 passkeys a user: the options and the registration past it are 409 PASSKEY_QUOTA_EXCEEDED, even raced', async (t) => {
  const server = await start(t)
  const me = await signedUp(server)
  for (let i = 0; i < 19; i++) await addPasskey(server, me, new SoftAuthenticator())
  const [a, b] = await Promise.all([1, 2].map(async () => (await server.call('POST', '/api/security/passkey/options', { currentPassword: me.password }, me.token)).data))
  const raced = await Promise.all([a, b].map(async (options) => await server.call('POST', '/api/security/passkeys', { response: new SoftAuthenticator().register(options, ORIGIN), currentPassword: me.password }, me.token)))
  t.same(raced.map((r) => r.status).sort(), [201, 409], 'two registrations at 19: one is the 20th, the other refused')
  t.match(assertProblem(t, raced.find((r) => r.status === 409)!, 409, 'PASSKEY_QUOTA_EXCEEDED').detail, /20 passkeys/)
  const security = await server.call('GET', '/api/security', undefined, me.token)
  t.equal(security.data.passkeys.length, 20)
  assertProblem(t, await server.call('POST', '/api/security/passkey/options', { currentPassword: me.password }, me.token), 409, 'PASSKEY_QUOTA_EXCEEDED')
  t.equal((await server.call('DELETE', `/api/security/passkeys/${security.data.passkeys[0].id}`, undefined, me.token)).status, 204)
  t.equal((await registerWith(server, me, new SoftAuthenticator())).status, 201, 'one deleted, one may be added')
})

t.test('cross-origin ceremonies (a frame of another site) are refused: registration, sign-in, second step', async (t) => {
  const server = await start(t)
  const me = await signedUp(server)
  const framed = await registerWith(server, me, new SoftAuthenticator(), { crossOrigin: true })
  t.match(assertProblem(t, framed, 400, 'PASSKEY_NOT_REGISTERED').detail, /crossOrigin/, 'registration')
  const authenticator = new SoftAuthenticator()
  await addPasskey(server, me, authenticator)
  t.match(assertProblem(t, await passwordless(server, authenticator, { crossOrigin: true }), 401, 'PASSKEY_REFUSED').detail, /crossOrigin/, 'passwordless sign-in')
  const enrol = await server.call('POST', '/api/security/totp', { currentPassword: me.password }, me.token)
  await server.call('POST', '/api/security/totp/confirm', { code: totpCode(enrol.data.secret), currentPassword: me.password }, me.token)
  const { mfaToken } = (await server.call('POST', '/api/auth/login', { username: me.username, password: me.password })).data
  const options = await server.call('POST', '/api/auth/mfa/passkey/options', { mfaToken })
  const step = await server.call('POST', '/api/auth/mfa/passkey', { mfaToken, response: authenticator.authenticate(options.data, ORIGIN, { crossOrigin: true }) })
  t.match(assertProblem(t, step, 401, 'PASSKEY_REFUSED').detail, /crossOrigin/, 'second step')
  t.equal((await passwordless(server, authenticator)).status, 200, 'the same passkey, same-origin: signs in')
})

t.test('a flood of sign-in options evicts no ticket and no other client\'s challenge: 429 per client, 503 when full, with Retry-After', async (t) => {
  // A small store (60 live challenges, 3 per client) so the flood is quick; the defaults are 100,000 and 50.
  const server = await start(t, { env: { RATE_LIMIT_AUTH_MAX: '100000' }, tuning: { challenges: { maxKeys: 60, perOwner: 3 } } })
  const { app, call } = server
  const me = await signedUp(server)
  const authenticator = new SoftAuthenticator()
  await addPasskey(server, me, authenticator)
  const enrol = await call('POST', '/api/security/totp', { currentPassword: me.password }, me.token)
  await call('POST', '/api/security/totp/confirm', { code: totpCode(enrol.data.secret), currentPassword: me.password }, me.token)

  const ticket = (await call('POST', '/api/auth/login', { username: me.username, password: me.password })).data.mfaToken as string
  const pending = (await call('POST', '/api/auth/passkey/options', {})).data as PublicKeyCredentialRequestOptionsJSON

  const statuses = new Map<number, number>()
  let perClient: Answer | undefined
  let full: Answer | undefined
  for (let i = 0; i < 40; i++) {
    const remoteAddress = `10.0.0.${i + 1}`
    for (let n = 0; n < 4; n++) {
      const res = await app.inject({ method: 'POST', url: '/api/auth/passkey/options', remoteAddress })
      statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1)
      if (res.statusCode === 429) perClient ??= res
      if (res.statusCode === 503) full ??= res
    }
  }
  t.comment(`160 options requests from 40 addresses: ${JSON.stringify(Object.fromEntries(statuses))}`)
  t.equal(statuses.get(200), 60 - 1, 'the store filled up (beside the pending sign-in\'s challenge)')
  t.match(assertProblem(t, perClient!, 429, 'RATE_LIMITED').detail, /challenges pending/, 'a fourth from one address: 429')
  t.ok(Number(perClient!.headers['retry-after']) > 0 && Number(perClient!.headers['retry-after']) <= 300, `Retry-After ${String(perClient!.headers['retry-after'])}`)
  t.match(assertProblem(t, full!, 503, 'SERVICE_UNAVAILABLE').detail, /challenges are pending/, 'a full store: 503')
  t.ok(Number(full!.headers['retry-after']) > 0, `Retry-After ${String(full!.headers['retry-after'])}`)

  const signIn = await app.inject({ method: 'POST', url: '/api/auth/passkey/login', payload: { response: authenticator.authenticate(pending, ORIGIN) } })
  t.equal(signIn.statusCode, 200, `the sign-in started before the flood completes: ${signIn.body}`)
  const step = await app.inject({ method: 'POST', url: '/api/auth/mfa/totp', payload: { mfaToken: ticket, code: totpCode(enrol.data.secret, 1) } })
  t.equal(step.statusCode, 200, `the ticket issued before the flood completes: ${step.body}`)
})

t.test('with Redis, a client\'s share of challenges holds across replicas', async (t) => {
  const redis = await testRedis(t)
  if (redis === undefined) return
  const databaseUrl = await createTestDatabase(t)
  const options = { databaseUrl, env: { REDIS_URL: redis.url, REDIS_KEY_PREFIX: redis.prefix, RATE_LIMIT_AUTH_MAX: '1000' }, tuning: { challenges: { perOwner: 4 } } }
  const a = await start(t, options)
  const b = await start(t, options)
  const me = await signedUp(a)
  const authenticator = new SoftAuthenticator()
  await addPasskey(a, me, authenticator)
  const ask = async (server: Server, remoteAddress: string) => await server.app.inject({ method: 'POST', url: '/api/auth/passkey/options', remoteAddress })
  const first = await ask(a, '10.1.0.1')
  t.same([(await ask(b, '10.1.0.1')).statusCode, (await ask(a, '10.1.0.1')).statusCode, (await ask(b, '10.1.0.1')).statusCode], [200, 200, 200])
  const refused = await ask(b, '10.1.0.1')
  assertProblem(t, refused, 429, 'RATE_LIMITED')
  t.ok(Number(refused.headers['retry-after']) > 290, `the fifth, on the other replica: 429 until the first expires (Retry-After ${String(refused.headers['retry-after'])})`)
  t.equal((await ask(a, '10.1.0.2')).statusCode, 200, 'another client is not held back')
  const response = authenticator.authenticate(first.json(), ORIGIN)
  t.equal((await b.call('POST', '/api/auth/passkey/login', { response })).status, 200, "the client's first challenge still works, on either replica")
})
