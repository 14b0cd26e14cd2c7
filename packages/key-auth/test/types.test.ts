/**
 * The public types of key-auth. This file is checked by `npx tsc -p tsconfig.json` (the
 * `@ts-expect-error` lines fail the type check when a misuse stops being an error), and
 * run by tap for the runtime half: the module exports exactly the documented values.
 */
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify'
import t from 'tap'
import { Type } from 'typebox'
import * as keyauthModule from '@user-product-service/key-auth'
import keyAuth, {
  createKeySet,
  KeyAuthInvalidKeyError,
  KeyAuthMissingOrMalformedError,
  keyAuthHook,
  type KeyAuthContext,
  type KeyAuthErrorHandler,
  type KeyAuthHook,
  type KeyAuthOptions,
  type KeyAuthPluginOptions,
  type KeyLookup,
  type KeySet
} from '@user-product-service/key-auth'

/** True when A and B are the same type. */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true : false
function expectType<A, B> (_proof: Equal<A, B>): void {}

/** Each line is a type error; `tsc` fails if one stops being one. */
function typeErrors (validator: (request: FastifyRequest, key: string) => boolean) {
  // @ts-expect-error the validator is required
  keyAuthHook({ keyLookup: 'header:Authorization' })
  // @ts-expect-error a source that does not exist
  keyAuthHook({ validator, keyLookup: 'body:key' })
  // @ts-expect-error a validator must answer a boolean
  keyAuthHook({ validator: () => 'yes' })
  // @ts-expect-error hooks after the handler cannot guard it
  const late: KeyAuthPluginOptions = { validator, hook: 'onSend' }
  // @ts-expect-error next answers a boolean, synchronously
  keyAuthHook({ validator, next: async () => true })
  return late
}

t.test('typed usage compiles; misuse does not', async (t) => {
  const keys: KeySet = createKeySet(['a-key-for-the-types'])
  const validator = (_request: FastifyRequest, key: string) => keys.has(key)

  const app = Fastify().withTypeProvider<TypeBoxTypeProvider>()
  t.teardown(async () => { await app.close() })
  await app.register(keyAuth, { validator, keyLookup: 'header:X-API-Key', contextKey: 'apiKey', hook: 'preHandler' })

  // The request decorator and the optional instance decorator.
  expectType<FastifyRequest['keyAuth'], KeyAuthContext | null>(true)
  expectType<NonNullable<FastifyRequest['keyAuth']>['token'], string | undefined>(true)
  expectType<typeof app.verifyKeyAuth, KeyAuthHook | undefined>(true)
  expectType<ReturnType<typeof keyAuthHook>, KeyAuthHook>(true)

  // The hook fits typed routes (TypeBox params) as onRequest and as preHandler.
  const guard = keyAuthHook({ validator, successHandler: (_request, reply) => reply.header('x-ok', '1') })
  app.get('/items/:id', {
    onRequest: guard,
    preHandler: [guard],
    schema: { params: Type.Object({ id: Type.Integer() }) }
  }, async (request) => {
    expectType<typeof request.params.id, number>(true)
    return { id: request.params.id, key: request.keyAuth?.apiKey ?? null }
  })

  // Handlers may answer, return nothing, or be async.
  const errorHandler: KeyAuthErrorHandler = async (_request: FastifyRequest, reply: FastifyReply, error: Error) => {
    return reply.code(401).send({ message: error.message })
  }
  const options: KeyAuthOptions = { validator: async () => true, errorHandler, next: (request) => request.url === '/health' }
  const pluginOptions: KeyAuthPluginOptions = { ...options, hook: false, decorator: 'verifyOther' }
  const lookups: KeyLookup[] = ['header:Authorization', 'cookie:access_token', 'query:api_key', 'form:api_key', 'param:key']
  t.ok(pluginOptions && lookups)

  // Misuse: compiled, never run.
  t.type(typeErrors, 'function')

  // The errors are constructors with a code and a status.
  const missing = new KeyAuthMissingOrMalformedError()
  expectType<typeof missing.code, 'FST_KEYAUTH_MISSING_OR_MALFORMED'>(true)
  t.equal(missing.statusCode, 401)
  t.equal(new KeyAuthInvalidKeyError().statusCode, 401)
  await app.ready()
})

t.test('the module exports exactly the documented values', async (t) => {
  t.same(Object.keys(keyauthModule).sort(), [
    'INVALID_KEY_MESSAGE',
    'KeyAuthCookiePluginMissingError',
    'KeyAuthInvalidKeyError',
    'KeyAuthMissingOrMalformedError',
    'KeyAuthOptionError',
    'MISSING_OR_MALFORMED_MESSAGE',
    'createKeySet',
    'default',
    'keyAuthHook'
  ])
  t.equal(keyauthModule.default, keyAuth)
  t.equal((keyAuth as unknown as Record<symbol, unknown>)[Symbol.for('plugin-meta')] !== undefined, true, 'wrapped with fastify-plugin')
  t.match((keyAuth as unknown as Record<symbol, { name: string }>)[Symbol.for('plugin-meta')], { name: 'keyauth', fastify: '5.x' })
})
