/**
 * Handler chains (SPEC.md "Routing model" 1, Next): `chain(h1, h2, h3)` gives route options
 * whose `preHandler` array runs h1 and h2 and whose `handler` is h3, each called as
 * `(request, reply, next)`.
 *
 * - `next()` passes on to the following handler (Fastify's preHandler `done()`).
 * - `next(error)`, a thrown error or a rejected promise ends the chain in the error handler.
 * - A step that returns without calling `next()`: an async step ends the chain and the
 *   reply is sent with what it returned (or what was written with `reply.write*`); a sync
 *   step may still call `next()` later (callback style). To end it by sending, `return reply`.
 * - `next()` in the last handler answers 404 (no later handler matches), `next(error)`
 *   goes to the error handler.
 *
 * Difference from the original: `next()` returns nothing and does not wait for the later
 * handlers (Fastify hooks are not an onion); work after the response belongs in an
 * `onResponse` hook.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, preHandlerHookHandler, RouteHandlerMethod } from 'fastify'
import { ChainHandlerError } from './errors.js'

export type Next = (error?: unknown) => void
export type ChainHandler = (this: FastifyInstance, request: FastifyRequest, reply: FastifyReply, next: Next) => unknown

export interface ChainedRoute {
  preHandler: preHandlerHookHandler[]
  handler: RouteHandlerMethod
}

function toError (error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error))
}

function isThenable (value: unknown): value is PromiseLike<unknown> {
  return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof (value as PromiseLike<unknown>).then === 'function'
}

function step (handler: ChainHandler): preHandlerHookHandler {
  return function chainStep (this: FastifyInstance, request, reply, done) {
    let passed = false
    const next: Next = (error) => {
      if (passed) return
      passed = true
      done(error === undefined || error === null ? undefined : toError(error))
    }
    let result: unknown
    try {
      result = handler.call(this, request, reply, next)
    } catch (error) {
      if (!passed) next(error ?? new Error('chain handler threw'))
      else reply.log.error({ err: error }, 'chain handler failed after next()')
      return
    }
    if (!isThenable(result)) return
    result.then((value) => {
      if (passed || reply.sent || reply.raw.headersSent) return
      // Returned without next(): the chain ends here and the reply goes out.
      passed = true
      reply.send(value)
    }, (error: unknown) => {
      if (!passed) next(error ?? new Error('chain handler rejected'))
      else reply.log.error({ err: error }, 'chain handler failed after next()')
    })
  }
}

function last (handler: ChainHandler): RouteHandlerMethod {
  return function chainEnd (this: FastifyInstance, request, reply) {
    return handler.call(this, request, reply, (error) => {
      if (error === undefined || error === null) reply.callNotFound()
      else reply.send(toError(error))
    })
  }
}

/** Route options for a chain of handlers: spread into `app.get(url, { ...chain(a, b, c) })`. */
export function chain (...handlers: ChainHandler[]): ChainedRoute {
  if (handlers.length === 0) throw new ChainHandlerError('give at least one handler')
  for (const handler of handlers) {
    if (typeof handler !== 'function') throw new ChainHandlerError('every handler must be a function')
  }
  return {
    preHandler: handlers.slice(0, -1).map(step),
    handler: last(handlers[handlers.length - 1] as ChainHandler)
  }
}
