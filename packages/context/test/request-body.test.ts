/** Body reading: bodyRaw, Body (decodedBody), Content-Encoding; the Immutable setting for Buffers. */
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib'
import t from 'tap'
import { contextApp } from './request-app.js'

const json = Buffer.from(JSON.stringify({ hello: 'world', list: [1, 2, 3] }))

async function bodyApp (t: { teardown: (fn: () => unknown) => void }, options = {}, fastify = {}): Promise<import('fastify').FastifyInstance> {
  return await contextApp(t, (app) => {
    app.post('/echo', async (request) => ({
      raw: request.bodyRaw().toString('base64'),
      decoded: request.decodedBody().toString(),
      parsed: request.body
    }))
    app.get('/none', async (request) => ({ raw: request.bodyRaw().length, decoded: request.decodedBody().length }))
  }, options, fastify)
}

t.test('bodyRaw and decodedBody without Content-Encoding: the same bytes', async (t) => {
  const app = await bodyApp(t)
  const response = await app.inject({ method: 'POST', url: '/echo', headers: { 'content-type': 'application/json' }, payload: json })
  t.same(response.json(), { raw: json.toString('base64'), decoded: json.toString(), parsed: { hello: 'world', list: [1, 2, 3] } })
  t.same((await app.inject('/none')).json(), { raw: 0, decoded: 0 }, 'no body: empty')
})

t.test('gzip, x-gzip, deflate, br and lists of codings are decoded for the parsers and decodedBody', async (t) => {
  const app = await bodyApp(t)
  const cases: Array<[string, Buffer]> = [
    ['gzip', gzipSync(json)],
    ['x-gzip', gzipSync(json)],
    ['deflate', deflateSync(json)],
    ['br', brotliCompressSync(json)],
    ['GZIP', gzipSync(json)],
    ['gzip, br', brotliCompressSync(gzipSync(json))],
    ['deflate, identity, gzip', gzipSync(deflateSync(json))]
  ]
  for (const [coding, payload] of cases) {
    const response = await app.inject({ method: 'POST', url: '/echo', headers: { 'content-type': 'application/json', 'content-encoding': coding }, payload })
    t.equal(response.statusCode, 200, coding)
    t.same(response.json(), { raw: payload.toString('base64'), decoded: json.toString(), parsed: { hello: 'world', list: [1, 2, 3] } }, `${coding}: raw as received, decoded, parsed`)
  }
})

t.test('corrupt, unsupported and oversized bodies: 400, 415, 413 (no crash)', async (t) => {
  const app = await bodyApp(t, {}, { bodyLimit: 10_000 })
  const post = async (coding: string, payload: Buffer): Promise<{ statusCode: number, code?: string }> => {
    const response = await app.inject({ method: 'POST', url: '/echo', headers: { 'content-type': 'application/json', 'content-encoding': coding }, payload })
    return { statusCode: response.statusCode, code: response.json().code }
  }
  t.same(await post('gzip', Buffer.from('definitely not gzip')), { statusCode: 400, code: 'FST_CONTEXT_CORRUPT_BODY' })
  t.same(await post('br', Buffer.from([0xff, 0xff, 0xff, 0xff])), { statusCode: 400, code: 'FST_CONTEXT_CORRUPT_BODY' })
  t.same(await post('gzip', gzipSync(json).subarray(0, 20)), { statusCode: 400, code: 'FST_CONTEXT_CORRUPT_BODY' }, 'truncated')
  t.same(await post('compress', json), { statusCode: 415, code: 'FST_CONTEXT_UNSUPPORTED_CONTENT_ENCODING' })
  t.same(await post('gzip, zstd', json), { statusCode: 415, code: 'FST_CONTEXT_UNSUPPORTED_CONTENT_ENCODING' })
  const bomb = gzipSync(Buffer.alloc(50 * 1024 * 1024, ' '))
  t.ok(bomb.length < 100_000, `the bomb is small on the wire (${bomb.length} bytes)`)
  const blown = await post('gzip', bomb)
  t.equal(blown.statusCode, 413, 'decoded size past bodyLimit')
  t.match(blown.code, /^(FST_CONTEXT_DECODED_BODY_TOO_LARGE|FST_ERR_CTP_BODY_TOO_LARGE)$/)
  const app2 = await bodyApp(t)
  t.equal((await app2.inject('/none')).statusCode, 200, 'the app still serves')
})

t.test('immutable: false hands out the kept Buffer, true a copy each call', async (t) => {
  for (const immutable of [false, true]) {
    const app = await contextApp(t, (app) => {
      app.post('/m', async (request) => {
        const first = request.bodyRaw()
        first[0] = 0x58 // 'X'
        const decoded = request.decodedBody()
        return { again: request.bodyRaw().toString(), same: request.bodyRaw() === first, decodedSame: request.decodedBody() === decoded }
      })
    }, { immutable })
    const response = await app.inject({ method: 'POST', url: '/m', headers: { 'content-type': 'text/plain' }, payload: 'abc' })
    t.same(response.json(), immutable
      ? { again: 'abc', same: false, decodedSame: false }
      : { again: 'Xbc', same: true, decodedSame: true }, `immutable: ${immutable}`)
  }
})

t.test('rawBody: false keeps no copy; encoded bodies are still decoded for the parsers', async (t) => {
  const app = await contextApp(t, (app) => {
    app.post('/r', async (request) => ({ parsed: request.body }))
    app.post('/raw', async (request) => request.bodyRaw())
  }, { rawBody: false })
  const response = await app.inject({ method: 'POST', url: '/r', headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' }, payload: gzipSync(json) })
  t.same(response.json(), { parsed: { hello: 'world', list: [1, 2, 3] } })
  const raw = await app.inject({ method: 'POST', url: '/raw', headers: { 'content-type': 'application/json' }, payload: json })
  t.match(raw.json(), { statusCode: 500, code: 'FST_CONTEXT_RAW_BODY_UNAVAILABLE', message: /rawBody is false/ })
})

t.test('a real socket: chunked upload, raw bytes kept exactly', async (t) => {
  const app = await bodyApp(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as { port: number }
  const payload = gzipSync(json)
  const stream = new ReadableStream<Uint8Array>({
    start (controller) {
      for (let i = 0; i < payload.length; i += 7) controller.enqueue(payload.subarray(i, i + 7))
      controller.close()
    }
  })
  const response = await fetch(`http://127.0.0.1:${port}/echo`, {
    method: 'POST', body: stream, duplex: 'half', headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' }
  } as RequestInit & { duplex: 'half' })
  t.same(await response.json(), { raw: payload.toString('base64'), decoded: json.toString(), parsed: { hello: 'world', list: [1, 2, 3] } })
})
