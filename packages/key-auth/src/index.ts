/**
 * key-auth: guards routes with a static API key read from a header, cookie, query string,
 * form field or route parameter and checked by the application's validator. Options,
 * behaviour and usage in README.md.
 *
 * Registered with `fastify-plugin`, so its hook lands in the context that registers it:
 * the root guards the whole application, an encapsulated plugin (a prefix) guards only its
 * routes. With `hook: false` it adds no hook and decorates the instance with the
 * verification function instead; `keyAuthHook(options)` makes one for a single route.
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { KeyAuthCookiePluginMissingError } from './errors.js'
import { createVerifier, type KeyAuthHook } from './hook.js'
import { resolvePluginOptions, type KeyAuthPluginOptions } from './options.js'

export {
  INVALID_KEY_MESSAGE,
  KeyAuthCookiePluginMissingError,
  KeyAuthInvalidKeyError,
  KeyAuthMissingOrMalformedError,
  KeyAuthOptionError,
  MISSING_OR_MALFORMED_MESSAGE
} from './errors.js'
export { keyAuthHook, type KeyAuthHook } from './hook.js'
export { createKeySet, type KeySet } from './key-set.js'
export type { KeySource } from './lookup.js'
export type {
  KeyAuthErrorHandler,
  KeyAuthHookName,
  KeyAuthOptions,
  KeyAuthPluginOptions,
  KeyAuthSuccessHandler,
  KeyAuthValidator,
  KeyLookup
} from './options.js'

/**
 * The valid keys of a request, by `contextKey` (`request.keyAuth?.token` by default). Merge
 * your own context keys into it to type them:
 * `declare module '<this module>' { interface KeyAuthContext { adminKey?: string } }`.
 */
export interface KeyAuthContext {
  [contextKey: string]: string | undefined
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The keys key-auth accepted on this request, by context key; `null` until one is accepted. */
    keyAuth: KeyAuthContext | null
  }
  interface FastifyInstance {
    /** The verification function, present when the plugin is registered with `hook: false` (and the default decorator name). */
    verifyKeyAuth?: KeyAuthHook
  }
}

async function keyAuth (app: FastifyInstance, options: KeyAuthPluginOptions): Promise<void> {
  const resolved = resolvePluginOptions(options)
  if (resolved.lookup.source === 'cookie' && !app.hasDecorator('parseCookie')) {
    throw new KeyAuthCookiePluginMissingError(resolved.lookup.lookup)
  }

  // Several registrations (one per prefix, or app-wide plus decorator mode) share the decorator.
  if (!app.hasRequestDecorator('keyAuth')) app.decorateRequest('keyAuth', null)

  const verify = createVerifier(resolved)
  if (resolved.hook === false) {
    app.decorate(resolved.decorator, verify)
  } else {
    app.addHook(resolved.hook, verify)
  }
}

export default fp(keyAuth, { name: 'keyauth', fastify: '5.x' })
