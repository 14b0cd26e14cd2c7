/**
 * The admin API keys (ADMIN_API_KEYS) and the key-auth options that check them. Keys are
 * sent as `Authorization: Bearer <key>`; every configured key is valid, so a key can be
 * rotated without downtime (add the new one, move clients over, remove the old one).
 * Refusals leave as problem details like every other error of the service, with the
 * SPEC.md texts as their detail.
 */
import createError from '@fastify/error'
import type { FastifyBaseLogger } from 'fastify'
import {
  createKeySet,
  INVALID_KEY_MESSAGE,
  KeyAuthInvalidKeyError,
  KeyAuthMissingOrMalformedError,
  MISSING_OR_MALFORMED_MESSAGE,
  type KeyAuthPluginOptions
} from '../../plugins/keyauth/index.js'

/** Shorter keys are refused at start: a key must not be guessable. */
export const MIN_API_KEY_LENGTH = 16

export const ApiKeyMissing = createError('API_KEY_MISSING', MISSING_OR_MALFORMED_MESSAGE, 401)
export const ApiKeyInvalid = createError('API_KEY_INVALID', INVALID_KEY_MESSAGE, 401)

/** The OpenAPI security scheme of the admin routes, and the requirement they declare. */
export const adminApiKeyScheme = {
  type: 'http',
  scheme: 'bearer',
  description: 'An admin API key, one of ADMIN_API_KEYS: `Authorization: Bearer <key>`'
} as const
export const adminApiKey = [{ adminApiKey: [] }]

/** ADMIN_API_KEYS: comma-separated, blanks around each key ignored. */
export function parseApiKeys (value: string): string[] {
  const keys = value.split(',').map((key) => key.trim()).filter((key) => key !== '')
  const short = keys.findIndex((key) => key.length < MIN_API_KEY_LENGTH)
  if (short >= 0) {
    throw new Error(`Invalid configuration: ADMIN_API_KEYS key #${short + 1} is shorter than ${MIN_API_KEY_LENGTH} characters (e.g. \`openssl rand -base64 32\`)`)
  }
  return keys
}

/** Key-auth options for the admin routes. With no keys configured, every request is refused. */
export function adminKeyAuthOptions (apiKeys: string, log: FastifyBaseLogger): KeyAuthPluginOptions {
  const keys = parseApiKeys(apiKeys)
  let validator: KeyAuthPluginOptions['validator'] = () => false
  if (keys.length === 0) {
    log.warn('ADMIN_API_KEYS is empty: the admin routes refuse every request')
  } else {
    const keySet = createKeySet(keys)
    validator = (_request, key) => keySet.has(key)
  }
  return {
    keyLookup: 'header:Authorization',
    authScheme: 'Bearer',
    validator,
    // Throwing hands the error to the service's error handler: problem details.
    errorHandler: (_request, reply, error) => {
      reply.header('www-authenticate', 'Bearer realm="admin"')
      if (error instanceof KeyAuthMissingOrMalformedError) throw new ApiKeyMissing()
      if (error instanceof KeyAuthInvalidKeyError) throw new ApiKeyInvalid()
      throw error
    }
  }
}
