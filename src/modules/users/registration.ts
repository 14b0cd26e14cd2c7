/**
 * The registration route, served twice: POST /api/user and POST /api/auth/register are the
 * same operation under two paths, so clients written for either route set work.
 */
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyInstance } from 'fastify'
import { json, problems } from '../../lib/responses.js'
import type { AuthBudget } from './budget.js'
import { RegisterBody, User } from './schemas.js'

export interface RegistrationRouteOptions {
  url: string
  /** The operation's id in the OpenAPI document (one per path). */
  operationId: string
  tag: string
  /** The operation's summary in the OpenAPI document. */
  summary: string
  /** The per-client budget of bcrypt-costing requests, shared with login and the other registration path. */
  authBudget: AuthBudget
}

export function registrationRoute (app: FastifyInstance, options: RegistrationRouteOptions): void {
  app.withTypeProvider<TypeBoxTypeProvider>().post(options.url, {
    onRequest: options.authBudget,
    schema: {
      operationId: options.operationId,
      tags: [options.tag],
      summary: options.summary,
      body: RegisterBody,
      response: { 201: json(User), ...problems(400, 409, 413, 415, 429) }
    }
  }, async (request, reply) => {
    return reply.code(201).send(await app.users.register(request.body))
  })
}
