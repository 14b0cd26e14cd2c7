/** Prisma access for users. Only `publicUserSelect` fields ever leave this module's callers. */
import { sqlPool } from '../../db/client.js'
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

/** The account a login name names, if any, and the name folded as the database folds it. */
export interface LoginAccount {
  /** `lower(name)` under the database's collation: what citext compares. */
  folded: string
  credentials: { id: number, passwordHash: string, tokenVersion: number } | null
}

// One row whether or not the account exists: the name folded by the database (citext
// compares `lower()` of both sides under the database's collation, so this is the one
// spelling every variant of the name shares) and the account's credentials, if any.
const loginSql = (column: 'username' | 'email') =>
  `WITH login AS (SELECT $1::citext AS name)
   SELECT lower(login.name::text) AS folded, u.id, u.password_hash AS "passwordHash", u.token_version AS "tokenVersion"
   FROM login LEFT JOIN users u ON u.${column} = login.name`
const LOGIN_SQL = { username: loginSql('username'), email: loginSql('email') }

export function usersRepository (prisma: PrismaClient) {
  return {
    /**
     * The account of a login name, by username or e-mail (both case-insensitive: citext),
     * with the database's folding of the name. One prepared statement on the pg pool.
     */
    async findLoginAccount (login: { username: string } | { email: string }): Promise<LoginAccount> {
      const column = 'email' in login ? 'email' : 'username'
      const name = 'email' in login ? login.email : login.username
      type Row = { folded: string, id: number | null, passwordHash: string | null, tokenVersion: number | null }
      let row: Row | undefined
      try {
        ({ rows: [row] } = await sqlPool(prisma).query<Row>({ name: `login-account-${column}`, text: LOGIN_SQL[column], values: [name] }))
      } catch (error) {
        // Wrapped so the error handler's classifier reads the driver error as the cause.
        throw new Error(`Reading the login's account failed: ${(error as Error).message}`, { cause: error })
      }
      if (row === undefined) throw new Error('The login query returned no row')
      const credentials = row.id === null ? null : { id: row.id, passwordHash: row.passwordHash!, tokenVersion: row.tokenVersion! }
      return { folded: row.folded, credentials }
    },

    async create (data: { username: string, email: string, passwordHash: string }): Promise<PublicUser & { tokenVersion: number }> {
      return await prisma.user.create({ data, select: { ...publicUserSelect, tokenVersion: true } })
    },

    async findById (id: number): Promise<PublicUser | null> {
      return await prisma.user.findUnique({ where: { id }, select: publicUserSelect })
    },

    /** The password hash and token version of a user, by id. */
    async findCredentialsById (id: number) {
      return await prisma.user.findUnique({ where: { id }, select: { id: true, passwordHash: true, tokenVersion: true } })
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
