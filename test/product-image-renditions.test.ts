/**
 * Renditions (`GET /api/product/{id}/image?w=`) over real HTTP, of real images made by sharp:
 * WebP at the width asked (never wider than the original, upright), their own validators,
 * the original untouched, a decompression bomb refused without being decoded.
 */
import t from 'tap'
import sharp from 'sharp'
import { assertProblem } from './helpers/assertions.js'
import { build, registerAndLogin } from './helpers/build.js'

const app = await build(t)
const base = await app.listen({ host: '127.0.0.1', port: 0 })
const me = await registerAndLogin(app)

/** A product of `me` with `image` as its image; its id. */
async function pictured (image: Buffer): Promise<number> {
  const id = (await app.inject({ method: 'POST', url: '/api/product', headers: me.auth, payload: { title: 'Lamp', amount: 100 } })).json().id as number
  const form = new FormData()
  form.append('image', new Blob([image]), 'image')
  const res = await fetch(`${base}/api/product/${id}/image`, { method: 'POST', headers: me.auth, body: form })
  t.equal(res.status, 201, 'uploaded')
  return id
}
const photo = async (width: number, height: number, format: 'png' | 'jpeg' = 'png'): Promise<Buffer> =>
  await sharp({ create: { width, height, channels: 3, background: { r: 200, g: 120, b: 40 } } })[format]().toBuffer()

t.test('a WebP rendition at the width asked, with its own ETag; the original as it was', async (t) => {
  const original = await photo(2000, 1000, 'jpeg')
  const id = await pictured(original)
  const res = await fetch(`${base}/api/product/${id}/image?w=256`)
  t.equal(res.status, 200)
  t.equal(res.headers.get('content-type'), 'image/webp')
  t.equal(res.headers.get('x-content-type-options'), 'nosniff')
  t.equal(res.headers.get('cache-control'), 'public, no-cache')
  t.equal(res.headers.get('content-disposition'), `inline; filename="product-${id}-256.webp"`)
  const bytes = Buffer.from(await res.arrayBuffer())
  t.equal(res.headers.get('content-length'), String(bytes.length))
  t.match(await sharp(bytes).metadata(), { format: 'webp', width: 256, height: 128 }, 'the aspect ratio kept')
  t.ok(bytes.length < original.length / 4, `${bytes.length} bytes against the original's ${original.length}`)

  const full = await fetch(`${base}/api/product/${id}/image`)
  t.same(Buffer.from(await full.arrayBuffer()), original, 'without w: the original bytes')
  const etag = res.headers.get('etag')!
  t.match(etag, /^"[A-Za-z0-9_-]{43}-w256"$/)
  t.not(etag, full.headers.get('etag'), 'a validator of its own')
  t.not(etag, (await fetch(`${base}/api/product/${id}/image?w=512`)).headers.get('etag'), 'one per width')

  const again = await app.inject({ url: `/api/product/${id}/image?w=256`, headers: { 'if-none-match': etag } })
  t.equal(again.statusCode, 304, 'revalidated: 304')
  const ranged = await app.inject({ url: `/api/product/${id}/image?w=256`, headers: { range: 'bytes=0-9' } })
  t.same([ranged.statusCode, ranged.headers['accept-ranges'], ranged.rawPayload.length], [200, 'none', bytes.length], 'whole: no ranges of a rendition')
  const concurrent = await Promise.all(Array.from({ length: 8 }, async () => Buffer.from(await (await fetch(`${base}/api/product/${id}/image?w=128`)).arrayBuffer())))
  t.ok(concurrent.every((b) => b.equals(concurrent[0]!)), 'concurrent requests get the same rendition')
  t.match(await sharp(concurrent[0]).metadata(), { width: 128, height: 64 })
})

