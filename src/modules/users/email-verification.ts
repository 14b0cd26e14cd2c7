/**
 * E-mail verification, decorated as `app.emailVerification`: registration and a change of
 * address write, in their own transaction, an outbox row for a verification e-mail (through
 * the users repository's `also`); when the sender prepares it, a single-use token is made
 * (stored as its SHA-256, with the address it verifies) and put in the link. Following it
 * sets `emailVerifiedAt`, if the user still has that address.
 *
 * A change of address only records the new one as pending and e-mails it the link: following
 * that link makes it the user's address, verified (409 if another account has it by then).
 * Until then the current address stays, for login and password resets, so that a mistyped
 * or someone else's address never takes the account over. The current address is told of the
 * request (no link), so that an account taken over is noticed.
 */
import createError from '@fastify/error'
import type { FastifyInstance, FastifyReply } from 'fastify'
import fp from 'fastify-plugin'
import { budget, type AttemptStore } from '../../lib/attempts.js'
import { escapeHtml, newLinkToken, tokenDigest } from '../../lib/link-token.js'
import type { Transaction } from '../../db/sql.js'
import type { Mail } from '../mail/index.js'
import { EmailTaken, type TokenUser, type UsersRepository } from './repository.js'

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

const sameAddress = (a: string, b: string): boolean => a.toLowerCase() === b.toLowerCase()

function emailVerification ({ users, mail, publicUrl, store }: Dependencies) {
  const resends = budget({ ...RESENDS_PER_USER, store, refusal: (seconds) => new TooManyVerificationMails(seconds) })

  mail.define(VERIFY_KIND, async (payload) => {
    const { userId, email } = payload as { userId: number, email: string }
    const user = await users.findEmail(userId)
    if (user === null) return null
    const change = user.pendingEmail !== null && sameAddress(user.pendingEmail, email)
    // Gone, verified meanwhile, or moved on to another address (which has its own e-mail).
    if (!change && (user.verified || !sameAddress(user.email, email))) return null
    const to = change ? user.pendingEmail! : user.email
    const { token, digest: hashed } = newLinkToken()
    await users.createVerificationToken(userId, to, hashed, VERIFICATION_TTL_MS)
    const link = `${publicUrl}/verify-email#token=${token}`
    const ask = change
      ? 'Your account asked to use this address from now on. It does once you open this link, within 24 hours:'
      : 'Please confirm that this address belongs to your account by opening this link within 24 hours:'
    return {
      message: {
        to,
        subject: 'Verify your e-mail address',
        text: `${ask}\n\n${link}\n\nIf you did not sign up or change your address, ignore this e-mail.\n`,
        html: `<p>${ask}</p><p><a href="${escapeHtml(link)}">Verify your e-mail address</a></p><p>If you did not sign up or change your address, ignore this e-mail.</p>`
      },
      undo: async () => { await users.deleteVerificationToken(hashed) }
    }
  })

  mail.define(NOTICE_KIND, async (payload) => {
    const { to, newEmail, username } = payload as { to: string, newEmail: string, username: string }
    return {
      message: {
        to,
        subject: 'A change of your e-mail address was asked for',
        text: `The account ${username} asked to change its e-mail address from this one to ${newEmail}. The change takes effect only when the link sent to ${newEmail} is opened; until then this address stays the account's.\n\nIf you did not ask for this, someone else may be using your account: log in and change your password, or reset it (either ends every session and cancels the change), or tell the operators of this service.\n`,
        html: `<p>The account <b>${escapeHtml(username)}</b> asked to change its e-mail address from this one to <b>${escapeHtml(newEmail)}</b>. The change takes effect only when the link sent to ${escapeHtml(newEmail)} is opened; until then this address stays the account's.</p><p>If you did not ask for this, someone else may be using your account: log in and change your password, or reset it (either ends every session and cancels the change), or tell the operators of this service.</p>`
      }
    }
  })

  return {
    /**
     * Writes, in the transaction `tx`, the verification e-mail of `user`'s pending address and
     * the notice to the current one, or without a pending address the verification e-mail of
     * the current one (call `wake` once it commits).
     */
    async queue (tx: Transaction, user: TokenUser): Promise<void> {
      const { pendingEmail } = user
      await mail.enqueue(VERIFY_KIND, { userId: user.id, email: pendingEmail ?? user.email }, SEND_WINDOW_MS, tx)
      if (pendingEmail !== null) await mail.enqueue(NOTICE_KIND, { to: user.email, newEmail: pendingEmail, username: user.username }, SEND_WINDOW_MS, tx)
    },

    wake: mail.wake,

    /**
     * Sends the link of `email` again (RESENDS_PER_USER, else 429): the pending address, else
     * the current one; nothing when that is verified.
     */
    async resend (userId: number, email: string, reply: FastifyReply): Promise<void> {
      await resends.spend(`user:${userId}`, reply)
      await mail.enqueue(VERIFY_KIND, { userId, email }, SEND_WINDOW_MS)
    },

    /**
     * Verifies the address of the token, or makes the pending address it was sent to the
     * user's (then answers the user and their new address); 400 VERIFICATION_TOKEN_INVALID
     * otherwise, 409 CONFLICT (nothing changed) when another account has that address.
     */
    async verify (token: string): Promise<{ userId: number, email: string } | null> {
      const { outcome, userId, email } = await users.verifyEmail(tokenDigest(token))
      if (outcome === 'invalid') throw new VerificationTokenInvalid()
      if (outcome === 'taken') throw new EmailTaken()
      return outcome === 'changed' ? { userId: userId!, email: email! } : null
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
