/**
 * The account routes served under /api/auth (registered there, with sign-in and sessions, by
 * src/modules/identity/routes.ts) and, for registration, under /api/user too: POST
 * /api/user and POST /api/auth/register are the same operation under two paths, so clients
 * written for either route set work. Each adds its routes to the scope it is given; the
 * bcrypt-costing and mail-sending ones spend the client's budget of auth requests
 * (`app.identity.authBudget`).
 */
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { BODY, empty, HEADERS, json, problems, SESSION_CHANGE, sessionAuth } from '../../lib/responses.js'
import { PasswordResetAccepted, PasswordResetBody, PasswordResetConfirmBody, RegisterBody, User, VerificationQueued, VerifyEmailBody } from './schemas.js'

export interface RegistrationRouteOptions {
  url: string
  /** The operation's id in the OpenAPI document (one per path). */
  operationId: string
  tag: string
  /** The operation's summary in the OpenAPI document. */
  summary: string
}

export function registrationRoute (app: FastifyInstance, options: RegistrationRouteOptions): void {
  app.withTypeProvider<TypeBoxTypeProvider>().post(options.url, {
    onRequest: app.identity.authBudget,
    schema: {
      operationId: options.operationId,
      tags: [options.tag],
      summary: options.summary,
      body: RegisterBody,
      response: { 201: json(User), ...problems(...BODY, 'VALIDATION_FAILED', 'BAD_REQUEST', 'PASSWORD_TOO_COMMON', 'CONFLICT', 'RATE_LIMITED') }
    }
  }, async (request, reply) => {
    return reply.code(201).send(await app.users.register(request.body))
  })
}

/** POST /password-reset and /password-reset/confirm: the recovery of a forgotten password. */
export function passwordResetRoutes (parent: FastifyInstance): void {
  const app = parent.withTypeProvider<TypeBoxTypeProvider>()
  /** The requests whose reset e-mail was queued, and their address. */
  const queued = new WeakMap<FastifyRequest, string>()
  app.post('/password-reset', {
    onRequest: app.identity.authBudget,
    // The account's activity is looked up once the answer is out: it takes the same time
    // whether or not the address has an account.
    onResponse: async (request) => {
      const email = queued.get(request)
      if (email === undefined) return
      const account = await app.usersRepository.findByEmail(email).catch((error: unknown) => {
        request.log.error({ err: error }, 'security activity: the account of a reset request could not be read')
        return null
      })
      if (account !== null) await app.identity.recordActivity(request, account.id, 'password-reset-requested')
    },
    schema: {
      operationId: 'requestPasswordReset',
      tags: ['auth'],
      summary: 'E-mail a link to reset the password of the account with this address',
      description: 'Always 202 with the same body, whether or not an account has the address, in the same time either way: the e-mail is sent afterwards, through the outbox. ' +
        'The link (`<PUBLIC_URL>/reset-password#token=...`) works once, for `PASSWORD_RESET_TTL` (30 min by default). ' +
        'At most 3 e-mails per address per hour (further requests are answered the same and send nothing); the client\'s budget of auth requests applies (429).',
      body: PasswordResetBody,
      response: { 202: json(PasswordResetAccepted), ...problems(...BODY, 'VALIDATION_FAILED', 'RATE_LIMITED') }
    }
  }, async (request, reply) => {
    if (await app.passwordReset.request(request.body.email, reply)) queued.set(request, request.body.email)
    return await reply.code(202).send({ detail: 'If an account has this address, a link to reset its password is on its way' })
  })

  app.post('/password-reset/confirm', {
    onRequest: app.identity.authBudget,
    schema: {
      operationId: 'confirmPasswordReset',
      tags: ['auth'],
      summary: 'Set a new password with the token of a reset link; ends every session of the user',
      description: 'The token is the part of the e-mailed link after `#token=`. The password follows registration\'s rules (one of the most common passwords: 400 `PASSWORD_TOO_COMMON`, checked before the token, which stays usable). ' +
        'Every session of the user ends (access and refresh tokens), and every other reset link of theirs stops working. ' +
        'An unknown, used or expired token: 400 `RESET_TOKEN_INVALID`. Of two confirmations with one token, one succeeds.',
      body: PasswordResetConfirmBody,
      response: { 204: empty('the password is set; log in with it', HEADERS.noStore), ...problems(...BODY, 'VALIDATION_FAILED', 'BAD_REQUEST', 'PASSWORD_TOO_COMMON', 'RESET_TOKEN_INVALID', 'RATE_LIMITED') }
    }
  }, async (request, reply) => {
    const userId = await app.passwordReset.confirm(request.body.token, request.body.password)
    await app.identity.recordActivity(request, userId, 'password-reset-completed')
    return await reply.code(204).header('cache-control', 'no-store').send(null)
  })
}

/** POST /verify-email: following a verification link (no session needed). */
export function verifyEmailRoute (parent: FastifyInstance): void {
  parent.withTypeProvider<TypeBoxTypeProvider>().post('/verify-email', {
    onRequest: parent.identity.authBudget,
    schema: {
      operationId: 'verifyEmail',
      tags: ['auth'],
      summary: 'Verify an e-mail address with the token of its verification link',
      description: 'The token is the part of the e-mailed link after `#token=`; no login is needed (the link may be opened on another device). ' +
        'Sets the user\'s `emailVerifiedAt`; a link sent to the `pendingEmail` of a change makes it the user\'s `email`, verified. ' +
        'An unknown, used or expired token, or one sent to an address the user has since left or no longer asks for: 400 `VERIFICATION_TOKEN_INVALID`. ' +
        'The pending address taken by another account meanwhile: 409 `CONFLICT`, nothing changed.',
      body: VerifyEmailBody,
      response: { 204: empty('the address is verified'), ...problems(...BODY, 'VALIDATION_FAILED', 'VERIFICATION_TOKEN_INVALID', 'CONFLICT', 'RATE_LIMITED') }
    }
  }, async (request, reply) => {
    const changed = await parent.emailVerification.verify(request.body.token)
    if (changed !== null) await parent.identity.recordActivity(request, changed.userId, 'email-changed', changed.email)
    return await reply.code(204).send(null)
  })
}

/** POST /verify-email/resend, in a signed-in scope (its hook has set `request.currentUser`). */
export function resendVerificationRoute (parent: FastifyInstance): void {
  parent.withTypeProvider<TypeBoxTypeProvider>().post('/verify-email/resend', {
    schema: {
      operationId: 'resendVerificationEmail',
      tags: ['auth'],
      summary: 'E-mail the verification link of your address again',
      description: 'Authenticated; no body. The link goes to the `pendingEmail` of a change when there is one, else to `email`; nothing is sent when that is verified already. At most 3 per user per hour: 429 with `Retry-After` past it.',
      security: sessionAuth,
      response: { 202: json(VerificationQueued), ...problems(...BODY, ...SESSION_CHANGE, 'RATE_LIMITED') }
    }
  }, async (request, reply) => {
    const user = request.currentUser!
    const email = user.pendingEmail ?? user.email
    await parent.emailVerification.resend(user.id, email, reply)
    return await reply.code(202).send({ detail: `A verification link is on its way to ${email}, unless it is verified already` })
  })
}
