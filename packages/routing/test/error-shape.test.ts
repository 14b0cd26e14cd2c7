/**
 * Not-found and error answers of an app using the routing plugin have the app's one shape:
 * every not-found answer comes from the app's not-found handler, every other
 * error from the app's error handler, whatever part of the plugin produced it.
 */
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import routing, { chain } from '@user-product-service/routing'

const PUBLIC = fileURLToPath(new URL('./fixtures/public/', import.meta.url))

interface Problem { type: string, title: string, status: number, detail: string, code?: string }

function problem (reply: FastifyReply, status: number, title: string, detail: string, code?: string): FastifyReply {
  const body: Problem = { type: 'about:blank', title, status, detail }
  if (code !== undefined) body.code = code
  return reply.code(status).type('application/problem+json').send(body)
}

/** The routes every variant shares: each can end in a not-found or an error answer. */
async function shapeApp (t: { teardown: (fn: () => unknown) => void }, problems: boolean): Promise<FastifyInstance> {
  // A URL find-my-way cannot decode is answered before any route or hook: only the
  // `frameworkErrors` server option reaches it (a plugin cannot set it).
  const app = Fastify(problems
    ? { frameworkErrors: (error, _request, reply) => problem(reply, 400, 'Request Error', error.message, error.code) }
    : {})
  t.teardown(() => app.close())
  await app.register(routing, { maxRestarts: 1 })
  if (problems) {
    app.setNotFoundHandler((request: FastifyRequest, reply) => problem(reply, 404, 'Not Found', `No route for ${request.method} ${request.url}`, 'NOT_FOUND'))
    app.setErrorHandler((error: { statusCode?: number, code?: string, message: string }, _request, reply) => {
      const status = error.statusCode !== undefined && error.statusCode >= 400 ? error.statusCode : 500
      return problem(reply, status, status >= 500 ? 'Internal Server Error' : 'Request Error', status >= 500 ? 'An internal error occurred' : error.message, error.code)
    })
  }
  app.get('/users/:name', async (request) => request.params)
  app.get('/shop/+/items', async (request) => request.params)
  app.get('/chain', chain(async (_request, _reply, next) => { next() }, async (_request, _reply, next) => { next() }))
  app.get('/restart-nowhere', async (request, reply) => {
    request.raw.url = '/nowhere'
    return reply.restartRouting()
  })
  app.get('/restart-loop', async (_request, reply) => reply.restartRouting())
  await app.static('/assets', PUBLIC)
  await app.ready()
  return app
}

/** [request, status, what produced it] */
const ANSWERS: Array<[{ method: 'GET' | 'POST', url: string }, number, string]> = [
  [{ method: 'GET', url: '/nothing' }, 404, 'no route'],
  [{ method: 'GET', url: '/users/' }, 404, 'native pattern, empty required parameter'],
  [{ method: 'GET', url: '/shop/a/reviews' }, 404, 'compiled pattern that does not match'],
  [{ method: 'GET', url: '/chain' }, 404, 'next() in the last handler of a chain'],
  [{ method: 'GET', url: '/restart-nowhere' }, 404, 'restartRouting to a path without a route'],
  [{ method: 'GET', url: '/assets/missing.txt' }, 404, 'static file that does not exist'],
  [{ method: 'GET', url: '/assets/.hidden' }, 404, 'static dotfile'],
  [{ method: 'POST', url: '/users/ann' }, 405, 'path that exists for GET only'],
  [{ method: 'GET', url: '/shop/%E0%A4%A/items' }, 400, 'URL that is not valid percent-encoding'],
  [{ method: 'GET', url: '/restart-loop' }, 500, 'restartRouting loop guard']
]

t.test('with a problem-details app: every answer is application/problem+json from the app\'s handlers', async (t) => {
  const app = await shapeApp(t, true)
  for (const [request, status, what] of ANSWERS) {
    const response = await app.inject(request)
    t.equal(response.statusCode, status, `${what}: status`)
    t.match(response.headers['content-type'], /^application\/problem\+json/, `${what}: content type`)
    const body = response.json() as Problem
    t.same(Object.keys(body).filter((key) => key !== 'code').sort(), ['detail', 'status', 'title', 'type'], `${what}: problem members`)
    t.equal(body.status, status, `${what}: status member`)
    if (status === 404) t.equal(body.code, 'NOT_FOUND', `${what}: the not-found handler answered`)
    if (status === 405) t.equal(body.code, 'FST_ROUTING_METHOD_NOT_ALLOWED')
    if (status === 500) t.equal(body.detail, 'An internal error occurred', `${what}: no internals`)
  }
})

t.test('with Fastify\'s defaults: 404s in the not-found shape, errors in the error shape', async (t) => {
  const app = await shapeApp(t, false)
  for (const [request, status, what] of ANSWERS) {
    const response = await app.inject(request)
    t.equal(response.statusCode, status, `${what}: status`)
    const body = response.json() as Record<string, unknown>
    if (status === 404) {
      const url = request.url === '/restart-nowhere' ? '/nowhere' : request.url
      t.same(body, { message: `Route ${request.method}:${url} not found`, error: 'Not Found', statusCode: 404 }, `${what}: Fastify's not-found body`)
    } else {
      t.same(Object.keys(body).sort(), ['code', 'error', 'message', 'statusCode'], `${what}: Fastify's error body`)
      t.equal(body.statusCode, status)
    }
  }
})
