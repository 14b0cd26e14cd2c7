/** Decorates the app with the factors service (`app.factors`), built once (docs/architecture.md). */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { prepareSecurityNotice, SECURITY_NOTICE_KIND, SECURITY_NOTICE_WINDOW_MS, type SecurityNotice } from '../mail/index.js'
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
  app.mail.define(SECURITY_NOTICE_KIND, prepareSecurityNotice)
  app.decorate('factors', factorsService({
    ...rest,
    factors: app.factorsRepository,
    guesses,
    checkPassword: async (userId, password, reply) => { await app.users.checkCurrentPassword(userId, password, reply) },
    tokenVersion: async (userId) => (await app.usersRepository.findCredentialsById(userId))?.tokenVersion ?? null,
    notify: async (tx, account, event, name) => {
      const notice: SecurityNotice = { event, to: account.email, username: account.username, ...(name === undefined ? {} : { name }) }
      await app.mail.enqueue(SECURITY_NOTICE_KIND, notice, SECURITY_NOTICE_WINDOW_MS, tx)
    },
    wake: app.mail.wake
  }))
}, { name: 'factors', fastify: '5.x', dependencies: ['factors-repository', 'users-service', 'users-repository', 'mail-sender'] })
