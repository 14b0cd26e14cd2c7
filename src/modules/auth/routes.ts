/**
 * POST /api/auth/register and POST /api/auth/login. Both spend the client's one budget of
 * bcrypt-costing requests (budget.ts, shared with the user routes);
 * login is also limited per account (password guesses per account, account-limit.ts).
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { BadRequest } from '../../lib/problem.js'
import { problems } from '../../lib/responses.js'
import { registrationRoute } from '../users/registration.js'
import type { AuthBudget } from './budget.js'
import { LoginBody, LoginResult } from './schemas.js'

export interface AuthRoutesOptions {
  /** The per-client budget of bcrypt-costing requests (shared with the user routes). */
  authBudget: AuthBudget
  expiresIn: string
}

export const authRoutes: FastifyPluginAsyncTypebox<AuthRoutesOptions> = async (app, options) => {
  registrationRoute(app, { url: '/register', tag: 'auth', variant: 'A', authBudget: options.authBudget })

  app.post('/login', {
    onRequest: options.authBudget,
    schema: {
      tags: ['auth'],
      summary: 'Log in with username (or e-mail) and password; returns a JWT',
      body: LoginBody,
      response: { 200: LoginResult, ...problems(400, 401, 413, 415, 429) }
    }
  }, async (request, reply) => {
    const { username, identity, password } = request.body
    const login = username ?? identity
    if (login === undefined || (username !== undefined && identity !== undefined)) {
      throw new BadRequest('Send exactly one of `username` and `identity`')
    }
    const { token, userId } = await app.users.login(login, password, reply)
    return { token, tokenType: 'Bearer' as const, expiresIn: options.expiresIn, userId }
  })
}
