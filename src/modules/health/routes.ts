/** Liveness (the process answers) and readiness (the database answers too). */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { ServiceUnavailable } from '../../lib/problem.js'
import { problems } from '../../lib/responses.js'

const Status = Type.Object({ status: Type.Literal('ok') })

export const healthRoutes: FastifyPluginAsyncTypebox = async (app) => {
  app.get('/live', {
    config: { rateLimit: false },
    schema: { tags: ['health'], summary: 'The process is up', response: { 200: Status } }
  }, async () => ({ status: 'ok' as const }))

  app.get('/ready', {
    config: { rateLimit: false },
    schema: { tags: ['health'], summary: 'The database answers', response: { 200: Status, ...problems(503) } }
  }, async () => {
    try {
      await app.prisma.$queryRaw`SELECT 1`
    } catch {
      throw new ServiceUnavailable('The database is unavailable')
    }
    return { status: 'ok' as const }
  })
}
