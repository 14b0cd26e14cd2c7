/** Request forms and state: cookies, FormValue, FormFile, MultipartForm, Locals, UserContext, SetUserContext. */
import fastifyFormbody from '@fastify/formbody'
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import fastifyMultipart from '@fastify/multipart'
import Fastify, { type FastifyInstance } from 'fastify'
import t from 'tap'
import context from '@user-product-service/context'
import { contextApp } from './request-app.js'

const boundary = '----ctx-boundary'
function multipart (parts: Array<{ name: string, value?: string, filename?: string, type?: string, data?: string }>): string {
  return parts.map((part) => part.filename === undefined
    ? `--${boundary}\r\nContent-Disposition: form-data; name="${part.name}"\r\n\r\n${part.value ?? ''}\r\n`
    : `--${boundary}\r\nContent-Disposition: form-data; name="${part.name}"; filename="${part.filename}"\r\nContent-Type: ${part.type ?? 'application/octet-stream'}\r\n\r\n${part.data ?? ''}\r\n`
  ).join('') + `--${boundary}--\r\n`
}
const multipartHeaders = { 'content-type': `multipart/form-data; boundary=${boundary}` }
const sample = multipart([
  { name: 'title', value: 'first' },
  { name: 'title', value: 'second' },
  { name: 'doc', filename: 'a.txt', type: 'text/plain', data: 'hello' },
  { name: 'doc', filename: 'b.bin', data: 'xyz' }
])

t.test('cookie: value, default only when the cookie is missing', async (t) => {
  const app = await contextApp(t, (app) => {
    app.get('/c', async (request) => ({ a: request.cookie('a'), empty: request.cookie('empty', 'd'), missing: request.cookie('missing'), dflt: request.cookie('missing', 'd') }))
  })
  t.same((await app.inject({ url: '/c', headers: { cookie: 'a=1%202; empty=' } })).json(), { a: '1 2', empty: '', missing: '', dflt: 'd' })
})

t.test('formValue: first value of a urlencoded field; default when absent; empty for non-form bodies', async (t) => {
  const app = await contextApp(t, async (app) => {
    await app.register(fastifyFormbody)
    app.post('/f', async (request) => ({ a: request.formValue('a'), missing: request.formValue('missing'), dflt: request.formValue('missing', 'd'), empty: request.formValue('e', 'd') }))
  })
  const form = await app.inject({ method: 'POST', url: '/f', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'a=1&a=2&e=' })
  t.same(form.json(), { a: '1', missing: '', dflt: 'd', empty: '' })
  const json = await app.inject({ method: 'POST', url: '/f', payload: { a: 'x' } })
  t.same(json.json(), { a: '', missing: '', dflt: 'd', empty: 'd' }, 'a JSON body has no form fields')
})

t.test('urlencoded without @fastify/formbody: Fastify answers 415 before the handler', async (t) => {
  const app = await contextApp(t, (app) => { app.post('/f', async (request) => request.formValue('a')) })
  t.equal((await app.inject({ method: 'POST', url: '/f', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'a=1' })).statusCode, 415)
})

function formRoutes (app: FastifyInstance): void {
  app.post('/form', async (request) => {
    const form = await request.multipartForm()
    const file = await request.formFile('doc')
    return {
      value: form.value,
      files: Object.fromEntries(Object.entries(form.file).map(([key, files]) => [key, files.map((f) => ({ ...f, data: f.data?.toString(), path: f.path ?? null }))])),
      first: { filename: file.filename, mimetype: file.mimetype, size: file.size, data: file.data?.toString() },
      title: request.formValue('title')
    }
  })
  app.post('/missing', async (request) => await request.formFile('nope'))
  app.post('/value-first', async (request) => request.formValue('title'))
}

const expected = {
  value: { title: ['first', 'second'] },
  files: {
    doc: [
      { fieldname: 'doc', filename: 'a.txt', mimetype: 'text/plain', encoding: '7bit', size: 5, data: 'hello', path: null },
      { fieldname: 'doc', filename: 'b.bin', mimetype: 'application/octet-stream', encoding: '7bit', size: 3, data: 'xyz', path: null }
    ]
  },
  first: { filename: 'a.txt', mimetype: 'text/plain', size: 5, data: 'hello' },
  title: 'first'
}

