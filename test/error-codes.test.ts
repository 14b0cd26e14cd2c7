/**
 * The service's error handler (src/plugins/error-handler.ts) and the plugin packages' errors:
 * every client error (4xx) a plugin exports has an explicit client-visible code in
 * KNOWN_CODES, and real plugin failures answer the mapped problem. A bare app with the
 * service's error handler and the three plugins, no database.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import createError from '@fastify/error'
import Fastify, { type FastifyError, type FastifyInstance } from 'fastify'
import t from 'tap'
import { Type } from 'typebox'
import errorHandler, { KNOWN_CODES } from '../src/plugins/error-handler.js'
import * as contextExports from '@user-product-service/context'
import * as keyauthExports from '@user-product-service/key-auth'
import * as routingExports from '@user-product-service/routing'
import { assertProblem } from './helpers/assertions.js'

const context = contextExports.default
const keyAuth = keyauthExports.default
const routing = routingExports.default

type ErrorClass = new (...args: unknown[]) => FastifyError

/** The @fastify/error constants a plugin exports, by export name. */
function errorsOf (exports: Record<string, unknown>, prefix: string): Map<string, ErrorClass> {
  const found = new Map<string, ErrorClass>()
  for (const [name, value] of Object.entries(exports)) {
    if (typeof value !== 'function' || !name.endsWith('Error')) continue
    const error = new (value as ErrorClass)('x', 'y', 'z')
    if (typeof error.code === 'string' && error.code.startsWith('FST_')) found.set(name, value as ErrorClass)
  }
  t.ok(found.size > 0, `${prefix}: errors found`)
  return found
}

const plugins = {
  FST_KEYAUTH_: errorsOf(keyauthExports, 'keyauth'),
  FST_CONTEXT_: errorsOf(contextExports, 'context'),
  FST_ROUTING_: errorsOf(routingExports, 'routing')
}

t.test('one code prefix per plugin, and every plugin error is an @fastify/error constant', async (t) => {
  for (const [prefix, errors] of Object.entries(plugins)) {
    for (const [name, ErrorClass] of errors) {
      const error = new ErrorClass('x', 'y', 'z')
      t.ok(error.code.startsWith(prefix), `${name}: ${error.code} starts with ${prefix}`)
      t.type(error.statusCode, 'number', `${name} has a status`)
    }
  }
})

t.test('KNOWN_CODES: each plugin 4xx is mapped, with its own status; no entry names a code that is gone', async (t) => {
  const exported = new Set<string>()
  for (const errors of Object.values(plugins)) {
    for (const [name, ErrorClass] of errors) {
      const error = new ErrorClass('x', 'y', 'z')
      exported.add(error.code)
      const status = error.statusCode ?? 500
      // FILE_SEND carries @fastify/send's status (412, 416, 400, 500): answered by status.
      if (status < 400 || status >= 500 || error.code === 'FST_CONTEXT_FILE_SEND') continue
      const entry = KNOWN_CODES[error.code]
      t.ok(entry, `${name} (${error.code}) has a client code`)
      t.equal(entry?.[0], status, `${error.code}: the map keeps the error's status`)
    }
  }
  for (const code of Object.keys(KNOWN_CODES)) {
    if (Object.keys(plugins).some((prefix) => code.startsWith(prefix))) t.ok(exported.has(code), `${code} is still exported`)
  }
})

async function bareApp (t: Tap, setup: (app: FastifyInstance) => void | Promise<void>): Promise<FastifyInstance> {
  const app = Fastify()
  t.teardown(() => app.close())
  app.addHook('onRequest', async (request, reply) => { reply.header('x-request-id', request.id) })
  await app.register(errorHandler)
  await setup(app)
  await app.ready()
  return app
}
interface Tap { teardown: (fn: () => unknown) => void }

