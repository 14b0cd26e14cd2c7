/** Schemas of sign-in (password, second step, passkeys), sessions and the second factors. */
import { Type } from 'typebox'
import { deprecatedNote } from '../../lib/deprecation.js'
import { Timestamp } from '../../lib/schemas.js'
import { SessionMode } from '../../lib/session-schemas.js'
import { passwordToCheck } from '../users/index.js'

const B64URL = { pattern: '^[A-Za-z0-9_-]*$' }
const base64url = (description: string, maxLength: number) => Type.String({ ...B64URL, minLength: 1, maxLength, description })

const MfaToken = Type.String({ pattern: '^[A-Za-z0-9_-]{43}$', description: 'the `mfaToken` login answered 202 with' })
export const TotpCode = Type.String({ pattern: '^[0-9]{6}$', description: 'the 6-digit code the authenticator app shows now' })
const RecoveryCodeInput = Type.String({ minLength: 16, maxLength: 40, description: 'one of your recovery codes (`abcd-efgh-ijkl-mnop`; case, spaces and hyphens do not matter); each works once' })
const RecoveryCodeMethod = [
  Type.Literal('recoveryCode'),
  Type.Literal('recovery-code', { deprecated: true, description: `the former name of \`recoveryCode\`, listed after it. ${deprecatedNote('`recoveryCode`')}` })
]
const Method = Type.Union([Type.Literal('password'), Type.Literal('totp'), ...RecoveryCodeMethod, Type.Literal('passkey')])
const Attachment = Type.Union([Type.Literal('platform'), Type.Literal('cross-platform')])
const Transports = Type.Array(Type.String({ maxLength: 32 }), { maxItems: 10 })

export const SecondStep = Type.Object({
  mfaToken: Type.String({ description: 'completes the sign-in with `POST /api/auth/mfa/totp` or `/api/auth/mfa/passkey`; works once, for `expiresIn` seconds' }),
  methods: Type.Array(Type.Union([Type.Literal('totp'), ...RecoveryCodeMethod, Type.Literal('passkey')]), { description: 'what completes it: `passkey` when the user has one' }),
  expiresIn: Type.Integer({ description: 'seconds' })
}, { description: 'The password was right and the account has a second factor: no session yet', examples: [{ mfaToken: 'Jw3q0pX4m2yZk8rT1sW6nB9cD5fG7hJ0lK2aE4uI6oY', methods: ['totp', 'recoveryCode', 'recovery-code', 'passkey'], expiresIn: 300 }] })

export const CodeStepBody = Type.Object({
  mfaToken: MfaToken,
  code: Type.Optional(TotpCode),
  recoveryCode: Type.Optional(RecoveryCodeInput)
}, { additionalProperties: false, description: 'exactly one of `code` and `recoveryCode`', examples: [{ mfaToken: 'Jw3q0pX4m2yZk8rT1sW6nB9cD5fG7hJ0lK2aE4uI6oY', code: '123456' }] })

export const MfaTokenBody = Type.Object({ mfaToken: MfaToken }, { additionalProperties: false, examples: [{ mfaToken: 'Jw3q0pX4m2yZk8rT1sW6nB9cD5fG7hJ0lK2aE4uI6oY' }] })

/** What `navigator.credentials.get()` answers, as JSON (`PublicKeyCredential.toJSON()`, @simplewebauthn/browser). */
export const AuthenticationResponse = Type.Object({
  id: base64url('the credential id', 1400),
  rawId: base64url('the credential id', 1400),
  type: Type.Literal('public-key'),
  response: Type.Object({
    clientDataJSON: base64url('client data', 8192),
    authenticatorData: base64url('authenticator data', 8192),
    signature: base64url('signature', 4096),
    userHandle: Type.Optional(Type.String({ ...B64URL, maxLength: 128 }))
  }),
  clientExtensionResults: Type.Object({}, { additionalProperties: true }),
  authenticatorAttachment: Type.Optional(Attachment)
}, { description: 'the assertion, as PublicKeyCredential.toJSON() gives it' })

