/**
 * Product images through real HTTP (a listening server, fetch with FormData, raw sockets
 * for cut-off uploads): upload, download with validators and ranges, removal, and no
 * file ever left behind without its row (docs/api.md, "Product images").
 */
import http from 'node:http'
import net from 'node:net'
import t, { type Test } from 'tap'
import { assertProblem } from './helpers/assertions.js'
import { build, registerAndLogin, TEST_ENV, type Session, type TestApp } from './helpers/build.js'
import { sqlClient } from './helpers/database.js'
import type pg from 'pg'

const MAX = 4096
const ADMIN_KEY = TEST_ENV.ADMIN_API_KEYS!.split(',')[0]!

// Real image headers (the type is judged by them), padded to a size that ranges can cut.
const PNG = Buffer.concat([Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64'), Buffer.alloc(1000, 7)])
const JPEG = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00, 0x01]), Buffer.alloc(500, 3), Buffer.from([0xff, 0xd9])])
const WEBP = Buffer.from('UklGRiQAAABXRUJQVlA4IBgAAAAwAQCdASoBAAEAAwA0JaQAA3AA/vuUAAA=', 'base64')

interface Part { name?: string, filename?: string, type?: string, data: Buffer | string }

/** The stored files (blobs) of product `id`. */
async function leftOf (id: number): Promise<string[]> {
  const { rows } = await ctx.db.query<{ key: string }>('SELECT key FROM blobs WHERE key LIKE $1 ORDER BY key', [`products/${id}/%`])
  return rows.map((row) => row.key)
}

/** Waits (bounded) until `check` holds; returns its last value. */
async function eventually<T> (read: () => Promise<T>, check: (value: T) => boolean, ms = 5000): Promise<T> {
  const until = Date.now() + ms
  let value = await read()
  while (!check(value) && Date.now() < until) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    value = await read()
  }
  return value
}

/**
 * GET with exactly these headers. fetch() is no use for conditional requests: with
 * If-None-Match or If-Modified-Since it adds `Cache-Control: no-cache` (the Fetch
 * standard), and a no-cache request is never answered 304 (the `fresh` rule, as Express).
 */
async function get (url: string, headers: Record<string, string>): Promise<{ status: number, headers: http.IncomingHttpHeaders, body: Buffer }> {
  return await new Promise((resolve, reject) => {
    http.get(url, { headers }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (chunk: Buffer) => chunks.push(chunk))
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }) })
    }).on('error', reject)
  })
}

