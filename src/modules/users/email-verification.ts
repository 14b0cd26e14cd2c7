/**
 * E-mail verification, decorated as `app.emailVerification`: registration and a change of
 * address write, in their own transaction, an outbox row for a verification e-mail (through
 * the users repository's `also`); when the sender prepares it, a single-use token is made
 * (stored as its SHA-256, with the address it verifies) and put in the link. Following it
 * sets `emailVerifiedAt`, if the user still has that address.
 *
 * A change of address also tells the old address, so that an account taken over is noticed.
 * Not done here: a pending change that takes effect only once the new address confirms; a
 * change takes effect at once and starts unverified.
 */
import createError from '@fastify/error'
import type { FastifyInstance, FastifyReply } from 'fastify'
import fp from 'fastify-plugin'
import { budget, type AttemptStore } from '../../lib/attempts.js'
import { escapeHtml, newLinkToken, tokenDigest } from '../../lib/link-token.js'
import type { Transaction } from '../../db/sql.js'
import type { Mail } from '../mail/index.js'
import type { TokenUser, UsersRepository } from './repository.js'

const VerificationTokenInvalid = createError('VERIFICATION_TOKEN_INVALID', 'The verification link is invalid, used or expired, or the address has changed since: ask for a new one', 400)
const TooManyVerificationMails = createError('RATE_LIMITED', 'Too many verification e-mails; retry in %d s', 429)

export const VERIFY_KIND = 'verify-email'
export const NOTICE_KIND = 'email-changed-notice'
/** A verification link works this long after its sending, ms. */
export const VERIFICATION_TTL_MS = 24 * 3_600_000
/** A verification e-mail not delivered within this long is not worth sending, ms. */
const SEND_WINDOW_MS = 24 * 3_600_000
/** Verification e-mails a user may ask for again per window. */
export const RESENDS_PER_USER = { max: 3, timeWindow: 3_600_000 }

export interface EmailVerificationOptions {
  /** PUBLIC_URL (no trailing slash): the base of the link. */
  publicUrl: string
  /** Where the per-user counts of resends live. */
  store?: AttemptStore
}

interface Dependencies extends EmailVerificationOptions {
  users: UsersRepository
  mail: Mail
}

function emailVerification ({ users, mail, publicUrl, store }: Dependencies) {
  const resends = budget({ ...RESENDS_PER_USER, store, refusal: (seconds) => new TooManyVerificationMails(seconds) })

  mail.define(VERIFY_KIND, async (payload) => {
    const { userId, email } = payload as { userId: number, email: string }
    const user = await users.findEmail(userId)
    // Gone, verified meanwhile, or moved on to another address (which has its own e-mail).
    if (user === null || user.verified || user.email.toLowerCase() !== email.toLowerCase()) return null
    const { token, digest: hashed } = newLinkToken()
    await users.createVerificationToken(userId, user.email, hashed, VERIFICATION_TTL_MS)
    const link = `${publicUrl}/verify-email#token=${token}`
    return {
      message: {
        to: user.email,
        subject: 'Verify your e-mail address',
        text: `Please confirm that this address belongs to your account by opening this link within 24 hours:\n\n${link}\n\nIf you did not sign up or change your address, ignore this e-mail.\n`,
        html: `<p>Please confirm that this address belongs to your account by opening this link within 24 hours:</p><p><a href="${escapeHtml(link)}">Verify your e-mail address</a></p><p>If you did not sign up or change your address, ignore this e-mail.</p>`
      },
      undo: async () => { await users.deleteVerificationToken(hashed) }
    }
  })

  mail.define(NOTICE_KIND, async (payload) => {
    const { to, newEmail, username } = payload as { to: string, newEmail: string, username: string }
    return {
      message: {
        to,
        subject: 'Your e-mail address was changed',
        text: `The e-mail address of the account ${username} was changed from this one to ${newEmail}.\n\nIf you did not make this change, someone else may be using your account: log in, change your password and set your address back, or tell the operators of this service.\n`,
        html: `<p>The e-mail address of the account <b>${escapeHtml(username)}</b> was changed from this one to <b>${escapeHtml(newEmail)}</b>.</p><p>If you did not make this change, someone else may be using your account: log in, change your password and set your address back, or tell the operators of this service.</p>`
      }
    }
  })

  return {
    /**
     * Writes the verification e-mail of `user`'s address in the transaction `tx`, and after a
     * change the notice to the address before (call `wake` once it commits).
     */
    async queue (tx: Transaction, user: TokenUser, previousEmail?: string): Promise<void> {
      await mail.enqueue(VERIFY_KIND, { userId: user.id, email: user.email }, SEND_WINDOW_MS, tx)
      if (previousEmail !== undefined) await mail.enqueue(NOTICE_KIND, { to: previousEmail, newEmail: user.email, username: user.username }, SEND_WINDOW_MS, tx)
    },

    wake: mail.wake,

    /** Sends the link again (RESENDS_PER_USER, else 429); nothing when the address is verified. */
    async resend (userId: number, email: string, reply: FastifyReply): Promise<void> {
      await resends.spend(`user:${userId}`, reply)
      await mail.enqueue(VERIFY_KIND, { userId, email }, SEND_WINDOW_MS)
    },

    /** Verifies the address of the token; 400 VERIFICATION_TOKEN_INVALID otherwise. */
    async verify (token: string): Promise<void> {
      if (!await users.verifyEmail(tokenDigest(token))) throw new VerificationTokenInvalid()
    }
  }
}

export type EmailVerification = ReturnType<typeof emailVerification>

declare module 'fastify' {
  interface FastifyInstance {
    emailVerification: EmailVerification
  }
}

export default fp(async function emailVerificationPlugin (app: FastifyInstance, options: EmailVerificationOptions) {
  app.decorate('emailVerification', emailVerification({ ...options, users: app.usersRepository, mail: app.mail }))
}, { name: 'email-verification', fastify: '5.x', dependencies: ['users-repository', 'mail-sender'] })
