/**
 * scripts/import-uploads.ts run as a user runs it (a child process, DATABASE_URL), on a
 * database in the state an upgrade from file storage leaves: products naming image keys
 * with no blob, the foreign key NOT VALID, and the files in the older version's layout
 * (`<UPLOAD_DIR>/<image_key>`, beside its `.incoming` temp folder). Imported images are
 * then served byte for byte; a second run imports nothing; files that are missing or do not
 * match their row are reported, and the constraint is validated only once all are there.
 */
import { createHash, randomBytes } from 'node:crypto'
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { build, registerAndLogin } from '../helpers/build.js'
import { sqlClient } from '../helpers/database.js'
import { runToExit } from '../helpers/local-start.js'

const PNG_HEAD = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64')
// Larger than a chunk (256 KiB) for one of them, so the import writes several.
const images = [PNG_HEAD, Buffer.concat([PNG_HEAD, randomBytes(600 * 1024)]), Buffer.concat([PNG_HEAD, randomBytes(50)]), Buffer.concat([PNG_HEAD, randomBytes(70)])]

const app = await build(t)
const db = await sqlClient(t, app.databaseUrl)
const uploads = await mkdtemp(path.join(os.tmpdir(), 'uploads-'))
t.teardown(async () => { await rm(uploads, { recursive: true, force: true }) })

const me = await registerAndLogin(app)
const ids: number[] = []
for (let i = 0; i < images.length + 1; i++) {
  const res = await app.inject({ method: 'POST', url: '/api/product', headers: me.auth, payload: { title: `old ${i}`, amount: 100 } })
  ids.push(res.json().id as number)
}
const keys = images.map((_, i) => `products/${ids[i]}/${randomBytes(16).toString('hex')}`)

// The rows as the older version wrote them, before the migration added the foreign key.
await db.query('ALTER TABLE products DROP CONSTRAINT products_image_key_fkey')
for (const [i, data] of images.entries()) {
  await db.query("UPDATE products SET image_key = $2, image_type = 'image/png', image_size = $3, image_sha256 = $4, image_updated_at = now() WHERE id = $1",
    [ids[i], keys[i], data.length, createHash('sha256').update(data).digest('base64url')])
}
await db.query('ALTER TABLE products ADD CONSTRAINT "products_image_key_fkey" FOREIGN KEY ("image_key") REFERENCES "blobs"("key") ON DELETE RESTRICT ON UPDATE CASCADE NOT VALID')

/** Writes `data` where the older version kept `key`. */
async function keep (key: string, data: Buffer): Promise<void> {
  await mkdir(path.join(uploads, path.dirname(key)), { recursive: true })
  await writeFile(path.join(uploads, key), data)
}

const run = async (dir = uploads) => await runToExit(['scripts/import-uploads.ts', dir], { DATABASE_URL: app.databaseUrl })
const validated = async (): Promise<boolean> => (await db.query("SELECT convalidated FROM pg_constraint WHERE conname = 'products_image_key_fkey'")).rows[0].convalidated
const blobIds = async (): Promise<string[]> => (await db.query('SELECT id FROM blobs ORDER BY id')).rows.map((row) => row.id as string)

t.test('a folder that does not exist: exit 1, and says which', async (t) => {
  const { code, output } = await run(path.join(uploads, 'nope'))
  t.equal(code, 1, output)
  t.match(output, /No such folder: .*nope/)
})

t.test('files missing or not matching their row: the rest imported, those listed, the constraint left unvalidated', async (t) => {
  await keep(keys[0]!, images[0]!)
  await keep(keys[1]!, images[1]!)
  // images[2]: no file. images[3]: a file whose bytes are not the row's.
  await keep(keys[3]!, images[2]!)
  await keep('.incoming/0123.part', randomBytes(10))
  await keep(`products/${ids[4]}/not-named-by-any-row`, images[0]!)

  const { code, output } = await run()
  t.equal(code, 1, output)
  t.match(output, /imported 2, skipped 0 \(already in the database\), missing 1 \(no file\), refused 1/)
  t.match(output, new RegExp(`product ${ids[3]}, ${keys[3]}: not imported: its SHA-256 is`))
  t.match(output, new RegExp(`2 product\\(s\\) name an image the database does not have[^]*product ${ids[2]}: ${keys[2]}\\n  product ${ids[3]}: ${keys[3]}`))
  t.equal(await validated(), false, 'the foreign key is still NOT VALID')
  t.same((await db.query('SELECT key FROM blobs ORDER BY key')).rows.map((row) => row.key).sort(), [keys[0], keys[1]].sort(), 'blobs for the two good files only')

  for (const i of [0, 1]) {
    const res = await app.inject({ url: `/api/product/${ids[i]}/image` })
    t.equal(res.statusCode, 200)
    t.ok(res.rawPayload.equals(images[i]!), `product ${i}: the same ${images[i]!.length} bytes through the API`)
    t.equal(res.headers.etag, `"${createHash('sha256').update(images[i]!).digest('base64url')}"`)
  }
  t.equal((await app.inject({ url: `/api/product/${ids[2]}/image` })).statusCode, 404, 'the missing one: 404')
})

t.test('once every file is there: imported, validated; a second run imports nothing', async (t) => {
  await keep(keys[2]!, images[2]!)
  await keep(keys[3]!, images[3]!)
  const first = await run()
  t.equal(first.code, 0, first.output)
  t.match(first.output, /imported 2, skipped 2 \(already in the database\), missing 0 \(no file\), refused 0/)
  t.match(first.output, /foreign key products\.image_key -> blobs\.key is validated/)
  t.equal(await validated(), true)
  const before = await blobIds()

  const second = await run()
  t.equal(second.code, 0, second.output)
  t.match(second.output, /imported 0, skipped 4 /)
  t.same(await blobIds(), before, 'the same blobs, none written again')
  for (const [i, data] of images.entries()) {
    const res = await app.inject({ url: `/api/product/${ids[i]}/image`, headers: { range: 'bytes=1-' } })
    t.equal(res.statusCode, 206)
    t.ok(res.rawPayload.equals(data.subarray(1)), `product ${i}: byte-identical`)
  }
})
