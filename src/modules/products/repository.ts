/**
 * Every statement on `products`, built once and decorated as `app.productsRepository`
 * (docs/architecture.md), in SQL through src/db/sql.ts as every repository's.
 *
 * - creation: the creator's row is locked first (`forUser`), so concurrent creations of one
 *   user are counted one after another, and a deletion of the user waits (then takes the new
 *   product with it, ON DELETE CASCADE).
 * - images: each statement hands back the storage key it replaced or deleted, read under
 *   the row lock, so that the file is removed once the statement commits (images.ts, whose
 *   sweep removes what that misses). An attach is `SELECT ... FOR UPDATE` then `UPDATE` in one
 *   statement: two uploads to one product each get the key the other replaced, never the
 *   same one twice. The image bytes a user stores (IMAGE_BYTES_MAX_PER_USER, docs/api.md
 *   "Quotas") are summed under the creator's row lock, in a statement of their own (so the
 *   sum sees every attach of theirs that committed first); removals need no lock: they can
 *   only free room.
 * - the catalogue as CSV (csv.ts): keyset batches cut by their size, no cursor held.
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { sql, type Transaction } from '../../db/sql.js'
import type { PrismaClient, Product } from '../../generated/prisma/client.js'
import { keysetPage } from '../../lib/schemas.js'
import type { CatalogueQuery } from './schemas.js'

/** The columns of a product as Prisma names them (`satisfies`: a column added to the model fails the build until it is here). */
const PRODUCT_COLUMNS = {
  id: 'id',
  title: 'title',
  description: 'description',
  amount: 'amount',
  creatorId: 'creator_id',
  createdAt: 'created_at',
  updatedAt: 'updated_at',
  imageKey: 'image_key',
  imageType: 'image_type',
  imageSize: 'image_size',
  imageSha256: 'image_sha256',
  imageUpdatedAt: 'image_updated_at'
} satisfies Record<keyof Product, string>
const SELECT_LIST = Object.entries(PRODUCT_COLUMNS).map(([field, column]) => `${column} AS "${field}"`).join(', ')

/**
 * A JSON catalogue page: the rows after the cursor in the order asked, one more than the
 * page (`keysetPage`). One statement per combination of filters (eight at most, each
 * prepared under its own name) rather than one with `$n IS NULL OR ...` branches, whose
 * generic plan could use neither the primary key's order nor the title's trigram index.
 * The cursor is compared as int8 so that "before the largest int4" includes it.
 */
function pageStatement (query: CatalogueQuery): { name: string, text: string, values: unknown[] } {
  const newest = query.sort === 'newest'
  const where = [newest ? 'id < $1::int8' : 'id > $1::int8']
  const values: unknown[] = [query.cursor ?? (newest ? 2 ** 31 : 0), query.limit + 1]
  if (query.q !== undefined) {
    values.push(`%${query.q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`)
    where.push(`title ILIKE $${values.length}`)
  }
  if (query.creatorId !== undefined) {
    values.push(query.creatorId)
    where.push(`creator_id = $${values.length}`)
  }
  const name = `products-page-${query.sort}${query.q === undefined ? '' : '-q'}${query.creatorId === undefined ? '' : '-creator'}`
  return { name, text: `SELECT ${SELECT_LIST} FROM products WHERE ${where.join(' AND ')} ORDER BY id ${newest ? 'DESC' : ''} LIMIT $2`, values }
}
const BY_ID_SQL = `SELECT ${SELECT_LIST} FROM products WHERE id = $1`

// Inserts only while the creator holds fewer than $5 products; run under the creator's row
// lock, so that the count sees every concurrent creation by the same user (any replica).
const CREATE_SQL = `INSERT INTO products (title, description, amount, creator_id, updated_at)
  SELECT $1, $2, $3, $4, now() WHERE (SELECT count(*) FROM products WHERE creator_id = $4) < $5
  RETURNING ${SELECT_LIST}`

// image_updated_at is the image's Last-Modified, shown to the second: a new image gets a
// later second than the one before it (kept after a removal), one second ahead of the
// clock if need be, so that no date ever names two images (images.ts shows none while it
// is ahead of the clock). Under the row lock, so concurrent uploads get distinct seconds.
const ATTACH_SQL = `
  WITH old AS (SELECT id, creator_id, image_key, image_updated_at FROM products WHERE id = $1 FOR UPDATE)
  UPDATE products p
     SET image_key = $3, image_type = $4, image_size = $5, image_sha256 = $6,
         image_updated_at = GREATEST(clock_timestamp(), date_trunc('second', old.image_updated_at) + interval '1 second'), updated_at = now()
    FROM old
   WHERE p.id = old.id AND old.creator_id = $2
  RETURNING old.image_key AS "previousKey"`

const DETACH_SQL = `
  WITH old AS (SELECT id, creator_id, image_key FROM products WHERE id = $1 FOR UPDATE)
  UPDATE products p
     SET image_key = NULL, image_type = NULL, image_size = NULL, image_sha256 = NULL, updated_at = now()
    FROM old
   WHERE p.id = old.id AND old.creator_id = $2 AND old.image_key IS NOT NULL
  RETURNING old.image_key AS "previousKey"`

