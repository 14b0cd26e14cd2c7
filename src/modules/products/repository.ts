/** Prisma access for products. */
import type { PrismaClient } from '../../generated/prisma/client.js'
import { isForeignKeyViolation } from '../../db/errors.js'
import { keysetPage } from '../../lib/schemas.js'

export function productsRepository (prisma: PrismaClient) {
  return {
    /** A page in id order; fetches one extra row to know whether another page follows. */
    async page (page: { limit: number, cursor?: number }) {
      const rows = await prisma.product.findMany({
        where: page.cursor === undefined ? {} : { id: { gt: page.cursor } },
        orderBy: { id: 'asc' },
        take: page.limit + 1
      })
      return keysetPage(rows, page.limit)
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
