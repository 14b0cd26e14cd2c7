/**
 * 405 Method Not Allowed with `Allow` (RFC 9110 15.5.6, 10.2.1) when the path exists for other
 * methods; OPTIONS on such a path 204 with `Allow` (RFC 9110 9.3.7); 404 otherwise.
 */
import Fastify, { type FastifyInstance } from 'fastify'
import t from 'tap'
import keyAuth from '@user-product-service/key-auth'
import routing, { RouteMethodNotAllowedError, RoutingOptionError } from '@user-product-service/routing'

async function methodsApp (t: { teardown: (fn: () => unknown) => void }, options = {}): Promise<FastifyInstance> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(routing, options)
  app.get('/items', async () => 'list')
  app.post('/items', async () => 'created')
  app.delete('/items/:id', async () => 'deleted')
  app.put('/items/:id', async () => 'replaced')
  app.post('/shop/+/orders', async () => 'order') // compiled pattern
  app.get('/users/:name', async () => 'user')
  app.post('/only-post', async () => 'x')
  await app.register(async (scope) => {
    scope.patch('/things/:id?', async () => 'patched')
  }, { prefix: '/api' })
  await app.ready()
  return app
}

t.test('a path that exists for other methods: 405 with Allow, in the error handler\'s shape', async (t) => {
  const app = await methodsApp(t)
  const cases: Array<[string, string, string]> = [
    ['DELETE', '/items', 'GET, HEAD, OPTIONS, POST'],
    ['PATCH', '/items', 'GET, HEAD, OPTIONS, POST'],
    ['GET', '/items/7', 'DELETE, OPTIONS, PUT'],
    ['HEAD', '/items/7', 'DELETE, OPTIONS, PUT'],
    ['GET', '/shop/a/b/orders', 'OPTIONS, POST'],
    ['GET', '/only-post', 'OPTIONS, POST'],
    ['GET', '/only-post?x=1', 'OPTIONS, POST'],
    ['GET', '/api/things', 'OPTIONS, PATCH'],
    ['GET', '/api/things/3', 'OPTIONS, PATCH'],
    ['POST', '/users/ann', 'GET, HEAD, OPTIONS']
  ]
  for (const [method, url, allow] of cases) {
    const response = await app.inject({ method: method as 'GET', url })
    t.equal(response.statusCode, 405, `${method} ${url}`)
    t.equal(response.headers.allow, allow, `Allow of ${method} ${url}`)
    if (method !== 'HEAD') {
      t.same(response.json(), {
        statusCode: 405,
        code: 'FST_ROUTING_METHOD_NOT_ALLOWED',
        error: 'Method Not Allowed',
        message: `Method ${method} is not allowed for ${url.split('?')[0] as string}; allowed: ${allow}`
      }, `body of ${method} ${url}: Fastify's default error shape`)
    }
  }
})

t.test('405 comes before the body is parsed: a malformed or unsupported body does not hide it', async (t) => {
  const app = await methodsApp(t)
  const cases: Array<[string, string]> = [['application/json', '{bad'], ['text/x-unknown', 'x'], ['application/json', '{"a":1}']]
  for (const [type, payload] of cases) {
    const response = await app.inject({ method: 'PATCH', url: '/items', headers: { 'content-type': type }, payload })
    t.equal(response.statusCode, 405, `${type} ${payload}`)
    t.equal(response.headers.allow, 'GET, HEAD, OPTIONS, POST')
  }
})

t.test('no route for the path under any method, or only an empty required parameter: 404', async (t) => {
  const app = await methodsApp(t)
  for (const [method, url] of [['GET', '/nothing'], ['POST', '/items/7/x'], ['GET', '/shop/a/b/reviews'], ['POST', '/users/'], ['GET', '/items/']] as const) {
    const response = await app.inject({ method, url })
    t.equal(response.statusCode, 404, `${method} ${url}`)
    t.equal(response.headers.allow, undefined)
  }
})

