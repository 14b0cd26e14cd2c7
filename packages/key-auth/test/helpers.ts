/** Bare Fastify apps for the key-auth tests: no database, just the plugin and a route or two. */
import Fastify, { type FastifyInstance } from 'fastify'
import keyAuth, { createKeySet, type KeyAuthPluginOptions } from '@user-product-service/key-auth'

export const GOOD_KEY = 'correct-key-0123456789'
export const OTHER_KEY = 'rotated-key-abcdefghij'
export const keys = createKeySet([GOOD_KEY, OTHER_KEY])

/** A validator accepting GOOD_KEY and OTHER_KEY. */
export const validator = (_request: unknown, key: string): boolean => keys.has(key)

interface Tap { teardown: (fn: () => unknown) => void }

/** A new app, closed at teardown. */
export function bare (t: Tap): FastifyInstance {
  const app = Fastify()
  t.teardown(async () => { await app.close() })
  return app
}

/**
 * An app with key-auth registered app-wide and `GET /` answering `{ keyAuth }` (what the
 * request holds after key-auth), plus whatever `routes` adds.
 */
export async function guarded (t: Tap, options: Partial<KeyAuthPluginOptions> = {}, routes?: (app: FastifyInstance) => void): Promise<FastifyInstance> {
  const app = bare(t)
  await app.register(keyAuth, { validator, ...options })
  app.get('/', async (request) => ({ keyAuth: request.keyAuth }))
  routes?.(app)
  await app.ready()
  return app
}