/** What `navigator.credentials.create()` answers, as JSON. */
export const RegistrationResponse = Type.Object({
  id: base64url('the credential id', 1400),
  rawId: base64url('the credential id', 1400),
  type: Type.Literal('public-key'),
  response: Type.Object({
    clientDataJSON: base64url('client data', 8192),
    attestationObject: base64url('attestation object', 65536),
    authenticatorData: Type.Optional(Type.String({ ...B64URL, maxLength: 65536 })),
    transports: Type.Optional(Transports),
    publicKeyAlgorithm: Type.Optional(Type.Integer()),
    publicKey: Type.Optional(Type.String({ ...B64URL, maxLength: 8192 }))
  }),
  clientExtensionResults: Type.Object({}, { additionalProperties: true }),
  authenticatorAttachment: Type.Optional(Attachment)
}, { description: 'the new credential, as PublicKeyCredential.toJSON() gives it' })

const ASSERTION_EXAMPLE = { id: 'pQ1yX4m2yZk8rT1sW6nB9w', rawId: 'pQ1yX4m2yZk8rT1sW6nB9w', type: 'public-key', response: { clientDataJSON: 'eyJ0eXBlIjoid2ViYXV0aG4uZ2V0IiwiY2hhbGxlbmdlIjoiaDJaazhyVDFzVzZuQjljRDVmRzdoSjBsSzJhRTR1STZvWXEzVngwcFg0bSIsIm9yaWdpbiI6Imh0dHBzOi8vc2hvcC5leGFtcGxlLmNvbSIsImNyb3NzT3JpZ2luIjpmYWxzZX0', authenticatorData: 'SZYN5YgOjGh0NBcPZHZgW4_krrmihjLHmVzzuoMdl2MFAAAAAQ', signature: 'MEUCIQDx7kq2Yb9fR3nU0sLw8ZpV4cTj6mHa1oKe5dNrXyBgQIgL2vS9uJwP3tF7hQz0cY4mA6nK1bE8rD5iW2xVoTsG0', userHandle: 'q2Vx0pX4m2yZk8rT1sW6nA' }, clientExtensionResults: {}, authenticatorAttachment: 'platform' }
export const PasskeyStepBody = Type.Object({ mfaToken: MfaToken, response: AuthenticationResponse }, { additionalProperties: false, examples: [{ mfaToken: 'Jw3q0pX4m2yZk8rT1sW6nB9cD5fG7hJ0lK2aE4uI6oY', response: ASSERTION_EXAMPLE }] })
export const PasskeySignInBody = Type.Object({ response: AuthenticationResponse, mode: Type.Optional(SessionMode) }, { additionalProperties: false, examples: [{ response: ASSERTION_EXAMPLE, mode: 'cookie' }] })

const Descriptor = Type.Object({ id: Type.String(), type: Type.Literal('public-key'), transports: Type.Optional(Transports) })

export const RequestOptions = Type.Object({
  challenge: Type.String(),
  rpId: Type.String(),
  timeout: Type.Integer(),
  userVerification: Type.String(),
  allowCredentials: Type.Optional(Type.Array(Descriptor))
}, { description: 'PublicKeyCredentialRequestOptionsJSON: give it to `navigator.credentials.get()` (PublicKeyCredential.parseRequestOptionsFromJSON, or @simplewebauthn/browser\'s startAuthentication)', examples: [{ challenge: 'h2Zk8rT1sW6nB9cD5fG7hJ0lK2aE4uI6oYq3Vx0pX4m', rpId: 'shop.example.com', timeout: 300000, userVerification: 'required' }] })

export const CreationOptions = Type.Object({
  challenge: Type.String(),
  rp: Type.Object({ name: Type.String(), id: Type.String() }),
  user: Type.Object({ id: Type.String(), name: Type.String(), displayName: Type.String() }),
  pubKeyCredParams: Type.Array(Type.Object({ alg: Type.Integer(), type: Type.Literal('public-key') })),
  timeout: Type.Integer(),
  attestation: Type.String(),
  excludeCredentials: Type.Array(Descriptor),
  authenticatorSelection: Type.Object({ residentKey: Type.String(), userVerification: Type.String(), requireResidentKey: Type.Boolean() }),
  extensions: Type.Object({ credProps: Type.Boolean() }),
  hints: Type.Array(Type.String())
}, { description: 'PublicKeyCredentialCreationOptionsJSON: give it to `navigator.credentials.create()` (PublicKeyCredential.parseCreationOptionsFromJSON, or @simplewebauthn/browser\'s startRegistration)', examples: [{ challenge: 'h2Zk8rT1sW6nB9cD5fG7hJ0lK2aE4uI6oYq3Vx0pX4m', rp: { name: 'User and product service', id: 'shop.example.com' }, user: { id: 'q2Vx0pX4m2yZk8rT1sW6nA', name: 'alice', displayName: 'Alice Liddell' }, pubKeyCredParams: [{ alg: -8, type: 'public-key' }, { alg: -7, type: 'public-key' }, { alg: -257, type: 'public-key' }], timeout: 300000, attestation: 'none', excludeCredentials: [], authenticatorSelection: { residentKey: 'required', userVerification: 'required', requireResidentKey: true }, extensions: { credProps: true }, hints: [] }] })