t.test('multipartForm / formFile with @fastify/multipart attachFieldsToBody: true', async (t) => {
  const app = await contextApp(t, async (app) => {
    await app.register(fastifyMultipart, { attachFieldsToBody: true, limits: { fileSize: 100 } })
    formRoutes(app)
  })
  t.same((await app.inject({ method: 'POST', url: '/form', headers: multipartHeaders, payload: sample })).json(), expected)
  t.equal((await app.inject({ method: 'POST', url: '/value-first', headers: multipartHeaders, payload: sample })).body, 'first', 'formValue works at once')
  const missing = await app.inject({ method: 'POST', url: '/missing', headers: multipartHeaders, payload: sample })
  t.match(missing.json(), { statusCode: 400, code: 'FST_CONTEXT_FORM_FILE_MISSING' })
  const notMultipart = await app.inject({ method: 'POST', url: '/missing', payload: { a: 1 } })
  t.match(notMultipart.json(), { statusCode: 415, code: 'FST_CONTEXT_NOT_MULTIPART' })
  const big = multipart([{ name: 'doc', filename: 'big.bin', data: 'x'.repeat(101) }])
  t.equal((await app.inject({ method: 'POST', url: '/form', headers: multipartHeaders, payload: big })).statusCode, 413, 'limits.fileSize enforced')
  const empty = await app.inject({ method: 'POST', url: '/missing', headers: multipartHeaders, payload: `--${boundary}--\r\n` })
  t.match(empty.json(), { statusCode: 400, code: 'FST_CONTEXT_FORM_FILE_MISSING' }, 'an empty form')
})

t.test('multipartForm / formFile reading request.parts() (no attachFieldsToBody)', async (t) => {
  const app = await contextApp(t, async (app) => {
    await app.register(fastifyMultipart, { limits: { fileSize: 100 } })
    formRoutes(app)
  })
  t.same((await app.inject({ method: 'POST', url: '/form', headers: multipartHeaders, payload: sample })).json(), expected)
  const before = await app.inject({ method: 'POST', url: '/value-first', headers: multipartHeaders, payload: sample })
  t.match(before.json(), { statusCode: 500, code: 'FST_CONTEXT_FORM_NOT_PARSED', message: /await request\.multipartForm\(\) first/ }, 'formValue before the form was read')
  const big = multipart([{ name: 'doc', filename: 'big.bin', data: 'x'.repeat(101) }])
  t.equal((await app.inject({ method: 'POST', url: '/form', headers: multipartHeaders, payload: big })).statusCode, 413, 'limits.fileSize enforced')
})

t.test('attachFieldsToBody: "keyValues": values readable, files refused with a clear error', async (t) => {
  const app = await contextApp(t, async (app) => {
    await app.register(fastifyMultipart, { attachFieldsToBody: 'keyValues' })
    formRoutes(app)
  })
  t.equal((await app.inject({ method: 'POST', url: '/value-first', headers: multipartHeaders, payload: sample })).body, 'first')
  t.match((await app.inject({ method: 'POST', url: '/form', headers: multipartHeaders, payload: sample })).json(), { statusCode: 500, code: 'FST_CONTEXT_FORM_NOT_PARSED', message: /keyValues/ })
})

t.test('locals: request-scoped, closed at the end of the request, also when the handler fails', async (t) => {
  const events: string[] = []
  const closable = (name: string, kind: 'close' | 'dispose' | 'asyncDispose' | 'failing'): object => {
    if (kind === 'close') return { close: () => { events.push(`close ${name}`) } }
    // The runtime's own symbols (Node 24's are the language's, no longer `Symbol.for('nodejs.dispose')`).
    const symbols = Symbol as unknown as { dispose: symbol, asyncDispose: symbol }
    if (kind === 'dispose') return { [symbols.dispose]: () => { events.push(`dispose ${name}`) } }
    if (kind === 'asyncDispose') return { [symbols.asyncDispose]: async () => { events.push(`asyncDispose ${name}`) } }
    return { close: () => { throw new Error('boom') } }
  }
  const app = await contextApp(t, (app) => {
    app.addHook('preHandler', async (request) => { request.locals('user', { id: 7 }) })
    app.get('/ok', async (request) => {
      request.locals('db', closable('db', 'close'))
      request.locals('tx', closable('tx', 'dispose'))
      request.locals('lock', closable('lock', 'asyncDispose'))
      request.locals('bad', closable('bad', 'failing'))
      request.locals(Symbol.for('plain'), 42)
      return { user: request.locals('user'), stored: request.locals('n', 5), missing: request.locals('missing') ?? null }
    })
    app.get('/fail', async (request) => {
      request.locals('db', closable('failed-db', 'close'))
      throw new Error('handler failed')
    })
    app.get('/fresh', async (request) => ({ n: request.locals('n') ?? null }))
  })
  t.same((await app.inject('/ok')).json(), { user: { id: 7 }, stored: 5, missing: null })
  t.same(events, ['asyncDispose lock', 'dispose tx', 'close db'], 'newest first; a failing close does not stop the others')
  events.length = 0
  t.equal((await app.inject('/fail')).statusCode, 500)
  t.same(events, ['close failed-db'], 'closed when the handler failed')
  t.same((await app.inject('/fresh')).json(), { n: null }, 'nothing leaks into the next request')
})

