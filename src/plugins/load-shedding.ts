/**
 * Load shedding: requests are refused at once with a 503 in problem details (code
 * `OVERLOADED`) and `Retry-After`, before their body is read, so the requests already
 * accepted keep a bounded latency (docs/operations.md), while
 * - the event loop lags: the mean delay of the last sample past `maxEventLoopDelayMs`
 *   (@fastify/under-pressure), or
 * - `maxDbWaiting` queries already wait for a connection of the database pool.
 * `/health/ready` is shed like any route (a balancer then sends traffic elsewhere);
 * a route with `config: { loadShedding: false }` (`/health/live`, `/metrics`) never is.
 */
import underPressure, { type FastifyUnderPressureOptions } from '@fastify/under-pressure'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { sqlPool } from '../db/client.js'
import { PROBLEM_CONTENT_TYPE, problemBody, type ProblemBody } from '../lib/problem.js'

declare module 'fastify' {
  interface FastifyContextConfig {
    /** `false`: this route is served even while the service sheds load. */
    loadShedding?: boolean
  }
}

interface LoadSheddingOptions {
  /** Shed while the mean event loop delay exceeds this (ms); 0 disables the shedding. */
  maxEventLoopDelayMs: number
  /** How often the delay is sampled (ms): the time to start and to stop shedding. */
  sampleIntervalMs: number
  /** Shed while this many queries wait for a database connection; 0 never. */
  maxDbWaiting: number
  /** `Retry-After` of the 503, in seconds. */
  retryAfterSeconds: number
}

async function loadShedding (app: FastifyInstance, options: LoadSheddingOptions): Promise<void> {
  const retryAfter = String(options.retryAfterSeconds)
  /** Counts the request and prepares its 503; the body to send. */
  function overloaded (request: FastifyRequest, reply: FastifyReply, why: string): ProblemBody {
    app.metrics.loadShed(request)
    const path = request.url.split('?')[0] ?? request.url
    reply.code(503).type(PROBLEM_CONTENT_TYPE).header('retry-after', retryAfter)
    return problemBody(503, 'OVERLOADED', `The service is overloaded (${why}); retry in ${retryAfter} s`, path, request.id)
  }

  if (options.maxDbWaiting > 0) {
    // Requests queued for a database connection: past the bound, a new request would only
    // wait longer than those already queued, so it is refused at once instead.
    const pool = sqlPool(app.prisma)
    const max = options.maxDbWaiting
    app.addHook('onRequest', (request, reply, done) => {
      if (pool.waitingCount < max || request.routeOptions.config.loadShedding === false) return done()
      reply.send(overloaded(request, reply, `${pool.waitingCount} requests waiting for a database connection`))
    })
  }

  if (options.maxEventLoopDelayMs > 0) {
    await app.register(underPressure, {
      maxEventLoopDelay: options.maxEventLoopDelayMs,
      sampleInterval: options.sampleIntervalMs,
      // A value returned is sent as the reply (the plugin's types say void, its code sends it).
      pressureHandler: ((request: FastifyRequest, reply: FastifyReply, _type: string, value: number | undefined) => {
        if (request.routeOptions.config.loadShedding === false) return undefined // served
        // Infinity when the loop was blocked for the whole sample (no tick was measured).
        const delay = typeof value === 'number' && Number.isFinite(value) ? String(Math.round(value)) : `over ${options.maxEventLoopDelayMs}`
        return overloaded(request, reply, `event loop delay ${delay} ms`)
      }) as FastifyUnderPressureOptions['pressureHandler']
    })
  }
}

export default fp(loadShedding, { name: 'load-shedding', fastify: '5.x', dependencies: ['metrics', 'prisma'] })
