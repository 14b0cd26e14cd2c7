/**
 * /api/admin: user and product administration, guarded by key-auth with the keys of
 * ADMIN_API_KEYS (docs/keyauth.md). JWTs play no part here,
 * and the key-auth hook is encapsulated in this plugin: no other route is affected.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { parseApiKeys } from '../../lib/api-keys.js'
import { NotFound } from '../../lib/problem.js'
import { BODY, empty, json, problems } from '../../lib/responses.js'
import { IdParams, Page, PageQuery } from '../../lib/schemas.js'
import keyAuth from '@user-product-service/key-auth'
import { User } from '../users/index.js'
import { ADMIN_KEY, adminApiKey, adminKeyAuthOptions, type KeyFailureLimit } from './api-keys.js'

export interface AdminRoutesOptions {
  /** ADMIN_API_KEYS: comma-separated keys; empty refuses every request. */
  adminApiKeys: string
  /** Wrong keys per client and window before 429, and where they are counted. */
  keyFailures: KeyFailureLimit
}

/** Users leave through the public `User` schema, never with a password hash. */
const UserPage = Page(User)
const deleted = empty('deleted')

export const adminRoutes: FastifyPluginAsyncTypebox<AdminRoutesOptions> = async (app, options) => {
  // Once, here: /metrics shares the keys (src/modules/metrics/routes.ts) and says nothing of them.
  if (parseApiKeys(options.adminApiKeys).length === 0) app.log.warn('ADMIN_API_KEYS is empty: the admin routes and /metrics refuse every request')
  await app.register(keyAuth, adminKeyAuthOptions(options.adminApiKeys, options.keyFailures))
  const { users, products } = app

  app.get('/users', {
    schema: {
      operationId: 'adminListUsers',
      tags: ['admin'],
      summary: 'List users, oldest first, a page at a time',
      security: adminApiKey,
      querystring: PageQuery,
      response: { 200: json(UserPage, { description: 'a page of users' }), ...problems(...ADMIN_KEY, 'VALIDATION_FAILED') }
    }
  }, async (request) => await users.page(request.query))

  app.delete('/users/:id', {
    schema: {
      operationId: 'adminDeleteUser',
      tags: ['admin'],
      summary: 'Delete a user and their products',
      security: adminApiKey,
      params: IdParams,
      response: { 204: deleted, ...problems(...BODY, ...ADMIN_KEY, 'VALIDATION_FAILED', 'NOT_FOUND') }
    }
  }, async (request, reply) => {
    await users.delete(request.params.id)
    return reply.code(204).send(null)
  })

  app.delete('/users/:id/factors', {
    schema: {
      operationId: 'adminResetFactors',
      tags: ['admin'],
      summary: 'Remove a user\'s second factors and passkeys (they lost them); logged',
      description: 'TOTP, recovery codes and passkeys all go: the next login asks for the password only. Each reset is logged at warn (`factors-reset`, with the user id, whether there was anything to remove and the client\'s address, beside the request id). ' +
        'Confirm who is asking before you do this: it is what an attacker who has the password wants. 404 when the user does not exist.',
      security: adminApiKey,
      params: IdParams,
      response: { 204: empty('the factors are removed'), ...problems(...BODY, ...ADMIN_KEY, 'VALIDATION_FAILED', 'NOT_FOUND') }
    }
  }, async (request, reply) => {
    const { id } = request.params
    if (await app.usersRepository.findCredentialsById(id) === null) throw new NotFound(`User ${id} does not exist`)
    const removed = await app.identity.factors.reset(id)
    request.log.warn({ event: 'factors-reset', userId: id, removed, client: request.ip }, 'factors reset')
    return reply.code(204).send(null)
  })

  app.delete('/products/:id', {
    schema: {
      operationId: 'adminDeleteProduct',
      tags: ['admin'],
      summary: 'Delete any product',
      security: adminApiKey,
      params: IdParams,
      response: { 204: deleted, ...problems(...BODY, ...ADMIN_KEY, 'VALIDATION_FAILED', 'NOT_FOUND') }
    }
  }, async (request, reply) => {
    await products.delete(request.params.id)
    return reply.code(204).send(null)
  })
}
