/**
 * The registration styles: the whole application, one encapsulated context (a prefix),
 * single routes (the exported hook, or the decorator of `hook: false`), composition.
 */
import type { FastifyReply, FastifyRequest } from 'fastify'
import fastifyFormbody from '@fastify/formbody'
import t from 'tap'
import keyAuth, { KeyAuthInvalidKeyError, keyAuthHook, type KeyAuthHook } from '@user-product-service/key-auth'
import { bare, GOOD_KEY, OTHER_KEY, validator } from './helpers.js'

const auth = (key: string) => ({ authorization: `Bearer ${key}` })

t.test('the whole application: every route, and unknown paths too', async (t) => {
  const app = bare(t)
  await app.register(keyAuth, { validator })
  app.get('/a', async () => 'a')
  await app.register(async (child) => { child.get('/b', async () => 'b') }, { prefix: '/child' })

  for (const url of ['/a', '/child/b', '/no-such-route']) {
    t.equal((await app.inject({ url })).statusCode, 401, `${url} without a key`)
  }
  t.equal((await app.inject({ url: '/a', headers: auth(GOOD_KEY) })).body, 'a')
  t.equal((await app.inject({ url: '/child/b', headers: auth(GOOD_KEY) })).body, 'b')
  t.equal((await app.inject({ url: '/no-such-route', headers: auth(GOOD_KEY) })).statusCode, 404, 'the route table is not revealed without a key')
})

t.test('one encapsulated context: its routes are guarded, the others stay open', async (t) => {
  const app = bare(t)
  app.get('/public', async () => 'public')
  await app.register(async (admin) => {
    await admin.register(keyAuth, { validator })
    admin.get('/stats', async (request) => ({ keyAuth: request.keyAuth }))
    await admin.register(async (nested) => { nested.get('/deep', async () => 'deep') }, { prefix: '/nested' })
  }, { prefix: '/admin' })
  await app.register(async (other) => { other.get('/list', async () => 'list') }, { prefix: '/other' })
  app.get('/after', async () => 'registered after the guarded context')

  t.equal((await app.inject({ url: '/admin/stats' })).statusCode, 401)
  t.equal((await app.inject({ url: '/admin/nested/deep' })).statusCode, 401, 'nested contexts inherit the hook')
  t.same((await app.inject({ url: '/admin/stats', headers: auth(GOOD_KEY) })).json(), { keyAuth: { token: GOOD_KEY } })
  t.equal((await app.inject({ url: '/admin/nested/deep', headers: auth(OTHER_KEY) })).body, 'deep')
  for (const url of ['/public', '/other/list', '/after']) {
    const res = await app.inject({ url })
    t.equal(res.statusCode, 200, `${url} stays open`)
  }
})

t.test('two sibling contexts, each with its own keys', async (t) => {
  const app = bare(t)
  await app.register(async (a) => {
    await a.register(keyAuth, { validator: (_request, key) => key === 'key-a' })
    a.get('/', async () => 'a')
  }, { prefix: '/a' })
  await app.register(async (b) => {
    await b.register(keyAuth, { validator: (_request, key) => key === 'key-b', keyLookup: 'header:X-API-Key' })
    b.get('/', async () => 'b')
  }, { prefix: '/b' })

  t.equal((await app.inject({ url: '/a', headers: auth('key-a') })).body, 'a')
  t.equal((await app.inject({ url: '/a', headers: auth('key-b') })).statusCode, 401)
  t.equal((await app.inject({ url: '/b', headers: { 'x-api-key': 'key-b' } })).body, 'b')
  t.equal((await app.inject({ url: '/b', headers: { 'x-api-key': 'key-a' } })).statusCode, 401)
})

t.test('single routes, with the exported hook', async (t) => {
  const app = bare(t)
  await app.register(fastifyFormbody)
  const guard = keyAuthHook({ validator })
  app.get('/open', async (request) => ({ keyAuth: request.keyAuth ?? null }))
  app.get('/guarded', { onRequest: guard }, async (request) => ({ keyAuth: request.keyAuth }))
  app.post('/form', { preHandler: keyAuthHook({ validator, keyLookup: 'form:key' }) }, async () => 'posted')

  t.equal((await app.inject({ url: '/open' })).statusCode, 200)
  const refused = await app.inject({ url: '/guarded' })
  t.equal(refused.statusCode, 401)
  t.equal(refused.body, 'missing or malformed API Key')
  t.same((await app.inject({ url: '/guarded', headers: auth(GOOD_KEY) })).json(), { keyAuth: { token: GOOD_KEY } })

  const form = { 'content-type': 'application/x-www-form-urlencoded' }
  t.equal((await app.inject({ method: 'POST', url: '/form', headers: form, payload: `key=${GOOD_KEY}` })).body, 'posted')
  t.equal((await app.inject({ method: 'POST', url: '/form', headers: form, payload: 'key=wrong' })).statusCode, 401)
})

