/** Static files at a prefix, over a real socket (index, ETag, Range, traversal, dotfiles). */
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import { fileURLToPath } from 'node:url'
import Fastify, { type FastifyInstance } from 'fastify'
import t from 'tap'
import context from '@user-product-service/context'
import routing from '@user-product-service/routing'

const PUBLIC = fileURLToPath(new URL('./fixtures/public/', import.meta.url))

interface RawResponse { status: number, headers: IncomingHttpHeaders, body: string }

/** A request whose path is sent exactly as written (fetch would normalize `..`). */
async function get (base: string, rawPath: string, headers: Record<string, string> = {}, method = 'GET'): Promise<RawResponse> {
  const { hostname, port } = new URL(base)
  return await new Promise((resolve, reject) => {
    const req = httpRequest({ hostname, port, path: rawPath, method, headers }, (res) => {
      let body = ''
      res.on('data', (chunk: Buffer) => { body += chunk.toString() })
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }))
    })
    req.on('error', reject)
    req.end()
  })
}

async function listen (t: { teardown: (fn: () => unknown) => void }, setup: (app: FastifyInstance) => Promise<void>): Promise<string> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(routing)
  await setup(app)
  await app.listen({ port: 0, host: '127.0.0.1' })
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
}

t.test('static(prefix, root): files under the root at the prefix, with type, ETag and Last-Modified', async (t) => {
  const base = await listen(t, async (app) => { await app.static('/assets', PUBLIC) })
  const css = await get(base, '/assets/style.css')
  t.equal(css.status, 200)
  t.equal(css.body, 'body{color:red}\n')
  t.equal(css.headers['content-type'], 'text/css; charset=utf-8')
  t.match(css.headers.etag, /^W\/"[0-9a-f]+-[0-9a-f]+"$/)
  t.ok(css.headers['last-modified'])
  t.equal(css.headers['accept-ranges'], 'bytes')
  t.equal(css.headers['cache-control'], 'public, max-age=0')
  t.equal((await get(base, '/assets/dir/file.txt')).body, 'file in dir\n')
  t.equal((await get(base, '/style.css')).status, 404, 'only under the prefix')
  t.equal((await get(base, '/assets/missing.txt')).status, 404)
  t.equal((await get(base, '/assets')).status, 404, 'the bare prefix is not added for static files (README.md, "Static files")')
})

t.test('static(prefix, root, { redirect: true }): the bare prefix redirects to the folder', async (t) => {
  const base = await listen(t, async (app) => { await app.static('/assets', PUBLIC, { redirect: true }) })
  const bare = await get(base, '/assets')
  t.equal(bare.status, 301)
  t.equal(bare.headers.location, '/assets/')
  t.equal((await get(base, '/assets/')).body, '<h1>home</h1>\n')
})

t.test('prefix / exposes /dir/file paths relative to the root; index.html for directories', async (t) => {
  const base = await listen(t, async (app) => { await app.static('/', PUBLIC) })
  t.equal((await get(base, '/dir/file.txt')).body, 'file in dir\n')
  const home = await get(base, '/')
  t.equal(home.status, 200)
  t.equal(home.body, '<h1>home</h1>\n')
  t.equal(home.headers['content-type'], 'text/html; charset=utf-8')
  t.equal((await get(base, '/docs/')).body, '<h1>docs</h1>\n')
  t.equal((await get(base, '/docs')).body, '<h1>docs</h1>\n', 'without the slash too (no redirect)')
  t.equal((await get(base, '/dir/')).status, 404, 'a directory without index.html: 404, no listing')
})

t.test('conditional GET and Range', async (t) => {
  const base = await listen(t, async (app) => { await app.static('/assets', PUBLIC) })
  const first = await get(base, '/assets/style.css')
  const byEtag = await get(base, '/assets/style.css', { 'if-none-match': first.headers.etag as string })
  t.equal(byEtag.status, 304)
  t.equal(byEtag.body, '')
  const byDate = await get(base, '/assets/style.css', { 'if-modified-since': first.headers['last-modified'] as string })
  t.equal(byDate.status, 304)
  const range = await get(base, '/assets/style.css', { range: 'bytes=0-3' })
  t.equal(range.status, 206)
  t.equal(range.body, 'body')
  t.equal(range.headers['content-range'], 'bytes 0-3/16')
  const head = await get(base, '/assets/style.css', {}, 'HEAD')
  t.equal(head.status, 200)
  t.equal(head.headers['content-length'], '16')
  t.equal(head.body, '')
})

t.test('traversal and dotfiles refused: nothing outside the root, no hidden file', async (t) => {
  const base = await listen(t, async (app) => { await app.static('/assets', PUBLIC) })
  for (const path of [
    '/assets/../secret.txt',
    '/assets/../../secret.txt',
    '/assets/%2e%2e/secret.txt',
    '/assets/%2E%2E%2Fsecret.txt',
    '/assets/dir/..%2f..%2fsecret.txt',
    '/assets/..%5csecret.txt',
    '/assets/dir/%2e%2e/%2e%2e/secret.txt',
    '/assets//../secret.txt',
    '/assets/.secret',
    '/assets/dir/../.secret'
  ]) {
    const response = await get(base, path)
    t.not(response.status, 200, path)
    t.ok(response.status === 403 || response.status === 404 || response.status === 400, `${path}: ${response.status}`)
    t.notOk(response.body.includes('top secret') || response.body.includes('hidden\n'), `${path}: nothing leaks`)
  }
})

t.test('several folders at once, next to the context plugin and its serveFile', async (t) => {
  const base = await listen(t, async (app) => {
    await app.register(context, { files: { root: PUBLIC } })
    await app.static('/a', PUBLIC)
    await app.static('/b', `${PUBLIC}dir`, { index: false, maxAge: 60_000 })
    app.get('/send', async (_request, reply) => reply.serveFile('style.css'))
  })
  t.equal((await get(base, '/a/style.css')).status, 200)
  const b = await get(base, '/b/file.txt')
  t.equal(b.body, 'file in dir\n')
  t.equal(b.headers['cache-control'], 'public, max-age=60', 'options pass through to @fastify/static')
  t.equal((await get(base, '/send')).body, 'body{color:red}\n')
})
