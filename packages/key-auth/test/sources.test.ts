/** Where the key is read (keyLookup) and how a header's scheme is parsed (authScheme). */
import { once } from 'node:events'
import net, { type AddressInfo } from 'node:net'
import fastifyCookie from '@fastify/cookie'
import fastifyFormbody from '@fastify/formbody'
import t from 'tap'
import keyAuth from '@user-product-service/key-auth'
import { bare, GOOD_KEY, guarded, validator } from './helpers.js'

const MISSING = 'missing or malformed API Key'
const INVALID = 'Invalid or expired API Key'

t.test('header:Authorization with the default scheme Bearer', async (t) => {
  const app = await guarded(t)
  const cases: [string, string | undefined, number, string][] = [
    ['no header', undefined, 401, MISSING],
    ['empty header', '', 401, MISSING],
    ['missing scheme', GOOD_KEY, 401, MISSING],
    ['wrong scheme', `Basic ${GOOD_KEY}`, 401, MISSING],
    ['scheme glued to the key', `Bearer${GOOD_KEY}`, 401, MISSING],
    ['scheme without a key', 'Bearer', 401, MISSING],
    ['scheme and blanks only', 'Bearer \t ', 401, MISSING],
    ['scheme as a prefix of a longer word', `Bearerx ${GOOD_KEY}`, 401, MISSING],
    ['wrong key', 'Bearer wrong-key', 401, INVALID],
    ['key with a second word', `Bearer ${GOOD_KEY} extra`, 401, INVALID],
    ['right key', `Bearer ${GOOD_KEY}`, 200, GOOD_KEY],
    ['lower-case scheme', `bearer ${GOOD_KEY}`, 200, GOOD_KEY],
    ['upper-case scheme', `BEARER ${GOOD_KEY}`, 200, GOOD_KEY],
    ['extra spaces', `Bearer     ${GOOD_KEY}`, 200, GOOD_KEY],
    ['a tab', `Bearer\t${GOOD_KEY}`, 200, GOOD_KEY],
    ['trailing blanks', `Bearer ${GOOD_KEY}  \t`, 200, GOOD_KEY]
  ]
  for (const [name, header, status, body] of cases) {
    const res = await app.inject({ url: '/', headers: header === undefined ? {} : { authorization: header } })
    t.equal(res.statusCode, status, name)
    t.equal(status === 200 ? res.json().keyAuth.token : res.body, body, name)
  }
})

t.test('an empty scheme: the whole header value is the key', async (t) => {
  const app = await guarded(t, { authScheme: '' })
  t.equal((await app.inject({ url: '/', headers: { authorization: GOOD_KEY } })).statusCode, 200)
  const withScheme = await app.inject({ url: '/', headers: { authorization: `Bearer ${GOOD_KEY}` } })
  t.equal(withScheme.statusCode, 401)
  t.equal(withScheme.body, INVALID, '"Bearer <key>" is taken as the key, and is not one')
  t.equal((await app.inject({ url: '/' })).body, MISSING)
})

t.test('a custom scheme word', async (t) => {
  const app = await guarded(t, { authScheme: 'ApiKey' })
  t.equal((await app.inject({ url: '/', headers: { authorization: `apikey ${GOOD_KEY}` } })).statusCode, 200)
  const bearer = await app.inject({ url: '/', headers: { authorization: `Bearer ${GOOD_KEY}` } })
  t.equal(bearer.body, MISSING)
})

t.test('another header: no scheme by default, name matched without regard to case', async (t) => {
  const app = await guarded(t, { keyLookup: 'header:X-API-KEY' })
  const res = await app.inject({ url: '/', headers: { 'x-api-key': GOOD_KEY } })
  t.equal(res.statusCode, 200)
  t.same(res.json(), { keyAuth: { token: GOOD_KEY } })
  t.equal((await app.inject({ url: '/', headers: { 'X-Api-Key': 'wrong' } })).body, INVALID)
  t.equal((await app.inject({ url: '/', headers: { authorization: `Bearer ${GOOD_KEY}` } })).body, MISSING, 'Authorization is not read')

  const schemed = await guarded(t, { keyLookup: 'header:X-API-Key', authScheme: 'Key' })
  t.equal((await schemed.inject({ url: '/', headers: { 'x-api-key': `Key ${GOOD_KEY}` } })).statusCode, 200)
  t.equal((await schemed.inject({ url: '/', headers: { 'x-api-key': GOOD_KEY } })).body, MISSING)
})

t.test('over a real socket: repeated headers and blanks as Node parses them', async (t) => {
  const app = await guarded(t, { keyLookup: 'header:X-API-Key' })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as AddressInfo

  async function raw (headers: string[]): Promise<string> {
    const socket = net.connect(port, '127.0.0.1')
    await once(socket, 'connect')
    socket.end(['GET / HTTP/1.1', 'Host: localhost', 'Connection: close', ...headers, '', ''].join('\r\n'))
    let response = ''
    for await (const chunk of socket) response += String(chunk)
    return response
  }

  t.match(await raw([`X-API-Key:    ${GOOD_KEY}   `]), /^HTTP\/1\.1 200 /, 'surrounding blanks are not part of the key')
  // Node joins repeated custom headers with ", ": the joined value is not a key.
  const twice = await raw([`X-API-Key: ${GOOD_KEY}`, `X-API-Key: ${GOOD_KEY}`])
  t.match(twice, /^HTTP\/1\.1 401 /)
  t.match(twice, /Invalid or expired API Key$/)
})

