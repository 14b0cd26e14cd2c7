/**
 * Public types of the routing plugin, checked by `npx tsc -p tsconfig.json` (each
 * `@ts-expect-error` fails the check when the misuse stops being an error), and its runtime
 * exports, checked by tap.
 */
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify'
import t from 'tap'
import { Type } from 'typebox'
import * as routingModule from '@user-product-service/routing'
import routing, { chain, type ChainHandler, type RoutingOptions } from '@user-product-service/routing'

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true : false
function expectType<A, B> (_proof: Equal<A, B>): void {}

function typeErrors (app: FastifyInstance) {
  // @ts-expect-error parameter values are text, numbers or booleans
  app.getRouteURL('user', { id: { nested: true } })
  // @ts-expect-error methodNotAllowed is a boolean
  const wrong: RoutingOptions = { methodNotAllowed: 1 }
  // @ts-expect-error maxRestarts is a number
  const options: RoutingOptions = { maxRestarts: '3' }
  // @ts-expect-error a route name is text
  app.get('/x', { config: { name: 7 } }, async () => 'x')
  // @ts-expect-error chain steps take (request, reply, next)
  chain((_request: unknown, _reply: unknown, _next: unknown, _extra: string) => undefined)
  return [options, wrong]
}

t.test('typed usage compiles', async (t) => {
  const app = Fastify().withTypeProvider<TypeBoxTypeProvider>()
  t.teardown(() => app.close())
  await app.register(routing, { maxRestarts: 3 })
  expectType<ReturnType<typeof app.getRouteURL>, string>(true)
  expectType<ReturnType<FastifyReply['restartRouting']>, FastifyReply>(true)

  const step: ChainHandler = async (_request, reply, next) => { reply.header('x-step', '1'); next() }
  app.get('/items/:id', {
    schema: { params: Type.Object({ id: Type.String() }) },
    config: { name: 'item' },
    ...chain(step, async (request) => ({ id: (request.params as { id: string }).id }))
  })
  await app.static('/assets', process.cwd(), { index: false })
  await app.ready()
  t.equal(app.getRouteURL('item', { id: 'a b' }), '/items/a%20b')
  t.same((await app.inject('/items/7')).json(), { id: '7' })
  t.type(typeErrors, 'function')
})

t.test('runtime exports are the documented ones', async (t) => {
  t.same(Object.keys(routingModule).sort(), [
    'ChainHandlerError', 'ChainNonErrorError', 'DuplicateRouteNameError', 'NoNextHandlerError', 'PATTERN_CONSTRAINT', 'RestartLimitError', 'RouteMethodNotAllowedError', 'RouteNameNotFoundError',
    'RouteParamDecodeError', 'RouteParamMissingError', 'RoutePatternError', 'RoutingOptionError',
    'buildURL', 'chain', 'compilePattern', 'default', 'matchCompiled', 'parsePattern'
  ].sort())
})
