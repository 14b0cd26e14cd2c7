/** User operations shared by the user and auth routes: registration, login, changes. */
import createError from '@fastify/error'
import type { FastifyInstance, FastifyReply } from 'fastify'
import { BadRequest, NotFound, Unauthorized } from '../../lib/problem.js'
import { MAX_PASSWORD_BYTES } from '../../plugins/password.js'
import { accountKey, type AccountLimiter } from '../auth/account-limit.js'
import { usersRepository, type PublicUser } from './repository.js'
import type { RegisterInput, UpdateUserInput } from './schemas.js'

/** A wrong current password on PATCH or DELETE /api/user/:id: 403 (the token is fine; 401 would tell clients to drop it). */
export const WrongPassword = createError('WRONG_PASSWORD', 'The current password is wrong', 403)

function checkPasswordBytes (password: string): void {
  if (Buffer.byteLength(password, 'utf8') > MAX_PASSWORD_BYTES) {
    throw new BadRequest(`The password is longer than ${MAX_PASSWORD_BYTES} bytes in UTF-8; bcrypt would ignore the rest`)
  }
}

export interface UsersServiceOptions {
  /** The per-account budget of password guesses (login and current-password checks). */
  guesses: AccountLimiter
}

export function usersService (app: FastifyInstance, options: UsersServiceOptions) {
  const { guesses } = options
  const users = usersRepository(app.prisma)

  return {
    users,

    async register (body: RegisterInput): Promise<PublicUser> {
      checkPasswordBytes(body.password)
      const passwordHash = await app.passwords.hash(body.password)
      // A duplicate username or e-mail, even from a racing registration, fails on the
      // unique index and is answered 409 by the error handler.
      const { tokenVersion: _, ...user } = await users.create({ username: body.username, email: body.email, passwordHash })
      return user
    },

    /**
     * Returns a token for valid credentials; the same 401 for an unknown user or a wrong
     * password. The guess is reserved on the account's counter before the bcrypt work
     * (429 when none is left) and given back when it is right.
     */
    async login (login: string, password: string, reply: FastifyReply): Promise<{ token: string, userId: number }> {
      const account = await users.findLoginAccount(login.includes('@') ? { email: login } : { username: login })
      const reservation = await guesses.reserve(accountKey(account), reply)
      const { credentials } = account
      const valid = credentials === null || Buffer.byteLength(password, 'utf8') > MAX_PASSWORD_BYTES
        ? await app.passwords.verifyDummy(password)
        : await app.passwords.verify(password, credentials.passwordHash)
      if (!valid || credentials === null) throw new Unauthorized('The username or password is wrong')
      await guesses.release(reservation)
      return { token: await app.signToken(credentials), userId: credentials.id }
    },

    /**
     * Checks a user's current password (PATCH and DELETE of the own record). The guess is
     * taken from the account's budget (login's: 429 when none is left) before the bcrypt
     * work and given back when right; a wrong one is a 403 WRONG_PASSWORD.
     */
    async checkCurrentPassword (id: number, password: string, reply: FastifyReply): Promise<void> {
      const reservation = await guesses.reserve(accountKey({ folded: '', credentials: { id } }), reply)
      const credentials = await users.findCredentialsById(id)
      if (credentials === null) throw new NotFound('The user no longer exists')
      const valid = Buffer.byteLength(password, 'utf8') > MAX_PASSWORD_BYTES
        ? await app.passwords.verifyDummy(password)
        : await app.passwords.verify(password, credentials.passwordHash)
      if (!valid) throw new WrongPassword()
      await guesses.release(reservation)
    },

    /** The checks of a change that cost nothing: run before any budget is spent. */
    validateUpdate (body: UpdateUserInput): void {
      if (body.password !== undefined) {
        if (body.currentPassword === undefined) throw new BadRequest('Send `currentPassword` with `password`: changing the password needs the current one')
        checkPasswordBytes(body.password)
      }
    },

    /** Changes a user; `currentPassword`, when sent, has been checked (`checkCurrentPassword`). */
    async update (id: number, body: UpdateUserInput): Promise<{ user: PublicUser, token?: string }> {
      const { password, currentPassword: _, ...fields } = body
      let passwordHash: string | undefined
      if (password !== undefined) {
        checkPasswordBytes(password)
        passwordHash = await app.passwords.hash(password)
      }
      const { tokenVersion, ...user } = await users.update(id, { ...fields, passwordHash })
      if (passwordHash === undefined) return { user }
      return { user, token: await app.signToken({ id, tokenVersion }) }
    }
  }
}
