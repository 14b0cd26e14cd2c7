/** User operations shared by the user and auth routes: registration, login, changes. */
import type { FastifyInstance } from 'fastify'
import { BadRequest, Unauthorized } from '../../lib/problem.js'
import { MAX_PASSWORD_BYTES } from '../../plugins/password.js'
import { usersRepository, type PublicUser } from './repository.js'
import type { RegisterInput, UpdateUserInput } from './schemas.js'

function checkPasswordBytes (password: string): void {
  if (Buffer.byteLength(password, 'utf8') > MAX_PASSWORD_BYTES) {
    throw new BadRequest(`The password is longer than ${MAX_PASSWORD_BYTES} bytes in UTF-8; bcrypt would ignore the rest`)
  }
}

export function usersService (app: FastifyInstance) {
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

    /** Returns a token for valid credentials; the same 401 for an unknown user or a wrong password. */
    async login (login: string, password: string): Promise<{ token: string, userId: number }> {
      const where = login.includes('@') ? { email: login } : { username: login }
      const credentials = await users.findCredentials(where)
      const valid = credentials === null || Buffer.byteLength(password, 'utf8') > MAX_PASSWORD_BYTES
        ? await app.passwords.verifyDummy(password)
        : await app.passwords.verify(password, credentials.passwordHash)
      if (!valid || credentials === null) throw new Unauthorized('The username or password is wrong')
      return { token: await app.signToken(credentials), userId: credentials.id }
    },

    async update (id: number, body: UpdateUserInput): Promise<{ user: PublicUser, token?: string }> {
      const { password, ...fields } = body
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