t.test('through the error handler: the mapped code, the status, the message as detail', async (t) => {
  const all = new Map([...plugins.FST_KEYAUTH_, ...plugins.FST_CONTEXT_, ...plugins.FST_ROUTING_])
  const app = await bareApp(t, (app) => {
    app.get('/throw/:name', async (request) => {
      const ErrorClass = all.get((request.params as { name: string }).name)
      throw new (ErrorClass as ErrorClass)('a', 'b', 'c')
    })
    app.get('/other', async () => { throw new (createError('FST_SOMEONE_ELSE', 'taken', 409))() })
    app.get('/ours', async () => { throw new (createError('WRONG_PASSWORD', 'no', 403))() })
  })
  for (const [name, ErrorClass] of all) {
    const error = new ErrorClass('a', 'b', 'c')
    const response = await app.inject(`/throw/${name}`)
    const known = KNOWN_CODES[error.code]
    if (known !== undefined) {
      const body = assertProblem(t, response, known[0], known[1])
      t.equal(body.detail, error.message, `${name}: the message is the detail`)
    } else if ((error.statusCode ?? 500) >= 500) {
      const body = assertProblem(t, response, 500, 'INTERNAL')
      t.notMatch(body.detail, error.message, `${name}: a programming error's message stays in the log`)
    } else {
      t.equal(error.code, 'FST_CONTEXT_FILE_SEND', `${name} is the one answered by status`)
    }
  }
  assertProblem(t, await app.inject('/other'), 409, 'CONFLICT')
  assertProblem(t, await app.inject('/ours'), 403, 'WRONG_PASSWORD')
})

t.test('real plugin failures answer their mapped problem', async (t) => {
  const root = await mkdtemp(path.join(os.tmpdir(), 'error-codes-'))
  t.teardown(() => rm(root, { recursive: true, force: true }))
  await writeFile(path.join(root, 'hello.txt'), 'hello')
  await writeFile(path.join(root, '.hidden'), 'dotfile')
  const app = await bareApp(t, async (app) => {
    await app.register(context, { files: { root } })
    await app.register(routing)
    app.get('/file/*', async (request, reply) => reply.serveFile((request.params as Record<string, string>)['*'] as string))
    app.get('/jsonp', async (request, reply) => reply.jsonp({ a: 1 }, (request.query as { cb: string }).cb))
    app.get('/bind', async (request) => request.queryParser(Type.Object({ n: Type.Integer() })))
    app.get('/only-get', async () => ({ ok: true }))
    await app.register(async (guarded) => {
      await guarded.register(keyAuth, { validator: (_request, key) => key === 'right', errorHandler: (_request, _reply, error) => { throw error } })
      guarded.get('/guarded', async () => ({ ok: true }))
    })
  })
  t.equal((await app.inject('/file/hello.txt')).statusCode, 200)
  assertProblem(t, await app.inject('/file/missing.txt'), 404, 'NOT_FOUND')
  assertProblem(t, await app.inject('/file/.hidden'), 404, 'NOT_FOUND')
  const jsonp = assertProblem(t, await app.inject({ url: '/jsonp', query: { cb: 'alert(document.cookie)' } }), 400, 'BAD_REQUEST')
  t.equal(jsonp.detail, 'Invalid JSONP callback name', 'a refused JSONP callback')
  t.equal((await app.inject({ url: '/jsonp', query: { cb: 'done' } })).body, 'done({"a":1});')
  const bind = assertProblem(t, await app.inject('/bind?n=0x10'), 400, 'VALIDATION_FAILED')
  t.same(bind.errors, [{ in: 'querystring', field: '/n', message: 'must be an integer' }])
  const allow = await app.inject({ method: 'DELETE', url: '/only-get' })
  assertProblem(t, allow, 405, 'METHOD_NOT_ALLOWED')
  t.match(allow.headers.allow, /GET/)
  assertProblem(t, await app.inject('/guarded'), 401, 'API_KEY_MISSING')
  assertProblem(t, await app.inject({ url: '/guarded', headers: { authorization: 'Bearer wrong' } }), 401, 'API_KEY_INVALID')
  t.equal((await app.inject({ url: '/guarded', headers: { authorization: 'Bearer right' } })).statusCode, 200)
})