/** A raw multipart body (fetch's FormData cannot send a field without a file name, or odd headers). */
function multipart (parts: Part[], boundary = '----imgtest7MA4YWxk'): { body: Buffer, type: string } {
  const chunks: Buffer[] = []
  for (const part of parts) {
    let head = `--${boundary}\r\nContent-Disposition: form-data; name="${part.name ?? 'image'}"`
    if (part.filename !== undefined) head += `; filename="${part.filename}"`
    head += '\r\n'
    if (part.type !== undefined) head += `Content-Type: ${part.type}\r\n`
    chunks.push(Buffer.from(head + '\r\n'), Buffer.from(part.data), Buffer.from('\r\n'))
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`))
  return { body: Buffer.concat(chunks), type: `multipart/form-data; boundary=${boundary}` }
}

interface Ctx { app: TestApp, base: string, db: pg.Client, me: Session, other: Session }

async function setup (t: { teardown: (fn: () => unknown) => void }, env: Record<string, string> = {}): Promise<Ctx> {
  const app = await build(t, { env: { IMAGE_MAX_BYTES: String(MAX), ...env } })
  const base = await app.listen({ host: '127.0.0.1', port: 0 })
  const me = await registerAndLogin(app)
  const other = await registerAndLogin(app)
  return { app, base, db: await sqlClient(t, app.databaseUrl), me, other }
}

// One app for the whole file: building one (its own database) costs seconds on a busy machine.
const ctx = await setup(t)

async function newProduct (app: TestApp, session: Session): Promise<number> {
  const res = await app.inject({ method: 'POST', url: '/api/product', headers: session.auth, payload: { title: 'with a picture', amount: 100 } })
  return res.json().id as number
}

async function upload (ctx: Ctx, id: number, parts: Part[], headers: Record<string, string> = ctx.me.auth): Promise<Response> {
  const { body, type } = multipart(parts)
  return await fetch(`${ctx.base}/api/product/${id}/image`, { method: 'POST', headers: { ...headers, 'content-type': type }, body })
}

/** assertProblem for a fetch Response. */
async function problem (t: Test, res: Response, status: number, code: string): Promise<Record<string, any>> {
  const body = await res.text()
  return assertProblem(t, { statusCode: res.status, headers: Object.fromEntries(res.headers), body, json: () => JSON.parse(body) } as never, status, code)
}

t.test('upload PNG, JPEG and WebP; download them as stored', async (t) => {
  const ids: number[] = []
  for (const [data, type, ext] of [[PNG, 'image/png', 'png'], [JPEG, 'image/jpeg', 'jpg'], [WEBP, 'image/webp', 'webp']] as const) {
    const id = await newProduct(ctx.app, ctx.me)
    ids.push(id)
    // A FormData body from fetch itself, with a name and a Content-Type that say nothing true.
    const form = new FormData()
    form.append('file', new Blob([data], { type: 'application/octet-stream' }), 'upload.bin')
    const res = await fetch(`${ctx.base}/api/product/${id}/image`, { method: 'POST', headers: ctx.me.auth, body: form })
    t.equal(res.status, 201, `${type}: 201 for a first image`)
    t.equal(res.headers.get('location'), `/api/product/${id}/image`)
    const product = await res.json() as Record<string, unknown>
    t.equal(product.imageUrl, `/api/product/${id}/image`, 'the product carries its image URL')
    t.notOk('imageKey' in product || 'imageSha256' in product, 'storage details stay inside')

    const image = await fetch(`${ctx.base}/api/product/${id}/image`)
    t.equal(image.status, 200)
    t.equal(image.headers.get('content-type'), type, 'Content-Type from the bytes')
    t.equal(image.headers.get('x-content-type-options'), 'nosniff')
    t.equal(image.headers.get('content-disposition'), `inline; filename="product-${id}.${ext}"`)
    t.equal(image.headers.get('accept-ranges'), 'bytes')
    t.equal(image.headers.get('content-length'), String(data.length))
    t.match(image.headers.get('etag'), /^"[A-Za-z0-9_-]{43}"$/, 'a strong ETag (the SHA-256)')
    t.ok(image.headers.get('last-modified'), 'Last-Modified')
    t.same(Buffer.from(await image.arrayBuffer()), data, 'the same bytes')
    const json = await (await fetch(`${ctx.base}/api/product/${id}`)).json() as Record<string, unknown>
    t.equal(json.imageUrl, `/api/product/${id}/image`, 'GET /api/product/:id shows it too')
  }
  t.same(await Promise.all(ids.map(async (id) => (await leftOf(id)).length)), [1, 1, 1], 'one file each')
  const head = await fetch(`${ctx.base}/api/product/${await newProduct(ctx.app, ctx.me)}`)
  t.equal(((await head.json()) as Record<string, unknown>).imageUrl, null, 'null without an image')
})

t.test('replacing an image: 200, and the old file is gone', async (t) => {
  const id = await newProduct(ctx.app, ctx.me)
  t.equal((await upload(ctx, id, [{ filename: 'a.png', type: 'image/png', data: PNG }])).status, 201)
  const first = await leftOf(id)
  const res = await upload(ctx, id, [{ filename: 'b.webp', type: 'image/webp', data: WEBP }])
  t.equal(res.status, 200, 'replaced')
  const now = await leftOf(id)
  t.equal(now.length, 1, 'one file')
  t.not(now[0], first[0], 'a new one')
  t.equal((await fetch(`${ctx.base}/api/product/${id}/image`)).headers.get('content-type'), 'image/webp')
})

t.test('refused uploads leave no file and change nothing', async (t) => {
  const id = await newProduct(ctx.app, ctx.me)
  const cases: Array<[string, () => Promise<Response>, number, string]> = [
    ['text named .png and sent as image/png', async () => await upload(ctx, id, [{ filename: 'cat.png', type: 'image/png', data: 'just some text, not an image at all' }]), 415, 'UNSUPPORTED_IMAGE_TYPE'],
    ['a GIF', async () => await upload(ctx, id, [{ filename: 'a.gif', type: 'image/gif', data: Buffer.from('GIF89a\x01\x00\x01\x00\x00\x00\x00;', 'latin1') }]), 415, 'UNSUPPORTED_IMAGE_TYPE'],
    ['HTML named .jpg', async () => await upload(ctx, id, [{ filename: 'x.jpg', type: 'image/jpeg', data: '<html><script>alert(1)</script></html>' }]), 415, 'UNSUPPORTED_IMAGE_TYPE'],
    ['an empty file', async () => await upload(ctx, id, [{ filename: 'e.png', type: 'image/png', data: '' }]), 415, 'UNSUPPORTED_IMAGE_TYPE'],
    ['RIFF but not WebP', async () => await upload(ctx, id, [{ filename: 'a.webp', data: Buffer.from('RIFF\x24\x00\x00\x00WAVEfmt ', 'latin1') }]), 415, 'UNSUPPORTED_IMAGE_TYPE'],
    ['a file past IMAGE_MAX_BYTES', async () => await upload(ctx, id, [{ filename: 'big.png', data: Buffer.concat([PNG, Buffer.alloc(MAX)]) }]), 413, 'PAYLOAD_TOO_LARGE'],
    ['a body past the route limit (refused by Content-Length)', async () => await upload(ctx, id, [{ filename: 'huge.png', data: Buffer.concat([PNG, Buffer.alloc(200_000)]) }]), 413, 'PAYLOAD_TOO_LARGE'],
    ['two files', async () => await upload(ctx, id, [{ filename: 'a.png', data: PNG }, { name: 'second', filename: 'b.png', data: PNG }]), 400, 'TOO_MANY_FILES'],
    ['no file, a field only', async () => await upload(ctx, id, [{ name: 'image', data: 'not a file' }]), 400, 'IMAGE_MISSING'],
    ['an empty form', async () => await upload(ctx, id, []), 400, 'IMAGE_MISSING'],
    ['JSON instead of multipart', async () => await fetch(`${ctx.base}/api/product/${id}/image`, { method: 'POST', headers: { ...ctx.me.auth, 'content-type': 'application/json' }, body: '{"image":"x"}' }), 415, 'UNSUPPORTED_MEDIA_TYPE'],
    ['no body at all', async () => await fetch(`${ctx.base}/api/product/${id}/image`, { method: 'POST', headers: ctx.me.auth }), 415, 'UNSUPPORTED_MEDIA_TYPE'],
    ['a truncated multipart body', async () => await fetch(`${ctx.base}/api/product/${id}/image`, { method: 'POST', headers: { ...ctx.me.auth, 'content-type': 'multipart/form-data; boundary=xyz' }, body: `--xyz\r\nContent-Disposition: form-data; name="image"; filename="a.png"\r\n\r\n${PNG.toString('latin1')}` }), 400, 'BAD_REQUEST'],
    ['not the creator', async () => await upload(ctx, id, [{ filename: 'a.png', data: PNG }], ctx.other.auth), 403, 'FORBIDDEN'],
    ['no token', async () => await upload(ctx, id, [{ filename: 'a.png', data: PNG }], {}), 401, 'UNAUTHORIZED'],
    ['a bad token', async () => await upload(ctx, id, [{ filename: 'a.png', data: PNG }], { authorization: 'Bearer x.y.z' }), 401, 'UNAUTHORIZED'],
    ['no such product', async () => await upload(ctx, 999_999, [{ filename: 'a.png', data: PNG }]), 404, 'NOT_FOUND'],
    ['an id that is no id', async () => await fetch(`${ctx.base}/api/product/abc/image`, { method: 'POST', headers: ctx.me.auth }), 400, 'VALIDATION_FAILED']
  ]
  for (const [what, send, status, code] of cases) {
    await t.test(what, async (t) => {
      const res = await send()
      await problem(t, res, status, code)
      if (status === 401) t.match(res.headers.get('www-authenticate'), /^Bearer/)
      t.same(await eventually(async () => await leftOf(id), (files) => files.length === 0), [], 'no file left, temp files included')
    })
  }
  const product = await (await fetch(`${ctx.base}/api/product/${id}`)).json() as Record<string, unknown>
  t.equal(product.imageUrl, null, 'the product still has no image')
  t.equal((await fetch(`${ctx.base}/api/product/${id}/image`)).status, 404)
})

t.test('a refused upload keeps the image there was', async (t) => {
  const id = await newProduct(ctx.app, ctx.me)
  await upload(ctx, id, [{ filename: 'a.png', data: PNG }])
  const before = await leftOf(id)
  t.equal((await upload(ctx, id, [{ filename: 'evil.png', data: 'text' }])).status, 415)
  t.equal((await upload(ctx, id, [{ filename: 'big.png', data: Buffer.concat([PNG, Buffer.alloc(MAX)]) }])).status, 413)
  t.same(await leftOf(id), before, 'the stored image, nothing else')
  t.same(Buffer.from(await (await fetch(`${ctx.base}/api/product/${id}/image`)).arrayBuffer()), PNG)
})

t.test('an upload cut off by the client leaves no file', async (t) => {
  const id = await newProduct(ctx.app, ctx.me)
  const { body, type } = multipart([{ filename: 'a.png', data: Buffer.concat([PNG, Buffer.alloc(2000, 1)]) }])
  const socket = net.connect(Number(new URL(ctx.base).port), '127.0.0.1')
  await new Promise((resolve) => socket.once('connect', resolve))
  socket.write(`POST /api/product/${id}/image HTTP/1.1\r\nHost: localhost\r\nAuthorization: ${ctx.me.auth.authorization}\r\nContent-Type: ${type}\r\nContent-Length: ${body.length}\r\n\r\n`)
  socket.write(body.subarray(0, 1500))
  // The first bytes are in (test/product-images-db.test.ts cuts one off mid-transaction):
  // nothing is visible yet; then the client goes away.
  await new Promise((resolve) => setTimeout(resolve, 200))
  t.same(await leftOf(id), [], 'nothing stored while the upload is unfinished')
  socket.destroy()
  t.same(await eventually(async () => await leftOf(id), (files) => files.length === 0), [], 'the partial file is removed')
  t.equal(((await (await fetch(`${ctx.base}/api/product/${id}`)).json()) as Record<string, unknown>).imageUrl, null)
})

t.test('download: validators, 304, ranges, 416', async (t) => {
  const id = await newProduct(ctx.app, ctx.me)
  await upload(ctx, id, [{ filename: 'a.png', data: PNG }])
  const url = `${ctx.base}/api/product/${id}/image`
  const first = await fetch(url)
  const etag = first.headers.get('etag')!
  const lastModified = first.headers.get('last-modified')!
  t.equal(first.headers.get('cache-control'), 'public, no-cache', 'revalidated on every use')

  for (const [what, headers] of [
    ['If-None-Match', { 'if-none-match': etag }],
    ['If-None-Match in a list, weak form', { 'if-none-match': `"other", W/${etag}` }],
    ['If-Modified-Since', { 'if-modified-since': lastModified }]
  ] as const) {
    const res = await get(url, headers)
    t.equal(res.status, 304, `${what}: 304`)
    t.equal(res.body.length, 0, 'no body')
    t.equal(res.headers.etag, etag)
  }
  t.equal((await get(url, { 'if-none-match': '"something-else"' })).status, 200, 'another ETag: 200')
  t.equal((await get(url, { 'if-none-match': etag, 'cache-control': 'no-cache' })).status, 200, 'Cache-Control: no-cache (a reload): the whole image')

  const range = await fetch(url, { headers: { range: 'bytes=0-9' } })
  t.equal(range.status, 206)
  t.equal(range.headers.get('content-range'), `bytes 0-9/${PNG.length}`)
  t.equal(range.headers.get('content-length'), '10')
  t.equal(range.headers.get('content-type'), 'image/png')
  t.same(Buffer.from(await range.arrayBuffer()), PNG.subarray(0, 10))

  const suffix = await fetch(url, { headers: { range: 'bytes=-5' } })
  t.equal(suffix.status, 206)
  t.equal(suffix.headers.get('content-range'), `bytes ${PNG.length - 5}-${PNG.length - 1}/${PNG.length}`)
  t.same(Buffer.from(await suffix.arrayBuffer()), PNG.subarray(PNG.length - 5))

  const open = await fetch(url, { headers: { range: `bytes=${PNG.length - 3}-` } })
  t.equal(open.status, 206)
  t.same(Buffer.from(await open.arrayBuffer()), PNG.subarray(PNG.length - 3))

  const beyond = await fetch(url, { headers: { range: `bytes=${PNG.length}-${PNG.length + 100}` } })
  await problem(t, beyond, 416, 'RANGE_NOT_SATISFIABLE')
  t.equal(beyond.headers.get('content-range'), `bytes */${PNG.length}`)

  for (const [what, headers] of [
    ['a malformed Range', { range: 'bytes=abc' }],
    ['another unit', { range: 'items=0-1' }],
    ['several ranges', { range: 'bytes=0-1,5-6' }],
    ['If-Range with an old ETag', { range: 'bytes=0-9', 'if-range': '"old"' }],
    ['If-Range with another date', { range: 'bytes=0-9', 'if-range': 'Tue, 01 Jan 2019 00:00:00 GMT' }]
  ] as const) {
    const res = await fetch(url, { headers })
    t.equal(res.status, 200, `${what}: the whole image`)
    t.equal(Buffer.from(await res.arrayBuffer()).length, PNG.length)
  }
  t.equal((await fetch(url, { headers: { range: 'bytes=0-9', 'if-range': etag } })).status, 206, 'If-Range with the current ETag: 206')
  t.equal((await fetch(url, { headers: { range: 'bytes=0-9', 'if-range': lastModified } })).status, 206, 'If-Range with the current date: 206')

  const head = await fetch(url, { method: 'HEAD' })
  t.equal(head.status, 200, 'HEAD')
  t.equal(head.headers.get('content-length'), String(PNG.length))

  // A new image: a new ETag, and the old one no longer matches.
  await upload(ctx, id, [{ filename: 'b.png', data: Buffer.concat([PNG, Buffer.from('more')]) }])
  const changed = await get(url, { 'if-none-match': etag })
  t.equal(changed.status, 200, 'a replaced image is not "not modified"')
  t.not(changed.headers.etag, etag)

  await problem(t, await fetch(`${ctx.base}/api/product/${await newProduct(ctx.app, ctx.me)}/image`), 404, 'NOT_FOUND')
  await problem(t, await fetch(`${ctx.base}/api/product/999999/image`), 404, 'NOT_FOUND')
  await problem(t, await fetch(`${ctx.base}/api/product/0/image`), 400, 'VALIDATION_FAILED')
})

t.test('DELETE /api/product/:id/image: the creator only', async (t) => {
  const id = await newProduct(ctx.app, ctx.me)
  await upload(ctx, id, [{ filename: 'a.png', data: PNG }])
  const url = `${ctx.base}/api/product/${id}/image`
  await problem(t, await fetch(url, { method: 'DELETE' }), 401, 'UNAUTHORIZED')
  await problem(t, await fetch(url, { method: 'DELETE', headers: ctx.other.auth }), 403, 'FORBIDDEN')
  t.equal((await leftOf(id)).length, 1, 'still there')
  const res = await fetch(url, { method: 'DELETE', headers: ctx.me.auth })
  t.equal(res.status, 204)
  t.same(await leftOf(id), [], 'the file is gone')
  await problem(t, await fetch(url), 404, 'NOT_FOUND')
  t.equal(((await (await fetch(`${ctx.base}/api/product/${id}`)).json()) as Record<string, unknown>).imageUrl, null)
  await problem(t, await fetch(url, { method: 'DELETE', headers: ctx.me.auth }), 404, 'NOT_FOUND')
  await problem(t, await fetch(`${ctx.base}/api/product/999999/image`, { method: 'DELETE', headers: ctx.me.auth }), 404, 'NOT_FOUND')
})

t.test('no orphan files: deleting a product or its creator deletes its image', async (t) => {
  const sql = await sqlClient(t, ctx.app.databaseUrl)
  const withImage = async (session: Session) => {
    const id = await newProduct(ctx.app, session)
    t.equal((await upload(ctx, id, [{ filename: 'a.png', data: PNG }], session.auth)).status, 201)
    return id
  }
  const keysOf = async (ids: number[]) => (await sql.query<{ image_key: string }>('SELECT image_key FROM products WHERE id = ANY($1)', [ids])).rows.map((r) => r.image_key)

  const alice = await registerAndLogin(ctx.app)
  const bob = await registerAndLogin(ctx.app)
  const owned = await withImage(alice)
  const [key] = await keysOf([owned])
  t.same(await leftOf(owned), [key], 'stored under its key')
  t.equal((await fetch(`${ctx.base}/api/product/${owned}`, { method: 'DELETE', headers: alice.auth })).status, 204)
  t.same(await leftOf(owned), [], 'DELETE /api/product/:id removes the file')

  const byAdmin = await withImage(alice)
  t.equal((await fetch(`${ctx.base}/api/admin/products/${byAdmin}`, { method: 'DELETE', headers: { authorization: `Bearer ${ADMIN_KEY}` } })).status, 204)
  t.same(await leftOf(byAdmin), [], 'DELETE /api/admin/products/:id too')

  // A user deleting themselves: every image of theirs goes; another user's stays.
  const mine = [await withImage(alice), await withImage(alice)]
  const theirs = await withImage(bob)
  const [theirKey] = await keysOf([theirs])
  const gone = await fetch(`${ctx.base}/api/user/${alice.id}`, { method: 'DELETE', headers: { ...alice.auth, 'content-type': 'application/json' }, body: JSON.stringify({ password: alice.password }) })
  t.equal(gone.status, 204)
  t.same((await Promise.all(mine.map(leftOf))).flat(), [], 'DELETE /api/user/:id removes the files of all their products')
  t.same(await keysOf(mine), [], 'and the rows')
  t.same(await leftOf(theirs), [theirKey], 'another user\'s image stays')

  t.equal((await fetch(`${ctx.base}/api/admin/users/${bob.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${ADMIN_KEY}` } })).status, 204)
  t.same(await leftOf(theirs), [], 'DELETE /api/admin/users/:id too')
})

t.test('concurrent uploads to one product leave exactly one file, the one the row names', async (t) => {
  const sql = await sqlClient(t, ctx.app.databaseUrl)
  const id = await newProduct(ctx.app, ctx.me)
  const results = await Promise.all(Array.from({ length: 6 }, async (_, i) =>
    await upload(ctx, id, [{ filename: `${i}.png`, data: Buffer.concat([PNG, Buffer.from(String(i))]) }])))
  t.same(results.map((r) => r.status).sort(), [200, 200, 200, 200, 200, 201], 'one created it, five replaced it')
  const { rows: [row] } = await sql.query<{ image_key: string }>('SELECT image_key FROM products WHERE id = $1', [id])
  t.same(await leftOf(id), [row!.image_key], 'one file, the current one')
})

t.test('an upload racing the deletion of its product leaves no file', async (t) => {
  const ids: number[] = []
  for (let i = 0; i < 5; i++) {
    const id = await newProduct(ctx.app, ctx.me)
    ids.push(id)
    const [up, del] = await Promise.all([
      upload(ctx, id, [{ filename: 'a.png', data: PNG }]),
      fetch(`${ctx.base}/api/product/${id}`, { method: 'DELETE', headers: ctx.me.auth })
    ])
    t.equal(del.status, 204, 'deleted')
    t.ok([201, 404].includes(up.status), `the upload: ${up.status}`)
    await up.body?.cancel()
  }
  const left = async () => (await Promise.all(ids.map(leftOf))).flat()
  t.same(await eventually(left, (files) => files.length === 0), [], 'no file without its product')
})

t.test('an image replaced twice within one second: Last-Modified never names two images (If-Range, If-Modified-Since)', async (t) => {
  const id = await newProduct(ctx.app, ctx.me)
  const url = `${ctx.base}/api/product/${id}/image`
  const versions = [PNG, Buffer.concat([PNG, Buffer.from('second')]), Buffer.concat([PNG, Buffer.from('third!!')])]
  // Three uploads and a download inside one wall-clock second (the database's clock is this
  // machine's): wait for the start of a second, and try again when the sequence ran over.
  let first: Awaited<ReturnType<typeof get>> | undefined
  for (let attempt = 0; attempt < 10 && first === undefined; attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 1000 - (Date.now() % 1000) + 5))
    const started = Date.now()
    t.ok([200, 201].includes((await upload(ctx, id, [{ filename: 'a.png', data: versions[0]! }])).status))
    const seen = await get(url, {})
    t.equal((await upload(ctx, id, [{ filename: 'b.png', data: versions[1]! }])).status, 200)
    t.equal((await upload(ctx, id, [{ filename: 'c.png', data: versions[2]! }])).status, 200)
    if (Math.floor(Date.now() / 1000) === Math.floor(started / 1000)) first = seen
  }
  if (first === undefined) throw new Error('could not fit the uploads in one second')
  const oldDate = first.headers['last-modified']!
  t.ok(oldDate, 'the first image had a Last-Modified')
  t.same(first.body, versions[0])

  const now = await get(url, {})
  t.same(now.body, versions[2], 'the current image')
  t.not(now.headers['last-modified'], oldDate, 'not the first image\'s Last-Modified')
  const sinceOld = await get(url, { 'if-modified-since': oldDate })
  t.equal(sinceOld.status, 200, 'If-Modified-Since with the first image\'s date: changed content is not "not modified"')
  t.same(sinceOld.body, versions[2])
  const rangeOld = await get(url, { range: 'bytes=0-9', 'if-range': oldDate })
  t.equal(rangeOld.status, 200, 'If-Range with the first image\'s date: the whole new image, not a piece of it')
  t.same(rangeOld.body, versions[2])
  t.equal((await get(url, { range: 'bytes=0-9', 'if-range': first.headers.etag! })).status, 200, 'If-Range with the first ETag: the whole image')

  // Once its date is not in the future, the current image's Last-Modified works as a validator.
  const current = await eventually(async () => await get(url, {}), (res) => res.headers['last-modified'] !== undefined, 5000)
  const date = current.headers['last-modified']!
  t.ok(Date.parse(date) > Date.parse(oldDate), `a later date (${date} after ${oldDate})`)
  t.ok(Date.parse(date) <= Date.parse(current.headers.date!), 'never later than the answer\'s Date')
  t.equal((await get(url, { 'if-modified-since': date })).status, 304, 'its own date: 304')
  const piece = await get(url, { range: 'bytes=0-9', 'if-range': date })
  t.equal(piece.status, 206, 'If-Range with its own date: 206')
  t.same(piece.body, versions[2]!.subarray(0, 10))

  // Removed and uploaded again within the same second: still a new date.
  const before = (await get(url, {})).headers['last-modified']!
  t.equal((await fetch(url, { method: 'DELETE', headers: ctx.me.auth })).status, 204)
  t.equal((await upload(ctx, id, [{ filename: 'd.png', data: versions[0]! }])).status, 201)
  const again = await get(url, { 'if-modified-since': before })
  t.equal(again.status, 200, 'removed and uploaded again: not "not modified" against the removed image\'s date')
  t.same(again.body, versions[0])
})

/** Reads one HTTP/1.1 answer (headers and a Content-Length body) off a raw socket; also when it arrived. */
function answerOn (socket: net.Socket): Promise<{ status: number, headers: string, body: string, at: number }> {
  return new Promise((resolve, reject) => {
    let data = Buffer.alloc(0)
    const onData = (chunk: Buffer): void => {
      data = Buffer.concat([data, chunk])
      const end = data.indexOf('\r\n\r\n')
      if (end === -1) return
      const headers = data.subarray(0, end).toString('latin1')
      const length = Number(/^content-length: *(\d+)/im.exec(headers)?.[1] ?? 0)
      if (data.length < end + 4 + length) return
      socket.off('data', onData)
      socket.off('close', onClose)
      resolve({ status: Number(headers.slice(9, 12)), headers, body: data.subarray(end + 4, end + 4 + length).toString('utf8'), at: Date.now() })
    }
    const onClose = (): void => reject(new Error(`closed before an answer: ${data.toString('latin1').slice(0, 200)}`))
    socket.on('data', onData)
    socket.once('close', onClose)
  })
}

t.test('a refused upload with a small body: the body is read to its end first, so every client reads the 415 (and the connection stays)', async (t) => {
  const id = await newProduct(ctx.app, ctx.me)
  // The client: Node's fetch with FormData, 20 times, a 50 KB text file named .png.
  const statuses: string[] = []
  for (let i = 0; i < 20; i++) {
    const form = new FormData()
    form.append('image', new Blob([Buffer.alloc(50_000, 'not an image ')], { type: 'image/png' }), 'cat.png')
    try {
      const res = await fetch(`${ctx.base}/api/product/${id}/image`, { method: 'POST', headers: ctx.me.auth, body: form })
      const body = await res.json() as { code?: string }
      statuses.push(`${res.status} ${body.code} ${res.headers.get('connection')}`)
    } catch (error) {
      statuses.push(`${String(error)} ${String((error as { cause?: { code?: string } }).cause?.code)}`)
    }
  }
  t.same(statuses, Array(20).fill('415 UNSUPPORTED_IMAGE_TYPE keep-alive'), 'fetch + FormData, 20 times: the 415 problem every time, the connection kept')

  // Deterministic: the first bytes (no image), a pause, then the rest. The answer waits for
  // the rest; then the same connection serves another request.
  const { body, type } = multipart([{ filename: 'cat.png', type: 'image/png', data: Buffer.alloc(50_000, 'text ') }])
  const socket = net.connect(Number(new URL(ctx.base).port), '127.0.0.1')
  socket.on('error', () => {})
  t.teardown(() => { socket.destroy() })
  await new Promise((resolve) => socket.once('connect', resolve))
  const first = answerOn(socket)
  socket.write(`POST /api/product/${id}/image HTTP/1.1\r\nHost: x\r\nAuthorization: ${ctx.me.auth.authorization}\r\nContent-Type: ${type}\r\nContent-Length: ${body.length}\r\n\r\n`)
  socket.write(body.subarray(0, 2000))
  const early = await Promise.race([first.then(() => 'answered'), new Promise((resolve) => setTimeout(() => resolve('waiting'), 500))])
  t.equal(early, 'waiting', 'no answer while the (small) body is still coming')
  const restSent = Date.now()
  socket.write(body.subarray(2000))
  const answer = await first
  t.equal(answer.status, 415, 'then the 415')
  t.ok(answer.at >= restSent, 'after the rest of the body')
  t.equal(JSON.parse(answer.body).code, 'UNSUPPORTED_IMAGE_TYPE')
  t.notMatch(answer.headers, /^connection: *close/im, 'no Connection: close')
  const second = answerOn(socket)
  socket.write(`GET /api/product/${id} HTTP/1.1\r\nHost: x\r\n\r\n`)
  t.equal((await second).status, 200, 'the connection serves the next request')
})

t.test('a refused upload with a large or stalled body is answered without reading it and the connection closed', async (t) => {
  // BODY_LIMIT under the image route's limit (IMAGE_MAX_BYTES + 64 KiB): a body between the
  // two is one the route takes but the service does not read only to refuse it.
  const small = await setup(t, { BODY_LIMIT: '10000' })
  const id = await newProduct(small.app, small.me)
  const send = async (declared: number, sent: Buffer, type: string): Promise<Awaited<ReturnType<typeof answerOn>> & { closed: Promise<void> }> => {
    const socket = net.connect(Number(new URL(small.base).port), '127.0.0.1')
    socket.on('error', () => {})
    t.teardown(() => { socket.destroy() })
    await new Promise((resolve) => socket.once('connect', resolve))
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()))
    const answer = answerOn(socket)
    socket.write(`POST /api/product/${id}/image HTTP/1.1\r\nHost: x\r\nAuthorization: ${small.me.auth.authorization}\r\nContent-Type: ${type}\r\nContent-Length: ${declared}\r\n\r\n`)
    socket.write(sent)
    return { ...await answer, closed }
  }
  const { body, type } = multipart([{ filename: 'cat.png', type: 'image/png', data: Buffer.alloc(2000, 'text ') }])
  // Past what is worth reading (under the route's limit, so not a 413): not read, closed.
  const big = await send(MAX + 60_000, body.subarray(0, 1500), type)
  t.equal(big.status, 415, `a body of ${MAX + 60_000} bytes declared (BODY_LIMIT 10000): 415 at once`)
  t.match(big.headers, /^connection: *close/im, 'Connection: close')
  await big.closed
  // A small body that stops coming: answered after a bounded wait, and closed.
  const started = Date.now()
  const stalled = await send(body.length, body.subarray(0, 1500), type)
  t.equal(stalled.status, 415, 'a small body that stalls: 415')
  t.ok(Date.now() - started < 15_000, `within a bounded wait (${Date.now() - started} ms)`)
  t.match(stalled.headers, /^connection: *close/im, 'Connection: close')
  await stalled.closed
})
