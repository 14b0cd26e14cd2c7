/**
 * The software authenticator of test/helpers/soft-authenticator.ts against
 * @simplewebauthn/server's own verification, without the service: what it registers verifies,
 * what it signs verifies, and each thing a test forges with it (counter, clone, origin, no user
 * verification, another key) is refused by the library for that reason.
 */
import { generateAuthenticationOptions, generateRegistrationOptions, verifyAuthenticationResponse, verifyRegistrationResponse, type WebAuthnCredential } from '@simplewebauthn/server'
import t from 'tap'
import { encodeCbor, SoftAuthenticator } from './helpers/soft-authenticator.js'

const rpID = 'localhost'
const origin = 'http://localhost:3000'

async function registered (authenticator: SoftAuthenticator, userName = 'alice', excludeCredentials: Array<{ id: string }> = []) {
  const options = await generateRegistrationOptions({
    rpName: 'test', rpID, userName, excludeCredentials, authenticatorSelection: { residentKey: 'required', userVerification: 'required' }
  })
  const response = authenticator.register(options, origin)
  const verified = await verifyRegistrationResponse({ response, expectedChallenge: options.challenge, expectedOrigin: origin, expectedRPID: rpID, requireUserVerification: true })
  if (!verified.verified) throw new Error('registration not verified')
  const credential: WebAuthnCredential = { ...verified.registrationInfo.credential }
  return { options, response, verified, credential }
}

async function assertion (authenticator: SoftAuthenticator, credential: WebAuthnCredential, call: { origin?: string, allow?: boolean, requireUserVerification?: boolean } = {}) {
  const options = await generateAuthenticationOptions({ rpID, userVerification: 'required', allowCredentials: call.allow === true ? [{ id: credential.id }] : [] })
  const response = authenticator.authenticate(options, call.origin ?? origin)
  const result = await verifyAuthenticationResponse({
    response, expectedChallenge: options.challenge, expectedOrigin: origin, expectedRPID: rpID, credential, requireUserVerification: call.requireUserVerification ?? true
  })
  return { response, result }
}

t.test('CBOR encoding: the examples of RFC 8949, appendix A', async (t) => {
  const cases: Array<[Parameters<typeof encodeCbor>[0], string]> = [
    [0, '00'], [23, '17'], [24, '1818'], [100, '1864'], [1000, '1903e8'], [1000000, '1a000f4240'],
    [-1, '20'], [-10, '29'], [-100, '3863'], [-1000, '3903e7'],
    ['', '60'], ['a', '6161'], ['IETF', '6449455446'], ['\u00fc', '62c3bc'],
    [Buffer.from('01020304', 'hex'), '4401020304'],
    [new Map([[1, 2], [3, 4]]), 'a201020304'],
    [new Map<string, string>([['a', 'A'], ['b', 'B'], ['c', 'C'], ['d', 'D'], ['e', 'E']]), 'a56161614161626142616361436164614461656145']
  ]
  for (const [value, hex] of cases) t.equal(encodeCbor(value).toString('hex'), hex, hex)
})

t.test('registration: `none` attestation, ES256 key, discoverable, UV', async (t) => {
  const authenticator = new SoftAuthenticator()
  const { response, verified, options } = await registered(authenticator)
  const info = verified.registrationInfo
  t.equal(info.fmt, 'none')
  t.equal(info.credential.id, response.id, 'the credential id')
  t.equal(info.userVerified, true, 'UV flag')
  t.equal(info.credentialDeviceType, 'singleDevice')
  t.equal(info.credentialBackedUp, false)
  t.equal(info.credential.counter, 0)
  t.equal(info.rpID, rpID)
  t.equal(info.origin, origin)
  t.equal(authenticator.credential(response.id).userHandle, options.user.id, 'the user handle kept for discoverable sign-in')
  t.equal(response.response.publicKey, authenticator.publicKey(response.id).toString('base64url'), 'getPublicKey(): the SPKI of the key')
})

t.test('registration: backed-up flags; excludeCredentials refuses a second key for the same RP', async (t) => {
  const synced = new SoftAuthenticator({ backedUp: true })
  const { verified, response } = await registered(synced)
  t.equal(verified.registrationInfo.credentialDeviceType, 'multiDevice')
  t.equal(verified.registrationInfo.credentialBackedUp, true)
  await t.rejects(registered(synced, 'alice', [{ id: response.id }]), /InvalidStateError/)
})

