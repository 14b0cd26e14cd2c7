/** SPEC.md "Routing model" 1 and Next: several handlers per route, in order, an error ending the chain. */
import Fastify, { type FastifyInstance } from 'fastify'
import t from 'tap'
import context from '../../src/plugins/context/index.js'
import routing, { chain, ChainHandlerError, type ChainHandler } from '../../src/plugins/routing/index.js'

async function chainApp (t: { teardown: (fn: () => unknown) => void }, setup: (app: FastifyInstance) => void): Promise<FastifyInstance> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(context)
  await app.register(routing)
  setup(app)
  await app.ready()
  return app
}

const mark = (name: string): ChainHandler => async (_request, reply, next) => {
  reply.append('x-trail', name)
  next()
}

t.test('handlers run in order; next() passes on; the last one answers', async (t) => {
  const app = await chainApp(t, (app) => {
    app.get('/', chain(mark('a'), (_request, reply, next) => {
      // callback style: next() later
      reply.append('x-trail', 'b')
      setImmediate(next)
    }, mark('c'), async (_request, reply) => {
      reply.append('x-trail', 'end')
      return { done: true }
    }))
  })
  const response = await app.inject('/')
  t.equal(response.statusCode, 200)
  t.same(response.json(), { done: true })
  t.equal(response.headers['x-trail'], 'a, b, c, end')
})

t.test('an error passed to next(), thrown or rejected ends the chain in the error handler', async (t) => {
  const ran: string[] = []
  const app = await chainApp(t, (app) => {
    app.setErrorHandler((error: Error & { statusCode?: number }, _request, reply) => {
      ran.push(`error-handler:${error.message}`)
      return reply.code(error.statusCode ?? 500).send({ handled: error.message })
    })
    const last: ChainHandler = async () => { ran.push('last'); return 'unreachable' }
    app.get('/next', chain(async (_request, _reply, next) => { next(Object.assign(new Error('via next'), { statusCode: 418 })) }, last))
    app.get('/throw', chain(() => { throw Object.assign(new Error('thrown'), { statusCode: 409 }) }, last))
    app.get('/reject', chain(async () => { throw new Error('rejected') }, last))
    app.get('/last-next', chain(mark('a'), async (_request, _reply, next) => { next(Object.assign(new Error('from last'), { statusCode: 422 })) }))
  })
  const viaNext = await app.inject('/next')
  t.equal(viaNext.statusCode, 418)
  t.same(viaNext.json(), { handled: 'via next' })
  t.equal((await app.inject('/throw')).statusCode, 409)
  t.equal((await app.inject('/reject')).statusCode, 500)
  t.equal((await app.inject('/last-next')).statusCode, 422)
  t.notOk(ran.includes('last'), 'the handlers after the error never run')
  t.same(ran, ['error-handler:via next', 'error-handler:thrown', 'error-handler:rejected', 'error-handler:from last'])
})

t.test('a step that returns without next() ends the chain and sends what it has', async (t) => {
  const app = await chainApp(t, (app) => {
    const never: ChainHandler = async (_request, reply) => reply.send('never')
    app.get('/written', chain(async (_request, reply) => { reply.code(401).writeString('stopped here') }, never))
    app.get('/returned', chain(async () => ({ early: true }), never))
    app.get('/reply', chain(async (_request, reply) => reply.code(403).send('sent'), never))
    app.get('/next-twice', chain(async (_request, _reply, next) => { next(); next() }, async () => 'once'))
  })
  const written = await app.inject('/written')
  t.equal(written.statusCode, 401)
  t.equal(written.body, 'stopped here')
  t.same((await app.inject('/returned')).json(), { early: true })
  const sent = await app.inject('/reply')
  t.equal(sent.statusCode, 403)
  t.equal(sent.body, 'sent')
  t.equal((await app.inject('/next-twice')).body, 'once', 'a second next() is ignored')
})

t.test('next() in the last handler: no later handler matches, 404', async (t) => {
  const app = await chainApp(t, (app) => {
    app.get('/', chain(mark('a'), async (_request, _reply, next) => { next() }))
  })
  t.equal((await app.inject('/')).statusCode, 404)
})

t.test('chains combine with route options and patterns; chain() refuses bad input', async (t) => {
  const app = await chainApp(t, (app) => {
    app.route({
      method: 'GET',
      url: '/items/+',
      config: { name: 'items' },
      ...chain(mark('a'), async (request) => request.params)
    })
  })
  const response = await app.inject('/items/x/y')
  t.same(response.json(), { '*1': 'x/y', '*': 'x/y' })
  t.equal(response.headers['x-trail'], 'a')
  t.throws(() => chain(), ChainHandlerError)
  t.throws(() => chain('x' as unknown as ChainHandler), ChainHandlerError)
})