const PasskeyName = Type.String({ minLength: 1, maxLength: 100, pattern: '\\S', description: 'a name to tell your passkeys apart (`Work laptop`); not blank' })

export const Passkey = Type.Object({
  id: Type.String({ format: 'uuid', description: 'the passkey\'s id here (a UUID): PATCH and DELETE /api/security/passkeys/{id} take it' }),
  name: PasskeyName,
  createdAt: Timestamp,
  lastUsedAt: Type.Union([Timestamp, Type.Null()]),
  backedUp: Type.Boolean({ description: 'synced by its provider (a multi-device passkey)' })
}, { examples: [{ id: '3f2b8c1e-6d4a-4f7e-9b2c-5a1d0e8f7c6b', name: 'Work laptop', createdAt: '2026-11-26T12:00:00.000Z', lastUsedAt: '2026-11-26T12:30:00.000Z', backedUp: true }] })

/** The proof a change that adds or replaces a factor needs (`requireProof`, sign-in.ts); optional here so that its absence gets the one answer of that check. */
const CurrentPassword = Type.Optional(Type.String({ minLength: 1, maxLength: 1024, description: 'your current password: required (a stolen session alone adds no factor)' }))
export const ProofBody = Type.Object({ currentPassword: CurrentPassword }, { additionalProperties: false, examples: [{ currentPassword: 'wonderland!' }] })

export const RegisterPasskeyBody = Type.Object({ response: RegistrationResponse, name: Type.Optional(PasskeyName), currentPassword: CurrentPassword }, { additionalProperties: false, examples: [{ currentPassword: 'wonderland!', response: { id: 'pQ1yX4m2yZk8rT1sW6nB9w', rawId: 'pQ1yX4m2yZk8rT1sW6nB9w', type: 'public-key', response: { clientDataJSON: 'eyJ0eXBlIjoid2ViYXV0aG4uY3JlYXRlIiwiY2hhbGxlbmdlIjoiaDJaazhyVDFzVzZuQjljRDVmRzdoSjBsSzJhRTR1STZvWXEzVngwcFg0bSIsIm9yaWdpbiI6Imh0dHBzOi8vc2hvcC5leGFtcGxlLmNvbSIsImNyb3NzT3JpZ2luIjpmYWxzZX0', attestationObject: 'o2NmbXRkbm9uZWdhdHRTdG10oGhhdXRoRGF0YVjESZYN5YgOjGh0NBcPZHZgW4_krrmihjLHmVzzuoMdl2NFAAAAAQ', transports: ['internal'] }, clientExtensionResults: {}, authenticatorAttachment: 'platform' }, name: 'Work laptop' }] })
export const RenamePasskeyBody = Type.Object({ name: PasskeyName }, { additionalProperties: false, examples: [{ name: 'Phone' }] })
export const PasskeyParams = Type.Object({ id: Type.String({ pattern: '^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$', description: 'the passkey\'s `id` (a UUID), as GET /api/security lists it' }) }, { additionalProperties: false })

export const Security = Type.Object({
  totp: Type.Object({ enabled: Type.Boolean(), enabledAt: Type.Union([Timestamp, Type.Null()]) }),
  recoveryCodesLeft: Type.Integer(),
  passkeys: Type.Array(Passkey),
  session: Type.Object({ methods: Type.Array(Method, { description: 'how this session was signed in' }), signedInAt: Timestamp })
}, { examples: [{ totp: { enabled: true, enabledAt: '2026-11-26T11:00:00.000Z' }, recoveryCodesLeft: 9, passkeys: [{ id: '3f2b8c1e-6d4a-4f7e-9b2c-5a1d0e8f7c6b', name: 'Work laptop', createdAt: '2026-11-26T12:00:00.000Z', lastUsedAt: '2026-11-26T12:30:00.000Z', backedUp: true }], session: { methods: ['password', 'totp'], signedInAt: '2026-11-26T12:00:00.000Z' } }] })

