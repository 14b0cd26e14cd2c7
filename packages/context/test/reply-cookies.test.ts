/** Response writing: Cookie (every field of a cookie record) and ClearCookie. Exact Set-Cookie strings. */
import Fastify from 'fastify'
import fastifyCookie from '@fastify/cookie'
import t, { type Test } from 'tap'
import context, { type CookieRecord } from '@user-product-service/context'
import { replyApp } from './reply-app.js'

async function cookieFor (t: Test, record: CookieRecord): Promise<string | string[] | undefined> {
  const app = await replyApp(t, (app) => {
    app.get('/', async (_request, reply) => reply.setCookieRecord(record).send('ok'))
  })
  const response = await app.inject('/')
  t.equal(response.statusCode, 200)
  return response.headers['set-cookie']
}

t.test('setCookieRecord: each field of a cookie record', async (t) => {
  const expires = new Date(Date.UTC(2030, 0, 2, 3, 4, 5))
  const cases: Array<[string, CookieRecord, string]> = [
    ['name and value; Path / and SameSite=Lax by default', { name: 'id', value: 'abc' }, 'id=abc; Path=/; SameSite=Lax'],
    ['value is URL-encoded', { name: 'q', value: 'a b;c=d' }, 'q=a%20b%3Bc%3Dd; Path=/; SameSite=Lax'],
    ['path', { name: 'a', value: '1', path: '/admin' }, 'a=1; Path=/admin; SameSite=Lax'],
    ['domain', { name: 'a', value: '1', domain: 'example.com' }, 'a=1; Domain=example.com; Path=/; SameSite=Lax'],
    ['maxAge', { name: 'a', value: '1', maxAge: 3600 }, 'a=1; Max-Age=3600; Path=/; SameSite=Lax'],
    ['maxAge 0 expires at once', { name: 'a', value: '1', maxAge: 0 }, 'a=1; Max-Age=0; Path=/; SameSite=Lax'],
    ['expires (Date)', { name: 'a', value: '1', expires }, 'a=1; Path=/; Expires=Wed, 02 Jan 2030 03:04:05 GMT; SameSite=Lax'],
    ['expires (ms timestamp)', { name: 'a', value: '1', expires: expires.getTime() }, 'a=1; Path=/; Expires=Wed, 02 Jan 2030 03:04:05 GMT; SameSite=Lax'],
    ['secure', { name: 'a', value: '1', secure: true }, 'a=1; Path=/; Secure; SameSite=Lax'],
    ['httpOnly', { name: 'a', value: '1', httpOnly: true }, 'a=1; Path=/; HttpOnly; SameSite=Lax'],
    ['sameSite lax', { name: 'a', value: '1', sameSite: 'lax' }, 'a=1; Path=/; SameSite=Lax'],
    ['sameSite Strict (any case)', { name: 'a', value: '1', sameSite: 'Strict' }, 'a=1; Path=/; SameSite=Strict'],
    ['sameSite None forces Secure', { name: 'a', value: '1', sameSite: 'none' }, 'a=1; Path=/; Secure; SameSite=None'],
    ['sameSite disabled: no attribute', { name: 'a', value: '1', sameSite: 'disabled' }, 'a=1; Path=/'],
    ['sessionOnly drops Max-Age and Expires', { name: 'a', value: '1', maxAge: 60, expires, sessionOnly: true }, 'a=1; Path=/; SameSite=Lax'],
    ['every field', {
      name: 'session',
      value: 'v',
      path: '/app',
      domain: 'example.com',
      maxAge: 60,
      expires,
      secure: true,
      httpOnly: true,
      sameSite: 'strict',
      sessionOnly: false
    }, 'session=v; Max-Age=60; Domain=example.com; Path=/app; Expires=Wed, 02 Jan 2030 03:04:05 GMT; HttpOnly; Secure; SameSite=Strict']
  ]
  for (const [label, record, header] of cases) {
    t.same(await cookieFor(t, record), [header], label)
  }
})

