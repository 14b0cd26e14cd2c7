/**
 * How a message leaves: nodemailer over SMTP (`SMTP_URL`: STARTTLS, TLS and auth as
 * nodemailer reads the URL), or, without it (development), a file in `MAIL_DIR` and a log
 * line holding the text (its link included), so the flows can be followed with no set-up.
 */
import { mkdir, writeFile } from 'node:fs/promises'
import path from 'node:path'
import type { FastifyBaseLogger } from 'fastify'
import nodemailer from 'nodemailer'

/** What a message says; the sender adds `From` and the headers every message carries. */
export interface Message {
  to: string
  subject: string
  text: string
  html: string
}

/** Sends one message; resolves once it is accepted, rejects with why not (or once `signal` aborts, its connection closed). */
export interface MailTransport {
  send: (message: Message & { from: string, messageId: string, headers: Record<string, string> }, signal: AbortSignal) => Promise<void>
  close: () => void
}

/**
 * SMTP timeouts, ms: a server that accepts a connection and then says nothing fails this
 * soon. Each byte it sends restarts the idle one, so a server that trickles is ended by the
 * attempt's total deadline instead (SEND_DEADLINE_MS, ./sender.ts).
 */
export const SMTP_TIMEOUTS = { connectionTimeout: 10_000, greetingTimeout: 10_000, socketTimeout: 20_000 }

export function smtpTransport (url: string): MailTransport {
  const transporter = nodemailer.createTransport({ url, ...SMTP_TIMEOUTS })
  return {
    // nodemailer closes the connection when the signal aborts, whatever the phase.
    async send (message, signal) { await transporter.sendMail({ ...message, signal }) },
    close () { transporter.close() }
  }
}

/** Development: each message as a `.eml` file in `dir`, and its text in the log. */
export function localTransport (dir: string, log: FastifyBaseLogger): MailTransport {
  const transporter = nodemailer.createTransport({ streamTransport: true, buffer: true, newline: 'unix' })
  return {
    async send (message) {
      const info = await transporter.sendMail(message)
      await mkdir(dir, { recursive: true })
      const file = path.join(dir, `${new Date().toISOString().replace(/[:.]/g, '-')}-${message.messageId.replace(/[^A-Za-z0-9.-]/g, '')}.eml`)
      await writeFile(file, info.message as Buffer)
      // The one place a message's text (and so its link) is logged: there is no SMTP server,
      // and this is not production (src/config.ts refuses that).
      log.info({ to: message.to, subject: message.subject, file }, `E-mail not sent (no SMTP_URL), written to ${file}:\n${message.text}`)
    },
    close () { transporter.close() }
  }
}
