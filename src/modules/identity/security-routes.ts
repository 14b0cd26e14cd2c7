/**
 * /api/security: the second factors and passkeys of the signed-in user. The subtree's one
 * `onRequest` hook is `app.authenticate`. The writes may need a recent sign-in
 * (RECENT_SIGN_IN_MAX_AGE), and those that add or replace a factor need the current password
 * (`requireProof`, sign-in.ts) and, to add one, a verified address.
 */
import type { FastifyPluginAsyncTypebox, TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyRequest } from 'fastify'
import { deprecatedAlias } from '../../lib/deprecation.js'
import { BadRequest } from '../../lib/problem.js'
import { BODY, empty, json, problems, SESSION, SESSION_CHANGE, sessionAuth } from '../../lib/responses.js'
import { CHALLENGE_LIMITS, CREDENTIAL_ID_MAX_BYTES, PASSKEYS_MAX_PER_USER, PUBLIC_KEY_MAX_BYTES } from './factors.js'
import { ConfirmTotpBody, CreationOptions, DisableTotpBody, Passkey, PasskeyParams, ProofBody, RecoveryCodes, RegisterPasskeyBody, RenamePasskeyBody, Security, TotpEnrolment } from './schemas.js'
import { ACTIVITY_OF, sessionRoutes } from './session-routes.js'
import { EmailNotVerified } from './sign-in.js'

/** What a change that needs the current password may answer besides its own codes: a missing, wrong or too often wrong one, a sign-in not recent enough. */
const PROVED = [...BODY, ...SESSION_CHANGE, 'VALIDATION_FAILED', 'BAD_REQUEST', 'WRONG_PASSWORD', 'RATE_LIMITED', 'RECENT_SIGN_IN_REQUIRED'] as const

