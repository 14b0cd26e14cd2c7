/** A bare Fastify app with just the context plugin, for the request-side tests (no database). */
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import context, { type ContextOptions } from '@user-product-service/context'

interface Tap { teardown: (fn: () => unknown) => void }

export async function contextApp (
  t: Tap,
  setup: (app: FastifyInstance) => void | Promise<void>,
  options: ContextOptions = {},
  fastify: FastifyServerOptions = {},
  /** Runs before the context plugin is registered (plugins the app registers first). */
  before?: (app: FastifyInstance) => void | Promise<void>
): Promise<FastifyInstance> {
  const app = Fastify(fastify)
  t.teardown(() => app.close())
  if (before !== undefined) await before(app)
  await app.register(context, options)
  await setup(app)
  await app.ready()
  return app
}
