/**
 * The routing plugin with app-wide key-auth reading the key from a route parameter
 * (`param:<name>`), over a real socket: hooks registered after the routing plugin see the
 * params of every pattern, compiled ones included.
 */
import Fastify, { type FastifyInstance } from 'fastify'
import t from 'tap'
import keyAuth from '@user-product-service/key-auth'
import routing from '@user-product-service/routing'

const KEY = 'sesame0123456789' // no '-': /segment/:key-:rest splits at the first one
const MISSING = 'missing or malformed API Key'
const INVALID = 'Invalid or expired API Key'

async function listening (t: { teardown: (fn: () => unknown) => void }): Promise<{ app: FastifyInstance, base: string }> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(routing)
  await app.register(keyAuth, { validator: (_request, key) => key === KEY, keyLookup: 'param:key' })
  const echo = async (request: { params: unknown, keyAuth: unknown }): Promise<unknown> => ({ params: request.params, keyAuth: request.keyAuth })
  app.get('/native/:key', echo)
  app.get('/optional/:key?', echo)
  app.get('/compiled/:key/+', echo)
  app.get('/inner/:key?/files/*/:name', echo)
  app.get('/segment/:key-:rest', echo)
  app.get('/nokey/+', echo)
  const address = await app.listen({ port: 0, host: '127.0.0.1' })
  return { app, base: address }
}

t.test('app-wide key-auth with a param: source on native and compiled patterns', async (t) => {
  const { base } = await listening(t)
  const get = async (path: string): Promise<{ status: number, text: string }> => {
    const response = await fetch(base + path)
    return { status: response.status, text: await response.text() }
  }

  const cases: Array<[string, Record<string, string>]> = [
    [`/native/${KEY}`, { key: KEY }],
    [`/optional/${KEY}`, { key: KEY }],
    [`/compiled/${KEY}/a/b`, { key: KEY, '*1': 'a/b', '*': 'a/b' }],
    [`/inner/${KEY}/files/x/y/n`, { key: KEY, '*1': 'x/y', name: 'n', '*': 'x/y' }],
    [`/segment/${KEY}-tail`, { key: KEY, rest: 'tail' }]
  ]
  for (const [path, params] of cases) {
    const ok = await get(path)
    t.equal(ok.status, 200, `right key: ${path}`)
    t.same(JSON.parse(ok.text), { params, keyAuth: { token: KEY } }, `params and key of ${path}`)
  }
  for (const path of ['/compiled/wrong/a', '/inner/wrong/files/x/n', '/segment/wrong-tail', '/native/wrong']) {
    t.same(await get(path), { status: 401, text: INVALID }, `wrong key: ${path}`)
  }
  t.same(await get('/inner/files/x/n'), { status: 401, text: MISSING }, 'absent optional key: missing')
  t.same(await get('/optional'), { status: 401, text: MISSING })
  t.same(await get('/nokey/a'), { status: 401, text: MISSING }, 'a compiled route without the parameter')
})
