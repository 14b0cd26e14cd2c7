/**
 * Liveness (the process answers) and readiness (the database answers and its schema is
 * current: every migration of prisma/migrations is applied). Both answer at once; a
 * database that is down or hangs makes `/ready` a 503 within READY_TIMEOUT_MS, logged as a
 * warning. Once the server drains for a stop
 * (src/plugins/draining.ts), `/ready` is a 503 at once while other routes are still served.
 *
 * With REDIS_URL, `/ready` also reports Redis (`redis: ok | unavailable`) but stays 200
 * while only Redis is down: reads still work then (the limits fail closed, answering 503 on
 * login, registration and admin keys), and a proxy that took every replica out of its pool
 * because the one shared Redis is down would turn that into a full outage
 * (docs/operations.md, "Redis").
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { expectedMigrations } from '../../db/pending.js'
import { pendingOnPool } from '../../db/readiness.js'
import { ServiceUnavailable } from '../../lib/problem.js'
import { problemsExactly } from '../../lib/responses.js'
import { redisAnswers } from '../../plugins/redis.js'

const Status = Type.Object({ status: Type.Literal('ok') }, { examples: [{ status: 'ok' }] })
const Readiness = Type.Object({
  status: Type.Literal('ok'),
  redis: Type.Optional(Type.Union([Type.Literal('ok'), Type.Literal('unavailable')], { description: 'only with REDIS_URL: whether Redis answered a PING in time' }))
}, { examples: [{ status: 'ok' }] })

/**
 * `/ready` answers 503 when the database has not answered within this time (ms): longer than a
 * healthy database ever takes, shorter than the probes of a proxy or an orchestrator wait.
 */
export const READY_TIMEOUT_MS = 1500

export interface HealthRoutesOptions {
  /** READY_TIMEOUT_MS unless a test sets it. */
  readyTimeoutMs?: number
}

export const healthRoutes: FastifyPluginAsyncTypebox<HealthRoutesOptions> = async (app, options) => {
  const expected = await expectedMigrations()
  const timeoutMs = options.readyTimeoutMs ?? READY_TIMEOUT_MS

  /**
   * The pending migrations (src/db/pending.ts), or a 503 once `timeoutMs` has passed:
   * waiting for a pool connection and the query together, so a frozen database cannot hold
   * the probe (the query's own client-side timeout drops its connection).
   */
  async function pending (): Promise<string[]> {
    const probe = pendingOnPool(app.prisma, expected, timeoutMs)
    probe.catch(() => {}) // settled after the race is lost: nothing more to do with it
    let timer: NodeJS.Timeout | undefined
    const late = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(new ServiceUnavailable(`The database did not answer within ${timeoutMs} ms`)), timeoutMs)
    })
    try {
      return await Promise.race([probe, late])
    } catch (error) {
      if ((error as { code?: string }).code === 'SERVICE_UNAVAILABLE') throw error
      throw new ServiceUnavailable('The database is unavailable')
    } finally {
      clearTimeout(timer)
    }
  }

  app.get('/live', {
    config: { rateLimit: false, loadShedding: false },
    schema: { operationId: 'healthLive', tags: ['health'], summary: 'The process is up', response: { 200: Status, ...problemsExactly('UNSUPPORTED_MEDIA_TYPE') } }
  }, async () => ({ status: 'ok' as const }))

  app.get('/ready', {
    config: { rateLimit: false },
    schema: { operationId: 'healthReady', tags: ['health'], summary: 'The database answers and its migrations are applied', response: { 200: Readiness, ...problemsExactly('TOO_MANY_IN_PROGRESS', 'UNSUPPORTED_MEDIA_TYPE', 'OVERLOADED', 'SERVICE_UNAVAILABLE') } }
  }, async (request) => {
    if (app.draining.active) throw new ServiceUnavailable('The service is shutting down')
    const redis = app.redis === null ? undefined : redisAnswers(app.redis, timeoutMs)
    const names = await pending()
    if (names.length > 0) {
      throw new ServiceUnavailable(`The database schema is not up to date: ${names.length} migration(s) pending`)
    }
    if (redis === undefined) return { status: 'ok' as const }
    const redisUp = await redis
    if (!redisUp) request.log.warn('readiness: Redis did not answer; the limits answer 503 until it does')
    return { status: 'ok' as const, redis: redisUp ? 'ok' as const : 'unavailable' as const }
  })
}
