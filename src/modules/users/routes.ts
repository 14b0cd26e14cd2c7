/**
 * /api/user: registration (Variant B) and the user's own record. A user reads, changes and
 * deletes only their own record: another id answers 403, whether or not it exists.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyRequest } from 'fastify'
import { Forbidden, NotFound } from '../../lib/problem.js'
import { bearerAuth, problems } from '../../lib/responses.js'
import { IdParams } from '../../lib/schemas.js'
import type { PublicUser } from './repository.js'
import { registrationRoute } from './registration.js'
import { UpdatedUser, UpdateUserBody, User } from './schemas.js'
import { usersService } from './service.js'

export interface UserRoutesOptions {
  rateLimit: { max: number, timeWindow: number }
}

/** The authenticated user, when `id` is theirs. */
function ownRecord (request: FastifyRequest, id: number): PublicUser {
  const user = request.currentUser
  if (user === null || user.id !== id) throw new Forbidden('You can only access your own user record')
  return user
}

export const userRoutes: FastifyPluginAsyncTypebox<UserRoutesOptions> = async (app, options) => {
  const service = usersService(app)

  registrationRoute(app, service, { url: '', tag: 'users', variant: 'B', rateLimit: options.rateLimit })

  app.get('/:id', {
    onRequest: app.authenticate,
    schema: {
      tags: ['users'],
      summary: 'Fetch your own user record',
      security: bearerAuth,
      params: IdParams,
      response: { 200: User, ...problems(400, 401, 403) }
    }
  }, async (request) => {
    // `authenticate` has just loaded this record: no second query.
    return ownRecord(request, request.params.id)
  })

  app.patch('/:id', {
    onRequest: app.authenticate,
    schema: {
      tags: ['users'],
      summary: 'Change your username, e-mail and/or password',
      description: 'A password change revokes every earlier token and returns a new one.',
      security: bearerAuth,
      params: IdParams,
      body: UpdateUserBody,
      response: { 200: UpdatedUser, ...problems(400, 401, 403, 404, 409, 413, 415) }
    }
  }, async (request) => {
    const { id } = ownRecord(request, request.params.id)
    return await service.update(id, request.body)
  })

  app.delete('/:id', {
    onRequest: app.authenticate,
    schema: {
      tags: ['users'],
      summary: 'Delete your user record and your products',
      security: bearerAuth,
      params: IdParams,
      response: { 204: { type: 'null', description: 'deleted' }, ...problems(400, 401, 403, 404) }
    }
  }, async (request, reply) => {
    const { id } = ownRecord(request, request.params.id)
    // False only when a concurrent request deleted the user first.
    if (!await service.users.delete(id)) throw new NotFound('The user no longer exists')
    return reply.code(204).send(null)
  })
}