// Bytes of the creator's images, not counting product $2's (the one an upload replaces).
const BYTES_USED_SQL = 'SELECT COALESCE(sum(image_size) FILTER (WHERE id <> $2), 0)::float8 AS used FROM products WHERE creator_id = $1'

const OWNER_SQL = 'SELECT creator_id AS "creatorId", image_key AS "imageKey" FROM products WHERE id = $1'

// Image blobs older than $1 ms that no product names (a read of storage's table; storage deletes).
const ORPHAN_IMAGES_SQL = `SELECT b.key FROM blobs b
  WHERE b.key LIKE 'products/%' AND b.created_at < now() - make_interval(secs => $1 / 1000.0)
    AND NOT EXISTS (SELECT 1 FROM products p WHERE p.image_key = b.key)
  ORDER BY b.id LIMIT $2`

/** CSV bytes of a row besides its title and description: ids, amount, two dates, the image URL, quotes, commas, CRLF. */
const CSV_ROW_BYTES = 128

// One batch of the CSV catalogue: among the next $3 rows after $1 (up to the page's last
// id, $2), those whose running size stays within $4 bytes, and at least one. The sizes
// come from the values' headers (octet_length does not decompress a TOASTed value); one
// statement, one snapshot.
const CATALOGUE_BATCH_SQL = `
  WITH sizes AS (
    SELECT id, sum(octet_length(title) + octet_length(description) + ${CSV_ROW_BYTES}) OVER (ORDER BY id) AS upto
      FROM products WHERE id > $1 AND id <= $2 ORDER BY id LIMIT $3
  ), cut AS (
    SELECT coalesce(max(id) FILTER (WHERE upto <= $4), min(id)) AS last FROM sizes
  )
  SELECT p.id, p.title, p.description, p.amount, p.creator_id AS "creatorId", p.created_at AS "createdAt", p.updated_at AS "updatedAt",
         p.image_key IS NOT NULL AS "hasImage"
    FROM products p, cut WHERE p.id > $1 AND p.id <= cut.last ORDER BY p.id`

// The ids of a page's last row and of the one after it, if any (index only).
const CATALOGUE_ENDS_SQL = 'SELECT id FROM products WHERE id > $1 ORDER BY id OFFSET $2 LIMIT 2'

export interface ImageMeta {
  key: string
  type: string
  size: number
  sha256: string
}

/** What an attach or detach found. */
export type ImageChange =
  | { outcome: 'done', previousKey: string | null }
  | { outcome: 'missing' }
  | { outcome: 'forbidden' }
  | { outcome: 'no-image' }
  /** The creator's other images take `used` bytes: this one does not fit in their quota. */
  | { outcome: 'quota', used: number }

/** A row of the CSV catalogue (csv.ts). */
export interface CatalogueRow {
  id: number
  title: string
  description: string
  amount: number
  creatorId: number
  createdAt: Date
  updatedAt: Date
  hasImage: boolean
}

export interface ProductsRepositoryOptions {
  /** PRODUCTS_MAX_PER_USER. */
  maxPerUser: number
}

