/** Handler chains and Next: several handlers per route, in order, an error ending the chain. */
import Fastify, { type FastifyInstance } from 'fastify'
import t from 'tap'
import context from '@user-product-service/context'
import routing, { chain, ChainHandlerError, type ChainHandler } from '@user-product-service/routing'

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

t.test('a value that is not an Error (thrown, rejected, passed to next) becomes ChainNonErrorError with it as the cause', async (t) => {
  const seen: Array<{ code?: string, cause?: unknown, statusCode?: number }> = []
  const app = await chainApp(t, (app) => {
    app.setErrorHandler((error: Error & { code?: string, statusCode?: number }, _request, reply) => {
      seen.push({ code: error.code, cause: error.cause, statusCode: error.statusCode })
      return reply.code(error.statusCode ?? 500).send({ code: error.code })
    })
    app.get('/throw', chain(() => { throw 'nope' as unknown as Error })) // eslint-disable-line no-throw-literal
    app.get('/reject', chain(async () => { await Promise.reject(42) })) // eslint-disable-line prefer-promise-reject-errors
    app.get('/undefined', chain(() => { throw undefined as unknown as Error })) // eslint-disable-line no-throw-literal
    app.get('/next', chain(async (_request, _reply, next) => { next({ reason: 'x' }) }, async () => 'unreachable'))
  })
  for (const url of ['/throw', '/reject', '/undefined', '/next']) {
    const response = await app.inject(url)
    t.equal(response.statusCode, 500, url)
    t.same(response.json(), { code: 'FST_ROUTING_NON_ERROR' }, url)
  }
  t.same(seen.map((s) => s.cause), ['nope', 42, undefined, { reason: 'x' }])
  t.ok(seen.every((s) => s.statusCode === 500))
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

t.test('next() returns the error of the rest of the chain: a middleware sees it, handles it or passes it on', async (t) => {
  const seen: string[] = []
  const app = await chainApp(t, (app) => {
    app.setErrorHandler((error: Error & { statusCode?: number }, _request, reply) => {
      return reply.code(error.statusCode ?? 500).send({ handled: error.message })
    })
    const failing: ChainHandler = async () => { throw Object.assign(new Error('downstream'), { statusCode: 409 }) }
    const handling: ChainHandler = async (_request, reply, next) => {
      const error = await next()
      seen.push(`handling saw ${error?.message ?? 'nothing'}`)
      if (error !== undefined) reply.code(503).sendString(`recovered from ${error.message}`)
    }
    const passingOn: ChainHandler = async (_request, reply, next) => {
      const error = await next()
      seen.push(`passing saw ${error?.message ?? 'nothing'}`)
      reply.header('x-outer', 'ran after the rest')
      if (error !== undefined) throw error
    }
    const returningIt: ChainHandler = async (_request, _reply, next) => await next()
    const timing: ChainHandler = async (_request, reply, next) => {
      const error = await next()
      reply.header('x-after', 'set after next() returned')
      return error
    }
    app.get('/handled', chain(handling, failing))
    app.get('/passed-on', chain(passingOn, failing))
    app.get('/returned', chain(returningIt, failing))
    app.get('/ok', chain(handling, async () => ({ fine: true })))
    app.get('/outer-headers', chain(timing, async (_request, reply) => { reply.json({ body: 'from the end' }) }))
    app.get('/two-levels', chain(handling, passingOn, failing))
    app.get('/next-error', chain(handling, async (_request, _reply, next) => { next(new Error('via next(error)')) }))
    app.get('/past-the-end', chain(async (_request, reply, next) => {
      const error = await next()
      return { code: (error as { code?: string } | undefined)?.code, status: (error as { statusCode?: number } | undefined)?.statusCode }
    }))
  })

  const handled = await app.inject('/handled')
  t.same([handled.statusCode, handled.body], [503, 'recovered from downstream'], 'handled: the error handler never runs')
  const passedOn = await app.inject('/passed-on')
  t.same([passedOn.statusCode, passedOn.json()], [409, { handled: 'downstream' }], 'passed on: the error handler answers')
  t.same((await app.inject('/returned')).json(), { handled: 'downstream' }, 'returning the error passes it on (Go style)')
  const ok = await app.inject('/ok')
  t.same(ok.json(), { fine: true })
  const outer = await app.inject('/outer-headers')
  t.same([outer.json(), outer.headers['x-after']], [{ body: 'from the end' }, 'set after next() returned'], 'the reply goes out after the chain returned')
  const twoLevels = await app.inject('/two-levels')
  t.same([twoLevels.statusCode, twoLevels.body], [503, 'recovered from downstream'], 'passed on by the middle, handled by the first')
  t.same((await app.inject('/next-error')).body, 'recovered from via next(error)')
  t.same((await app.inject('/past-the-end')).json(), { code: 'FST_ROUTING_NO_NEXT_HANDLER', status: 404 }, 'past the last handler: a 404 error the step can see')
  t.same(seen, [
    'handling saw downstream', 'passing saw downstream', 'handling saw nothing', 'passing saw downstream',
    'handling saw downstream', 'handling saw via next(error)'
  ])
})

t.test('next() not awaited (callback style): a downstream error still reaches the error handler', async (t) => {
  const app = await chainApp(t, (app) => {
    app.setErrorHandler((error: Error & { statusCode?: number }, _request, reply) => reply.code(error.statusCode ?? 500).send({ handled: error.message }))
    app.get('/sync', chain((_request, _reply, next) => { setImmediate(next) }, async () => { throw Object.assign(new Error('late'), { statusCode: 422 }) }))
    app.get('/async', chain(async (_request, _reply, next) => { next() }, async () => { throw Object.assign(new Error('unread'), { statusCode: 418 }) }))
  })
  t.same((await app.inject('/sync')).json(), { handled: 'late' })
  t.equal((await app.inject('/sync')).statusCode, 422)
  t.equal((await app.inject('/async')).statusCode, 418)
})
