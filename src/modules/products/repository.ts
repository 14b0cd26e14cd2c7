/** Database access for products, built once and decorated as `app.productsRepository` (docs/architecture.md). */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { sqlPool } from '../../db/client.js'
import { LOCK_USER_SQL, transaction } from '../../db/transaction.js'
import type { PrismaClient, Product } from '../../generated/prisma/client.js'
import { keysetPage, keysetQuery, type PageQueryInput } from '../../lib/schemas.js'

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

// Inserts only while the creator holds fewer than $5 products; run after the creator's row
// is locked, so that the count sees every concurrent creation by the same user (any replica).
const CREATE_SQL = `INSERT INTO products (title, description, amount, creator_id, updated_at)
  SELECT $1, $2, $3, $4, now() WHERE (SELECT count(*) FROM products WHERE creator_id = $4) < $5
  RETURNING ${Object.entries(PRODUCT_COLUMNS).map(([field, column]) => `${column} AS "${field}"`).join(', ')}`

export interface ProductsRepositoryOptions {
  /** PRODUCTS_MAX_PER_USER. */
  maxPerUser: number
}

function productsRepository (prisma: PrismaClient, { maxPerUser }: ProductsRepositoryOptions) {
  const pool = sqlPool(prisma)
  return {
    /** A page in id order. */
    async page (query: PageQueryInput) {
      const rows = await prisma.product.findMany(keysetQuery(query))
      return keysetPage(rows, query.limit)
    },

    async findById (id: number) {
      return await prisma.product.findUnique({ where: { id } })
    },

    /**
     * The new product; `{ quota }` when its creator already holds `maxPerUser` products; null
     * when the creator no longer exists (a user deleted while their request was in flight:
     * the token check read the user, the deletion committed before the lock). The creator's
     * row is locked first: concurrent creations of one user are counted one after another,
     * and a deletion of the user waits (then takes the new product with it, ON DELETE CASCADE).
     */
    async create (data: { title: string, description: string, amount: number, creatorId: number }): Promise<Product | { quota: number } | null> {
      return await transaction(pool, 'product-create', async (client) => {
        if ((await client.query(LOCK_USER_SQL, [data.creatorId])).rowCount === 0) return null
        const { rows: [product] } = await client.query<Product>(CREATE_SQL, [data.title, data.description, data.amount, data.creatorId, maxPerUser])
        return product ?? { quota: maxPerUser }
      })
    },

    /** Deletes when `creatorId` matches; the count says whether it did. */
    async deleteOwned (id: number, creatorId: number): Promise<boolean> {
      const { count } = await prisma.product.deleteMany({ where: { id, creatorId } })
      return count === 1
    },

    async delete (id: number): Promise<boolean> {
      const { count } = await prisma.product.deleteMany({ where: { id } })
      return count === 1
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
