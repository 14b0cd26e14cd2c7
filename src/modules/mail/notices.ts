/**
 * Security notices: the account's address is told of each change that adds, removes or
 * replaces a way to sign in, so that an owner whose session was stolen learns of it
 * (docs/api.md, "Notices"). The module that makes the change writes the outbox row in the
 * change's own transaction (`SECURITY_NOTICE_KIND`, a `SecurityNotice` payload); it is
 * rendered here when it is sent. The notice of a change of address is the users module's
 * (src/modules/users/email-verification.ts).
 */
import { escapeHtml } from '../../lib/link-token.js'
import type { Prepared } from './sender.js'

export const SECURITY_NOTICE_KIND = 'security-notice'
/** A notice not delivered within this long after its change is not worth sending, ms. */
export const SECURITY_NOTICE_WINDOW_MS = 24 * 3_600_000

export type SecurityEvent = 'passkey-added' | 'totp-enabled' | 'totp-disabled' | 'recovery-codes-replaced'

export interface SecurityNotice {
  event: SecurityEvent
  /** The account's address when the change was made. */
  to: string
  username: string
  /** The new passkey's name. */
  name?: string
}

const WHAT: Record<SecurityEvent, { subject: string, happened: (notice: SecurityNotice) => string }> = {
  'passkey-added': { subject: 'A passkey was added to your account', happened: (n) => `A passkey named "${n.name ?? ''}" was added to the account ${n.username}: it can sign in to it from now on.` },
  'totp-enabled': { subject: 'Two-step login was turned on', happened: (n) => `Two-step login (an authenticator app) was turned on for the account ${n.username}, with new recovery codes.` },
  'totp-disabled': { subject: 'Two-step login was turned off', happened: (n) => `Two-step login was turned off for the account ${n.username}: the password alone signs in again, and its recovery codes no longer work.` },
  'recovery-codes-replaced': { subject: 'New recovery codes were made', happened: (n) => `New recovery codes were made for the account ${n.username}; the old ones no longer work.` }
}

const ADVICE = 'If this was not you, someone else may be using your account: reset your password (it ends every session), then look at the Security section for passkeys and two-step login you do not know.'

/** The message of a notice. */
export async function prepareSecurityNotice (payload: unknown): Promise<Prepared> {
  const notice = payload as SecurityNotice
  const what = WHAT[notice.event]
  const happened = what.happened(notice)
  return {
    message: {
      to: notice.to,
      subject: what.subject,
      text: `${happened}\n\n${ADVICE}\n`,
      html: `<p>${escapeHtml(happened)}</p><p>${escapeHtml(ADVICE)}</p>`
    }
  }
}