t.test('setCookieRecord: several cookies, a repeat with the same name/domain/path replaces', async (t) => {
  const app = await replyApp(t, (app) => {
    app.get('/', async (_request, reply) => reply
      .setCookieRecord({ name: 'a', value: '1' })
      .setCookieRecord({ name: 'b', value: '2' })
      .setCookieRecord({ name: 'a', value: '3' })
      .setCookieRecord({ name: 'a', value: '4', path: '/other' })
      .send('ok'))
  })
  t.same((await app.inject('/')).headers['set-cookie'], [
    'b=2; Path=/; SameSite=Lax',
    'a=3; Path=/; SameSite=Lax',
    'a=4; Path=/other; SameSite=Lax'
  ])
})

t.test('setCookieRecord: invalid records are programming errors (500)', async (t) => {
  const app = await replyApp(t, (app) => {
    app.post('/', async (request, reply) => reply.setCookieRecord(request.body as CookieRecord).send('ok'))
  })
  for (const body of [
    { name: '', value: 'x' },
    { name: 'a', value: 1 },
    { name: 'a', value: 'x', sameSite: 'sometimes' },
    { name: 'a', value: 'x', maxAge: 1.5 },
    { name: 'a', value: 'x', expires: 'not a date' }
  ]) {
    const response = await app.inject({ method: 'POST', url: '/', payload: body })
    t.equal(response.statusCode, 500, JSON.stringify(body))
    t.equal(response.json().code, 'FST_CONTEXT_INVALID_ARGUMENT')
  }
})

t.test('clearCookies: the named cookies, or every cookie of the request', async (t) => {
  const app = await replyApp(t, (app) => {
    app.get('/named', async (_request, reply) => reply.clearCookies('a', 'b').send('ok'))
    app.get('/all', async (_request, reply) => reply.clearCookies().send('ok'))
    app.get('/scoped', async (_request, reply) => reply.clearCookies('s', { path: '/admin', domain: 'example.com', secure: true }).send('ok'))
    app.get('/set-then-clear', async (_request, reply) => reply.setCookieRecord({ name: 'a', value: '1' }).clearCookies('a').send('ok'))
  })
  t.same((await app.inject('/named')).headers['set-cookie'], [
    'a=; Max-Age=0; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 GMT; SameSite=Lax',
    'b=; Max-Age=0; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 GMT; SameSite=Lax'
  ])
  t.same((await app.inject({ url: '/all', headers: { cookie: 'x=1; y=2' } })).headers['set-cookie'], [
    'x=; Max-Age=0; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 GMT; SameSite=Lax',
    'y=; Max-Age=0; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 GMT; SameSite=Lax'
  ])
  t.equal((await app.inject('/all')).headers['set-cookie'], undefined, 'no cookies sent: nothing to clear')
  t.same((await app.inject('/scoped')).headers['set-cookie'],
    ['s=; Max-Age=0; Domain=example.com; Path=/admin; Expires=Thu, 01 Jan 1970 00:00:00 GMT; Secure; SameSite=Lax'],
    'the options the cookie was set with, so the browser matches it')
  t.same((await app.inject('/set-then-clear')).headers['set-cookie'],
    ['a=; Max-Age=0; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 GMT; SameSite=Lax'], 'the clear replaces the earlier set')
})

t.test('works next to @fastify/cookie registered by the application, and with its own cookies', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(fastifyCookie, { secret: 'a-secret-for-signing' })
  await app.register(context)
  app.get('/', async (_request, reply) => reply
    .setCookieRecord({ name: 'mine', value: '1' })
    .setCookie('native', 'v', { path: '/', signed: true })
    .send('ok'))
  const response = await app.inject('/')
  const cookies = response.headers['set-cookie'] as string[]
  t.equal(cookies[0], 'mine=1; Path=/; SameSite=Lax')
  t.match(cookies[1], /^native=v\.[^;]+; Path=\/; SameSite=Lax$/)
})
