/**
 * POST /api/auth/register and POST /api/auth/login. Both are rate-limited per client;
 * login is also limited per account (failed logins per login name, account-limit.ts).
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { BadRequest } from '../../lib/problem.js'
import { problems } from '../../lib/responses.js'
import { registrationRoute } from '../users/registration.js'
import { usersService } from '../users/service.js'
import { accountLimiter, DEFAULT_ACCOUNT_LIMIT, type AccountLimitOptions } from './account-limit.js'
import { LoginBody, LoginResult } from './schemas.js'

export interface AuthRoutesOptions {
  rateLimit: { max: number, timeWindow: number }
  /** Failed logins per account and window (default 10 per 15 min). */
  accountLimit?: AccountLimitOptions
  expiresIn: string
}

export const authRoutes: FastifyPluginAsyncTypebox<AuthRoutesOptions> = async (app, options) => {
  const service = usersService(app)
  const rateLimit = options.rateLimit
  const accounts = accountLimiter(app, options.accountLimit ?? DEFAULT_ACCOUNT_LIMIT)

  registrationRoute(app, service, { url: '/register', tag: 'auth', variant: 'A', rateLimit })

  app.post('/login', {
    config: { rateLimit },
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
    await accounts.check(request, reply)
    try {
      const { token, userId } = await service.login(login, password)
      return { token, tokenType: 'Bearer' as const, expiresIn: options.expiresIn, userId }
    } catch (error) {
      if ((error as { statusCode?: number }).statusCode === 401) await accounts.recordFailure(request)
      throw error
    }
  })
}
