/**
 * The form operations with hostile clients: the whole multipart body is
 * bounded by bodyLimit, large files go to disk and are removed with the response, a truncated
 * or malformed body is a 400, and formFile(key) returns without reading the rest of the body.
 */
import { existsSync, readFileSync } from 'node:fs'
import { request as httpRequest } from 'node:http'
import { Readable } from 'node:stream'
import fastifyMultipart from '@fastify/multipart'
import type { FastifyInstance } from 'fastify'
import t from 'tap'
import { contextApp } from './request-app.js'

const boundary = '----ctx-limits'
const headers = { 'content-type': `multipart/form-data; boundary=${boundary}` }
const filePart = (name: string, filename: string, data: string): string =>
  `--${boundary}\r\nContent-Disposition: form-data; name="${name}"; filename="${filename}"\r\nContent-Type: application/octet-stream\r\n\r\n${data}\r\n`
const fieldPart = (name: string, value: string): string => `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`
const end = `--${boundary}--\r\n`

/** 20 files of 60 KiB: each under the 64 KiB per-file limit, 1.2 MB in all. */
const manyFiles = Array.from({ length: 20 }, (_, i) => filePart(`f${i}`, `f${i}.bin`, 'x'.repeat(60 * 1024))).join('') + end

function routes (app: FastifyInstance): void {
  app.post('/form', async (request) => {
    const form = await request.multipartForm()
    return { files: Object.keys(form.file).length, values: form.value }
  })
  app.post('/file', async (request) => {
    const file = await request.formFile('doc')
    const bytes = file.data ?? readFileSync(file.path as string)
    return { size: file.size, inMemory: file.data !== undefined, path: file.path ?? null, same: bytes.equals(await file.toBuffer()), head: bytes.subarray(0, 3).toString() }
  })
}

const modes = [
  ['attachFieldsToBody: true', { attachFieldsToBody: true }],
  ['reading request.parts()', {}]
] as const

for (const [mode, multipartOptions] of modes) {
  t.test(`${mode}: the whole body is bounded by bodyLimit (413), not only each file`, async (t) => {
    const app = await contextApp(t, async (app) => {
      await app.register(fastifyMultipart, multipartOptions)
      routes(app)
    }, {}, { bodyLimit: 64 * 1024 })
    const sized = await app.inject({ method: 'POST', url: '/form', headers, payload: manyFiles })
    t.equal(sized.statusCode, 413, 'with Content-Length')
    t.match(sized.json(), { code: 'FST_CONTEXT_MULTIPART_TOO_LARGE' })
    const chunked = await app.inject({ method: 'POST', url: '/form', headers, payload: Readable.from([Buffer.from(manyFiles)]) })
    t.equal(chunked.statusCode, 413, 'without Content-Length (counted while read)')
    const small = await app.inject({ method: 'POST', url: '/form', headers, payload: filePart('a', 'a.bin', 'abc') + end })
    t.same(small.json(), { files: 1, values: {} }, 'a body within the limit')
  })

  t.test(`${mode}: a truncated or malformed multipart body is a 400, never a 500`, async (t) => {
    const app = await contextApp(t, async (app) => {
      await app.register(fastifyMultipart, multipartOptions)
      routes(app)
    })
    const truncated = filePart('doc', 'a.txt', 'hello') + fieldPart('title', 'x').slice(0, 30)
    for (const [name, payload, contentType] of [
      ['cut in a part header', truncated, headers['content-type']],
      ['cut in a file', `--${boundary}\r\nContent-Disposition: form-data; name="doc"; filename="a"\r\n\r\nhel`, headers['content-type']],
      ['no closing boundary', filePart('doc', 'a.txt', 'hello'), headers['content-type']],
      ['no boundary parameter', filePart('doc', 'a.txt', 'hello') + end, 'multipart/form-data']
    ] as const) {
      const response = await app.inject({ method: 'POST', url: '/form', headers: { 'content-type': contentType }, payload })
      t.equal(response.statusCode, 400, name)
      t.match(response.json(), { code: 'FST_CONTEXT_MALFORMED_MULTIPART' }, name)
    }
  })
}

t.test('files past formFiles.memoryThreshold are streamed to a temp file, removed when the response ends', async (t) => {
  const app = await contextApp(t, async (app) => {
    await app.register(fastifyMultipart)
    routes(app)
  }, { formFiles: { memoryThreshold: 1024 } })
  const big = await app.inject({ method: 'POST', url: '/file', headers, payload: filePart('doc', 'big.bin', 'abc' + 'y'.repeat(4000)) + end })
  const body = big.json()
  t.match(body, { size: 4003, inMemory: false, same: true, head: 'abc' })
  t.type(body.path, 'string')
  // Removed by the onResponse hook, which runs after the response was sent: wait for it (at most 10 s).
  for (let i = 0; i < 500 && existsSync(body.path); i++) await new Promise((resolve) => setTimeout(resolve, 20))
  t.notOk(existsSync(body.path), 'the temp file is gone after the response')
  const small = await app.inject({ method: 'POST', url: '/file', headers, payload: filePart('doc', 'small.bin', 'abc') + end })
  t.match(small.json(), { size: 3, inMemory: true, path: null, same: true, head: 'abc' }, 'a file within the threshold stays in memory')
})

t.test('formFile(key) answers without reading the parts after the file it needs', { timeout: 20000 }, async (t) => {
  const app = await contextApp(t, async (app) => {
    await app.register(fastifyMultipart)
    routes(app)
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as { port: number }
  // The client sends the file, then the start of another part, and never finishes the body.
  const response = await new Promise<{ status: number, body: string, connection: string | undefined }>((resolve, reject) => {
    const request = httpRequest({ port, host: '127.0.0.1', method: 'POST', path: '/file', headers: { ...headers, 'transfer-encoding': 'chunked' } }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => { text += chunk })
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, body: text, connection: res.headers.connection }) })
    })
    request.on('error', reject)
    request.write(fieldPart('title', 'x') + filePart('doc', 'a.txt', 'abc') + `--${boundary}\r\nContent-Disposition: form-data; name="later"; filename="l"\r\n\r\nstill coming`)
  })
  t.equal(response.status, 200)
  t.match(JSON.parse(response.body), { size: 3, inMemory: true, head: 'abc' })
  t.equal(response.connection, 'close', 'the unread rest of the body is not read: the connection closes')
})
