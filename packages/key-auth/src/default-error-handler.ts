/**
 * The default error handler: 401 with the exact text of README.md's "Errors" table, as
 * text/plain, and a `WWW-Authenticate` challenge naming the scheme when the key comes from
 * a header that has one. Errors that are not key-auth's own (a validator that threw) are
 * logged: they may be an outage rather than a bad key, though the client is told only
 * that the key was refused.
 */
import {
  INVALID_KEY_MESSAGE,
  KeyAuthInvalidKeyError,
  KeyAuthMissingOrMalformedError,
  MISSING_OR_MALFORMED_MESSAGE
} from './errors.js'
import type { KeyAuthErrorHandler } from './options.js'

export function defaultErrorHandler (scheme: string): KeyAuthErrorHandler {
  return function keyAuthDefaultErrorHandler (request, reply, error) {
    const missing = error instanceof KeyAuthMissingOrMalformedError
    if (!missing && !(error instanceof KeyAuthInvalidKeyError)) {
      request.log.error({ err: error }, 'key-auth: the validator failed')
    }
    if (scheme !== '') reply.header('www-authenticate', scheme)
    return reply.code(401).type('text/plain; charset=utf-8').send(missing ? MISSING_OR_MALFORMED_MESSAGE : INVALID_KEY_MESSAGE)
  }
}
