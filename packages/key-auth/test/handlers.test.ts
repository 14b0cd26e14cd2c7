/** Validator outcomes, next, the success and error handlers, and the context key. */
import { Writable } from 'node:stream'
import Fastify from 'fastify'
import t from 'tap'
import keyAuth, {
  KeyAuthInvalidKeyError,
  KeyAuthMissingOrMalformedError,
  type KeyAuthErrorHandler
} from '@user-product-service/key-auth'
import { GOOD_KEY, guarded, OTHER_KEY } from './helpers.js'

const MISSING = 'missing or malformed API Key'
const INVALID = 'Invalid or expired API Key'
const auth = (key: string) => ({ authorization: `Bearer ${key}` })

t.test('the validator gets the request and the key; only `true` accepts', async (t) => {
  const seen: { url: string, key: string }[] = []
  const results: Record<string, unknown> = { yes: true, no: false, one: 1, text: 'true', nothing: undefined, later: Promise.resolve(true) }
  const app = await guarded(t, {
    validator: (request, key) => {
      seen.push({ url: request.url, key })
      return results[key] as boolean
    }
  })
  t.equal((await app.inject({ url: '/?x=1', headers: auth('yes') })).statusCode, 200)
  t.same(seen, [{ url: '/?x=1', key: 'yes' }])
  t.equal((await app.inject({ url: '/', headers: auth('later') })).statusCode, 200, 'a Promise resolving true')
  for (const key of ['no', 'one', 'text', 'nothing']) {
    const res = await app.inject({ url: '/', headers: auth(key) })
    t.equal(res.statusCode, 401, `validator result ${key}`)
    t.equal(res.body, INVALID)
  }
  t.equal((await app.inject({ url: '/' })).statusCode, 401)
  t.equal(seen.length, 6, 'not called when the key is missing')
})

t.test('a validator that throws or rejects: the error handler gets that error', async (t) => {
  const boom = new Error('database down')
  const got: Error[] = []
  const errorHandler: KeyAuthErrorHandler = (_request, reply, error) => {
    got.push(error)
    return reply.code(401).send({ code: (error as { code?: string }).code ?? null, message: error.message })
  }
  const app = await guarded(t, {
    errorHandler,
    validator: async (_request, key) => {
      if (key === 'throw') throw boom
      if (key === 'reject') return await Promise.reject(new Error('rejected'))
      if (key === 'string') throw 'no' // eslint-disable-line no-throw-literal
      if (key === 'malformed') throw new KeyAuthMissingOrMalformedError()
      return key === GOOD_KEY
    }
  })
  t.same((await app.inject({ url: '/', headers: auth('throw') })).json(), { code: null, message: 'database down' })
  t.equal(got[0], boom, 'the very error thrown')
  t.same((await app.inject({ url: '/', headers: auth('reject') })).json(), { code: null, message: 'rejected' })
  const wrapped = await app.inject({ url: '/', headers: auth('string') })
  t.same(wrapped.json(), { code: 'FST_KEYAUTH_INVALID_KEY', message: INVALID }, 'a non-Error becomes the invalid-key error')
  t.equal((got[2] as Error & { cause?: unknown }).cause, 'no', 'with what was thrown as its cause')
  t.same((await app.inject({ url: '/', headers: auth('malformed') })).json(), { code: 'FST_KEYAUTH_MISSING_OR_MALFORMED', message: MISSING })
  t.same((await app.inject({ url: '/', headers: auth('other') })).json(), { code: 'FST_KEYAUTH_INVALID_KEY', message: INVALID })
  t.same((await app.inject({ url: '/' })).json(), { code: 'FST_KEYAUTH_MISSING_OR_MALFORMED', message: MISSING })
})

t.test('the default error handler: validator errors answer the invalid-key text and are logged', async (t) => {
  const lines: Record<string, unknown>[] = []
  const stream = new Writable({ write (chunk, _encoding, done) { lines.push(JSON.parse(String(chunk))); done() } })
  const app = Fastify({ logger: { level: 'info', stream } })
  t.teardown(async () => { await app.close() })
  await app.register(keyAuth, {
    validator: (_request, key) => {
      if (key === 'throw') throw new Error('database down')
      if (key === 'malformed') throw new KeyAuthMissingOrMalformedError()
      return false
    }
  })
  app.get('/', async () => 'ok')

  const thrown = await app.inject({ url: '/', headers: auth('throw') })
  t.equal(thrown.statusCode, 401)
  t.equal(thrown.body, INVALID)
  t.notMatch(thrown.body, /database/, 'the cause is not sent')
  const logged = lines.filter((line) => line.msg === 'key-auth: the validator failed')
  t.equal(logged.length, 1)
  t.equal(logged[0]?.level, 50, 'at error level')
  t.match(logged[0]?.err, { message: 'database down' })

  t.equal((await app.inject({ url: '/', headers: auth('malformed') })).body, MISSING, 'the validator may answer missing-or-malformed')
  t.equal((await app.inject({ url: '/', headers: auth('wrong') })).body, INVALID)
  t.equal(lines.filter((line) => line.msg === 'key-auth: the validator failed').length, 1, 'refused keys are not logged as failures')
})

