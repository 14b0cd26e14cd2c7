/**
 * The verification itself, as a Fastify hook: skip (`next`), read the key (`keyLookup`),
 * ask the validator, then store the key and run the success handler, or run the error
 * handler. The plugin adds it to a context; `keyAuthHook` hands it out for single routes
 * and for composition (@fastify/auth).
 */
import type { FastifyReply, FastifyRequest } from 'fastify'
import { KeyAuthInvalidKeyError, KeyAuthMissingOrMalformedError } from './errors.js'
import { resolveOptions, type KeyAuthOptions, type ResolvedKeyAuthOptions } from './options.js'

/** A key-auth verification function: usable as an `onRequest`, `preParsing`, `preValidation` or `preHandler` hook. */
export type KeyAuthHook = (request: FastifyRequest, reply: FastifyReply) => Promise<void>

/** What a validator threw, as an Error (a bare `throw 'no'` becomes an invalid-key error with that cause). */
function asError (thrown: unknown): Error {
  return thrown instanceof Error ? thrown : new KeyAuthInvalidKeyError({ cause: thrown })
}

export function createVerifier (options: ResolvedKeyAuthOptions): KeyAuthHook {
  const { extract, validator, next, successHandler, errorHandler, contextKey } = options

  async function fail (request: FastifyRequest, reply: FastifyReply, error: Error): Promise<void> {
    await errorHandler(request, reply, error)
    // Fail closed: an error handler that neither answered nor threw must not let the
    // request through to the route handler.
    if (!reply.sent) throw error
  }

  return async function verifyKeyAuth (request, reply) {
    if (next !== undefined && next(request) === true) return

    const key = extract(request)
    if (key === undefined) return await fail(request, reply, new KeyAuthMissingOrMalformedError())

    let valid: unknown
    try {
      valid = await validator(request, key)
    } catch (thrown) {
      return await fail(request, reply, asError(thrown))
    }
    if (valid !== true) return await fail(request, reply, new KeyAuthInvalidKeyError())

    request.keyAuth = { ...request.keyAuth, [contextKey]: key }
    if (successHandler !== undefined) await successHandler(request, reply)
  }
}

/**
 * A key-auth hook for single routes or for composition, without registering the plugin:
 * `app.get('/x', { onRequest: keyAuthHook({ validator }) }, handler)`. The options are
 * checked now; `request.keyAuth` is declared by the plugin's types and is `undefined`
 * rather than `null` on requests no key-auth has seen when the plugin is not registered.
 * Place a `form:` lookup in `preValidation` or `preHandler`: the body is parsed only then.
 */
export function keyAuthHook (options: KeyAuthOptions): KeyAuthHook {
  return createVerifier(resolveOptions(options))
}
