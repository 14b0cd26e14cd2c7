/**
 * The README's recipes: a key read from a cookie, and guarding chosen paths with `next` on
 * the lower-cased original URL, including where that matching falls short.
 */
import fastifyCookie from '@fastify/cookie'
import type { FastifyRequest } from 'fastify'
import t from 'tap'
import keyAuth, { createKeySet, KeyAuthMissingOrMalformedError } from '@user-product-service/key-auth'
import { bare } from './helpers.js'

const API_KEY = 'my-super-secret-key'
const apiKeys = createKeySet([API_KEY])

/** The example's validator: constant-time over hashes; a wrong key is "missing or malformed" too. */
function validateApiKey (_request: FastifyRequest, key: string): boolean {
  if (apiKeys.has(key)) return true
  throw new KeyAuthMissingOrMalformedError()
}

t.test('cookie example: no key, correct key, wrong key (over a real socket)', async (t) => {
  const app = bare(t)
  await app.register(fastifyCookie)
  await app.register(keyAuth, { keyLookup: 'cookie:access_token', validator: validateApiKey })
  app.get('/', async () => 'Successfully authenticated!')
  const base = await app.listen({ port: 0, host: '127.0.0.1' })

  const none = await fetch(base)
  t.equal(none.status, 401, 'a missing key: the default handler answers 401')
  t.equal(await none.text(), 'missing or malformed API Key')
  t.equal(none.headers.get('content-type'), 'text/plain; charset=utf-8')

  const correct = await fetch(base, { headers: { cookie: `access_token=${API_KEY}` } })
  t.equal(correct.status, 200)
  t.equal(await correct.text(), 'Successfully authenticated!')

  const wrong = await fetch(base, { headers: { cookie: 'access_token=not-the-key' } })
  t.equal(wrong.status, 401)
  t.equal(await wrong.text(), 'missing or malformed API Key', 'the same text as a missing key')
})

t.test('next: guard only chosen paths, matched on the lower-cased original URL', async (t) => {
  const protectedUrls = [/^\/authenticated$/, /^\/auth2$/]
  /** The example's filter: skip (true) unless the URL is one of the protected ones. */
  const authFilter = (request: FastifyRequest): boolean => {
    const originalUrl = request.originalUrl.toLowerCase()
    return !protectedUrls.some((pattern) => pattern.test(originalUrl))
  }

  const app = bare(t)
  await app.register(keyAuth, { next: authFilter, keyLookup: 'header:Authorization', authScheme: 'Bearer', validator: validateApiKey })
  app.get('/', async () => 'Welcome')
  app.get('/authenticated', async () => 'Successfully authenticated!')
  app.get('/auth2', async () => 'Successfully authenticated 2!')
  const key = { authorization: `Bearer ${API_KEY}` }

  t.equal((await app.inject({ url: '/' })).body, 'Welcome', 'an unlisted path is open')
  for (const url of ['/authenticated', '/auth2']) {
    const refused = await app.inject({ url })
    t.equal(refused.statusCode, 401, `${url} without a key`)
    t.equal(refused.body, 'missing or malformed API Key')
    t.equal((await app.inject({ url, headers: { authorization: 'Bearer wrong' } })).statusCode, 401, `${url} with a wrong key`)
    t.equal((await app.inject({ url, headers: key })).statusCode, 200, `${url} with the key`)
  }
  t.equal((await app.inject({ url: '/AUTHENTICATED' })).statusCode, 401, 'matched after lower-casing (the route itself is case-sensitive)')

  // The limits of matching the original URL exactly: a query string or a percent-encoded
  // letter reaches the same route, but the URL no longer matches, so key-auth is skipped.
  for (const url of ['/authenticated?x=1', '/authenticate%64']) {
    const res = await app.inject({ url })
    t.equal(res.statusCode, 200, `${url} reaches the handler without a key`)
    t.equal(res.body, 'Successfully authenticated!')
  }
})

t.test('next on the matched route pattern closes those gaps', async (t) => {
  const protectedRoutes = new Set(['/authenticated', '/auth2'])
  const app = bare(t)
  // routeOptions.url is the route's pattern, whatever the URL looked like.
  await app.register(keyAuth, { next: (request) => !protectedRoutes.has(request.routeOptions.url ?? ''), validator: validateApiKey })
  app.get('/', async () => 'Welcome')
  app.get('/authenticated', async () => 'Successfully authenticated!')

  t.equal((await app.inject({ url: '/' })).statusCode, 200)
  for (const url of ['/authenticated', '/authenticated?x=1', '/authenticate%64', '/authenticated/']) {
    const res = await app.inject({ url })
    t.not(res.statusCode, 200, `${url} without a key`)
  }
  t.equal((await app.inject({ url: '/authenticated?x=1', headers: { authorization: `Bearer ${API_KEY}` } })).statusCode, 200)
})