export const TotpEnrolment = Type.Object({
  secret: Type.String({ description: 'the secret in base32, to type into an authenticator app by hand; shown this once' }),
  uri: Type.String({ description: 'the `otpauth://totp/...` URI authenticator apps read' }),
  qrCode: Type.String({ description: 'the URI as a QR code: an SVG image as a `data:` URL' })
}, { examples: [{ secret: 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP', uri: 'otpauth://totp/User%20and%20product%20service:alice?issuer=User%20and%20product%20service&secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP&algorithm=SHA1&digits=6&period=30', qrCode: 'data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciLz4=' }] })

export const ConfirmTotpBody = Type.Object({ code: TotpCode, currentPassword: CurrentPassword }, { additionalProperties: false, examples: [{ code: '123456', currentPassword: 'wonderland!' }] })
export const DisableTotpBody = Type.Object({
  currentPassword: Type.Optional(Type.String({ minLength: 1, maxLength: 1024, description: 'your current password' })),
  password: Type.Optional(Type.String({ minLength: 1, maxLength: 1024, deprecated: true, description: `the former name of \`currentPassword\`. ${deprecatedNote('`currentPassword`')}` })),
  code: Type.Optional(TotpCode)
}, { additionalProperties: false, description: 'exactly one of `currentPassword` and `code`', examples: [{ code: '123456' }, { currentPassword: 'wonderland!' }] })
export const RecoveryCodes = Type.Object({
  recoveryCodes: Type.Array(Type.String(), { description: 'ten single-use codes for when the authenticator is lost; shown this once: keep them safe' })
}, { examples: [{ recoveryCodes: ['k2m4-q7xa-b3nd-e5fz', 'p6rt-w2yc-h4jm-n7sb', '...'] }] })

/**
 * `username` and `identity` are two names of one field, so clients of either route set log in.
 * Either may hold the username or the e-mail address; exactly one must be present.
 */
const LoginName = Type.String({ minLength: 1, maxLength: 254, description: 'your username or e-mail address' })

/**
 * Where the browser goes after a successful login in cookie mode (303 See Other): a path of
 * this service, never another host. One leading `/` and not `//` or `/\` (both mean "another
 * host" to a browser), visible ASCII only, no backslash anywhere (browsers read it as `/`),
 * no spaces, tabs or newlines (browsers drop tabs and newlines from URLs, so `/<TAB>/evil.com`
 * would become `//evil.com`). Anything else is a 400 naming the field.
 */
export const RedirectPath = Type.String({
  maxLength: 2048,
  pattern: '^/(?!/)[!-\\[\\]-~]*$',
  description: 'cookie mode only: after a successful login answer 303 with this `Location` instead of 200 with a body; ' +
    'a path of this service (`/docs`, `/app/?tab=2`): one leading `/`, not `//`, visible ASCII without `\\`. A failed login still answers its problem (e.g. 401)'
})

export const LoginBody = Type.Object({
  username: Type.Optional(LoginName),
  identity: Type.Optional(LoginName),
  password: passwordToCheck('your password'),
  mode: Type.Optional(SessionMode),
  redirect: Type.Optional(RedirectPath)
}, { additionalProperties: false, examples: [{ username: 'alice', password: 'wonderland!' }, { identity: 'alice@example.com', password: 'wonderland!' }, { username: 'alice', password: 'wonderland!', mode: 'cookie' }] })

/** Logout reads nothing from the body; one may still be sent (an HTML form's, `{}`), never with fields. */
export const LogoutBody = Type.Object({}, { additionalProperties: false, description: 'nothing: send no body, `{}` or an empty form', examples: [{}] })

export const RefreshBody = Type.Object({
  refreshToken: Type.Optional(Type.String({ minLength: 1, maxLength: 512, description: 'the refresh token; browsers send none (the refresh cookie is used)' }))
}, { additionalProperties: false, examples: [{ refreshToken: 'q3Vx0pX4m2yZk8rT1sW6nB9cD5fG7hJ0lK2aE4uI6oY' }, {}] })