export const securityRoutes: FastifyPluginAsyncTypebox = async (parent) => {
  const app = parent.withTypeProvider<TypeBoxTypeProvider>()
  const { factors, requireProof } = app.identity
  const recent = async (request: FastifyRequest): Promise<void> => { await factors.requireRecentSignIn(request.sessionId!) }
  // A factor is added only to an account whose address is proven its owner's: else whoever
  // registered someone else's address could keep a way in after the owner takes it back.
  const verified = async (request: FastifyRequest): Promise<void> => { if (request.currentUser!.emailVerifiedAt === null) throw new EmailNotVerified() }
  const write = { preHandler: recent }
  /** Adds a factor: a recent sign-in when required, a verified address, the current password. */
  const adds = { preHandler: [recent, verified, requireProof] }
  /** Replaces the recovery codes: a recent sign-in when required, the current password. */
  const proved = { preHandler: [recent, requireProof] }
  app.addHook('onRequest', async (_request, reply) => { reply.header('cache-control', 'no-store') })
  app.addHook('onRequest', app.authenticate)
  // A change that went through is an event of the account's activity (activity.ts).
  app.addHook('onSend', async (request, reply) => {
    const kind = ACTIVITY_OF[String(request.routeOptions.schema?.operationId).replace(/Deprecated$/, '')]
    if (kind === undefined || reply.statusCode >= 300) return
    await app.identity.recordActivity(request, request.currentUser!.id, kind)
  })

  app.get('', {
    schema: {
      operationId: 'getSecurity',
      tags: ['security'],
      summary: 'Your second factors, passkeys and how this session was signed in',
      security: sessionAuth,
      response: { 200: json(Security), ...problems(...SESSION) }
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
      response: { 200: json(TotpEnrolment), ...problems(...PROVED, 'EMAIL_NOT_VERIFIED', 'TOTP_ENABLED') }
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
      response: { 200: json(RecoveryCodes), ...problems(...PROVED, 'EMAIL_NOT_VERIFIED', 'TOTP_NOT_PENDING', 'TOTP_CODE_INVALID') }
    }
  }, async (request) => await factors.confirmTotp(request.currentUser!, request.body.code))

  app.post('/totp/disable', {
    ...write,
    schema: {
      operationId: 'disableTotp',
      tags: ['security'],
      summary: 'Turn TOTP off (and drop the recovery codes), with your current password or a current code',
      description: 'A wrong password: 403 `WRONG_PASSWORD`; a wrong code: 400 `TOTP_CODE_INVALID`; both count with the account\'s wrong passwords (429 past `LOGIN_FAILURES_MAX`). The account\'s address is told.',
      security: sessionAuth,
      body: DisableTotpBody,
      response: { 204: empty('TOTP is off'), ...problems(...BODY, ...SESSION_CHANGE, 'VALIDATION_FAILED', 'BAD_REQUEST', 'WRONG_PASSWORD', 'TOTP_CODE_INVALID', 'TOTP_NOT_ENABLED', 'RATE_LIMITED', 'RECENT_SIGN_IN_REQUIRED') }
    }
  }, async (request, reply) => {
    const { currentPassword, password, code } = request.body
    if (currentPassword !== undefined && password !== undefined) throw new BadRequest('Send `currentPassword` alone: `password` is its former name')
    await factors.disableTotp(request.currentUser!, { password: currentPassword ?? password, code }, reply)
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
      response: { 200: json(RecoveryCodes), ...problems(...PROVED, 'TOTP_NOT_ENABLED') }
    }
  }, async (request) => await factors.regenerateRecoveryCodes(request.currentUser!))

  deprecatedAlias(app, '/passkey-options').post('/passkey/options', {
    ...adds,
    schema: {
      operationId: 'passkeyRegistrationOptions',
      tags: ['security'],
      summary: 'The WebAuthn options to register a new passkey (discoverable, user verification required)',
      description: `Needs \`currentPassword\` (missing: 400 \`BAD_REQUEST\`; wrong: 403 \`WRONG_PASSWORD\`, counted with the account's wrong passwords, 429 past \`LOGIN_FAILURES_MAX\`) and a verified address (403 \`EMAIL_NOT_VERIFIED\`). A user holds at most ${PASSKEYS_MAX_PER_USER} passkeys: past it, 409 \`PASSKEY_QUOTA_EXCEEDED\` until one is deleted. ${CHALLENGE_LIMITS}`,
      security: sessionAuth,
      body: ProofBody,
      response: { 200: json(CreationOptions), ...problems(...PROVED, 'EMAIL_NOT_VERIFIED', 'PASSKEY_QUOTA_EXCEEDED') }
    }
  }, async (request, reply) => await factors.registrationOptions(request.currentUser!, reply))

  app.post('/passkeys', {
    ...adds,
    schema: {
      operationId: 'registerPasskey',
      tags: ['security'],
      summary: 'Register a passkey: `{response, name?, currentPassword}`, `response` being the credential navigator.credentials.create() made from the options, as JSON',
      description: 'The body is an object: `response` is the new credential as `PublicKeyCredential.toJSON()` gives it (what @simplewebauthn/browser\'s `startRegistration` answers), not the `PublicKeyCredential` object itself; `name` tells your passkeys apart. ' +
        'Refused (challenge unknown, used, expired or another user\'s; wrong origin or RP id; made in a cross-origin frame; no user verification; ' +
        `a credential id over ${CREDENTIAL_ID_MAX_BYTES} bytes, or other than the response's \`id\`, in the authenticator data; a public key over ${PUBLIC_KEY_MAX_BYTES} bytes): ` +
        '400 `PASSKEY_NOT_REGISTERED` with the reason. A credential registered already: 409 `CONFLICT`; ' +
        `${PASSKEYS_MAX_PER_USER} passkeys held already: 409 \`PASSKEY_QUOTA_EXCEEDED\`. The answer's \`id\` (a UUID) names the passkey in this API; the credential id stays the authenticator's. ` +
        'Needs `currentPassword` and a verified address, as the options do. The account\'s address is told of the new passkey.',
      security: sessionAuth,
      body: RegisterPasskeyBody,
      response: { 201: json(Passkey), ...problems(...PROVED, 'EMAIL_NOT_VERIFIED', 'PASSKEY_NOT_REGISTERED', 'CONFLICT', 'PASSKEY_QUOTA_EXCEEDED') }
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
      response: { 200: json(Passkey), ...problems(...BODY, ...SESSION_CHANGE, 'VALIDATION_FAILED', 'RECENT_SIGN_IN_REQUIRED', 'NOT_FOUND') }
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
      response: { 204: empty('deleted'), ...problems(...BODY, ...SESSION_CHANGE, 'VALIDATION_FAILED', 'RECENT_SIGN_IN_REQUIRED', 'NOT_FOUND') }
    }
  }, async (request, reply) => {
    await factors.deletePasskey(request.currentUser!.id, request.params.id)
    return await reply.code(204).send(null)
  })

  await app.register(sessionRoutes)
}
