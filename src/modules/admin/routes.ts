/**
 * /api/admin: user and product administration, guarded by key-auth with the keys of
 * ADMIN_API_KEYS (docs/keyauth.md, "The service's admin routes"). JWTs play no part here,
 * and the key-auth hook is encapsulated in this plugin: no other route is affected.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { NotFound } from '../../lib/problem.js'
import { problems } from '../../lib/responses.js'
import { IdParams, Pagination } from '../../lib/schemas.js'
import keyAuth from '../../plugins/keyauth/index.js'
import { productsRepository } from '../products/repository.js'
import { usersRepository } from '../users/repository.js'
import { adminApiKey, adminKeyAuthOptions, type KeyFailureLimit } from './api-keys.js'
import { AdminUserPage } from './schemas.js'

export interface AdminRoutesOptions {
  /** ADMIN_API_KEYS: comma-separated keys; empty refuses every request. */
  apiKeys: string
  /** Wrong keys per client and window before 429 (ADMIN_KEY_FAILURES_*). */
  keyFailures: KeyFailureLimit
}

const deleted = { type: 'null', description: 'deleted' } as const

export const adminRoutes: FastifyPluginAsyncTypebox<AdminRoutesOptions> = async (app, options) => {
  await app.register(keyAuth, adminKeyAuthOptions(options.apiKeys, app.log, options.keyFailures))
  const users = usersRepository(app.prisma)
  const products = productsRepository(app.prisma)

  app.get('/users', {
    schema: {
      tags: ['admin'],
      summary: 'List users, oldest first, a page at a time',
      security: adminApiKey,
      querystring: Pagination,
      response: { 200: AdminUserPage, ...problems(400, 401, 429) }
    }
  }, async (request) => await users.page(request.query))

  app.delete('/users/:id', {
    schema: {
      tags: ['admin'],
      summary: 'Delete a user and their products',
      security: adminApiKey,
      params: IdParams,
      response: { 204: deleted, ...problems(400, 401, 404, 429) }
    }
  }, async (request, reply) => {
    const { id } = request.params
    if (!await users.delete(id)) throw new NotFound(`User ${id} does not exist`)
    return reply.code(204).send(null)
  })

  app.delete('/products/:id', {
    schema: {
      tags: ['admin'],
      summary: 'Delete any product',
      security: adminApiKey,
      params: IdParams,
      response: { 204: deleted, ...problems(400, 401, 404, 429) }
    }
  }, async (request, reply) => {
    const { id } = request.params
    if (!await products.delete(id)) throw new NotFound(`Product ${id} does not exist`)
    return reply.code(204).send(null)
  })
}
