/**
 * The sweep of stored images that no product names (src/modules/products/images.ts): a
 * replaced image whose removal failed and an upload whose row never named it are removed
 * once older than the grace; a young one, one a product names and a key outside
 * `products/` stay. The foreign key keeps any removal of a named image from happening.
 */
import { randomBytes } from 'node:crypto'
import { Readable } from 'node:stream'
import t from 'tap'
import { build, registerAndLogin } from '../helpers/build.js'
import { sqlClient } from '../helpers/database.js'

const PNG = Buffer.concat([Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64'), randomBytes(100)])
const WEBP = Buffer.from('UklGRiQAAABXRUJQVlA4IBgAAAAwAQCdASoBAAEAAwA0JaQAA3AA/vuUAAA=', 'base64')

const app = await build(t)
const db = await sqlClient(t, app.databaseUrl)
const me = await registerAndLogin(app)
const keys = async (): Promise<string[]> => (await db.query('SELECT key FROM blobs ORDER BY key')).rows.map((row) => row.key as string)

function form (data: Buffer) {
  const boundary = 'sweeptest7MA4YWxk'
  return {
    headers: { ...me.auth, 'content-type': `multipart/form-data; boundary=${boundary}` },
    payload: Buffer.concat([Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="image"; filename="a"\r\nContent-Type: application/octet-stream\r\n\r\n`), data, Buffer.from(`\r\n--${boundary}--\r\n`)])
  }
}

t.test('files no product names go once older than the grace; named, young and other files stay', async (t) => {
  const id = (await app.inject({ method: 'POST', url: '/api/product', headers: me.auth, payload: { title: 'swept', amount: 1 } })).json().id as number
  t.equal((await app.inject({ method: 'POST', url: `/api/product/${id}/image`, ...form(PNG) })).statusCode, 201)
  const [replaced] = await keys()

  // The replacement's removal of the old file fails (the database was away for it).
  const remove = app.storage.remove
  app.storage.remove = async () => { throw new Error('database away') }
  t.teardown(() => { app.storage.remove = remove })
  t.equal((await app.inject({ method: 'POST', url: `/api/product/${id}/image`, ...form(WEBP) })).statusCode, 200)
  app.storage.remove = remove
  const [current] = (await db.query('SELECT image_key FROM products WHERE id = $1', [id])).rows.map((row) => row.image_key as string)

  // An upload whose process stopped after storing its file, before the row named it.
  const crashed = `products/${id}/${randomBytes(16).toString('hex')}`
  await app.storage.put(crashed, Readable.from([PNG]))
  const young = `products/${id}/${randomBytes(16).toString('hex')}`
  await app.storage.put(young, Readable.from([PNG]))
  await app.storage.put('other/file', Readable.from([PNG]))
  await db.query("UPDATE blobs SET created_at = now() - interval '2 hours' WHERE key <> $1", [young])
  t.same(await keys(), [current, replaced, crashed, young, 'other/file'].sort(), 'five stored files')

  t.equal(await app.productImages.sweep(), 2, 'two found')
  t.same(await keys(), [current, young, 'other/file'].sort(), 'the replaced one and the crashed upload\'s are gone')
  const image = await app.inject({ url: `/api/product/${id}/image` })
  t.equal(image.statusCode, 200)
  t.ok(image.rawPayload.equals(WEBP), 'the product\'s image is untouched')
  t.equal(await app.productImages.sweep(), 0, 'a second sweep finds nothing')
  t.equal(await app.productImages.sweep(0), 1, 'with no grace, the young one too')
  t.same(await keys(), [current, 'other/file'].sort())

  await t.rejects(app.storage.remove(current!), /products_image_key_fkey/, 'a file a product names cannot be removed')
  t.ok((await keys()).includes(current!))
})
