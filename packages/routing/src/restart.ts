/**
 * RestartRouting: `reply.restartRouting()` runs the request through Fastify's router
 * again (`app.routing(req, res)`, the function the HTTP server calls), so a changed path
 * (`request.path('/other')`, which rewrites `request.raw.url`) or method reaches its route
 * with all of that route's hooks. The current reply is hijacked; headers it set are not
 * carried over, the request id is new.
 *
 * The body was read by the first pass and cannot be read again: when it was, the parsed
 * body is carried over (its Content-Type/Length headers are hidden from the second pass's
 * parser and put back in a preValidation hook), so the new route sees the same
 * `request.body`. Loops: after `maxRestarts` restarts of one request, RestartLimitError.
 */
import type { IncomingMessage } from 'node:http'
import type { FastifyInstance, FastifyReply } from 'fastify'
import { RestartLimitError } from './errors.js'

declare module 'fastify' {
  interface FastifyReply {
    /** RestartRouting: routes the request again (after its path or method changed). */
    restartRouting: () => FastifyReply
  }
}

const BODY_HEADERS = ['content-type', 'content-length', 'transfer-encoding'] as const

interface RestartState {
  count: number
  body?: unknown
  headers?: Partial<Record<typeof BODY_HEADERS[number], string | string[]>>
}

const kRestart = Symbol('routing.restart')
type RestartableRequest = IncomingMessage & { [kRestart]?: RestartState }

export function registerRestart (app: FastifyInstance, maxRestarts: number): void {
  function restartRouting (this: FastifyReply): FastifyReply {
    const raw = this.request.raw as RestartableRequest
    const state = raw[kRestart] ??= { count: 0 }
    if (state.count >= maxRestarts) throw new RestartLimitError(maxRestarts)
    state.count++
    if (raw.readableDidRead) {
      state.body = this.request.body
      state.headers = {}
      for (const name of BODY_HEADERS) {
        const value = raw.headers[name]
        if (value !== undefined) state.headers[name] = value
        delete raw.headers[name]
      }
    }
    this.hijack()
    this.server.routing(raw, this.raw)
    return this
  }

  app.decorateReply('restartRouting', restartRouting)

  app.addHook('preValidation', function restoreCarriedBody (request, _reply, done) {
    const state = (request.raw as RestartableRequest)[kRestart]
    if (state?.headers !== undefined) {
      Object.assign(request.raw.headers, state.headers)
      request.body = state.body
      state.headers = undefined
      state.body = undefined
    }
    done()
  })
}
