/**
 * Password hashing, off the event loop. bcrypt with a configurable cost; @node-rs/bcrypt
 * hashes on libuv's thread pool and writes the same `$2b$` hashes bcryptjs reads and
 * writes (bench/README.md, "Password hashing", has the figures behind this choice).
 * bcrypt reads at most 72 bytes, so longer passwords are refused by the schemas
 * (src/modules/users/schemas.ts) rather than silently truncated.
 */
import { hash, verify } from '@node-rs/bcrypt'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

export interface PasswordHasher {
  hash: (password: string) => Promise<string>
  verify: (password: string, passwordHash: string) => Promise<boolean>
  /**
   * Spends the time of one verification without a stored hash, so that a login for an
   * unknown user takes as long as one with a wrong password.
   */
  verifyDummy: (password: string) => Promise<false>
}

declare module 'fastify' {
  interface FastifyInstance {
    passwords: PasswordHasher
  }
}

export const MAX_PASSWORD_BYTES = 72

export async function createPasswordHasher (cost: number): Promise<PasswordHasher> {
  const dummyHash = await hash('dummy password for timing', cost)
  return {
    hash: async (password) => await hash(password, cost),
    verify: async (password, passwordHash) => await verify(password, passwordHash),
    verifyDummy: async (password) => { await verify(password, dummyHash); return false }
  }
}

async function passwordPlugin (app: FastifyInstance, options: { cost: number }): Promise<void> {
  app.decorate('passwords', await createPasswordHasher(options.cost))
}

export default fp(passwordPlugin, { name: 'passwords', fastify: '5.x' })
