/**
 * A real SMTP server over TCP for the mail tests (the `smtp-server` package): STARTTLS
 * with a self-signed certificate made for the run, AUTH PLAIN/LOGIN required, every
 * accepted message parsed with `mailparser`. It can be stopped and started again on the
 * same port, told to refuse (`4xx` or `5xx` at DATA) or accept, and to answer slowly.
 */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { simpleParser, type ParsedMail } from 'mailparser'
import { SMTPServer } from 'smtp-server'

export const SINK_USER = 'sender'
export const SINK_PASSWORD = 'sink-password'

export interface Received {
  mail: ParsedMail
  /** The session was upgraded by STARTTLS before the message. */
  secure: boolean
  user: string | undefined
}

export interface SmtpSink {
  port: number
  /** SMTP_URL for the service: STARTTLS required, the test certificate accepted. */
  url: string
  received: Received[]
  /** `accept`, or refuse every message with this SMTP reply code. */
  refuse: (code: number | null) => void
  /** Answer each message's DATA only after this long (a slow server). */
  delay: (ms: number) => void
  /** Refused DATA commands so far. */
  refusals: number
  stop: () => Promise<void>
  start: () => Promise<void>
  /** Resolves once `count` messages are received (rejects after `timeoutMs`). */
  waitFor: (count: number, timeoutMs?: number) => Promise<Received[]>
}

/** A self-signed certificate for `localhost` (openssl), made once per process. */
function certificate (): { key: Buffer, cert: Buffer } {
  const dir = mkdtempSync(path.join(tmpdir(), 'smtp-cert-'))
  try {
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=localhost',
      '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem')], { stdio: 'ignore' })
    return { key: readFileSync(path.join(dir, 'key.pem')), cert: readFileSync(path.join(dir, 'cert.pem')) }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

interface Tap { teardown: (fn: () => unknown) => void }

export async function startSmtpSink (t: Tap): Promise<SmtpSink> {
  const tls = certificate()
  let refuseWith: number | null = null
  let delayMs = 0
  let server: SMTPServer | null = null
  let port = 0
  const sink: SmtpSink = {
    port: 0,
    url: '',
    received: [],
    refusals: 0,
    refuse (code) { refuseWith = code },
    delay (ms) { delayMs = ms },
    async stop () {
      const closing = server
      server = null
      if (closing !== null) await new Promise<void>((resolve) => { closing.close(() => { resolve() }) })
    },
    async start () {
      const created = new SMTPServer({
        ...tls,
        logger: false,
        authMethods: ['PLAIN', 'LOGIN'],
        onAuth (auth, _session, callback) {
          if (auth.username === SINK_USER && auth.password === SINK_PASSWORD) callback(null, { user: auth.username })
          else callback(new Error('Invalid username or password'))
        },
        onData (stream, session, callback) {
          const chunks: Buffer[] = []
          stream.on('data', (chunk: Buffer) => chunks.push(chunk))
          stream.on('end', () => { setTimeout(answer, delayMs) })
          function answer (): void {
            if (refuseWith !== null) {
              sink.refusals++
              const error = new Error(refuseWith >= 500 ? 'Refused for good (test sink)' : 'Try again later (test sink)') as Error & { responseCode: number }
              error.responseCode = refuseWith
              callback(error)
              return
            }
            simpleParser(Buffer.concat(chunks)).then((mail) => {
              sink.received.push({ mail, secure: session.secure, user: session.user as string | undefined })
              callback()
            }, callback)
          }
        }
      })
      await new Promise<void>((resolve, reject) => {
        created.once('error', reject)
        created.listen(port, '127.0.0.1', () => { resolve() })
      })
      created.on('error', () => {})
      port = (created.server.address() as AddressInfo).port
      sink.port = port
      sink.url = `smtp://${SINK_USER}:${SINK_PASSWORD}@127.0.0.1:${port}/?requireTLS=true&tls.rejectUnauthorized=false`
      server = created
    },
    async waitFor (count, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs
      while (sink.received.length < count) {
        if (Date.now() > deadline) throw new Error(`waited ${timeoutMs} ms for ${count} messages, got ${sink.received.length}`)
        await new Promise((resolve) => setTimeout(resolve, 25))
      }
      return sink.received
    }
  }
  await sink.start()
  t.teardown(async () => { await sink.stop() })
  return sink
}
