/**
 * Locals, UserContext, SetUserContext: request-scoped values.
 *
 * Locals are removed when the request ends (onResponse, or onRequestAbort when the client
 * went away); a value with `Symbol.asyncDispose`, `Symbol.dispose` or `close()` is closed
 * then, newest first, also when the handler failed (the error response still ends in
 * onResponse). A failing close is logged, never thrown.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { ContextArgumentError } from '../reply/errors.js'
import { kState, stateOf, whenResponseEnds } from './state.js'

/** The user context type; merge into it (`declare module`) to type `userContext()`. */
export interface ContextUserContext {}

declare module 'fastify' {
  interface FastifyRequest {
    /** Locals: with a value stores it and returns it; without, reads it (undefined when unset). */
    locals: <T = unknown>(key: unknown, ...value: [] | [T]) => T
    /** UserContext: the context set by setUserContext, or a blank object (kept for the request). */
    userContext: () => ContextUserContext
    /** SetUserContext. */
    setUserContext: (context: ContextUserContext) => void
  }
}

const asyncDispose: symbol | undefined = (Symbol as unknown as { asyncDispose?: symbol }).asyncDispose
const syncDispose: symbol | undefined = (Symbol as unknown as { dispose?: symbol }).dispose

async function close (value: unknown): Promise<void> {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) return
  const target = value as Record<string | symbol, unknown>
  for (const key of [asyncDispose, syncDispose, 'close']) {
    if (key !== undefined && typeof target[key] === 'function') {
      await (target[key] as () => unknown).call(value)
      return
    }
  }
}

async function releaseLocals (request: FastifyRequest): Promise<void> {
  const state = request[kState]
  const locals = state?.locals
  if (state === null || locals === undefined) return
  state.locals = undefined
  for (const value of [...locals.values()].reverse()) {
    try {
      await close(value)
    } catch (error) {
      request.log.error({ err: error }, 'closing a request local failed')
    }
  }
}

export function registerLocals (app: FastifyInstance): void {
  app.decorateRequest('locals', function <T>(this: FastifyRequest, key: unknown, ...value: [] | [T]): T {
    const state = stateOf(this)
    if (value.length > 0) {
      if (state.locals === undefined) {
        state.locals = new Map()
        whenResponseEnds(this, async () => { await releaseLocals(this) })
      }
      state.locals.set(key, value[0])
      return value[0] as T
    }
    return state.locals?.get(key) as T
  })

  app.decorateRequest('userContext', function (this: FastifyRequest): ContextUserContext {
    const state = stateOf(this)
    state.userContext ??= {}
    return state.userContext
  })

  app.decorateRequest('setUserContext', function (this: FastifyRequest, context: ContextUserContext): void {
    if (typeof context !== 'object' || context === null) throw new ContextArgumentError('setUserContext: the context must be an object')
    stateOf(this).userContext = context
  })

  // Released when the response is sent (here, before the next request on the connection);
  // a request cut off by its client releases them on the response's 'close' instead
  // (whenResponseEnds, attached with the first local). The second call finds nothing left.
  app.addHook('onResponse', function (request, _reply, done) {
    if (request[kState]?.locals === undefined) return done()
    releaseLocals(request).then(() => { done() }, done)
  })
}
