/** Response writing: SendFile, Download (Attachment: reply-headers). */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import path from 'node:path'
import zlib from 'node:zlib'
import t from 'tap'
import { ContextOptionError, FileRootMissingError } from '@user-product-service/context'
import { FIXTURES, replyApp } from './reply-app.js'

const ROOT = path.join(FIXTURES, 'files')
const BIG = readFileSync(path.join(ROOT, 'big.txt'))

async function filesApp (t: Tap) {
  return replyApp(t, (app) => {
    app.get('/file', async (request, reply) => {
      const { name, compress } = request.query as { name: string, compress?: string }
      return reply.serveFile(name, compress === 'true')
    })
    app.get('/download', async (request, reply) => {
      const { name, as } = request.query as { name: string, as?: string }
      return reply.downloadFile(name, as)
    })
  }, { files: { root: ROOT } })
}
type Tap = Parameters<typeof replyApp>[0]

interface RawResponse { status: number, headers: IncomingHttpHeaders, body: string }

async function rawRequest (url: string, method = 'GET', headers: Record<string, string> = {}): Promise<RawResponse> {
  return await new Promise((resolve, reject) => {
    const req = httpRequest(url, { method, headers }, (res) => {
      let body = ''
      res.on('data', (chunk: Buffer) => { body += chunk.toString() })
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }))
    })
    req.on('error', reject)
    req.end()
  })
}