t.test('registration: a wrong origin, a missing UV flag, another challenge are refused', async (t) => {
  const options = await generateRegistrationOptions({ rpName: 'test', rpID, userName: 'bob', authenticatorSelection: { residentKey: 'required', userVerification: 'required' } })
  const check = (response: ReturnType<SoftAuthenticator['register']>, challenge = options.challenge) =>
    verifyRegistrationResponse({ response, expectedChallenge: challenge, expectedOrigin: origin, expectedRPID: rpID, requireUserVerification: true })
  await t.rejects(check(new SoftAuthenticator().register(options, 'http://evil.localhost:3000')), /origin/i)
  await t.rejects(check(new SoftAuthenticator({ userVerification: false }).register(options, origin)), /user could not be verified/i)
  await t.rejects(check(new SoftAuthenticator().register(options, origin), 'c29tZXRoaW5nIGVsc2U'), /challenge/i)
})

t.test('passwordless sign-in: the discoverable credential, its user handle, a counter that rises', async (t) => {
  const authenticator = new SoftAuthenticator()
  const { credential, options } = await registered(authenticator)
  const first = await assertion(authenticator, credential)
  t.equal(first.result.verified, true)
  t.equal(first.result.authenticationInfo.newCounter, 1)
  t.equal(first.result.authenticationInfo.userVerified, true)
  t.equal(first.response.response.userHandle, options.user.id, 'userHandle: the registration user.id')
  credential.counter = first.result.authenticationInfo.newCounter
  const second = await assertion(authenticator, credential, { allow: true })
  t.equal(second.result.authenticationInfo.newCounter, 2, 'with allowCredentials too')
})

t.test('with several credentials: the one allowCredentials names, else the chosen or newest discoverable one', async (t) => {
  const authenticator = new SoftAuthenticator()
  const a = await registered(authenticator, 'a')
  const b = await registered(authenticator, 'b')
  const options = await generateAuthenticationOptions({ rpID, allowCredentials: [{ id: a.credential.id }] })
  t.equal(authenticator.authenticate(options, origin).id, a.credential.id, 'allowCredentials')
  const open = await generateAuthenticationOptions({ rpID })
  t.equal(authenticator.authenticate(open, origin).id, b.credential.id, 'the newest')
  t.equal(authenticator.authenticate(open, origin, { credentialId: a.credential.id }).id, a.credential.id, 'the chosen one')
  t.throws(() => authenticator.authenticate({ ...open, rpId: 'example.com' }, 'https://example.com'), /NotAllowedError/, 'none for another RP')
})

t.test('refused: a counter that goes backwards, a clone, a wrong origin, no UV, another key', async (t) => {
  const authenticator = new SoftAuthenticator()
  const { credential, response } = await registered(authenticator)
  const used = await assertion(authenticator, credential)
  credential.counter = used.result.authenticationInfo.newCounter

  const clone = authenticator.clone(response.id)
  credential.counter = (await assertion(authenticator, credential)).result.authenticationInfo.newCounter
  t.equal(credential.counter, 2)
  await t.rejects(assertion(clone, credential), /counter value/i, 'the clone signs 2 again: refused')

  authenticator.credential(response.id).signCount = 0
  await t.rejects(assertion(authenticator, credential), /counter value/i, 'a counter set back')
  authenticator.credential(response.id).signCount = 10

  await t.rejects(assertion(authenticator, credential, { origin: 'http://localhost.evil.example:3000' }), /origin/i)
  authenticator.userVerification = false
  await t.rejects(assertion(authenticator, credential), /user could not be verified/i)
  t.equal((await assertion(authenticator, credential, { requireUserVerification: false })).result.verified, true, 'UV off is fine when not required')
  authenticator.userVerification = true

  const other = await registered(new SoftAuthenticator(), 'mallory')
  const signedByOther = await assertion(authenticator, { ...credential, publicKey: other.credential.publicKey })
  t.equal(signedByOther.result.verified, false, 'the signature does not verify under another key')
})

t.test('an authenticator that does not count (always 0) is accepted while the stored counter is 0', async (t) => {
  const authenticator = new SoftAuthenticator()
  const { credential, response } = await registered(authenticator)
  authenticator.credential(response.id).counts = false
  for (let i = 0; i < 2; i++) t.equal((await assertion(authenticator, credential)).result.authenticationInfo.newCounter, 0)
})