t.test('OPTIONS on a path that exists for other methods: 204 with Allow; an OPTIONS route wins', async (t) => {
  const app = await methodsApp(t)
  const response = await app.inject({ method: 'OPTIONS', url: '/items' })
  t.equal(response.statusCode, 204)
  t.equal(response.headers.allow, 'GET, HEAD, OPTIONS, POST')
  t.equal(response.body, '')
  t.equal((await app.inject({ method: 'OPTIONS', url: '/nothing' })).statusCode, 404)

  const withOptions = Fastify()
  t.teardown(() => withOptions.close())
  await withOptions.register(routing)
  withOptions.get('/a', async () => 'a')
  // A CORS-style catch-all OPTIONS route does not make every path "exist".
  withOptions.options('*', async (_request, reply) => reply.code(204).header('x-cors', 'yes').send())
  await withOptions.ready()
  const preflight = await withOptions.inject({ method: 'OPTIONS', url: '/a' })
  t.equal(preflight.headers['x-cors'], 'yes')
  t.equal((await withOptions.inject({ method: 'POST', url: '/a' })).headers.allow, 'GET, HEAD, OPTIONS')
  t.equal((await withOptions.inject({ method: 'POST', url: '/unknown' })).statusCode, 404, 'not 405 "Allow: OPTIONS"')
})

t.test('the 405 goes through the app\'s error handler, after app-wide hooks such as key-auth', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(routing)
  await app.register(keyAuth, { validator: (_request, key) => key === 'k', keyLookup: 'header:x-api-key' })
  app.setErrorHandler((error: { statusCode?: number, code?: string, message: string }, _request, reply) => {
    const status = error.statusCode ?? 500
    return reply.code(status).type('application/problem+json').send({ type: 'about:blank', status, code: error.code, detail: error.message })
  })
  app.get('/r', async () => 'r')
  await app.ready()
  const denied = await app.inject({ method: 'POST', url: '/r' })
  t.equal(denied.statusCode, 401, 'no key: key-auth answers first, the path is not revealed')
  t.equal(denied.headers.allow, undefined)
  const response = await app.inject({ method: 'POST', url: '/r', headers: { 'x-api-key': 'k' } })
  t.equal(response.statusCode, 405)
  t.equal(response.headers.allow, 'GET, HEAD, OPTIONS')
  t.match(response.headers['content-type'], /^application\/problem\+json/)
  t.same(response.json(), { type: 'about:blank', status: 405, code: 'FST_ROUTING_METHOD_NOT_ALLOWED', detail: 'Method POST is not allowed for /r; allowed: GET, HEAD, OPTIONS' })
  t.ok(new RouteMethodNotAllowedError('POST', '/r', 'GET') instanceof Error)
})

t.test('methodNotAllowed: false keeps 404; a wrong value is refused', async (t) => {
  const app = await methodsApp(t, { methodNotAllowed: false })
  const response = await app.inject({ method: 'DELETE', url: '/items' })
  t.equal(response.statusCode, 404)
  t.equal(response.headers.allow, undefined)
  t.equal((await app.inject({ method: 'OPTIONS', url: '/items' })).statusCode, 404)
  const wrong = Fastify()
  t.teardown(() => wrong.close())
  await t.rejects(async () => { await wrong.register(routing, { methodNotAllowed: 'yes' as unknown as boolean }) }, RoutingOptionError)
})

t.test('router options reach the check: ignoreTrailingSlash, caseSensitive false', async (t) => {
  const app = Fastify({ routerOptions: { ignoreTrailingSlash: true, caseSensitive: false } })
  t.teardown(() => app.close())
  await app.register(routing)
  app.get('/Mixed/path', async () => 'x')
  await app.ready()
  t.equal((await app.inject('/mixed/PATH/')).statusCode, 200)
  const response = await app.inject({ method: 'POST', url: '/mixed/PATH/' })
  t.equal(response.statusCode, 405)
  t.equal(response.headers.allow, 'GET, HEAD, OPTIONS')
})
