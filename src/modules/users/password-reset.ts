/**
 * Password reset, decorated as `app.passwordReset`: a request e-mails a link with a
 * single-use token; confirming with the token sets a new password and ends every session.
 *
 * No enumeration: a request does the same work whoever the address names: one outbox row
 * holding the address, and the same 202. Whether the address has an account is looked at
 * only when the sender prepares the message (./outbox kind `password-reset`): then the
 * token is made, stored as its SHA-256 digest, and put in the link; an address without an
 * account gets no e-mail. The token exists nowhere but in the e-mail (not in the outbox, not
 * in the logs); a failed attempt removes its token, and the retry makes another.
 *
 * Limits: the client's budget of auth requests (the routes), and RESETS_PER_ADDRESS per
 * address, counted in the same stores (Redis when configured); past it the answer is still
 * 202 and nothing is sent, so neither the owner's mailbox nor the answers can be flooded.
 */
import createError from '@fastify/error'
import type { FastifyInstance, FastifyReply } from 'fastify'
import fp from 'fastify-plugin'
import { budget, type AttemptStore } from '../../lib/attempts.js'
import { escapeHtml, newLinkToken, tokenDigest } from '../../lib/link-token.js'
import { checkNewPassword } from '../../lib/password-rule.js'
import type { Mail } from '../mail/index.js'
import type { UsersRepository } from './repository.js'

const ResetTokenInvalid = createError('RESET_TOKEN_INVALID', 'The reset link is invalid, used or expired: ask for a new one', 400)

/** Reset e-mails per address and window: enough for a lost message or two, too few to flood a mailbox. */
export const RESETS_PER_ADDRESS = { max: 3, timeWindow: 3_600_000 }

export const RESET_KIND = 'password-reset'
/** A reset e-mail not delivered within this long after the request is not worth sending, ms. */
const RESET_SEND_WINDOW_MS = 3_600_000

/** `30 minutes`, `2 hours`, `45 seconds`. */
function humanDuration (ms: number): string {
  const [unit, size] = ms % 3_600_000 === 0 ? ['hour', 3_600_000] as const : ms % 60_000 === 0 ? ['minute', 60_000] as const : ['second', 1000] as const
  const n = Math.max(1, Math.round(ms / size))
  return `${n} ${unit}${n === 1 ? '' : 's'}`
}

export interface PasswordResetOptions {
  /** PUBLIC_URL (no trailing slash): the base of the link. */
  publicUrl: string
  /** PASSWORD_RESET_TTL in ms. */
  ttlMs: number
  /** Where the per-address counts live. */
  store?: AttemptStore
}

interface Dependencies extends PasswordResetOptions {
  users: UsersRepository
  mail: Mail
  hash: (password: string) => Promise<string>
}

function passwordReset ({ users, mail, hash, publicUrl, ttlMs, store }: Dependencies) {
  const perAddress = budget({ ...RESETS_PER_ADDRESS, store, refusal: () => new Error('too many resets for this address') })

  mail.define(RESET_KIND, async (payload) => {
    const { email } = payload as { email: string }
    const account = await users.findByEmail(email)
    if (account === null) return null
    const { token, digest: hashed } = newLinkToken()
    await users.createResetToken(account.id, hashed, ttlMs)
    const link = `${publicUrl}/reset-password#token=${token}`
    const valid = humanDuration(ttlMs)
    return {
      message: {
        to: account.email,
        subject: 'Reset your password',
        text: `Someone asked to reset the password of the account with this address.\n\nTo choose a new password, open this link within ${valid}:\n\n${link}\n\nThe link works once. If you did not ask for it, ignore this e-mail: your password stays as it is.\n`,
        html: `<p>Someone asked to reset the password of the account with this address.</p><p>To choose a new password, open this link within ${valid}:</p><p><a href="${escapeHtml(link)}">Reset your password</a></p><p>The link works once. If you did not ask for it, ignore this e-mail: your password stays as it is.</p>`
      },
      undo: async () => { await users.deleteResetToken(hashed) }
    }
  })

  return {
    /** Queues a reset e-mail for `email` (sent only if an account has it); the same work either way. False past the address's budget: nothing queued. */
    async request (email: string, reply: FastifyReply): Promise<boolean> {
      const address = email.toLowerCase()
      try {
        await perAddress.spend(`address:${address}`, reply)
      } catch (error) {
        // The store is down: 503 like every other budget. Used up: silently nothing, and
        // the same answer as any other request.
        if ((error as { statusCode?: number }).statusCode === 503) throw error
        reply.removeHeader('retry-after')
        return false
      }
      await mail.enqueue(RESET_KIND, { email }, RESET_SEND_WINDOW_MS)
      return true
    },

    /** Sets the password of the token's user and ends their sessions: the user's id; 400 RESET_TOKEN_INVALID for any token that is not live. */
    async confirm (token: string, password: string): Promise<number> {
      checkNewPassword(password)
      const passwordHash = await hash(password)
      const userId = await users.resetPassword(tokenDigest(token), passwordHash)
      if (userId === null) throw new ResetTokenInvalid()
      return userId
    }
  }
}

export type PasswordReset = ReturnType<typeof passwordReset>

declare module 'fastify' {
  interface FastifyInstance {
    passwordReset: PasswordReset
  }
}

export default fp(async function passwordResetPlugin (app: FastifyInstance, options: PasswordResetOptions) {
  app.decorate('passwordReset', passwordReset({ ...options, users: app.usersRepository, mail: app.mail, hash: async (password) => await app.passwords.hash(password) }))
}, { name: 'password-reset', fastify: '5.x', dependencies: ['users-repository', 'passwords', 'mail-sender'] })
