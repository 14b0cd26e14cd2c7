/**
 * User operations, built once and decorated as `app.users` (docs/architecture.md): what the
 * user, auth and admin routes do with users, over the users repository, the password
 * hasher and the budget of guesses; a deletion also takes the user's products and their
 * image files. The routes call nothing else for users.
 */
import createError from '@fastify/error'
import type { FastifyInstance, FastifyReply } from 'fastify'
import fp from 'fastify-plugin'
import { BadRequest, NotFound, Unauthorized } from '../../lib/problem.js'
import type { PageOf, PageQueryInput } from '../../lib/schemas.js'
import { checkPasswordBytes, MAX_PASSWORD_BYTES, type PasswordHasher } from '../../plugins/password.js'
import type { ProductImages, ProductsRepository } from '../products/index.js'
import { accountKey, type AccountLimiter } from './account-limit.js'
import type { EmailVerification } from './email-verification.js'
import type { UsersRepository } from './repository.js'
import type { PublicUser, RegisterInput, UpdateUserInput } from './schemas.js'

/** A wrong current password on PATCH or DELETE /api/user/:id: 403 (the token is fine; 401 would tell clients to drop it). */
const WrongPassword = createError('WRONG_PASSWORD', 'The current password is wrong', 403)
/** Login with the right password to an account whose address is not verified (REQUIRE_VERIFIED_EMAIL), or a factor added before its address is. */
export const EmailNotVerified = createError('EMAIL_NOT_VERIFIED', 'Verify your e-mail address first: follow the link of the verification e-mail', 403)

interface UsersServiceDependencies {
  users: UsersRepository
  passwords: PasswordHasher
  /** The per-account budget of password guesses (login and current-password checks). */
  guesses: AccountLimiter
  /** A user's products go in the transaction that deletes the user. */
  products: Pick<ProductsRepository, 'deleteAllOf'>
  /** Their image files are removed once it has committed. */
  images: Pick<ProductImages, 'discard'>
  /** The verification e-mail of a new address, written with it. */
  verification: Pick<EmailVerification, 'queue' | 'wake'>
  /** REQUIRE_VERIFIED_EMAIL. */
  requireVerifiedEmail: boolean
}

function usersService ({ users, passwords, guesses, products, images, verification, requireVerifiedEmail }: UsersServiceDependencies) {
  /** bcrypt's verdict, or the time of one spent on nothing when there is no hash to compare or the password is longer than bcrypt reads. */
  async function verify (password: string, passwordHash: string | undefined): Promise<boolean> {
    return passwordHash === undefined || Buffer.byteLength(password, 'utf8') > MAX_PASSWORD_BYTES
      ? await passwords.verifyDummy(password)
      : await passwords.verify(password, passwordHash)
  }

  /**
   * Checks a user's current password (PATCH and DELETE of the own record). The guess is
   * taken from the account's budget (login's: 429 when none is left) before the bcrypt
   * work and given back when right; a wrong one is a 403 WRONG_PASSWORD.
   */
  async function checkCurrentPassword (id: number, password: string, reply: FastifyReply): Promise<void> {
    const reservation = await guesses.reserve(accountKey({ folded: '', credentials: { id } }), reply)
    const credentials = await users.findCredentialsById(id)
    if (credentials === null) throw new NotFound('The user no longer exists')
    if (!await verify(password, credentials.passwordHash)) throw new WrongPassword()
    await guesses.release(reservation)
  }

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
      checkPasswordBytes(body.password)
      const passwordHash = await passwords.hash(body.password)
      // A duplicate username or e-mail, even from a racing registration, fails on the
      // unique index and is answered 409 by the error handler.
      const { tokenVersion: _, ...user } = await users.create({ username: body.username, email: body.email, names: body.names, passwordHash }, verification.queue)
      verification.wake()
      return user
    },

    /**
     * Returns the account for valid credentials (the caller starts a session: app.sessions);
     * the same 401 for an unknown user or a wrong password. The guess is reserved on the
     * account's counter before the bcrypt work (429 when none is left) and given back when
     * it is right.
     */
    async login (login: string, password: string, reply: FastifyReply): Promise<{ id: number, tokenVersion: number }> {
      const account = await users.findLoginAccount(login.includes('@') ? { email: login } : { username: login })
      const reservation = await guesses.reserve(accountKey(account), reply)
      const { credentials } = account
      const valid = await verify(password, credentials?.passwordHash)
      if (!valid || credentials === null) throw new Unauthorized('The username or password is wrong')
      await guesses.release(reservation)
      // Only after the password: the answer tells nothing about an account to someone without it.
      if (requireVerifiedEmail && !credentials.emailVerified) throw new EmailNotVerified()
      return { id: credentials.id, tokenVersion: credentials.tokenVersion }
    },

    checkCurrentPassword,

    /** The checks of a change that cost nothing: run before any budget is spent. */
    validateUpdate (body: UpdateUserInput): void {
      if (body.password !== undefined) {
        if (body.currentPassword === undefined) throw new BadRequest('Send `currentPassword` with `password`: changing the password needs the current one')
        checkPasswordBytes(body.password)
      }
    },

    /** Whether a change needs the proof of `stepUp`: a new password, or an address other than the current one (the current one only cancels a pending change). */
    needsProof (user: PublicUser, body: UpdateUserInput): boolean {
      return body.password !== undefined || (body.email !== undefined && body.email.toLowerCase() !== user.email.toLowerCase())
    },

    /**
     * Changes a user; `currentPassword`, when sent, has been checked (`checkCurrentPassword`).
     * A new password ends every session (the token version moves on): `tokenVersion` is
     * then the new one, for the caller's new session.
     */
    async update (id: number, body: UpdateUserInput): Promise<{ user: PublicUser, tokenVersion?: number }> {
      const { password, currentPassword: _, ...fields } = body
      let passwordHash: string | undefined
      if (password !== undefined) {
        checkPasswordBytes(password)
        passwordHash = await passwords.hash(password)
      }
      const changed = await users.update(id, { ...fields, passwordHash }, verification.queue)
      if (changed === null) throw new NotFound('The user no longer exists')
      const { tokenVersion, ...user } = changed
      if (fields.email !== undefined) verification.wake()
      if (passwordHash === undefined) return { user }
      return { user, tokenVersion }
    },

    /** Deletes the own record after checking its password; 404 when a concurrent request deleted it first. */
    async deleteOwn (id: number, password: string, reply: FastifyReply): Promise<void> {
      await checkCurrentPassword(id, password, reply)
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

interface UsersServicePluginOptions {
  guesses: AccountLimiter
  requireVerifiedEmail: boolean
}

export default fp(async function usersServicePlugin (app: FastifyInstance, options: UsersServicePluginOptions) {
  app.decorate('users', usersService({ users: app.usersRepository, passwords: app.passwords, guesses: options.guesses, products: app.productsRepository, images: app.productImages, verification: app.emailVerification, requireVerifiedEmail: options.requireVerifiedEmail }))
}, { name: 'users-service', fastify: '5.x', dependencies: ['users-repository', 'passwords', 'products-repository', 'product-images', 'email-verification'] })