t.test('serveFile: body, Content-Type from the extension, ETag, Last-Modified, Accept-Ranges', async (t) => {
  const app = await filesApp(t)
  const cases: Array<[string, string, string]> = [
    ['hello.txt', 'text/plain; charset=utf-8', 'hello, world\n'],
    ['page.html', 'text/html; charset=utf-8', '<h1>hi</h1>\n'],
    ['data.json', 'application/json; charset=utf-8', '{"a":1}\n'],
    ['sub/inner.txt', 'text/plain; charset=utf-8', 'nested\n'],
    ['/sub/inner.txt', 'text/plain; charset=utf-8', 'nested\n'],
    ['we%ird #name.txt', 'text/plain; charset=utf-8', 'odd name\n'],
    ['résumé.txt', 'text/plain; charset=utf-8', 'résumé\n'],
    [path.join(ROOT, 'hello.txt'), 'text/plain; charset=utf-8', 'hello, world\n']
  ]
  for (const [name, type, body] of cases) {
    const response = await app.inject({ url: '/file', query: { name } })
    t.equal(response.statusCode, 200, name)
    t.equal(response.headers['content-type'], type, name)
    t.equal(response.body, body, name)
    t.equal(response.headers['content-length'], String(Buffer.byteLength(body)), name)
    t.match(response.headers.etag, /^W\/"/, `${name}: weak ETag`)
    t.ok(response.headers['last-modified'], name)
    t.equal(response.headers['accept-ranges'], 'bytes', name)
    t.equal(response.headers['content-encoding'], undefined, `${name}: compression off by default`)
  }
})

t.test('serveFile: outside the root 403, missing 404, dotfiles and directories 404', async (t) => {
  const app = await filesApp(t)
  const cases: Array<[string, number, string]> = [
    ['../outside.txt', 403, 'FST_CONTEXT_FILE_FORBIDDEN'],
    ['sub/../../outside.txt', 403, 'FST_CONTEXT_FILE_FORBIDDEN'],
    ['..\\outside.txt', 403, 'FST_CONTEXT_FILE_FORBIDDEN'],
    [path.join(FIXTURES, 'outside.txt'), 404, 'FST_CONTEXT_FILE_NOT_FOUND'], // read as root/<that path>
    ['/etc/passwd', 404, 'FST_CONTEXT_FILE_NOT_FOUND'], // read as root/etc/passwd
    ['missing.txt', 404, 'FST_CONTEXT_FILE_NOT_FOUND'],
    ['.hidden', 404, 'FST_CONTEXT_FILE_NOT_FOUND'],
    ['sub', 404, 'FST_CONTEXT_FILE_NOT_FOUND']
  ]
  for (const [name, status, code] of cases) {
    const response = await app.inject({ url: '/file', query: { name } })
    t.equal(response.statusCode, status, name)
    t.equal(response.json().code, code, name)
    t.notOk(response.body.includes('outside'), `${name}: nothing of the file leaks`)
  }
})

t.test('serveFile and downloadFile contain by real path: a symbolic link out of the root is refused', async (t) => {
  // root/: inside.txt, .env, link-in -> inside.txt, link-out -> ../outside/secret.txt,
  // dir-out -> ../outside, alias.txt -> .env, .alias -> inside.txt, loop -> loop, dangling -> nowhere
  const base = mkdtempSync(path.join(tmpdir(), 'context-files-'))
  t.teardown(() => rmSync(base, { recursive: true, force: true }))
  const root = path.join(base, 'root')
  mkdirSync(root)
  mkdirSync(path.join(base, 'outside'))
  writeFileSync(path.join(base, 'outside', 'secret.txt'), 'TOP SECRET\n')
  writeFileSync(path.join(root, 'inside.txt'), 'inside\n')
  writeFileSync(path.join(root, '.env'), 'PASSWORD=x\n')
  symlinkSync('inside.txt', path.join(root, 'link-in'))
  symlinkSync(path.join('..', 'outside', 'secret.txt'), path.join(root, 'link-out.txt'))
  symlinkSync(path.join(base, 'outside'), path.join(root, 'dir-out'))
  symlinkSync('.env', path.join(root, 'alias.txt'))
  symlinkSync('inside.txt', path.join(root, '.alias'))
  symlinkSync('loop', path.join(root, 'loop'))
  symlinkSync('nowhere', path.join(root, 'dangling'))
  // A root reached through a link is fine: containment compares real paths on both sides.
  symlinkSync(root, path.join(base, 'root-link'))

  const app = await replyApp(t, (app) => {
    app.get('/file', async (request, reply) => reply.serveFile((request.query as { name: string }).name))
    app.get('/download', async (request, reply) => reply.downloadFile((request.query as { name: string }).name))
  }, { files: { root: path.join(base, 'root-link') } })

  const cases: Array<[string, number, string]> = [
    ['inside.txt', 200, 'inside\n'],
    ['link-in', 200, 'inside\n'],
    ['link-out.txt', 403, 'FST_CONTEXT_FILE_FORBIDDEN'],
    ['dir-out/secret.txt', 403, 'FST_CONTEXT_FILE_FORBIDDEN'],
    [path.join(base, 'root-link', 'link-out.txt'), 403, 'FST_CONTEXT_FILE_FORBIDDEN'],
    ['alias.txt', 404, 'FST_CONTEXT_FILE_NOT_FOUND'],
    ['.alias', 404, 'FST_CONTEXT_FILE_NOT_FOUND'],
    ['loop', 404, 'FST_CONTEXT_FILE_NOT_FOUND'],
    ['dangling', 404, 'FST_CONTEXT_FILE_NOT_FOUND']
  ]
  for (const route of ['/file', '/download']) {
    for (const [name, status, expected] of cases) {
      const response = await app.inject({ url: route, query: { name } })
      t.equal(response.statusCode, status, `${route} ${name}`)
      if (status === 200) t.equal(response.body, expected, `${route} ${name}`)
      else t.equal(response.json().code, expected, `${route} ${name}`)
      t.notOk(response.body.includes('SECRET') || response.body.includes('PASSWORD'), `${route} ${name}: nothing leaks`)
    }
  }
})

t.test('serveFile / downloadFile live beside @fastify/static\'s own sendFile / download (no name clash)', async (t) => {
  const fastifyStatic = (await import('@fastify/static')).default
  const app = await replyApp(t, async (app) => {
    await app.register(fastifyStatic, { root: path.join(ROOT, 'sub'), serve: false })
    app.get('/theirs', async (_request, reply) => reply.sendFile('inner.txt'))
    app.get('/their-download', async (_request, reply) => reply.download('inner.txt', 'x.txt'))
    app.get('/ours', async (_request, reply) => reply.serveFile('hello.txt', true))
  }, { files: { root: ROOT } })
  const theirs = await app.inject('/theirs')
  t.same([theirs.statusCode, theirs.body], [200, 'nested\n'], '@fastify/static\'s sendFile, from its own root')
  t.match((await app.inject('/their-download')).headers['content-disposition'], /^attachment; filename="?x\.txt"?$/)
  const ours = await app.inject({ url: '/ours', headers: { 'accept-encoding': 'gzip' } })
  t.same([ours.statusCode, ours.headers['content-encoding']], [200, 'gzip'], 'ours, from files.root, compressed')
  t.equal(zlib.gunzipSync(ours.rawPayload).toString(), 'hello, world\n')
})

t.test('serveFile: conditional GET gives 304 / 412', async (t) => {
  const app = await filesApp(t)
  const first = await app.inject({ url: '/file', query: { name: 'hello.txt' } })
  const etag = first.headers.etag as string
  const lastModified = first.headers['last-modified'] as string
  const byEtag = await app.inject({ url: '/file', query: { name: 'hello.txt' }, headers: { 'if-none-match': etag } })
  t.equal(byEtag.statusCode, 304)
  t.equal(byEtag.body, '')
  const byDate = await app.inject({ url: '/file', query: { name: 'hello.txt' }, headers: { 'if-modified-since': lastModified } })
  t.equal(byDate.statusCode, 304)
  const otherEtag = await app.inject({ url: '/file', query: { name: 'hello.txt' }, headers: { 'if-none-match': 'W/"other"' } })
  t.equal(otherEtag.statusCode, 200)
  const noCache = await app.inject({ url: '/file', query: { name: 'hello.txt' }, headers: { 'if-none-match': etag, 'cache-control': 'no-cache' } })
  t.equal(noCache.statusCode, 200, 'Cache-Control: no-cache skips the cache check')
  const precondition = await app.inject({ url: '/file', query: { name: 'hello.txt' }, headers: { 'if-match': '"nope"' } })
  t.equal(precondition.statusCode, 412)
})

t.test('serveFile: Range gives 206 with Content-Range, 416 when unsatisfiable', async (t) => {
  const app = await filesApp(t)
  const partial = await app.inject({ url: '/file', query: { name: 'hello.txt' }, headers: { range: 'bytes=0-4' } })
  t.equal(partial.statusCode, 206)
  t.equal(partial.body, 'hello')
  t.equal(partial.headers['content-range'], 'bytes 0-4/13')
  t.equal(partial.headers['content-length'], '5')
  const suffix = await app.inject({ url: '/file', query: { name: 'hello.txt' }, headers: { range: 'bytes=-6' } })
  t.equal(suffix.body, 'world\n')
  const unsatisfiable = await app.inject({ url: '/file', query: { name: 'hello.txt' }, headers: { range: 'bytes=100-200' } })
  t.equal(unsatisfiable.statusCode, 416)
  t.equal(unsatisfiable.headers['content-range'], 'bytes */13')
})

t.test('serveFile(path, true): compresses when the client accepts it, never otherwise', async (t) => {
  const app = await filesApp(t)
  const gzip = await app.inject({ url: '/file', query: { name: 'big.txt', compress: 'true' }, headers: { 'accept-encoding': 'gzip, deflate, br' } })
  t.equal(gzip.statusCode, 200)
  t.equal(gzip.headers['content-encoding'], 'gzip', 'gzip first among equals')
  t.equal(gzip.headers.vary, 'Accept-Encoding')
  t.equal(gzip.headers['content-length'], undefined)
  t.equal(gzip.headers['accept-ranges'], undefined, 'no ranges over a compressed body')
  t.ok(gzip.rawPayload.length < BIG.length / 10)
  t.same(zlib.gunzipSync(gzip.rawPayload), BIG)

  const br = await app.inject({ url: '/file', query: { name: 'big.txt', compress: 'true' }, headers: { 'accept-encoding': 'gzip;q=0.5, br' } })
  t.equal(br.headers['content-encoding'], 'br')
  t.same(zlib.brotliDecompressSync(br.rawPayload), BIG)

  const none = await app.inject({ url: '/file', query: { name: 'big.txt', compress: 'true' } })
  t.equal(none.headers['content-encoding'], undefined, 'no Accept-Encoding: identity')
  t.equal(none.headers.vary, 'Accept-Encoding')
  t.equal(none.headers['content-length'], String(BIG.length))

  const identity = await app.inject({ url: '/file', query: { name: 'big.txt', compress: 'true' }, headers: { 'accept-encoding': 'identity' } })
  t.equal(identity.headers['content-encoding'], undefined)

  const off = await app.inject({ url: '/file', query: { name: 'big.txt' }, headers: { 'accept-encoding': 'gzip' } })
  t.equal(off.headers['content-encoding'], undefined, 'compress defaults to false')
  t.equal(off.headers.vary, undefined)
})

t.test('downloadFile: attachment named after the file or the given name, Content-Type from that name', async (t) => {
  const app = await filesApp(t)
  const plain = await app.inject({ url: '/download', query: { name: 'sub/inner.txt' } })
  t.equal(plain.statusCode, 200)
  t.equal(plain.body, 'nested\n')
  t.equal(plain.headers['content-disposition'], 'attachment; filename=inner.txt')
  t.equal(plain.headers['content-type'], 'text/plain; charset=utf-8')

  const renamed = await app.inject({ url: '/download', query: { name: 'data.json', as: 'Überblick 2024.csv' } })
  t.equal(renamed.body, '{"a":1}\n')
  t.equal(renamed.headers['content-disposition'], 'attachment; filename="?berblick 2024.csv"; filename*=UTF-8\'\'%C3%9Cberblick%202024.csv')
  t.equal(renamed.headers['content-type'], 'text/csv; charset=utf-8', 'from the attachment name')

  const unknownType = await app.inject({ url: '/download', query: { name: 'data.json', as: 'export' } })
  t.equal(unknownType.headers['content-type'], 'application/json; charset=utf-8', 'no extension: the file\'s type')

  const missing = await app.inject({ url: '/download', query: { name: 'nope.txt' } })
  t.equal(missing.statusCode, 404)
  t.equal(missing.headers['content-disposition'], undefined, 'an error is not an attachment')

  const outside = await app.inject({ url: '/download', query: { name: '../outside.txt' } })
  t.equal(outside.statusCode, 403)
})

t.test('serveFile and downloadFile over a real socket: range, 304, gzip, HEAD', async (t) => {
  const app = await filesApp(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as AddressInfo
  const base = `http://127.0.0.1:${port}`

  const range = await fetch(`${base}/file?name=big.txt`, { headers: { range: 'bytes=10-19' } })
  t.equal(range.status, 206)
  t.equal(await range.text(), BIG.subarray(10, 20).toString())

  // fetch adds Cache-Control: no-cache to conditional requests, so plain http here.
  const first = await rawRequest(`${base}/file?name=hello.txt`)
  const again = await rawRequest(`${base}/file?name=hello.txt`, 'GET', { 'if-none-match': first.headers.etag as string })
  t.equal(again.status, 304)
  t.equal(again.body, '')

  // fetch decompresses: the body must come back whole, and the header says it was gzip
  const gzip = await fetch(`${base}/file?name=big.txt&compress=true`, { headers: { 'accept-encoding': 'gzip' } })
  t.equal(gzip.headers.get('content-encoding'), 'gzip')
  t.equal(await gzip.text(), BIG.toString())

  const response = await rawRequest(`${base}/download?name=hello.txt`, 'HEAD')
  const head = { status: response.status, length: response.headers['content-length'], body: response.body }
  t.same(head, { status: 200, length: '13', body: '' })
})

t.test('serveFile without files.root throws FileRootMissingError; bad options and arguments', async (t) => {
  const app = await replyApp(t, (app) => {
    app.get('/', async (_request, reply) => reply.serveFile('hello.txt'))
  })
  const response = await app.inject('/')
  t.equal(response.statusCode, 500)
  t.equal(response.json().code, new FileRootMissingError('serveFile').code)

  await t.rejects(replyApp(t, () => {}, { files: { root: path.join(ROOT, 'hello.txt') } }), ContextOptionError, 'root must be a folder')
  await t.rejects(replyApp(t, () => {}, { files: { root: path.join(ROOT, 'nope') } }), ContextOptionError)

  const strict = await replyApp(t, (app) => {
    app.get('/root-arg', async (_request, reply) => reply.serveFile('hello.txt', '/etc' as unknown as boolean))
  }, { files: { root: ROOT } })
  const rootArg = await strict.inject('/root-arg')
  t.equal(rootArg.statusCode, 500, "@fastify/static's (file, rootPath) form is refused")
  t.equal(rootArg.json().code, 'FST_CONTEXT_INVALID_ARGUMENT')
})
