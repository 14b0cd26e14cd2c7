/** Decorates the app with the factors service (`app.factors`), built once (docs/architecture.md). */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { AccountLimiter } from '../users/index.js'
import { factorsService, type FactorsOptions, type FactorsService } from './service.js'

declare module 'fastify' {
  interface FastifyInstance {
    factors: FactorsService
  }
}

export interface FactorsPluginOptions extends FactorsOptions {
  /** The account's budget of guesses (login's). */
  guesses: AccountLimiter
}

export default fp(async function factorsPlugin (app: FastifyInstance, options: FactorsPluginOptions) {
  const { guesses, ...rest } = options
  app.decorate('factors', factorsService({
    ...rest,
    factors: app.factorsRepository,
    guesses,
    checkPassword: async (userId, password, reply) => { await app.users.checkCurrentPassword(userId, password, reply) },
    tokenVersion: async (userId) => (await app.usersRepository.findCredentialsById(userId))?.tokenVersion ?? null
  }))
}, { name: 'factors', fastify: '5.x', dependencies: ['factors-repository', 'users-service', 'users-repository'] })
