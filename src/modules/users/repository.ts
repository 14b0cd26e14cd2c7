/** Prisma access for users. Only `publicUserSelect` fields ever leave this module's callers. */
import type { PrismaClient } from '../../generated/prisma/client.js'
import { keysetPage } from '../../lib/schemas.js'

export const publicUserSelect = {
  id: true,
  username: true,
  email: true,
  createdAt: true,
  updatedAt: true
} as const

export interface PublicUser {
  id: number
  username: string
  email: string
  createdAt: Date
  updatedAt: Date
}

export function usersRepository (prisma: PrismaClient) {
  return {
    async create (data: { username: string, email: string, passwordHash: string }): Promise<PublicUser & { tokenVersion: number }> {
      return await prisma.user.create({ data, select: { ...publicUserSelect, tokenVersion: true } })
    },

    async findById (id: number): Promise<PublicUser | null> {
      return await prisma.user.findUnique({ where: { id }, select: publicUserSelect })
    },

    /** The credentials of a user by username or e-mail (both case-insensitive: citext). */
    async findCredentials (login: { username: string } | { email: string }) {
      return await prisma.user.findUnique({
        where: login,
        select: { id: true, passwordHash: true, tokenVersion: true }
      })
    },

    async update (id: number, data: { username?: string, email?: string, passwordHash?: string }): Promise<PublicUser & { tokenVersion: number }> {
      return await prisma.user.update({
        where: { id },
        data: data.passwordHash === undefined ? data : { ...data, tokenVersion: { increment: 1 } },
        select: { ...publicUserSelect, tokenVersion: true }
      })
    },

    /**
     * Deletes the user and, by the foreign key's ON DELETE CASCADE, their products; the
     * result says whether there was such a user.
     */
    async delete (id: number): Promise<boolean> {
      const { count } = await prisma.user.deleteMany({ where: { id } })
      return count === 1
    },

    /** A page in id order (see `keysetPage`). */
    async page (page: { limit: number, cursor?: number }) {
      const rows = await prisma.user.findMany({
        where: page.cursor === undefined ? {} : { id: { gt: page.cursor } },
        orderBy: { id: 'asc' },
        take: page.limit + 1,
        select: publicUserSelect
      })
      return keysetPage(rows, page.limit)
    }
  }
}

export type UsersRepository = ReturnType<typeof usersRepository>
