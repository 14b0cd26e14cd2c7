/** Options: checked at registration with clear errors, defaults, the caller's object left alone. */
import fastifyCookie from '@fastify/cookie'
import t, { type Test } from 'tap'
import keyAuth, {
  KeyAuthCookiePluginMissingError,
  KeyAuthOptionError,
  keyAuthHook,
  type KeyAuthPluginOptions
} from '@user-product-service/key-auth'
import { bare, GOOD_KEY, guarded, validator } from './helpers.js'

const OPTION_ERROR = 'FST_KEYAUTH_INVALID_OPTION'

/** Registers key-auth with `options` and expects the registration to fail with `match`. */
async function refused (t: Test, options: unknown, match: { code: string, message: RegExp }) {
  const app = bare(t)
  // `register` returns a thenable, not a Promise: wrap it for t.rejects.
  await t.rejects(async () => { await app.register(keyAuth, options as KeyAuthPluginOptions) }, match)
}

t.test('bad options fail at registration, naming the option', async (t) => {
  const cases: [string, unknown, RegExp][] = [
    ['no validator', {}, /validator is required/],
    ['validator not a function', { validator: 'secret' }, /validator is required/],
    ['keyLookup not a string', { validator, keyLookup: 42 }, /keyLookup must be a string/],
    ['keyLookup without a colon', { validator, keyLookup: 'header' }, /keyLookup "header" must be "<source>:<name>"/],
    ['unknown source', { validator, keyLookup: 'body:key' }, /keyLookup "body:key" must be "<source>:<name>" with source one of header, cookie, query, form, param/],
    ['source without a name', { validator, keyLookup: 'query:' }, /keyLookup "query:" names no query/],
    ['header name with a space', { validator, keyLookup: 'header:X Api Key' }, /"X Api Key" is not a valid header name/],
    ['cookie name with a semicolon', { validator, keyLookup: 'cookie:a;b' }, /"a;b" is not a valid cookie name/],
    ['authScheme of two words', { validator, authScheme: 'Bearer token' }, /authScheme must be a single word/],
    ['authScheme not a string', { validator, authScheme: 1 }, /authScheme must be a single word/],
    ['authScheme on a query source', { validator, keyLookup: 'query:key', authScheme: 'Bearer' }, /authScheme applies to header sources only/],
    ['empty contextKey', { validator, contextKey: '' }, /contextKey must be a non-empty string/],
    ['contextKey not a string', { validator, contextKey: 7 }, /contextKey must be a non-empty string/],
    ['next not a function', { validator, next: true }, /next must be a function/],
    ['successHandler not a function', { validator, successHandler: 'ok' }, /successHandler must be a function/],
    ['errorHandler not a function', { validator, errorHandler: {} }, /errorHandler must be a function/],
    ['misspelt option', { validator, keylookup: 'query:key' }, /unknown option "keylookup"/],
    ['unknown hook', { validator, hook: 'onSend' }, /hook must be false or one of onRequest, preParsing, preValidation, preHandler/],
    ['form lookup in onRequest', { validator, keyLookup: 'form:key', hook: 'onRequest' }, /reads the parsed body, which onRequest runs before/],
    ['form lookup in preParsing', { validator, keyLookup: 'form:key', hook: 'preParsing' }, /reads the parsed body, which preParsing runs before/],
    ['decorator with a hook', { validator, decorator: 'verifyAdmin' }, /decorator is used only with hook: false/],
    ['decorator not an identifier', { validator, hook: false, decorator: 'verify-admin' }, /decorator must be an identifier/]
  ]
  for (const [name, options, message] of cases) {
    await t.test(name, async (t) => refused(t, options, { code: OPTION_ERROR, message }))
  }
})

t.test('the option error is a TypeError made with @fastify/error', async (t) => {
  const error = new KeyAuthOptionError('x')
  t.ok(error instanceof TypeError)
  t.equal(error.code, OPTION_ERROR)
  t.equal(error.message, 'keyauth: x')
})

t.test('keyAuthHook checks its options when it is created', async (t) => {
  t.throws(() => keyAuthHook(null as never), { code: OPTION_ERROR, message: /options must be an object/ })
  t.throws(() => keyAuthHook({} as never), { code: OPTION_ERROR, message: /validator is required/ })
  t.throws(() => keyAuthHook({ validator, keyLookup: 'nowhere:key' } as never), { code: OPTION_ERROR })
  // Plugin-only options are not hook options.
  t.throws(() => keyAuthHook({ validator, hook: false } as never), { code: OPTION_ERROR, message: /unknown option "hook"/ })
})

t.test('a cookie lookup needs @fastify/cookie registered first', async (t) => {
  await t.test('missing', async (t) => {
    await refused(t, { validator, keyLookup: 'cookie:access_token' }, {
      code: 'FST_KEYAUTH_COOKIE_PLUGIN_MISSING',
      message: /keyLookup "cookie:access_token" reads a cookie, but @fastify\/cookie is not registered/
    })
  })
  await t.test('registered after key-auth', async (t) => {
    const app = bare(t)
    app.register(keyAuth, { validator, keyLookup: 'cookie:access_token' })
    app.register(fastifyCookie)
    await t.rejects(async () => { await app.ready() }, KeyAuthCookiePluginMissingError)
  })
  await t.test('registered before key-auth', async (t) => {
    const app = bare(t)
    await app.register(fastifyCookie)
    await app.register(keyAuth, { validator, keyLookup: 'cookie:access_token' })
    await app.ready()
    t.pass('registered')
  })
})

