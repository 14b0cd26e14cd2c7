/** Named routes and GetRouteURL: named routes turned into relative URLs. */
import Fastify, { type FastifyInstance } from 'fastify'
import t from 'tap'
import routing, { DuplicateRouteNameError, RouteNameNotFoundError, RouteParamMissingError } from '@user-product-service/routing'

async function namedApp (t: { teardown: (fn: () => unknown) => void }): Promise<FastifyInstance> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(routing)
  app.get('/', { config: { name: 'home' } }, async () => 'home')
  app.get('/users/:id', { config: { name: 'user' } }, async () => 'user')
  app.route({ method: ['GET', 'POST'], url: '/users/:id/posts/:post?', config: { name: 'post' }, handler: async () => 'post' })
  app.get('/files/*', { config: { name: 'files' } }, async () => 'files')
  app.get('/v1/*/shop/+', { config: { name: 'shop' } }, async () => 'shop')
  app.get('/mid/:a?/end', { config: { name: 'mid' } }, async () => 'mid')
  await app.register(async (scope) => {
    scope.get('/items/:sku', { config: { name: 'item' } }, async () => 'item')
  }, { prefix: '/api' })
  await app.ready()
  return app
}

t.test('getRouteURL: relative URLs with parameters percent-encoded', async (t) => {
  const app = await namedApp(t)
  const cases: Array<[string, Record<string, string | number | boolean>, string]> = [
    ['home', {}, '/'],
    ['user', { id: 42 }, '/users/42'],
    ['user', { id: 'a b/c?d#e%' }, '/users/a%20b%2Fc%3Fd%23e%25'],
    ['user', { id: 'été', unused: 'x' }, '/users/%C3%A9t%C3%A9'],
    ['post', { id: 1, post: 'hello' }, '/users/1/posts/hello'],
    ['post', { id: 1 }, '/users/1/posts'],
    ['post', { id: 1, post: '' }, '/users/1/posts'],
    ['files', { '*': 'docs/a b.txt' }, '/files/docs/a%20b.txt'],
    ['files', { '*1': 'x/y' }, '/files/x/y'],
    ['files', {}, '/files/'],
    ['shop', { '*1': 'a/b', '*2': 'c' }, '/v1/a/b/shop/c'],
    ['shop', { '*': 'a', '*2': true }, '/v1/a/shop/true'],
    ['mid', { a: 'x' }, '/mid/x/end'],
    ['mid', {}, '/mid/end'],
    ['item', { sku: 'K-1' }, '/api/items/K-1']
  ]
  for (const [name, params, url] of cases) {
    t.equal(app.getRouteURL(name, params), url, `${name} ${JSON.stringify(params)}`)
  }
})

t.test('getRouteURL: every built URL routes back to its route', async (t) => {
  const app = await namedApp(t)
  const urls: Array<[string, string]> = [
    [app.getRouteURL('user', { id: 'a b/c' }), 'user'],
    [app.getRouteURL('post', { id: 1 }), 'post'],
    [app.getRouteURL('shop', { '*1': 'x y', '*2': 'z' }), 'shop'],
    [app.getRouteURL('mid', {}), 'mid'],
    [app.getRouteURL('item', { sku: 'é' }), 'item']
  ]
  for (const [url, body] of urls) {
    const response = await app.inject(url)
    t.equal(response.statusCode, 200, url)
    t.equal(response.body, body, url)
  }
})

t.test('getRouteURL: unknown name and missing parameter are errors', async (t) => {
  const app = await namedApp(t)
  t.throws(() => app.getRouteURL('nope', {}), RouteNameNotFoundError)
  t.throws(() => app.getRouteURL('user', {}), RouteParamMissingError)
  t.throws(() => app.getRouteURL('user', { id: '' }), RouteParamMissingError)
  t.throws(() => app.getRouteURL('shop', { '*1': 'a' }), RouteParamMissingError, '+ needs a value')
  try {
    app.getRouteURL('post', {})
    t.fail('should throw')
  } catch (error) {
    t.equal((error as Error).message, 'Route "post" needs a value for parameter "id"')
  }
})

t.test('route names: one name, one pattern', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(routing)
  app.get('/a', { config: { name: 'a' } }, async () => 'a')
  app.post('/a', { config: { name: 'a' } }, async () => 'a') // same pattern, other method: fine
  t.throws(() => app.get('/b', { config: { name: 'a' } }, async () => 'b'), DuplicateRouteNameError)
  t.throws(() => app.get('/c', { config: { name: '' } }, async () => 'c'), { code: 'FST_ROUTING_INVALID_OPTION' })
})
