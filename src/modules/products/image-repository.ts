/**
 * The image columns of products, and every deletion that can take an image with it. Plain
 * SQL on the pg pool: each statement must hand back the storage key it replaced or
 * deleted, read under the row lock, so that no stored file is ever left without a row
 * (docs/api.md, "Product images": no orphan files).
 *
 * - attach: `SELECT ... FOR UPDATE` then `UPDATE`, in one statement: two uploads to one
 *   product each get the key the other replaced, never the same one twice.
 * - a product deleted while its upload streams: the attach finds no row and the caller
 *   removes the new file.
 * - a user deleted: the user's row is locked first (so no product of theirs can be inserted
 *   meanwhile), their products are deleted returning their keys, then the user.
 * - the image bytes a user stores (IMAGE_BYTES_MAX_PER_USER, docs/api.md "Quotas"): an attach
 *   locks the creator's row, sums the sizes of their other products' images in a statement
 *   of its own (so it sees every attach of theirs that committed first) and attaches only
 *   when the new size fits. Removals need no lock: they can only free room.
 */
import type pg from 'pg'
import { LOCK_USER_SQL, transaction } from '../../db/transaction.js'

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

/** Wrapped so the error handler's classifier reads the driver error as the cause (503s). */
async function query<Row extends pg.QueryResultRow> (client: pg.Pool | pg.PoolClient, name: string, text: string, values: unknown[]): Promise<Row[]> {
  try {
    return (await client.query<Row>({ name, text, values })).rows
  } catch (error) {
    throw new Error(`Product image query ${name} failed: ${(error as Error).message}`, { cause: error })
  }
}

/**
 * @param bytesPerUser IMAGE_BYTES_MAX_PER_USER: the most bytes of images one user stores.
 */
export function productImagesRepository (pool: pg.Pool, bytesPerUser: number) {
  /** Why a conditional update found nothing: no product, another's product, or no image. */
  async function whyNot (id: number, creatorId: number): Promise<ImageChange> {
    const [row] = await query<{ creatorId: number, imageKey: string | null }>(pool, 'product-owner', OWNER_SQL, [id])
    if (row === undefined) return { outcome: 'missing' }
    if (row.creatorId !== creatorId) return { outcome: 'forbidden' }
    return { outcome: 'no-image' }
  }

  return {
    /** The product's creator, or undefined when there is no such product. */
    async ownerOf (id: number): Promise<number | undefined> {
      const [row] = await query<{ creatorId: number }>(pool, 'product-owner', OWNER_SQL, [id])
      return row?.creatorId
    },

    /**
     * Bytes of `creatorId`'s images besides product `id`'s: an upload is refused before its
     * body is read when there is no room at all (attach decides, under the lock).
     */
    async bytesUsed (creatorId: number, id: number): Promise<number> {
      const [row] = await query<{ used: number }>(pool, 'product-image-bytes-used', BYTES_USED_SQL, [creatorId, id])
      return row?.used ?? 0
    },

    /**
     * Sets the image of `creatorId`'s product `id` when it fits in the creator's quota;
     * `previousKey` is the file it replaced.
     */
    async attach (id: number, creatorId: number, image: ImageMeta): Promise<ImageChange> {
      const attached = await transaction(pool, 'product-image-attach', async (client) => {
        await query(client, 'product-image-user-lock', LOCK_USER_SQL, [creatorId])
        const [{ used } = { used: 0 }] = await query<{ used: number }>(client, 'product-image-bytes-used', BYTES_USED_SQL, [creatorId, id])
        if (used + image.size > bytesPerUser) return { used }
        const rows = await query<{ previousKey: string | null }>(client, 'product-image-attach', ATTACH_SQL, [id, creatorId, image.key, image.type, image.size, image.sha256])
        return rows[0]
      })
      if (attached !== undefined && 'previousKey' in attached) return { outcome: 'done', previousKey: attached.previousKey }
      // No row changed, or no room: say why (not found and forbidden win over the quota).
      const why = await whyNot(id, creatorId)
      return attached !== undefined && why.outcome === 'no-image' ? { outcome: 'quota', used: attached.used } : why
    },

    /** Clears the image of `creatorId`'s product `id`; `previousKey` is the file to remove. */
    async detach (id: number, creatorId: number): Promise<ImageChange> {
      const rows = await query<{ previousKey: string | null }>(pool, 'product-image-detach', DETACH_SQL, [id, creatorId])
      if (rows[0] !== undefined) return { outcome: 'done', previousKey: rows[0].previousKey }
      return await whyNot(id, creatorId)
    },

    /**
     * Deletes product `id` (only when `creatorId` made it, if given): `deleted` says whether
     * it did, `imageKey` is the file to remove.
     */
    async deleteProduct (id: number, creatorId?: number): Promise<{ deleted: boolean, imageKey: string | null }> {
      const rows = creatorId === undefined
        ? await query<{ imageKey: string | null }>(pool, 'product-delete', 'DELETE FROM products WHERE id = $1 RETURNING image_key AS "imageKey"', [id])
        : await query<{ imageKey: string | null }>(pool, 'product-delete-owned', 'DELETE FROM products WHERE id = $1 AND creator_id = $2 RETURNING image_key AS "imageKey"', [id, creatorId])
      return { deleted: rows.length === 1, imageKey: rows[0]?.imageKey ?? null }
    },

    /**
     * Deletes user `userId` and their products in one transaction: `deleted` says whether
     * there was such a user, `imageKeys` are the files to remove.
     */
    async deleteUser (userId: number): Promise<{ deleted: boolean, imageKeys: string[] }> {
      return await transaction(pool, `deleting user ${userId}`, async (client) => {
        const locked = await query(client, 'user-lock', 'SELECT id FROM users WHERE id = $1 FOR UPDATE', [userId])
        if (locked.length === 0) return { deleted: false, imageKeys: [] }
        const products = await query<{ imageKey: string | null }>(client, 'user-products-delete', 'DELETE FROM products WHERE creator_id = $1 RETURNING image_key AS "imageKey"', [userId])
        await query(client, 'user-delete', 'DELETE FROM users WHERE id = $1', [userId])
        return { deleted: true, imageKeys: products.flatMap((row) => row.imageKey === null ? [] : [row.imageKey]) }
      })
    }
  }
}

export type ProductImagesRepository = ReturnType<typeof productImagesRepository>
