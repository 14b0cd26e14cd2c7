/**
 * Password checks: the password step of a login (`login`), the check of the current password
 * that changes of an account make (`checkCurrentPassword`), and the proof a lasting change
 * needs beyond its session (`requireProof`, docs/api.md, "Proof for lasting changes"): a
 * stolen access token alone must not add a factor, replace the recovery codes or move the
 * account to another address. Every guess is taken from the account's budget before its
 * bcrypt work (429 when none is left) and given back when it is right (budgets.ts).
 */
import createError from '@fastify/error'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { BadRequest, NotFound, Unauthorized } from '../../lib/problem.js'
import { MAX_PASSWORD_BYTES } from '../../lib/password-rule.js'
import type { PasswordHasher } from '../../plugins/password.js'
import type { UsersRepository } from '../users/index.js'
import { accountKey, type AccountLimiter, type AuthBudget } from './budgets.js'
import type { SecurityActivity } from './activity.js'
import { deviceOf } from './sessions.js'

/** A wrong current password on a change of the account: 403 (the token is fine; 401 would tell clients to drop it). */
const WrongPassword = createError('WRONG_PASSWORD', 'The current password is wrong', 403)
/** Login with the right password to an account whose address is not verified (REQUIRE_VERIFIED_EMAIL), or a factor added before its address is. */
export const EmailNotVerified = createError('EMAIL_NOT_VERIFIED', 'Verify your e-mail address first: follow the link of the verification e-mail', 403)

/** Throws unless the request proves it is the account's owner; the caller has authenticated it. */
export type RequireProof = (request: FastifyRequest, reply: FastifyReply) => Promise<void>

export interface PasswordChecksDependencies {
  users: Pick<UsersRepository, 'findLoginAccount' | 'findCredentialsById'>
  passwords: PasswordHasher
  /** The per-account budget of password guesses (login and current-password checks). */
  guesses: AccountLimiter
  /** The per-client budget of bcrypt-costing requests. */
  authBudget: AuthBudget
  /** REQUIRE_VERIFIED_EMAIL. */
  requireVerifiedEmail: boolean
  /** The account's security activity: a wrong password at login is an event of the account. */
  activity: Pick<SecurityActivity, 'record'>
}

export function passwordChecks ({ users, passwords, guesses, authBudget, requireVerifiedEmail, activity }: PasswordChecksDependencies) {
  /** bcrypt's verdict, or the time of one spent on nothing when there is no hash to compare or the password is longer than bcrypt reads. */
  async function verify (password: string, passwordHash: string | undefined): Promise<boolean> {
    return passwordHash === undefined || Buffer.byteLength(password, 'utf8') > MAX_PASSWORD_BYTES
      ? await passwords.verifyDummy(password)
      : await passwords.verify(password, passwordHash)
  }

  /** Checks a user's current password against the account's budget of guesses; a wrong one is a 403 WRONG_PASSWORD. */
  async function checkCurrentPassword (id: number, password: string, reply: FastifyReply): Promise<void> {
    const reservation = await guesses.reserve(accountKey({ folded: '', credentials: { id } }), reply)
    const credentials = await users.findCredentialsById(id)
    if (credentials === null) throw new NotFound('The user no longer exists')
    if (!await verify(password, credentials.passwordHash)) throw new WrongPassword()
    await guesses.release(reservation)
  }

  return {
    /**
     * The account of valid credentials (the caller starts a session or a second step); the
     * same 401 for an unknown user or a wrong password.
     */
    async login (login: string, password: string, reply: FastifyReply): Promise<{ id: number, tokenVersion: number }> {
      const account = await users.findLoginAccount(login.includes('@') ? { email: login } : { username: login })
      const reservation = await guesses.reserve(accountKey(account), reply)
      const { credentials } = account
      const valid = await verify(password, credentials?.passwordHash)
      if (!valid && credentials !== null) await activity.record(credentials.id, 'sign-in-failed', deviceOf(reply.request))
      if (!valid || credentials === null) throw new Unauthorized('The username or password is wrong')
      await guesses.release(reservation)
      // Only after the password: the answer tells nothing about an account to someone without it.
      if (requireVerifiedEmail && !credentials.emailVerified) throw new EmailNotVerified()
      return { id: credentials.id, tokenVersion: credentials.tokenVersion }
    },

    checkCurrentPassword,

    /**
     * `currentPassword` from the body, checked as a password change checks it: the client's
     * budget of bcrypt-costing requests, then the account's budget of guesses (a wrong one is
     * 403 WRONG_PASSWORD, counted; 429 past either budget); missing, 400 BAD_REQUEST.
     */
    async requireProof (request: FastifyRequest, reply: FastifyReply): Promise<void> {
      const password = (request.body as { currentPassword?: unknown } | null | undefined)?.currentPassword
      if (typeof password !== 'string') throw new BadRequest('Send `currentPassword`: this change needs your current password')
      await authBudget(request, reply)
      await checkCurrentPassword(request.currentUser!.id, password, reply)
    }
  }
}

export type PasswordChecks = ReturnType<typeof passwordChecks>