t.test('cookie:<name>', async (t) => {
  for (const cookieHook of ['onRequest', 'preHandler', false] as const) {
    await t.test(`with @fastify/cookie parsing in ${String(cookieHook)}`, async (t) => {
      const app = bare(t)
      await app.register(fastifyCookie, { hook: cookieHook })
      await app.register(keyAuth, { validator, keyLookup: 'cookie:access_token' })
      app.get('/', async (request) => ({ keyAuth: request.keyAuth }))

      const ok = await app.inject({ url: '/', cookies: { other: 'x', access_token: GOOD_KEY } })
      t.equal(ok.statusCode, 200)
      t.same(ok.json(), { keyAuth: { token: GOOD_KEY } })
      t.equal((await app.inject({ url: '/', headers: { cookie: `access_token=${encodeURIComponent(GOOD_KEY)}` } })).statusCode, 200)
      t.equal((await app.inject({ url: '/', cookies: { access_token: 'wrong' } })).body, INVALID)
      t.equal((await app.inject({ url: '/', cookies: { access_token: '' } })).body, MISSING)
      t.equal((await app.inject({ url: '/', cookies: { other: GOOD_KEY } })).body, MISSING)
      const bearer = await app.inject({ url: '/', headers: { authorization: `Bearer ${GOOD_KEY}` } })
      t.equal(bearer.body, MISSING)
      t.notOk(bearer.headers['www-authenticate'], 'no header challenge for a cookie')
    })
  }
})

t.test('query:<name>', async (t) => {
  const app = await guarded(t, { keyLookup: 'query:api_key' })
  const ok = await app.inject({ url: `/?api_key=${GOOD_KEY}&page=2` })
  t.equal(ok.statusCode, 200)
  t.same(ok.json(), { keyAuth: { token: GOOD_KEY } })
  t.equal((await app.inject({ url: '/?api_key=wrong' })).body, INVALID)
  t.equal((await app.inject({ url: '/?api_key=' })).body, MISSING)
  t.equal((await app.inject({ url: '/' })).body, MISSING)
  t.equal((await app.inject({ url: `/?api_key=${GOOD_KEY}&api_key=${GOOD_KEY}` })).body, MISSING, 'a repeated field is ambiguous')

  // Inherited properties are never taken for a field.
  const inherited = await guarded(t, { keyLookup: 'query:toString' })
  t.equal((await inherited.inject({ url: '/' })).body, MISSING)
})

t.test('form:<name> reads the parsed body, in preHandler by default', async (t) => {
  for (const hook of [undefined, 'preValidation', 'preHandler'] as const) {
    await t.test(`hook ${hook ?? '(default)'}`, async (t) => {
      const app = bare(t)
      await app.register(fastifyFormbody)
      await app.register(keyAuth, { validator, keyLookup: 'form:api_key', ...(hook ? { hook } : {}) })
      app.post('/', async (request) => ({ keyAuth: request.keyAuth, body: request.body }))
      app.get('/', async () => 'read')

      const form = { 'content-type': 'application/x-www-form-urlencoded' }
      const ok = await app.inject({ method: 'POST', url: '/', headers: form, payload: `title=x&api_key=${GOOD_KEY}` })
      t.equal(ok.statusCode, 200)
      t.same(ok.json(), { keyAuth: { token: GOOD_KEY }, body: { title: 'x', api_key: GOOD_KEY } })
      t.equal((await app.inject({ method: 'POST', url: '/', headers: form, payload: 'api_key=wrong' })).body, INVALID)
      t.equal((await app.inject({ method: 'POST', url: '/', headers: form, payload: 'title=x' })).body, MISSING)
      t.equal((await app.inject({ method: 'GET', url: '/' })).body, MISSING, 'no body, no key')
      // A JSON body field is read the same way.
      t.equal((await app.inject({ method: 'POST', url: '/', payload: { api_key: GOOD_KEY } })).statusCode, 200)
      t.equal((await app.inject({ method: 'POST', url: '/', payload: { api_key: [GOOD_KEY] } })).body, MISSING, 'not a string')
    })
  }
})

t.test('param:<name>', async (t) => {
  const app = bare(t)
  await app.register(keyAuth, { validator, keyLookup: 'param:key' })
  app.get('/keys/:key/items', async (request) => ({ keyAuth: request.keyAuth }))
  app.get('/other', async () => 'other')

  const ok = await app.inject({ url: `/keys/${GOOD_KEY}/items` })
  t.equal(ok.statusCode, 200, 'route parameters are known in onRequest')
  t.same(ok.json(), { keyAuth: { token: GOOD_KEY } })
  t.equal((await app.inject({ url: '/keys/wrong/items' })).body, INVALID)
  t.equal((await app.inject({ url: '/other' })).body, MISSING, 'a route without the parameter')
})