function productsRepository (prisma: PrismaClient, { maxPerUser }: ProductsRepositoryOptions) {
  const db = sql(prisma)

  /** Why a conditional update found nothing: no product, another's product, or no image. */
  async function whyNot (id: number, creatorId: number): Promise<ImageChange> {
    const [row] = await db.rows<{ creatorId: number }>('product-owner', OWNER_SQL, [id])
    if (row === undefined) return { outcome: 'missing' }
    if (row.creatorId !== creatorId) return { outcome: 'forbidden' }
    return { outcome: 'no-image' }
  }

  return {
    /** A JSON catalogue page (`pageStatement`). */
    async page (query: CatalogueQuery) {
      const { name, text, values } = pageStatement(query)
      return keysetPage(await db.rows<Product>(name, text, values), query.limit)
    },

    async findById (id: number): Promise<Product | null> {
      const [row] = await db.rows<Product>('product-by-id', BY_ID_SQL, [id])
      return row ?? null
    },

    /**
     * The new product; `{ quota }` when its creator already holds `maxPerUser` products; null
     * when the creator no longer exists (a user deleted while their request was in flight:
     * the token check read the user, the deletion committed before the lock).
     */
    async create (data: { title: string, description: string, amount: number, creatorId: number }): Promise<Product | { quota: number } | null> {
      return await db.forUser('product-create', data.creatorId, async (tx) => {
        const [product] = await db.rows<Product>('product-create', CREATE_SQL, [data.title, data.description, data.amount, data.creatorId, maxPerUser], tx)
        return product ?? { quota: maxPerUser }
      })
    },

    /**
     * Deletes product `id` (only when `creatorId` made it, if given): `deleted` says whether
     * it did, `imageKey` is the file to remove.
     */
    async delete (id: number, creatorId?: number): Promise<{ deleted: boolean, imageKey: string | null }> {
      const rows = creatorId === undefined
        ? await db.rows<{ imageKey: string | null }>('product-delete', 'DELETE FROM products WHERE id = $1 RETURNING image_key AS "imageKey"', [id])
        : await db.rows<{ imageKey: string | null }>('product-delete-owned', 'DELETE FROM products WHERE id = $1 AND creator_id = $2 RETURNING image_key AS "imageKey"', [id, creatorId])
      return { deleted: rows.length === 1, imageKey: rows[0]?.imageKey ?? null }
    },

    /** Deletes every product of `creatorId` inside `tx` (a deletion of the user): the image files to remove once it commits. */
    async deleteAllOf (creatorId: number, tx: Transaction): Promise<string[]> {
      const rows = await db.rows<{ imageKey: string | null }>('products-delete-of-creator', 'DELETE FROM products WHERE creator_id = $1 RETURNING image_key AS "imageKey"', [creatorId], tx)
      return rows.flatMap((row) => row.imageKey === null ? [] : [row.imageKey])
    },

    /** The product's creator, or undefined when there is no such product. */
    async ownerOf (id: number): Promise<number | undefined> {
      const [row] = await db.rows<{ creatorId: number }>('product-owner', OWNER_SQL, [id])
      return row?.creatorId
    },

    /**
     * Bytes of `creatorId`'s images besides product `id`'s: an upload is refused before its
     * body is read when there is no room at all (attach decides, under the lock).
     */
    async imageBytesUsed (creatorId: number, id: number): Promise<number> {
      const [row] = await db.rows<{ used: number }>('product-image-bytes-used', BYTES_USED_SQL, [creatorId, id])
      return row?.used ?? 0
    },

    /**
     * Sets the image of `creatorId`'s product `id` when it fits in the creator's
     * `bytesPerUser` (IMAGE_BYTES_MAX_PER_USER); `previousKey` is the file it replaced.
     */
    async attachImage (id: number, creatorId: number, image: ImageMeta, bytesPerUser: number): Promise<ImageChange> {
      const attached = await db.forUser('product-image-attach', creatorId, async (tx) => {
        const [{ used } = { used: 0 }] = await db.rows<{ used: number }>('product-image-bytes-used', BYTES_USED_SQL, [creatorId, id], tx)
        if (used + image.size > bytesPerUser) return { used }
        const rows = await db.rows<{ previousKey: string | null }>('product-image-attach', ATTACH_SQL, [id, creatorId, image.key, image.type, image.size, image.sha256], tx)
        return rows[0]
      })
      if (attached != null && 'previousKey' in attached) return { outcome: 'done', previousKey: attached.previousKey }
      // No row changed, or no room: say why (not found and forbidden win over the quota).
      const why = await whyNot(id, creatorId)
      return attached != null && why.outcome === 'no-image' ? { outcome: 'quota', used: attached.used } : why
    },

    /**
     * Up to `limit` keys of stored images that no product names and that are older than
     * `olderThanMs`: uploads whose process stopped before the row named them, and images
     * whose removal failed after their row let go of them.
     */
    async orphanImageKeys (olderThanMs: number, limit: number): Promise<string[]> {
      const rows = await db.rows<{ key: string }>('product-image-orphans', ORPHAN_IMAGES_SQL, [olderThanMs, limit])
      return rows.map((row) => row.key)
    },

    /** Clears the image of `creatorId`'s product `id`; `previousKey` is the file to remove. */
    async detachImage (id: number, creatorId: number): Promise<ImageChange> {
      const rows = await db.rows<{ previousKey: string | null }>('product-image-detach', DETACH_SQL, [id, creatorId])
      if (rows[0] !== undefined) return { outcome: 'done', previousKey: rows[0].previousKey }
      return await whyNot(id, creatorId)
    },

    /** The ids of the last row of the page of `limit` rows after id `after`, and of the row after it, if any. */
    async catalogueEnds (after: number, limit: number): Promise<number[]> {
      const rows = await db.rows<{ id: number }>('catalogue-probe', CATALOGUE_ENDS_SQL, [after, limit - 1])
      return rows.map((row) => row.id)
    },

    /** Of the next `count` rows after id `from` (up to id `last`), those within `bytes` of CSV, and at least one. */
    async catalogueBatch (from: number, last: number, count: number, bytes: number): Promise<CatalogueRow[]> {
      return await db.rows<CatalogueRow>('catalogue-batch', CATALOGUE_BATCH_SQL, [from, last, count, bytes])
    }
  }
}

export type ProductsRepository = ReturnType<typeof productsRepository>

declare module 'fastify' {
  interface FastifyInstance {
    productsRepository: ProductsRepository
  }
}

export default fp(async function productsRepositoryPlugin (app: FastifyInstance, options: ProductsRepositoryOptions) {
  app.decorate('productsRepository', productsRepository(app.prisma, options))
}, { name: 'products-repository', fastify: '5.x', dependencies: ['prisma'] })
