/**
 * Draining: the first phase of a graceful stop behind a load balancer. `app.draining.start()`
 * (src/server.ts, on SIGTERM) turns `/health/ready` into a 503 while every request is still
 * served, and answers them with `Connection: close`, so a proxy's health check takes this
 * instance out of rotation and kept-alive clients reconnect elsewhere. After
 * SHUTDOWN_DRAIN_MS the server closes (docs/deployment.md, "Several replicas").
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

declare module 'fastify' {
  interface FastifyInstance {
    draining: Draining
  }
}

export interface Draining {
  /** True once `start()` was called: readiness answers 503. */
  readonly active: boolean
  start: () => void
}

async function draining (app: FastifyInstance): Promise<void> {
  let active = false
  app.decorate('draining', {
    get active () { return active },
    start () { active = true }
  })
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (active) reply.header('connection', 'close')
    done(null, payload)
  })
}

export default fp(draining, { name: 'draining', fastify: '5.x' })
