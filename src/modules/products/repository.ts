/** Database access for products, built once and decorated as `app.productsRepository` (docs/architecture.md). */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { PrismaClient } from '../../generated/prisma/client.js'
import { isForeignKeyViolation } from '../../db/errors.js'
import { keysetPage, keysetQuery, type PageQueryInput } from '../../lib/schemas.js'

function productsRepository (prisma: PrismaClient) {
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
     * The new product, or null when its creator no longer exists: a user deleted while
     * their request was in flight (the token check read the user, the deletion committed
     * before the insert). The insert then fails on the foreign key and writes nothing; a
     * product inserted just before the deletion is removed with the user (ON DELETE CASCADE).
     */
    async create (data: { title: string, description: string, amount: number, creatorId: number }) {
      try {
        return await prisma.product.create({ data })
      } catch (error) {
        if (isForeignKeyViolation(error)) return null
        throw error
      }
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

export default fp(async function productsRepositoryPlugin (app: FastifyInstance) {
  app.decorate('productsRepository', productsRepository(app.prisma))
}, { name: 'products-repository', fastify: '5.x', dependencies: ['prisma'] })
