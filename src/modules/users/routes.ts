/**
 * /api/user: registration and the user's own record. A user reads, changes and
 * deletes only their own record: another id answers 403, whether or not it exists. The
 * routes of the own record are a signed-in subtree: `app.authenticate` is its one hook.
 * Passwords are checked, and sessions started and ended, by identity (`app.identity`).
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyRequest } from 'fastify'
import createError from '@fastify/error'
import { budget, type AttemptStore } from '../../lib/attempts.js'
import { BadRequest, Forbidden } from '../../lib/problem.js'
import { BODY, empty, HEADERS, json, problems, SESSION, SESSION_CHANGE, sessionAuth } from '../../lib/responses.js'
import { IdParams } from '../../lib/schemas.js'
import { registrationRoute } from './account-routes.js'
import { DeleteUserBody, UpdatedUser, UpdateUserBody, User, type PublicUser } from './schemas.js'

export interface UserRoutesOptions {
  /** Where changes of one's own record are counted; `max` and `timeWindow` are ACCOUNT_CHANGES unless a test sets them. */
  accountChanges: { max?: number, timeWindow?: number, store?: AttemptStore }
}

/**
 * Changes of one's own record (PATCH, DELETE) per user and window: a person edits a profile
 * a few times, while a stolen token probing taken usernames through 409 answers gets ten
 * guesses per quarter of an hour (docs/reliability.md, "Brute force").
 */
export const ACCOUNT_CHANGES = { max: 10, timeWindow: 15 * 60_000 }

const TooManyAccountChanges = createError('RATE_LIMITED', 'Too many changes to this account; retry in %d s', 429)

/** The authenticated user, when `id` is theirs. */
function ownRecord (request: FastifyRequest, id: number): PublicUser {
  const user = request.currentUser
  if (user === null || user.id !== id) throw new Forbidden('You can only access your own user record')
  return user
}

export const userRoutes: FastifyPluginAsyncTypebox<UserRoutesOptions> = async (app, options) => {
  registrationRoute(app, { url: '', operationId: 'createUser', tag: 'users', summary: 'Register a user' })
  await app.register(ownRecordRoutes, { accountChanges: options.accountChanges })
}

const ownRecordRoutes: FastifyPluginAsyncTypebox<UserRoutesOptions> = async (app, options) => {
  const { users, identity } = app
  const changes = budget({ ...ACCOUNT_CHANGES, ...options.accountChanges, refusal: (seconds) => new TooManyAccountChanges(seconds) })
  app.addHook('onRequest', app.authenticate)

  app.get('/:id', {
    schema: {
      operationId: 'getUser',
      tags: ['users'],
      summary: 'Fetch your own user record',
      security: sessionAuth,
      params: IdParams,
      response: { 200: json(User), ...problems(...SESSION, 'VALIDATION_FAILED', 'FORBIDDEN') }
    }
  }, async (request) => {
    // `authenticate` has just loaded this record: no second query.
    return ownRecord(request, request.params.id)
  })

  app.patch('/:id', {
    schema: {
      operationId: 'updateUser',
      tags: ['users'],
      summary: 'Change your username, e-mail and/or password',
      description: 'A new `email` does not change `email` yet: the answer has it in `pendingEmail`, a verification link goes to it and a notice to the current address; ' +
        'following the link (`POST /api/auth/verify-email`) makes the change. An address another account has: 409 `CONFLICT`. The current address (in any case), or a new password, cancels a pending change. ' +
        'A new address or a new password needs `currentPassword` (missing: 400 `BAD_REQUEST`; wrong: 403 `WRONG_PASSWORD`, counted with the account\'s wrong passwords). A new password ends every session, this one included, and starts a new one ' +
        '(new tokens in the body, or new cookies when this request was authenticated by cookie). ' +
        'Limited per user (10 changes per 15 min) and, when a password is sent, per client (`RATE_LIMIT_AUTH_MAX`) and per account (`LOGIN_FAILURES_MAX`): 429.',
      security: sessionAuth,
      params: IdParams,
      body: UpdateUserBody,
      response: { 200: json(UpdatedUser, { headers: { 'Set-Cookie': HEADERS.setCookie['Set-Cookie'], 'Cache-Control': HEADERS.noStore['Cache-Control'] } }), ...problems(...BODY, ...SESSION_CHANGE, 'VALIDATION_FAILED', 'BAD_REQUEST', 'PASSWORD_TOO_COMMON', 'FORBIDDEN', 'WRONG_PASSWORD', 'RECENT_SIGN_IN_REQUIRED', 'NOT_FOUND', 'CONFLICT', 'RATE_LIMITED') }
    }
  }, async (request, reply) => {
    const own = ownRecord(request, request.params.id)
    const { id } = own
    users.validateUpdate(request.body)
    if (users.needsProof(own, request.body) && request.body.currentPassword === undefined) throw new BadRequest('Send `currentPassword`: a new e-mail address or password needs your current password')
    if (request.body.password !== undefined || request.body.email !== undefined) await identity.factors.requireRecentSignIn(request.sessionId!)
    await changes.spend(`user:${id}`, reply)
    // Whenever sent it is checked, with the one check every lasting change uses.
    if (request.body.currentPassword !== undefined) await identity.requireProof(request, reply)
    const { user, tokenVersion } = await users.update(id, request.body)
    if (tokenVersion === undefined) return { user }
    return { user, ...await identity.renew(request, reply, { id, tokenVersion }) }
  })

  app.delete('/:id', {
    schema: {
      operationId: 'deleteUser',
      tags: ['users'],
      summary: 'Delete your user record and your products',
      description: 'Needs your current password in the body, `{ "password": ... }` (a wrong one: 403 `WRONG_PASSWORD`). ' +
        'Limited per user (10 changes per 15 min), per client (`RATE_LIMIT_AUTH_MAX`) and per account (`LOGIN_FAILURES_MAX`): 429.',
      security: sessionAuth,
      params: IdParams,
      body: DeleteUserBody,
      response: { 204: empty('deleted', { ...HEADERS.clearCookie, ...HEADERS.noStore }), ...problems(...BODY, ...SESSION_CHANGE, 'VALIDATION_FAILED', 'FORBIDDEN', 'WRONG_PASSWORD', 'RECENT_SIGN_IN_REQUIRED', 'NOT_FOUND', 'RATE_LIMITED') }
    }
  }, async (request, reply) => {
    const { id } = ownRecord(request, request.params.id)
    await identity.factors.requireRecentSignIn(request.sessionId!)
    await changes.spend(`user:${id}`, reply)
    await identity.authBudget(request, reply)
    await identity.checkCurrentPassword(id, request.body.password, reply)
    await users.deleteOwn(id)
    // Its sessions went with it (foreign key cascade); a browser's cookies go too.
    identity.cookies.clear(reply)
    return reply.code(204).send(null)
  })
}
