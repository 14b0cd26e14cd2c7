/**
 * The key-auth errors. Request errors carry 401 and the exact texts of README.md's "Errors"
 * table; configuration errors are thrown at registration (or when the per-route hook is
 * created) and carry no meaningful status. Each is a constructor made by @fastify/error:
 * test with `instanceof` (it works across copies of this module: @fastify/error
 * marks instances with a global symbol per code) or by `code`.
 */
import createError from '@fastify/error'

/** The text the default error handler sends for a missing or malformed key. */
export const MISSING_OR_MALFORMED_MESSAGE = 'missing or malformed API Key'
/** The text the default error handler sends for every other failure. */
export const INVALID_KEY_MESSAGE = 'Invalid or expired API Key'

/**
 * No key where `keyLookup` points, or a header without the `authScheme` word. A validator
 * may throw it too: the default error handler then answers with the same text.
 */
export const KeyAuthMissingOrMalformedError = createError('FST_KEYAUTH_MISSING_OR_MALFORMED', MISSING_OR_MALFORMED_MESSAGE, 401)

/** The validator returned something other than `true`. */
export const KeyAuthInvalidKeyError = createError('FST_KEYAUTH_INVALID_KEY', INVALID_KEY_MESSAGE, 401)

/** An option has a wrong type or value; the message names the option. */
export const KeyAuthOptionError = createError('FST_KEYAUTH_INVALID_OPTION', 'keyauth: %s', 500, TypeError)

/** `keyLookup` reads a cookie but @fastify/cookie is not registered before key-auth. */
export const KeyAuthCookiePluginMissingError = createError(
  'FST_KEYAUTH_COOKIE_PLUGIN_MISSING',
  'keyauth: keyLookup "%s" reads a cookie, but @fastify/cookie is not registered; register @fastify/cookie before key-auth',
  500
)
