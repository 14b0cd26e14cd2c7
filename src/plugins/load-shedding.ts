/**
 * Load shedding: the conditions under which the admission in front of Fastify
 * (src/plugins/admission.ts) refuses requests with a 503 `OVERLOADED` and `Retry-After`, before
 * their body is read, so the requests already admitted keep a bounded latency
 * (docs/operations.md, "Load shedding"). Besides admission's own cap on requests in
 * progress (LOAD_SHED_MAX_IN_FLIGHT):
 * - the event loop lags: the mean delay of the last sample past `maxEventLoopDelayMs`
 *   (@fastify/under-pressure, which samples it);
 * - `maxDbWaiting` queries already wait for a connection of the database pool.
 * `/health/ready` is shed like any route (a balancer then sends traffic elsewhere);
 * a route with `config: { loadShedding: false }` (`/health/live`, `/metrics`) never is.
 *
 * Requests that do not pass through admission (`app.inject`) meet the event-loop condition
 * in under-pressure's own onRequest hook, with the same answer.
 */
import underPressure, { type FastifyUnderPressureOptions } from '@fastify/under-pressure'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { sqlPool } from '../db/client.js'
import type { Admission, Overload } from './admission.js'
import { PROBLEM_CONTENT_TYPE, problemBody, type ProblemBody } from '../lib/problem.js'

declare module 'fastify' {
  interface FastifyContextConfig {
    /** `false`: this route is served even while the service sheds load. */
    loadShedding?: boolean
  }
}

/**
 * How often the event loop delay is sampled (ms): shedding starts and stops within about this
 * time. Shorter reacts faster to a burst but sheds on shorter hiccups (a GC pause).
 */
export const SAMPLE_INTERVAL_MS = 1000

export interface LoadSheddingOptions {
  admission: Admission
  /** Shed while the mean event loop delay exceeds this (ms); 0 disables this condition. */
  maxEventLoopDelayMs: number
  /** How often the delay is sampled (ms): the time to start and to stop shedding; SAMPLE_INTERVAL_MS unless a test sets it. */
  sampleIntervalMs?: number
  /** Shed while this many queries wait for a database connection; 0 never. */
  maxDbWaiting: number
}

async function loadShedding (app: FastifyInstance, options: LoadSheddingOptions): Promise<void> {
  const { admission } = options

  // The routes that are never shed are exempt from admission too (their path, and the same
  // with a trailing slash: the router ignores it).
  app.addHook('onRoute', (route) => {
    if (route.config?.loadShedding !== false || route.url.includes(':') || route.url.includes('*')) return
    admission.exempt(route.url)
    admission.exempt(route.url.endsWith('/') ? route.url.slice(0, -1) : `${route.url}/`)
  })

  if (options.maxDbWaiting > 0) {
    // Requests queued for a database connection: past the bound, a new request would only
    // wait longer than those already queued, so it is refused at once instead.
    const pool = sqlPool(app.prisma)
    const max = options.maxDbWaiting
    admission.watch(() => pool.waitingCount < max ? undefined : { reason: 'db_queue', why: `${pool.waitingCount} requests waiting for a database connection` })
  }

  if (options.maxEventLoopDelayMs > 0) {
    const loopOverload = (delay: number): Overload => ({
      reason: 'event_loop',
      // Infinity when the loop was blocked for the whole sample (no tick was measured).
      why: `event loop delay ${Number.isFinite(delay) ? String(Math.round(delay)) : `over ${options.maxEventLoopDelayMs}`} ms`
    })
    await app.register(underPressure, {
      maxEventLoopDelay: options.maxEventLoopDelayMs,
      sampleInterval: options.sampleIntervalMs ?? SAMPLE_INTERVAL_MS,
      // A value returned is sent as the reply (the plugin's types say void, its code sends it).
      pressureHandler: ((request: FastifyRequest, reply: FastifyReply, _type: string, value: number | undefined): ProblemBody | undefined => {
        if (request.routeOptions.config.loadShedding === false) return undefined // served
        const overload = loopOverload(typeof value === 'number' ? value : Number.POSITIVE_INFINITY)
        admission.count(overload.reason)
        reply.code(503).type(PROBLEM_CONTENT_TYPE).header('retry-after', admission.retryAfter)
        return problemBody(503, 'OVERLOADED', admission.detail(overload), request.url.split('?')[0] ?? request.url, request.id)
      }) as FastifyUnderPressureOptions['pressureHandler']
    })
    admission.watch(() => app.isUnderPressure() ? loopOverload(app.memoryUsage().eventLoopDelay) : undefined)
  }
}

export default fp(loadShedding, { name: 'load-shedding', fastify: '5.x', dependencies: ['prisma'] })
