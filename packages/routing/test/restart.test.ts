/** RestartRouting: route again after Path (or Method) changed, with a loop guard. */
import type { AddressInfo } from 'node:net'
import Fastify, { type FastifyInstance } from 'fastify'
import t from 'tap'
import context from '@user-product-service/context'
import routing, { RestartLimitError, type RoutingOptions } from '@user-product-service/routing'

async function restartApp (t: { teardown: (fn: () => unknown) => void }, setup: (app: FastifyInstance) => void, options: RoutingOptions = {}): Promise<FastifyInstance> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(context)
  await app.register(routing, options)
  setup(app)
  await app.ready()
  return app
}

t.test('restartRouting after path(): the new route runs with its own params and hooks', async (t) => {
  const app = await restartApp(t, (app) => {
    app.get('/old/:id', async (request, reply) => {
      reply.header('x-from-old', 'lost')
      request.path(`/new/${(request.params as { id: string }).id}`)
      return reply.restartRouting()
    })
    app.get('/new/:id', {
      onRequest: async (_request, reply) => { reply.header('x-new-hook', 'ran') }
    }, async (request) => ({ params: request.params, url: request.url, originalUrl: request.originalUrl }))
  })
  const response = await app.inject('/old/7?q=1')
  t.equal(response.statusCode, 200)
  t.same(response.json(), { params: { id: '7' }, url: '/new/7?q=1', originalUrl: '/old/7?q=1' })
  t.equal(response.headers['x-new-hook'], 'ran')
  t.equal(response.headers['x-from-old'], undefined, 'headers of the first pass are not carried over')
})

t.test('restartRouting keeps the parsed body for the new route', async (t) => {
  const app = await restartApp(t, (app) => {
    app.post('/v1/items', async (request, reply) => {
      request.path('/v2/items')
      return reply.restartRouting()
    })
    app.post('/v2/items', async (request) => ({ body: request.body, type: request.headers['content-type'] }))
  })
  const response = await app.inject({ method: 'POST', url: '/v1/items', payload: { name: 'x', n: [1, 2] } })
  t.equal(response.statusCode, 200)
  t.same(response.json(), { body: { name: 'x', n: [1, 2] }, type: 'application/json' })
})

t.test('restartRouting after requestMethod(): another method\'s route', async (t) => {
  const app = await restartApp(t, (app) => {
    app.post('/thing', async (request, reply) => {
      const { _method: override } = request.query as { _method?: string }
      if (override === undefined) return 'post'
      request.requestMethod(override)
      return reply.restartRouting()
    })
    app.delete('/thing', async () => 'deleted')
  })
  t.equal((await app.inject({ method: 'POST', url: '/thing?_method=DELETE' })).body, 'deleted')
  t.equal((await app.inject({ method: 'POST', url: '/thing' })).body, 'post')
})

t.test('loops end with RestartLimitError after maxRestarts; no route gives 404', async (t) => {
  let passes = 0
  const app = await restartApp(t, (app) => {
    app.get('/loop', async (_request, reply) => {
      passes++
      return reply.restartRouting()
    })
    app.get('/nowhere', async (request, reply) => {
      request.path('/does-not-exist')
      return reply.restartRouting()
    })
  }, { maxRestarts: 3 })
  const loop = await app.inject('/loop')
  t.equal(loop.statusCode, 500)
  t.equal(loop.json().code, new RestartLimitError(3).code)
  t.equal(passes, 4, 'the first pass and three restarts')
  t.equal((await app.inject('/nowhere')).statusCode, 404)

  const none = await restartApp(t, (app) => {
    app.get('/', async (_request, reply) => reply.restartRouting())
  }, { maxRestarts: 0 })
  t.equal((await none.inject('/')).json().code, 'FST_ROUTING_RESTART_LIMIT')
  await t.rejects(restartApp(t, () => {}, { maxRestarts: -1 }), { code: 'FST_ROUTING_INVALID_OPTION' })
})

t.test('restartRouting over a real socket: one response, keep-alive connection reused', async (t) => {
  const app = await restartApp(t, (app) => {
    app.post('/a', async (request, reply) => {
      request.path('/b')
      return reply.restartRouting()
    })
    app.post('/b', async (request) => ({ got: request.body }))
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
  for (let i = 0; i < 3; i++) {
    const response = await fetch(`${base}/a`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ i }) })
    t.equal(response.status, 200)
    t.same(await response.json(), { got: { i } })
  }
})