t.test("the caller's options object is not changed (a frozen object works)", async (t) => {
  const options = Object.freeze({ validator, keyLookup: 'header:X-API-Key' as const })
  const app = await guarded(t, options)
  t.same(Object.keys(options), ['validator', 'keyLookup'])
  t.equal((await app.inject({ url: '/', headers: { 'x-api-key': GOOD_KEY } })).statusCode, 200)
  // The same object registered twice gives two independent guards.
  const second = await guarded(t, options)
  t.equal((await second.inject({ url: '/' })).statusCode, 401)
})

t.test("Fastify's own register options (prefix) are accepted alongside", async (t) => {
  const app = bare(t)
  await app.register(keyAuth, { validator, prefix: '/ignored' } as KeyAuthPluginOptions)
  app.get('/', async () => 'ok')
  t.equal((await app.inject({ url: '/' })).statusCode, 401)
})

t.test('defaults', async (t) => {
  const app = await guarded(t)

  await t.test('keyLookup header:Authorization with scheme Bearer, contextKey token', async (t) => {
    const res = await app.inject({ url: '/', headers: { authorization: `Bearer ${GOOD_KEY}` } })
    t.equal(res.statusCode, 200)
    t.same(res.json(), { keyAuth: { token: GOOD_KEY } })
  })

  await t.test('error handler: 401, the exact texts as text/plain, a Bearer challenge', async (t) => {
    const missing = await app.inject({ url: '/' })
    t.equal(missing.statusCode, 401)
    t.equal(missing.body, 'missing or malformed API Key')
    t.equal(missing.headers['content-type'], 'text/plain; charset=utf-8')
    t.equal(missing.headers['www-authenticate'], 'Bearer')

    const wrong = await app.inject({ url: '/', headers: { authorization: 'Bearer not-the-key' } })
    t.equal(wrong.statusCode, 401)
    t.equal(wrong.body, 'Invalid or expired API Key')
    t.equal(wrong.headers['content-type'], 'text/plain; charset=utf-8')
    t.equal(wrong.headers['www-authenticate'], 'Bearer')
  })

  await t.test('a request that is not guarded has no keyAuth: null', async (t) => {
    const open = bare(t)
    await open.register(keyAuth, { validator, next: () => true })
    open.get('/', async (request) => ({ keyAuth: request.keyAuth }))
    t.same((await open.inject({ url: '/' })).json(), { keyAuth: null })
  })

  await t.test('hook onRequest: the key is checked before the body is read', async (t) => {
    const app = await guarded(t, {}, (app) => app.post('/echo', async (request) => request.body))
    const res = await app.inject({ method: 'POST', url: '/echo', headers: { 'content-type': 'application/json' }, payload: '{not json' })
    t.equal(res.statusCode, 401, 'refused before the malformed body is parsed')
  })
})

t.test('the hook option moves the check later in the request', async (t) => {
  // [hook, answer to a malformed JSON body, answer to valid JSON that fails the schema]:
  // 401 where key-auth runs before that step, 400 where the step runs first.
  const cases = [
    ['onRequest', 401, 401],
    ['preParsing', 401, 401],
    ['preValidation', 400, 401],
    ['preHandler', 400, 400]
  ] as const
  for (const [hook, malformed, invalid] of cases) {
    await t.test(hook, async (t) => {
      const app = await guarded(t, { hook }, (app) => {
        app.post('/echo', { schema: { body: { type: 'object', required: ['name'] } } }, async (request) => request.body)
      })
      const json = { 'content-type': 'application/json' }
      t.equal((await app.inject({ method: 'POST', url: '/echo', headers: json, payload: '{not json' })).statusCode, malformed, 'malformed body')
      t.equal((await app.inject({ method: 'POST', url: '/echo', payload: {} })).statusCode, invalid, 'body failing the schema')
      const ok = await app.inject({ method: 'POST', url: '/echo', payload: { name: 'x' }, headers: { authorization: `Bearer ${GOOD_KEY}` } })
      t.equal(ok.statusCode, 200)
      t.same(ok.json(), { name: 'x' })
    })
  }
})

t.test('WWW-Authenticate names the scheme only for header sources that have one', async (t) => {
  const cases: [Partial<KeyAuthPluginOptions>, string | undefined][] = [
    [{ authScheme: 'ApiKey' }, 'ApiKey'],
    [{ keyLookup: 'header:X-API-Key' }, undefined],
    [{ keyLookup: 'header:Authorization', authScheme: '' }, undefined],
    [{ keyLookup: 'query:api_key' }, undefined]
  ]
  for (const [options, challenge] of cases) {
    const app = await guarded(t, options)
    const res = await app.inject({ url: '/' })
    t.equal(res.statusCode, 401)
    t.equal(res.headers['www-authenticate'], challenge, JSON.stringify(options))
  }
})