t.test('next: true skips key-auth for that request', async (t) => {
  const app = await guarded(t, { next: (request) => request.headers['x-skip'] === 'yes' }, (app) => {
    app.get('/public', async (request) => ({ keyAuth: request.keyAuth }))
  })
  const skipped = await app.inject({ url: '/public', headers: { 'x-skip': 'yes', ...auth(GOOD_KEY) } })
  t.equal(skipped.statusCode, 200)
  t.same(skipped.json(), { keyAuth: null }, 'skipped: the key is not read, even when present')
  t.equal((await app.inject({ url: '/public', headers: { 'x-skip': 'no' } })).statusCode, 401)
  t.equal((await app.inject({ url: '/public', headers: auth(GOOD_KEY) })).statusCode, 200)
})

t.test('next that throws: the request fails, it is not let through', async (t) => {
  const app = await guarded(t, { next: () => { throw new Error('bad predicate') } })
  t.equal((await app.inject({ url: '/', headers: auth(GOOD_KEY) })).statusCode, 500)
})

t.test('successHandler runs after a valid key, with the key stored', async (t) => {
  await t.test('continuing', async (t) => {
    const calls: (string | undefined)[] = []
    const app = await guarded(t, {
      successHandler: (request, reply) => {
        calls.push(request.keyAuth?.token)
        reply.header('x-key-auth', 'ok')
      }
    })
    const res = await app.inject({ url: '/', headers: auth(GOOD_KEY) })
    t.equal(res.statusCode, 200)
    t.equal(res.headers['x-key-auth'], 'ok')
    t.same(res.json(), { keyAuth: { token: GOOD_KEY } }, 'then the route handler ran')
    t.same(calls, [GOOD_KEY])
    await app.inject({ url: '/', headers: auth('wrong') })
    t.same(calls, [GOOD_KEY], 'not for a wrong key')
  })
  await t.test('answering', async (t) => {
    const app = await guarded(t, { successHandler: async (_request, reply) => reply.code(202).send('handled by key-auth') })
    const res = await app.inject({ url: '/', headers: auth(GOOD_KEY) })
    t.equal(res.statusCode, 202)
    t.equal(res.body, 'handled by key-auth')
  })
  await t.test('throwing', async (t) => {
    const app = await guarded(t, { successHandler: () => { throw Object.assign(new Error('quota exceeded'), { statusCode: 429 }) } })
    const res = await app.inject({ url: '/', headers: auth(GOOD_KEY) })
    t.equal(res.statusCode, 429)
    t.equal(res.json().message, 'quota exceeded')
  })
})

t.test('errorHandler', async (t) => {
  await t.test('answering its own way', async (t) => {
    const app = await guarded(t, {
      errorHandler: async (_request, reply, error) => {
        await new Promise((resolve) => setTimeout(resolve, 5))
        return reply.code(403).send({ refused: error instanceof KeyAuthInvalidKeyError ? 'invalid' : 'missing' })
      }
    })
    const wrong = await app.inject({ url: '/', headers: auth('wrong') })
    t.equal(wrong.statusCode, 403)
    t.same(wrong.json(), { refused: 'invalid' })
    t.same((await app.inject({ url: '/' })).json(), { refused: 'missing' })
    t.notOk(wrong.headers['www-authenticate'], 'the default challenge is the default handler\'s')
  })
  await t.test('throwing: Fastify\'s error handler answers', async (t) => {
    const app = await guarded(t, {
      errorHandler: (_request, _reply, error) => { throw error }
    }, (app) => {
      app.setErrorHandler((error: Error & { statusCode?: number, code?: string }, _request, reply) => {
        return reply.code(error.statusCode ?? 500).send({ handledBy: 'app', code: error.code })
      })
    })
    const res = await app.inject({ url: '/', headers: auth('wrong') })
    t.equal(res.statusCode, 401)
    t.same(res.json(), { handledBy: 'app', code: 'FST_KEYAUTH_INVALID_KEY' })
  })
  await t.test('neither answering nor throwing: the request still fails (fail closed)', async (t) => {
    let handlerRan = false
    const app = await guarded(t, { errorHandler: () => {} }, (app) => {
      app.get('/secret', async () => { handlerRan = true; return 'secret' })
    })
    const res = await app.inject({ url: '/secret', headers: auth('wrong') })
    t.equal(res.statusCode, 401)
    t.equal(res.json().code, 'FST_KEYAUTH_INVALID_KEY')
    t.notOk(handlerRan)
  })
})

t.test('contextKey: where the valid key is kept on the request', async (t) => {
  const app = await guarded(t, { contextKey: 'apiKey' }, (app) => {
    app.get('/key', async (request) => request.keyAuth?.apiKey ?? 'none')
  })
  t.equal((await app.inject({ url: '/key', headers: auth(OTHER_KEY) })).body, OTHER_KEY)
  t.same((await app.inject({ url: '/', headers: auth(GOOD_KEY) })).json(), { keyAuth: { apiKey: GOOD_KEY } }, 'not under token')
})