t.test('locals: closed when the client goes away before the response', async (t) => {
  let closed!: () => void
  const wasClosed = new Promise<void>((resolve) => { closed = resolve })
  const app = await contextApp(t, (app) => {
    app.get('/slow', async (request) => {
      request.locals('resource', { close: () => { closed() } })
      await new Promise((resolve) => setTimeout(resolve, 300))
      return 'late'
    })
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as { port: number }
  const controller = new AbortController()
  const request = fetch(`http://127.0.0.1:${port}/slow`, { signal: controller.signal }).catch(() => 'aborted')
  setTimeout(() => { controller.abort() }, 50)
  t.equal(await request, 'aborted')
  await wasClosed
  t.pass('closed')
})

t.test('upload files on disk: removed once the response is sent, and when the client goes away', async (t) => {
  const tmpDir = mkdtempSync(path.join(os.tmpdir(), 'context-forms-'))
  t.teardown(() => { rmSync(tmpDir, { recursive: true, force: true }) })
  const folders = (): string[] => readdirSync(tmpDir)
  let stored!: () => void
  const fileStored = new Promise<void>((resolve) => { stored = resolve })
  const app = await contextApp(t, async (app) => {
    await app.register(fastifyMultipart)
    app.post('/keep', async (request) => {
      const file = await request.formFile('doc')
      return { onDisk: file.path !== undefined && folders().length === 1 }
    })
    app.post('/slow', async (request) => {
      await request.formFile('doc')
      stored()
      await new Promise((resolve) => setTimeout(resolve, 300))
      return 'late'
    })
  // forceCloseConnections: app.close() at teardown would otherwise wait up to Fastify's
  // keepAliveTimeout (72 s) for a connection these clients leave open; no assertion needs it.
  }, { formFiles: { memoryThreshold: 0, tmpDir } }, { forceCloseConnections: true })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as { port: number }
  const body = multipart([{ name: 'doc', filename: 'a.txt', data: 'on disk' }])
  const kept = await fetch(`http://127.0.0.1:${port}/keep`, { method: 'POST', headers: multipartHeaders, body })
  t.same(await kept.json(), { onDisk: true }, 'the file was written to a folder of its own')
  await waitFor(() => folders().length === 0)
  t.same(folders(), [], 'removed after the response')

  const controller = new AbortController()
  const cut = fetch(`http://127.0.0.1:${port}/slow`, { method: 'POST', headers: multipartHeaders, body, signal: controller.signal }).catch(() => 'aborted')
  await fileStored
  t.equal(folders().length, 1)
  controller.abort()
  t.equal(await cut, 'aborted')
  await waitFor(() => folders().length === 0)
  t.same(folders(), [], 'removed when the client went away')
})

t.test('a request that uses none of it gets no listener from the plugin (an onRequestAbort hook would add one to every request)', async (t) => {
  const count = async (withPlugin: boolean): Promise<number> => {
    const app = Fastify()
    t.teardown(() => app.close())
    if (withPlugin) await app.register(context)
    let listeners = -1
    app.get('/', async (request) => {
      listeners = request.raw.listenerCount('close') + request.raw.socket.listenerCount('close')
      return 'ok'
    })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const { port } = app.server.address() as { port: number }
    await (await fetch(`http://127.0.0.1:${port}/`)).text()
    return listeners
  }
  t.equal(await count(true), await count(false))
})

async function waitFor (condition: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms
  while (!condition() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
}

t.test('userContext / setUserContext', async (t) => {
  const app = await contextApp(t, (app) => {
    app.get('/u', async (request) => {
      const blank = request.userContext()
      const same = request.userContext() === blank
      ;(blank as { seen?: boolean }).seen = true
      const kept = (request.userContext() as { seen?: boolean }).seen
      request.setUserContext({ tenant: 'acme' })
      return { blankIsObject: typeof blank === 'object' && blank !== null, same, kept, after: request.userContext() }
    })
    app.get('/bad', async (request) => { request.setUserContext(null as unknown as object) })
  })
  t.same((await app.inject('/u')).json(), { blankIsObject: true, same: true, kept: true, after: { tenant: 'acme' } })
  t.equal((await app.inject('/bad')).statusCode, 500)
})