t.test('never wider than the original; a new image gets new renditions', async (t) => {
  const id = await pictured(await photo(100, 80))
  t.match(await sharp(Buffer.from(await (await fetch(`${base}/api/product/${id}/image?w=1024`)).arrayBuffer())).metadata(), { format: 'webp', width: 100, height: 80 })
  const before = (await fetch(`${base}/api/product/${id}/image?w=128`)).headers.get('etag')
  const form = new FormData()
  form.append('image', new Blob([await photo(600, 600)]), 'image')
  t.equal((await fetch(`${base}/api/product/${id}/image`, { method: 'POST', headers: me.auth, body: form })).status, 200, 'replaced')
  const after = await fetch(`${base}/api/product/${id}/image?w=128`)
  t.not(after.headers.get('etag'), before, 'a new ETag')
  t.match(await sharp(Buffer.from(await after.arrayBuffer())).metadata(), { width: 128, height: 128 }, 'of the new image')
})

t.test('a width outside the set, or no image: the usual answers', async (t) => {
  const id = await pictured(await photo(300, 200))
  t.equal((await app.inject(`/api/product/${id}/image?_=123`)).statusCode, 200, 'other parameters are ignored (cache busters)')
  for (const w of ['300', '0', 'abc', '1e3', '256.0']) {
    assertProblem(t, await app.inject(`/api/product/${id}/image?w=${w}`), 400, 'VALIDATION_FAILED')
  }
  const bare = (await app.inject({ method: 'POST', url: '/api/product', headers: me.auth, payload: { title: 'Bare', amount: 1 } })).json().id
  assertProblem(t, await app.inject(`/api/product/${bare}/image?w=256`), 404, 'NOT_FOUND')
})

t.test('a decompression bomb: a small file claiming 100 megapixels gets no rendition, and the service goes on', async (t) => {
  const bomb = await sharp({ create: { width: 10_000, height: 10_000, channels: 3, background: { r: 0, g: 0, b: 0 } } }).png({ compressionLevel: 9 }).toBuffer()
  t.ok(bomb.length < 5 * 1024 * 1024, `${bomb.length} bytes: within IMAGE_MAX_BYTES`)
  const id = await pictured(bomb)
  const used = process.memoryUsage().rss
  assertProblem(t, await app.inject(`/api/product/${id}/image?w=256`), 415, 'UNSUPPORTED_IMAGE_TYPE')
  t.ok(process.memoryUsage().rss - used < 200 * 1024 * 1024, 'not decoded (300 MB if it were)')
  t.equal((await app.inject(`/api/product/${id}/image`)).statusCode, 200, 'the original is still served')
  t.equal((await app.inject(`/api/product/${await pictured(await photo(50, 50))}/image?w=128`)).statusCode, 200, 'other renditions go on')
})

t.test('a URL that names the product\'s version is immutable; any other revalidates', async (t) => {
  const id = await pictured(await photo(400, 300))
  const { updatedAt } = (await app.inject(`/api/product/${id}`)).json()
  for (const query of [`?v=${encodeURIComponent(updatedAt)}`, `?v=${encodeURIComponent(updatedAt)}&w=256`]) {
    const res = await app.inject(`/api/product/${id}/image${query}`)
    t.same([res.statusCode, res.headers['cache-control']], [200, 'public, max-age=31536000, immutable'], `${query}: immutable`)
  }
  for (const query of ['', '?v=2020-01-01T00:00:00.000Z', '?w=256']) {
    t.equal((await app.inject(`/api/product/${id}/image${query}`)).headers['cache-control'], 'public, no-cache', `'${query}': revalidated`)
  }
  const form = new FormData()
  form.append('image', new Blob([await photo(300, 300)]), 'image')
  t.equal((await fetch(`${base}/api/product/${id}/image`, { method: 'POST', headers: me.auth, body: form })).status, 200, 'replaced')
  t.equal((await app.inject(`/api/product/${id}/image?v=${encodeURIComponent(updatedAt)}`)).headers['cache-control'], 'public, no-cache', 'the old version\'s URL is no longer immutable')
})
