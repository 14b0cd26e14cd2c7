/** A bare Fastify app with the context plugin (and what a test adds), for the response-side tests. */
import { fileURLToPath } from 'node:url'
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import context, { type ContextOptions } from '@user-product-service/context'

interface Tap { teardown: (fn: () => unknown) => void }

/** Folder of the response-side fixtures (files to send, templates). */
export const FIXTURES = fileURLToPath(new URL('./reply-fixtures/', import.meta.url))

export async function replyApp (
  t: Tap,
  setup: (app: FastifyInstance) => void | Promise<void>,
  options: ContextOptions = {},
  fastify: FastifyServerOptions = {}
): Promise<FastifyInstance> {
  const app = Fastify(fastify)
  t.teardown(() => app.close())
  await app.register(context, options)
  await setup(app)
  await app.ready()
  return app
}
