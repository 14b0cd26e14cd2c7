/**
 * Handler chains (README.md "Handler chains (Next)": `Next () -> error`): `chain(h1, h2, h3)`
 * gives route options whose `handler` runs h1, h2, h3 in order, each called as
 * `(request, reply, next)`, as an onion: `next()` runs the rest of the chain and its promise
 * resolves with the rest's error (or undefined), so a middleware can `await next()`, see
 * a downstream error and handle it or pass it on.
 *
 * - `const error = await next()`: the step has read the result and decides: returning
 *   normally handles the error (the chain goes on as if there was none), throwing it (or
 *   returning it) passes it on.
 * - `next()` whose result the step never reads (not awaited, no `.then`: callback style):
 *   a downstream error passes on by itself, as it always did.
 * - `next(error)`, a thrown error or a rejected promise: this step's error (passed back to
 *   the step before, and at the top to the route's error handler).
 * - A value (not an Error) a step returns after `next()` becomes the reply, replacing what
 *   the rest returned.
 * - An async step that returns without calling `next()` ends the chain: what it returned is
 *   the reply (or the context body written with `reply.write*` / `reply.json` ..., or what
 *   it sent itself). The reply goes out after the whole chain has returned, so a step can
 *   still set headers after `await next()`.
 * - A sync step that returns `undefined` without calling `next()` may call it later
 *   (callback style); to end the chain it sends (`reply.send(...)`) or returns a value.
 * - `next()` in the last handler: no later handler matches; it resolves with a
 *   `NoNextHandlerError` (404), and when that error reaches the top the app's not-found
 *   handler answers (as a request no route matches).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteHandlerMethod } from 'fastify'
import { ChainHandlerError, ChainNonErrorError, NoNextHandlerError } from './errors.js'

/** Runs the rest of the chain; resolves with its error, or undefined. A second call returns the first result. */
export type Next = (error?: unknown) => PromiseLike<Error | undefined>
export type ChainHandler = (this: FastifyInstance, request: FastifyRequest, reply: FastifyReply, next: Next) => unknown

export interface ChainedRoute {
  handler: RouteHandlerMethod
}

/** What a step threw, rejected with or passed to next(), as an Error: a value that is not one becomes ChainNonErrorError with it as the cause. */
function toError (error: unknown): Error {
  return error instanceof Error ? error : new ChainNonErrorError(String(error), { cause: error })
}

function isThenable (value: unknown): value is PromiseLike<unknown> {
  return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof (value as PromiseLike<unknown>).then === 'function'
}

interface ChainRun {
  instance: FastifyInstance
  request: FastifyRequest
  reply: FastifyReply
  handlers: readonly ChainHandler[]
  /** What the step that ended the chain returned. */
  endValue: unknown
}

/** Runs step `index` and, through its `next`, the rest; resolves with the step's error. */
function runStep (run: ChainRun, index: number): Promise<Error | undefined> {
  return new Promise((resolve) => {
    const handler = run.handlers[index] as ChainHandler
    let passed: Promise<Error | undefined> | undefined
    let passedError: Error | undefined
    let observed = false
    let returned = false
    let settled = false
    const finish = (error: Error | undefined): void => {
      if (settled) return
      settled = true
      resolve(error)
    }

    const next: Next = (error) => {
      if (passed === undefined) {
        if (error !== undefined && error !== null) {
          passedError = toError(error)
          passed = Promise.resolve(passedError)
        } else {
          passed = index + 1 < run.handlers.length ? runStep(run, index + 1) : Promise.resolve(new NoNextHandlerError())
        }
        // A sync step that already returned (callback style): its outcome is the rest's.
        if (returned) passed.then((downstream) => finish(passedError ?? (observed ? undefined : downstream)))
      }
      const result = passed
      // A thenable, not the promise itself: `await` on a native promise does not call its
      // `then`, and the call is how this step says it reads the result.
      return {
        then (onFulfilled, onRejected) {
          observed = true
          return result.then(onFulfilled, onRejected)
        }
      }
    }

    /** The step returned (or resolved with) `value`. */
    const completed = (value: unknown): void => {
      if (passed === undefined) {
        // Ended the chain here.
        run.endValue = value
        finish(undefined)
        return
      }
      passed.then((downstream) => {
        // A value returned after next() is the reply (the later word wins, as a Send after the rest).
        if (value !== undefined && !(value instanceof Error)) run.endValue = value
        if (passedError !== undefined) finish(passedError)
        else if (value instanceof Error) finish(value)
        else finish(observed ? undefined : downstream)
      })
    }

    let result: unknown
    try {
      result = handler.call(run.instance, run.request, run.reply, next)
    } catch (error) {
      finish(toError(error))
      return
    }
    if (isThenable(result)) {
      result.then(completed, (error: unknown) => finish(toError(error)))
      return
    }
    returned = true
    if (passed !== undefined || result !== undefined) completed(result)
    // else: a sync step that may call next() later (callback style).
  })
}

function chainHandler (handlers: readonly ChainHandler[]): RouteHandlerMethod {
  return async function chainHandler (this: FastifyInstance, request: FastifyRequest, reply: FastifyReply) {
    const run: ChainRun = { instance: this, request, reply, handlers, endValue: undefined }
    const error = await runStep(run, 0)
    if (error !== undefined) {
      if (reply.sent || reply.raw.headersSent) {
        reply.log.error({ err: error }, 'chain handler failed after the reply was sent')
        return
      }
      if (error instanceof NoNextHandlerError) {
        reply.callNotFound()
        return reply
      }
      throw error
    }
    if (reply.sent || reply.raw.headersSent) return
    return run.endValue
  }
}

/** Route options for a chain of handlers: spread into `app.get(url, { ...chain(a, b, c) })`. */
export function chain (...handlers: ChainHandler[]): ChainedRoute {
  if (handlers.length === 0) throw new ChainHandlerError('give at least one handler')
  for (const handler of handlers) {
    if (typeof handler !== 'function') throw new ChainHandlerError('every handler must be a function')
  }
  return { handler: chainHandler([...handlers]) }
}