t.test('the exported hook with a cookie lookup and no @fastify/cookie: a clear 500, not a silent 401', async (t) => {
  const app = bare(t)
  app.get('/', { onRequest: keyAuthHook({ validator, keyLookup: 'cookie:sid' }) }, async () => 'ok')
  let logged: unknown
  app.setErrorHandler((error, _request, reply) => { logged = error; return reply.code(500).send('misconfigured') })
  t.equal((await app.inject({ url: '/', cookies: { sid: GOOD_KEY } })).statusCode, 500)
  t.match(logged, { code: 'FST_KEYAUTH_COOKIE_PLUGIN_MISSING' })
})

t.test('hook: false decorates the instance with the verification function', async (t) => {
  const app = bare(t)
  await app.register(keyAuth, { validator, hook: false })
  await app.register(keyAuth, { validator: (_request, key) => key === 'ops-key', hook: false, decorator: 'verifyOpsKey', keyLookup: 'header:X-Ops-Key', contextKey: 'ops' })
  t.type(app.verifyKeyAuth, 'function')
  app.get('/open', async () => 'open')
  app.get('/guarded', { onRequest: app.verifyKeyAuth! }, async (request) => ({ keyAuth: request.keyAuth }))
  app.get('/ops', { onRequest: app.getDecorator<KeyAuthHook>('verifyOpsKey') }, async () => 'ops')
  // Both guards on one route (AND), each keeping its key under its own context key.
  app.get('/both', { onRequest: [app.verifyKeyAuth!, app.getDecorator<KeyAuthHook>('verifyOpsKey')] }, async (request) => ({ keyAuth: request.keyAuth }))

  t.equal((await app.inject({ url: '/open' })).statusCode, 200, 'no hook was added')
  t.equal((await app.inject({ url: '/guarded' })).statusCode, 401)
  t.same((await app.inject({ url: '/guarded', headers: auth(GOOD_KEY) })).json(), { keyAuth: { token: GOOD_KEY } })
  t.equal((await app.inject({ url: '/ops', headers: { 'x-ops-key': 'ops-key' } })).body, 'ops')
  t.equal((await app.inject({ url: '/ops', headers: auth(GOOD_KEY) })).statusCode, 401)
  t.equal((await app.inject({ url: '/both', headers: auth(GOOD_KEY) })).statusCode, 401, 'one key is not enough')
  t.same((await app.inject({ url: '/both', headers: { ...auth(GOOD_KEY), 'x-ops-key': 'ops-key' } })).json(), { keyAuth: { token: GOOD_KEY, ops: 'ops-key' } },
    'both keys kept, each under its context key')
})

t.test('composition (@fastify/auth style): a throwing error handler lets another guard decide', async (t) => {
  // With an error handler that throws, the hook rejects without answering, which is what
  // @fastify/auth's `relation: 'or'` expects. This is that relation, in three lines.
  const rethrow = (_request: FastifyRequest, _reply: FastifyReply, error: Error) => { throw error }
  const adminKey = keyAuthHook({ validator: (_request, key) => key === 'admin', errorHandler: rethrow, contextKey: 'admin' })
  const serviceKey = keyAuthHook({ validator: (_request, key) => key === 'service', keyLookup: 'header:X-Service-Key', errorHandler: rethrow, contextKey: 'service' })
  const either = (guards: KeyAuthHook[]): KeyAuthHook => async (request, reply) => {
    let last: unknown
    for (const guard of guards) {
      try { return await guard(request, reply) } catch (error) { last = error }
    }
    throw last
  }
  const app = bare(t)
  app.get('/', { onRequest: either([adminKey, serviceKey]) }, async (request) => ({ keyAuth: request.keyAuth }))

  t.same((await app.inject({ url: '/', headers: auth('admin') })).json(), { keyAuth: { admin: 'admin' } })
  t.same((await app.inject({ url: '/', headers: { 'x-service-key': 'service' } })).json(), { keyAuth: { service: 'service' } })
  const neither = await app.inject({ url: '/', headers: { 'x-service-key': 'nope' } })
  t.equal(neither.statusCode, 401, 'the rejected error keeps its 401')
  t.equal(neither.json().code, 'FST_KEYAUTH_INVALID_KEY')

  // The hook alone: rejects with the error and sends nothing.
  const reply = { sent: false } as FastifyReply
  await t.rejects(adminKey({ headers: auth('nope') } as unknown as FastifyRequest, reply), KeyAuthInvalidKeyError)
  t.equal(reply.sent, false)
})
