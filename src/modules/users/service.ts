/**
 * User operations, built once and decorated as `app.users` (docs/architecture.md): what the
 * user, registration and admin routes do with user records, over the users repository and
 * the password hasher; a deletion also takes the user's products and their image files. The
 * checks of a password are sign-in's (src/modules/identity/). The routes call nothing else
 * for users.
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { BadRequest, NotFound } from '../../lib/problem.js'
import type { PageOf, PageQueryInput } from '../../lib/schemas.js'
import { checkNewPassword } from '../../lib/password-rule.js'
import type { PasswordHasher } from '../../plugins/password.js'
import type { ProductImages, ProductsRepository } from '../products/index.js'
import type { EmailVerification } from './email-verification.js'
import type { UsersRepository } from './repository.js'
import type { PublicUser, RegisterInput, UpdateUserInput } from './schemas.js'

interface UsersServiceDependencies {
  users: UsersRepository
  passwords: PasswordHasher
  /** A user's products go in the transaction that deletes the user. */
  products: Pick<ProductsRepository, 'deleteAllOf'>
  /** Their image files are removed once it has committed. */
  images: Pick<ProductImages, 'discard'>
  /** The verification e-mail of a new address, written with it. */
  verification: Pick<EmailVerification, 'queue' | 'wake'>
}

function usersService ({ users, passwords, products, images, verification }: UsersServiceDependencies) {
  /**
   * Deletes user `id`: first the rows, in one transaction (the user's row locked, their
   * products deleted, then the user and with it their sessions), then, once that has
   * committed, those products' image files: a row never names a file that is gone, and a
   * file that cannot be removed is logged (images.ts). False when there was no such user.
   */
  async function deleteUser (id: number): Promise<boolean> {
    const imageKeys = await users.delete(id, async (tx) => await products.deleteAllOf(id, tx))
    if (imageKeys === null) return false
    await images.discard(...imageKeys)
    return true
  }

  return {
    async register (body: RegisterInput): Promise<PublicUser> {
      checkNewPassword(body.password)
      const passwordHash = await passwords.hash(body.password)
      // A duplicate username or e-mail, even from a racing registration, fails on the
      // unique index and is answered 409 by the error handler.
      const { tokenVersion: _, ...user } = await users.create({ username: body.username, email: body.email, names: body.names, passwordHash }, verification.queue)
      verification.wake()
      return user
    },

    /** The checks of a change that cost nothing: run before any budget is spent. */
    validateUpdate (body: UpdateUserInput): void {
      if (body.password !== undefined) {
        if (body.currentPassword === undefined) throw new BadRequest('Send `currentPassword` with `password`: changing the password needs the current one')
        checkNewPassword(body.password)
      }
    },

    /** Whether a change needs the proof of `app.identity.requireProof`: a new password, or an address other than the current one (the current one only cancels a pending change). */
    needsProof (user: PublicUser, body: UpdateUserInput): boolean {
      return body.password !== undefined || (body.email !== undefined && body.email.toLowerCase() !== user.email.toLowerCase())
    },

    /**
     * Changes a user; `currentPassword`, when sent, has been checked (`app.identity.requireProof`).
     * A new password ends every session (the token version moves on): `tokenVersion` is
     * then the new one, for the caller's new session.
     */
    async update (id: number, body: UpdateUserInput): Promise<{ user: PublicUser, tokenVersion?: number }> {
      const { password, currentPassword: _, ...fields } = body
      let passwordHash: string | undefined
      if (password !== undefined) {
        checkNewPassword(password)
        passwordHash = await passwords.hash(password)
      }
      const changed = await users.update(id, { ...fields, passwordHash }, verification.queue)
      if (changed === null) throw new NotFound('The user no longer exists')
      const { tokenVersion, ...user } = changed
      if (fields.email !== undefined) verification.wake()
      if (passwordHash === undefined) return { user }
      return { user, tokenVersion }
    },

    /** Deletes the own record, its password checked; 404 when a concurrent request deleted it first. */
    async deleteOwn (id: number): Promise<void> {
      if (!await deleteUser(id)) throw new NotFound('The user no longer exists')
    },

    /** Deletes any user and their products (admin); 404 when there is no such user. */
    async delete (id: number): Promise<void> {
      if (!await deleteUser(id)) throw new NotFound(`User ${id} does not exist`)
    },

    /** A page of users in id order (admin). */
    async page (query: PageQueryInput): Promise<PageOf<PublicUser>> {
      return await users.page(query)
    }
  }
}

type UsersService = ReturnType<typeof usersService>

declare module 'fastify' {
  interface FastifyInstance {
    users: UsersService
  }
}

export default fp(async function usersServicePlugin (app: FastifyInstance) {
  app.decorate('users', usersService({ users: app.usersRepository, passwords: app.passwords, products: app.productsRepository, images: app.productImages, verification: app.emailVerification }))
}, { name: 'users-service', fastify: '5.x', dependencies: ['users-repository', 'passwords', 'products-repository', 'product-images', 'email-verification'] })
