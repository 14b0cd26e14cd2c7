/**
 * `npx tsx scripts/import-uploads.ts <dir>`: copies the product images that a version with
 * UPLOAD_DIR kept as files (`<dir>/<image_key>`) into the database, for every product whose
 * image has no blob yet, one transaction per file; a file whose SHA-256 is not the row's
 * (the image's ETag) is refused. Once every product's image is in the database it validates
 * products.image_key's foreign key (added NOT VALID by the migration
 * product_images_in_database); until then it lists the products still without theirs.
 * The database is the one the service's configuration names (DATABASE_URL or DB_*, `.env`).
 * A second run skips what the first stored. docs/operations.md, "Upgrading from file storage".
 * Exit 0: all there; 1: an error, or a file refused; 2: products whose file is missing.
 */
import { createHash } from 'node:crypto'
import { createReadStream } from 'node:fs'
import { stat } from 'node:fs/promises'
import path from 'node:path'
import { pipeline, Transform } from 'node:stream'
import { loadConfig } from '../src/config.js'
import { closePrismaClient, createPrismaClient, sqlPool } from '../src/db/client.js'
import { openDatabase } from '../src/db/open.js'
import { sql } from '../src/db/sql.js'
import { exitOnSetupError, SetupError } from '../src/lib/setup-error.js'
import { checkKey, PgBlobStorage } from '../src/storage/blob-storage.js'

const BATCH = 100
const LISTED = 100

// Product images with the blob check: ids after $1, in id order.
const IMAGES_SQL = `SELECT p.id, p.image_key AS key, p.image_sha256 AS sha256,
       EXISTS (SELECT 1 FROM blobs b WHERE b.key = p.image_key) AS stored
  FROM products p WHERE p.image_key IS NOT NULL AND p.id > $1 ORDER BY p.id LIMIT $2`
const ABSENT_SQL = `SELECT p.id, p.image_key AS key, count(*) OVER ()::int AS total
  FROM products p WHERE p.image_key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM blobs b WHERE b.key = p.image_key)
 ORDER BY p.id LIMIT $1`

/** The file's bytes, failing at their end when their SHA-256 (base64url) is not `expected`. */
function checked (file: string, expected: string | null): Transform {
  const hash = createHash('sha256')
  const check = new Transform({
    transform (chunk: Buffer, _encoding, done) { hash.update(chunk); done(null, chunk) },
    flush (done) {
      const actual = hash.digest('base64url')
      done(expected === null || actual === expected ? null : new Error(`its SHA-256 is ${actual}, the product's image has ${expected}`))
    }
  })
  return pipeline(createReadStream(file), check, () => {})
}

const dir = process.argv[2]
if (dir === undefined || !(await stat(dir).then((s) => s.isDirectory(), () => false))) {
  console.error(dir === undefined
    ? 'Usage: npx tsx scripts/import-uploads.ts <dir>: the UPLOAD_DIR of the version that kept product images as files'
    : `No such folder: ${dir} (give the UPLOAD_DIR of the version that kept product images as files)`)
  process.exit(1)
}

try {
  const database = await openDatabase(loadConfig(process.env, { devSecretFile: false }).database)
  const prisma = createPrismaClient({ url: database.url, poolSize: 2 })
  try {
    const db = sql(prisma)
    const storage = new PgBlobStorage(db)
    const counts = { imported: 0, skipped: 0, missing: 0, refused: 0 }
    for (let after = 0; ;) {
      const rows = await db.rows<{ id: number, key: string, sha256: string | null, stored: boolean }>('import-uploads-images', IMAGES_SQL, [after, BATCH])
      if (rows.length === 0) break
      after = rows.at(-1)!.id
      for (const row of rows) {
        if (row.stored) { counts.skipped++; continue }
        try {
          await storage.put(row.key, checked(path.join(dir, ...checkKey(row.key)), row.sha256))
          counts.imported++
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code === 'ENOENT') { counts.missing++; continue }
          counts.refused++
          console.error(`product ${row.id}, ${row.key}: not imported: ${(error as Error).message}`)
        }
      }
    }
    console.log(`imported ${counts.imported}, skipped ${counts.skipped} (already in the database), missing ${counts.missing} (no file), refused ${counts.refused}`)

    const absent = await db.rows<{ id: number, key: string, total: number }>('import-uploads-absent', ABSENT_SQL, [LISTED])
    if (absent.length === 0) {
      await sqlPool(prisma).query('ALTER TABLE products VALIDATE CONSTRAINT products_image_key_fkey')
      console.log('Every product image is in the database: the foreign key products.image_key -> blobs.key is validated.')
    } else {
      console.log(`${absent[0]!.total} product(s) name an image the database does not have (GET answers 404 for it)${absent[0]!.total > LISTED ? `; the first ${LISTED}` : ''}:`)
      for (const row of absent) console.log(`  product ${row.id}: ${row.key}`)
      process.exitCode = counts.refused > 0 ? 1 : 2
    }
  } finally {
    await closePrismaClient(prisma)
    await database.embedded?.stop()
  }
} catch (error) {
  if (error instanceof SetupError) exitOnSetupError(error)
  console.error(`Import failed: ${error instanceof Error ? error.message : String(error)}`)
  process.exit(1)
}
