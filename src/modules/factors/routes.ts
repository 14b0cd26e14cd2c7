/**
 * The routes of second factors and passkeys: the sign-in steps under /api/auth
 * (`signInRoutes`: the second step of a login, passwordless passkey sign-in) and the
 * security settings of the signed-in user under /api/security (`securityRoutes`). The
 * public ones spend the client's budget of auth requests, as login does; the settings'
 * writes may need a recent sign-in (RECENT_SIGN_IN_MAX_AGE), and those that add or replace
 * a factor need the current password (`stepUp`) and a verified address.
 */
import type { FastifyPluginAsyncTypebox, TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { OriginCheck } from '../../lib/csrf.js'
import { empty, HEADERS, json, problems, sessionAuth } from '../../lib/responses.js'
import { deliverSession, SessionResult } from '../sessions/index.js'
import { EmailNotVerified, stepUp, type AuthBudget } from '../users/index.js'
import {
  CodeStepBody, ConfirmTotpBody, CreationOptions, DisableTotpBody, MfaTokenBody, Passkey, PasskeyParams, PasskeySignInBody, PasskeyStepBody,
  ProofBody, RecoveryCodes, RegisterPasskeyBody, RenamePasskeyBody, RequestOptions, Security, TotpEnrolment
} from './schemas.js'
import { CHALLENGES_PER_CLIENT, CREDENTIAL_ID_MAX_BYTES, PASSKEYS_MAX_PER_USER, PUBLIC_KEY_MAX_BYTES, type SignIn } from './service.js'

export interface SignInRoutesOptions {
  authBudget: AuthBudget
  /** ACCESS_TOKEN_TTL, as configured: the session's `expiresIn`. */
  accessTokenTtl: string
  originCheck: OriginCheck
}

const CHALLENGE_LIMITS = `A client address holds at most ${CHALLENGES_PER_CLIENT} live challenges (used ones count until they expire): past it, 429 \`RATE_LIMITED\`; ` +
  'a full store (memory mode), 503; both with `Retry-After`. No request ever voids another client\'s challenge or a pending second step.'

const sessionAnswer = { 200: json(SessionResult, { headers: { ...HEADERS.setCookie, ...HEADERS.noStore } }) }

export const signInRoutes: FastifyPluginAsyncTypebox<SignInRoutesOptions> = async (parent, options) => {
  const app = parent.withTypeProvider<TypeBoxTypeProvider>()
  const { factors } = app
  const guarded = { onRequest: options.authBudget }

  /** A browser's sign-in (cookie mode) must come from a trusted origin and keep its cookies. */
  function checkBrowser (request: FastifyRequest, mode: string): void {
    options.originCheck(request, { requireOrigin: false })
    if (mode === 'cookie') app.sessionCookies.assertBrowserKeeps(request)
  }

  async function startSession (reply: FastifyReply, signIn: SignIn) {
    const issued = await app.sessions.start(signIn.account, signIn.methods)
    return deliverSession(reply, app.sessionCookies, issued, signIn.mode, options.accessTokenTtl)
  }

  app.post('/mfa/totp', {
    ...guarded,
    schema: {
      operationId: 'completeLoginWithCode',
      tags: ['auth'],
      summary: 'Complete a login\'s second step with a TOTP code or a recovery code; starts the session',
      description: 'After login answered 202. A TOTP code is accepted for its 30 s step and one step either side, once; a recovery code once. ' +
        'The session is delivered as login would have (token or cookie mode, as the login asked). ' +
        'A wrong, expired or used code: 401 `MFA_CODE_INVALID`, counted with the account\'s wrong passwords (`LOGIN_FAILURES_MAX`: 429 past it). ' +
        'An unknown, expired or completed `mfaToken`: 401 `MFA_TOKEN_INVALID`.',
      body: CodeStepBody,
      response: { ...sessionAnswer, ...problems(400, 401, 403, 413, 415) }
    }
  }, async (request, reply) => {
    options.originCheck(request, { requireOrigin: false })
    const { mfaToken, ...proof } = request.body
    return await startSession(reply, await factors.completeWithCode(mfaToken, proof, reply))
  })

  app.post('/mfa/passkey/options', {
    ...guarded,
    schema: {
      operationId: 'secondStepPasskeyOptions',
      tags: ['auth'],
      summary: 'The WebAuthn options to complete a login\'s second step with one of the user\'s passkeys',
      description: CHALLENGE_LIMITS,
      body: MfaTokenBody,
      response: { 200: json(RequestOptions), ...problems(400, 401, 413, 415) }
    }
  }, async (request, reply) => await factors.secondStepPasskeyOptions(request.body.mfaToken, reply))

  app.post('/mfa/passkey', {
    ...guarded,
    schema: {
      operationId: 'completeLoginWithPasskey',
      tags: ['auth'],
      summary: 'Complete a login\'s second step with a passkey; starts the session',
      description: 'The assertion answers the options of `POST /api/auth/mfa/passkey/options` (single use, 5 min). Refused (as for `POST /api/auth/passkey/login`, a cross-origin frame included): 401 `PASSKEY_REFUSED` with the reason.',
      body: PasskeyStepBody,
      response: { ...sessionAnswer, ...problems(400, 401, 403, 413, 415) }
    }
  }, async (request, reply) => {
    options.originCheck(request, { requireOrigin: false })
    return await startSession(reply, await factors.completeWithPasskey(request.body.mfaToken, request.body.response))
  })

  app.post('/passkey/options', {
    ...guarded,
    schema: {
      operationId: 'passkeySignInOptions',
      tags: ['auth'],
      summary: 'The WebAuthn options of a sign-in with a passkey alone (no name typed)',
      description: `No body. The challenge works once, for 5 minutes, on any replica. ${CHALLENGE_LIMITS}`,
      'x-optional-body': true,
      response: { 200: json(RequestOptions), ...problems() }
    }
  }, async (_request, reply) => await factors.signInOptions(reply))

  app.post('/passkey/login', {
    ...guarded,
    schema: {
      operationId: 'passkeySignIn',
      tags: ['auth'],
      summary: 'Sign in with a passkey alone; starts a session',
      description: 'The assertion answers the options of `POST /api/auth/passkey/options`; the passkey names its user, whose user verification (PIN, biometrics) is required. ' +
        '`mode` as for login (`token` by default). Refused (unknown or deleted passkey, wrong origin, made in a cross-origin frame, a counter that did not go up, a used or expired challenge, no user verification): 401 `PASSKEY_REFUSED` with the reason.',
      body: PasskeySignInBody,
      response: { ...sessionAnswer, ...problems(400, 401, 403, 413, 415) }
    }
  }, async (request, reply) => {
    const mode = request.body.mode ?? 'token'
    checkBrowser(request, mode)
    return await startSession(reply, await factors.signIn(request.body.response, mode))
  })
}

export interface SecurityRoutesOptions {
  /** The per-client budget of bcrypt-costing requests: the current password's check spends it. */
  authBudget: AuthBudget
}

/** What a change that adds or replaces a factor may answer besides its own statuses: 400 (no `currentPassword`), 403, 413, 415, 429. */
const PROVED = [400, 401, 403, 413, 415, 429] as const

export const securityRoutes: FastifyPluginAsyncTypebox<SecurityRoutesOptions> = async (parent, options) => {
  const app = parent.withTypeProvider<TypeBoxTypeProvider>()
  const { factors } = app
  const recent = async (request: FastifyRequest): Promise<void> => { await factors.requireRecentSignIn(request.sessionId!) }
  const requireProof = stepUp({ authBudget: options.authBudget, checkCurrentPassword: app.users.checkCurrentPassword })
  // A factor is added only to an account whose address is proven its owner's: else whoever
  // registered someone else's address could keep a way in after the owner takes it back.
  const verified = async (request: FastifyRequest): Promise<void> => { if (request.currentUser!.emailVerifiedAt === null) throw new EmailNotVerified() }
  const write = { onRequest: app.authenticate, preHandler: recent }
  /** Adds a factor: a recent sign-in when required, a verified address, the current password. */
  const adds = { onRequest: app.authenticate, preHandler: [recent, verified, requireProof] }
  /** Replaces the recovery codes: a recent sign-in when required, the current password. */
  const proved = { onRequest: app.authenticate, preHandler: [recent, requireProof] }
  app.addHook('onRequest', async (_request, reply) => { reply.header('cache-control', 'no-store') })

  app.get('', {
    onRequest: app.authenticate,
    schema: {
      operationId: 'getSecurity',
      tags: ['security'],
      summary: 'Your second factors, passkeys and how this session was signed in',
      security: sessionAuth,
      response: { 200: json(Security), ...problems(401) }
    }
  }, async (request) => await factors.overview(request.currentUser!.id, request.sessionId!))

  app.post('/totp', {
    ...adds,
    schema: {
      operationId: 'startTotp',
      tags: ['security'],
      summary: 'Start enrolling an authenticator app (TOTP): its secret, shown this once',
      description: 'TOTP is not on until `POST /api/security/totp/confirm` gets a first valid code; starting again replaces a pending secret. TOTP on already: 409 `TOTP_ENABLED`. ' +
        'Needs `currentPassword` (missing: 400 `BAD_REQUEST`; wrong: 403 `WRONG_PASSWORD`, counted with the account\'s wrong passwords, 429 past `LOGIN_FAILURES_MAX`) and a verified address (403 `EMAIL_NOT_VERIFIED`).',
      security: sessionAuth,
      body: ProofBody,
      response: { 200: json(TotpEnrolment), ...problems(...PROVED, 409) }
    }
  }, async (request) => await factors.startTotp(request.currentUser!))

  app.post('/totp/confirm', {
    ...adds,
    schema: {
      operationId: 'confirmTotp',
      tags: ['security'],
      summary: 'Turn TOTP on with a first code; answers the ten recovery codes, shown this once',
      description: 'A wrong code: 400 `TOTP_CODE_INVALID`; nothing pending: 409 `TOTP_NOT_PENDING`. From then on, login asks for a second step, and the account\'s address is told. ' +
        'Needs `currentPassword` and a verified address, as `POST /api/security/totp`.',
      security: sessionAuth,
      body: ConfirmTotpBody,
      response: { 200: json(RecoveryCodes), ...problems(...PROVED, 409) }
    }
  }, async (request) => await factors.confirmTotp(request.currentUser!, request.body.code))

  app.post('/totp/disable', {
    ...write,
    schema: {
      operationId: 'disableTotp',
      tags: ['security'],
      summary: 'Turn TOTP off (and drop the recovery codes), with your password or a current code',
      description: 'A wrong password: 403 `WRONG_PASSWORD`; a wrong code: 400 `TOTP_CODE_INVALID`; both count with the account\'s wrong passwords (429 past `LOGIN_FAILURES_MAX`). The account\'s address is told.',
      security: sessionAuth,
      body: DisableTotpBody,
      response: { 204: empty('TOTP is off'), ...problems(400, 401, 403, 409, 413, 415) }
    }
  }, async (request, reply) => {
    await factors.disableTotp(request.currentUser!, request.body, reply)
    return await reply.code(204).send(null)
  })

  app.post('/recovery-codes', {
    ...proved,
    schema: {
      operationId: 'regenerateRecoveryCodes',
      tags: ['security'],
      summary: 'Replace your recovery codes with ten new ones, shown this once',
      description: 'The old codes stop working; the account\'s address is told. TOTP off: 409 `TOTP_NOT_ENABLED`. ' +
        'Needs `currentPassword` (missing: 400 `BAD_REQUEST`; wrong: 403 `WRONG_PASSWORD`, counted with the account\'s wrong passwords, 429 past `LOGIN_FAILURES_MAX`).',
      security: sessionAuth,
      body: ProofBody,
      response: { 200: json(RecoveryCodes), ...problems(...PROVED, 409) }
    }
  }, async (request) => await factors.regenerateRecoveryCodes(request.currentUser!))

  app.post('/passkey-options', {
    ...adds,
    schema: {
      operationId: 'passkeyRegistrationOptions',
      tags: ['security'],
      summary: 'The WebAuthn options to register a new passkey (discoverable, user verification required)',
      description: `Needs \`currentPassword\` (missing: 400 \`BAD_REQUEST\`; wrong: 403 \`WRONG_PASSWORD\`, counted with the account's wrong passwords, 429 past \`LOGIN_FAILURES_MAX\`) and a verified address (403 \`EMAIL_NOT_VERIFIED\`). A user holds at most ${PASSKEYS_MAX_PER_USER} passkeys: past it, 409 \`PASSKEY_QUOTA_EXCEEDED\` until one is deleted. ${CHALLENGE_LIMITS}`,
      security: sessionAuth,
      body: ProofBody,
      response: { 200: json(CreationOptions), ...problems(...PROVED, 409) }
    }
  }, async (request, reply) => await factors.registrationOptions(request.currentUser!, reply))

  app.post('/passkeys', {
    ...adds,
    schema: {
      operationId: 'registerPasskey',
      tags: ['security'],
      summary: 'Register a passkey: the answer of navigator.credentials.create() to the options',
      description: 'Refused (challenge unknown, used, expired or another user\'s; wrong origin or RP id; made in a cross-origin frame; no user verification; ' +
        `a credential id over ${CREDENTIAL_ID_MAX_BYTES} bytes, or other than the response's \`id\`, in the authenticator data; a public key over ${PUBLIC_KEY_MAX_BYTES} bytes): ` +
        '400 `PASSKEY_NOT_REGISTERED` with the reason. A credential registered already: 409 `CONFLICT`; ' +
        `${PASSKEYS_MAX_PER_USER} passkeys held already: 409 \`PASSKEY_QUOTA_EXCEEDED\`. The answer's \`id\` (a UUID) names the passkey in this API; the credential id stays the authenticator's. ` +
        'Needs `currentPassword` and a verified address, as the options do. The account\'s address is told of the new passkey.',
      security: sessionAuth,
      body: RegisterPasskeyBody,
      response: { 201: json(Passkey), ...problems(...PROVED, 409) }
    }
  }, async (request, reply) => {
    const passkey = await factors.register(request.currentUser!, request.body.response, request.body.name)
    return await reply.code(201).send(passkey)
  })

  app.patch('/passkeys/:id', {
    ...write,
    schema: {
      operationId: 'renamePasskey',
      tags: ['security'],
      summary: 'Rename one of your passkeys (by the `id` GET /api/security lists)',
      security: sessionAuth,
      params: PasskeyParams,
      body: RenamePasskeyBody,
      response: { 200: json(Passkey), ...problems(400, 401, 403, 404, 413, 415) }
    }
  }, async (request) => await factors.renamePasskey(request.currentUser!.id, request.params.id, request.body.name))

  app.delete('/passkeys/:id', {
    ...write,
    schema: {
      operationId: 'deletePasskey',
      tags: ['security'],
      summary: 'Delete one of your passkeys (by the `id` GET /api/security lists): it signs in no more',
      security: sessionAuth,
      params: PasskeyParams,
      response: { 204: empty('deleted'), ...problems(400, 401, 403, 404) }
    }
  }, async (request, reply) => {
    await factors.deletePasskey(request.currentUser!.id, request.params.id)
    return await reply.code(204).send(null)
  })
}
