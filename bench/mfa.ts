/**
 * Second factors against the real service (src/server.ts, production settings, bcrypt cost
 * 10), in the same run:
 *   1. logins a second, password only (POST /api/auth/login: 200) against password + TOTP
 *      (POST /api/auth/login: 202, then POST /api/auth/mfa/totp with an otplib code: 200),
 *      MFA_CONNECTIONS logins in flight, the two cases interleaved over MFA_PASSES passes of
 *      MFA_SECONDS each, with the ratio within each pass;
 *   2. passwordless passkey sign-in (POST /api/auth/passkey/options, the software
 *      authenticator's assertion, POST /api/auth/passkey/login): p50/p99 of the pair, and
 *      sign-ins a second, at the same concurrency.
 *
 *   npx tsx bench/mfa.ts                  2 passes of 5 s per case (~1.5 min with the set-up)
 *   MFA_SECONDS=10 MFA_PASSES=3 BENCH_WRITE=0 npx tsx bench/mfa.ts
 */
import path from 'node:path'
import { generateSync } from 'otplib'
import { SoftAuthenticator } from '../test/helpers/soft-authenticator.js'
import { benchDatabase } from './lib/database.js'
import { describeMachine, formatLoad, machine } from './lib/machine.js'
import { ROOT, startServer } from './lib/processes.js'
import { formatMs, markdownTable, median, percent, writeSection } from './lib/report.js'
import { BENCH_PASSWORD, serviceEnv } from './lib/service.js'

const SECONDS = Number(process.env.MFA_SECONDS ?? 5)
const PASSES = Number(process.env.MFA_PASSES ?? 2)
const CONNECTIONS = Number(process.env.MFA_CONNECTIONS ?? 10)
const WRITE = process.env.BENCH_WRITE !== '0'
const ORIGIN = 'http://localhost:3000'
const STEP_SECONDS = 30

interface Reply { status: number, data: any }

async function post (base: string, url: string, body: unknown, token?: string): Promise<Reply> {
  const headers: Record<string, string> = { 'content-type': 'application/json' }
  if (token !== undefined) headers.authorization = `Bearer ${token}`
  const res = await fetch(base + url, { method: 'POST', headers, body: JSON.stringify(body) })
  const text = await res.text()
  return { status: res.status, data: text === '' ? undefined : JSON.parse(text) }
}

function expect (what: string, reply: Reply, status: number): Reply {
  if (reply.status !== status) throw new Error(`${what}: ${reply.status} ${JSON.stringify(reply.data)}, expected ${status}`)
  return reply
}

interface BenchAccount { username: string, secret?: string, authenticator?: SoftAuthenticator, lastStep: number }

/** `count` accounts, `setup` more for each after the password login; CONNECTIONS at a time. */
async function accounts (base: string, tag: string, count: number, setup: (account: BenchAccount, token: string) => Promise<void>): Promise<BenchAccount[]> {
  const out: BenchAccount[] = []
  let next = 0
  await Promise.all(Array.from({ length: CONNECTIONS }, async () => {
    while (next < count) {
      const username = `mfa_${tag}_${next++}`
      expect('register', await post(base, '/api/user', { username, email: `${username}@example.com`, password: BENCH_PASSWORD }), 201)
      const login = expect('login', await post(base, '/api/auth/login', { username, password: BENCH_PASSWORD }), 200)
      const account: BenchAccount = { username, lastStep: 0 }
      await setup(account, login.data.token)
      out.push(account)
    }
  }))
  return out
}

const step = (): number => Math.floor(Date.now() / 1000 / STEP_SECONDS)

/** CONNECTIONS workers repeat `job` for SECONDS (a wrong answer throws: the bench stops): each job's duration, ms. */
async function closedLoop (job: () => Promise<void>): Promise<{ durations: number[], seconds: number }> {
  const durations: number[] = []
  const started = performance.now()
  const end = started + SECONDS * 1000
  await Promise.all(Array.from({ length: CONNECTIONS }, async () => {
    while (performance.now() < end) {
      const t0 = performance.now()
      await job()
      durations.push(performance.now() - t0)
    }
  }))
  return { durations, seconds: (performance.now() - started) / 1000 }
}

const quantile = (values: number[], q: number): number => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(q * values.length))]!

const database = await benchDatabase()
const service = await startServer({
  entry: 'src/server.ts',
  // No load shedding (a busy shared machine delays the event loop past its bound: 503s), and
  // no per-account failure budget in the way: every code sent is right.
  env: serviceEnv(database.url, { PUBLIC_URL: ORIGIN, MAX_EVENT_LOOP_DELAY_MS: '0' }),
  readyPath: '/health/live'
})
try {
  const base = service.url
  const setupStarted = Date.now()
  // The service takes each TOTP time step once per account (a code of that step or an earlier
  // one is refused after), accepting one step either side: enough accounts that the workers
  // rarely wait for a fresh step (the login rate at cost 10 is ~20/s on 2 cores).
  const mfaUsers = await accounts(base, `t${process.pid}`, Math.ceil(25 * SECONDS * PASSES), async (account, token) => {
    const enrol = expect('totp', await post(base, '/api/security/totp', {}, token), 200)
    account.secret = enrol.data.secret as string
    account.lastStep = step()
    expect('confirm', await post(base, '/api/security/totp/confirm', { code: generateSync({ secret: account.secret, epoch: account.lastStep * STEP_SECONDS }) }, token), 200)
    const authenticator = new SoftAuthenticator()
    const options = expect('passkey options', await post(base, '/api/security/passkey/options', {}, token), 200)
    expect('passkey', await post(base, '/api/security/passkeys', { response: authenticator.register(options.data, ORIGIN) }, token), 201)
    account.authenticator = authenticator
  })
  const plainUsers = await accounts(base, `p${process.pid}`, 20, async () => {})
  const setupSeconds = (Date.now() - setupStarted) / 1000

  let nextPlain = 0
  const passwordOnly = async (): Promise<void> => {
    const user = plainUsers[nextPlain++ % plainUsers.length]!
    expect('login', await post(base, '/api/auth/login', { username: user.username, password: BENCH_PASSWORD }), 200)
  }
  let waited = 0
  // The next step an account can use: after its last one, this step or the next.
  const usable = (account: BenchAccount): number | null => {
    const next = Math.max(account.lastStep + 1, step())
    return next <= step() + 1 ? next : null
  }
  let nextTotp = 0
  const withTotp = async (): Promise<void> => {
    let user: BenchAccount | undefined
    let at: number | null = null
    for (;;) {
      for (let i = 0; i < mfaUsers.length && at === null; i++) {
        user = mfaUsers[nextTotp++ % mfaUsers.length]!
        at = usable(user)
      }
      if (at !== null) break
      waited++
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    user!.lastStep = at
    const first = expect('login', await post(base, '/api/auth/login', { username: user!.username, password: BENCH_PASSWORD }), 202)
    expect('mfa/totp', await post(base, '/api/auth/mfa/totp', { mfaToken: first.data.mfaToken, code: generateSync({ secret: user!.secret!, epoch: at * STEP_SECONDS }) }), 200)
  }
  let nextKey = 0
  const passkey = async (): Promise<void> => {
    const user = mfaUsers[nextKey++ % mfaUsers.length]!
    const options = expect('passkey options', await post(base, '/api/auth/passkey/options', {}), 200)
    expect('passkey login', await post(base, '/api/auth/passkey/login', { response: user.authenticator!.authenticate(options.data, ORIGIN) }), 200)
  }

  interface Figures { perSecond: number, p50: number, p99: number, count: number }
  const figures = (run: { durations: number[], seconds: number }): Figures =>
    ({ perSecond: run.durations.length / run.seconds, p50: quantile(run.durations, 0.5), p99: quantile(run.durations, 0.99), count: run.durations.length })
  const passes: Array<{ load: number[], password: Figures, totp: Figures, passkey: Figures }> = []
  for (let pass = 0; pass < PASSES; pass++) {
    const load = machine().load
    // Alternate which goes first, so that neither always follows the other's tail.
    const order = pass % 2 === 0 ? ['password', 'totp'] as const : ['totp', 'password'] as const
    const result: Partial<Record<'password' | 'totp' | 'passkey', Figures>> = {}
    for (const name of order) {
      result[name] = figures(await closedLoop(name === 'password' ? passwordOnly : withTotp))
      await new Promise((resolve) => setTimeout(resolve, 1500))
    }
    result.passkey = figures(await closedLoop(passkey))
    await new Promise((resolve) => setTimeout(resolve, 1500))
    passes.push({ load, password: result.password!, totp: result.totp!, passkey: result.passkey! })
  }

  const m = machine()
  const med = (pick: (p: typeof passes[number]) => number): number => median(passes.map(pick))
  const rate = (n: number): string => n.toFixed(1)
  const report = [
    `Measured ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC on ${describeMachine(m)}; load average at the start of each pass: ${passes.map((p) => formatLoad(p.load)).join('; ')}; at the end: ${formatLoad(m.load)}.`,
    `Command: \`${[['MFA_SECONDS', SECONDS, 5], ['MFA_PASSES', PASSES, 2], ['MFA_CONNECTIONS', CONNECTIONS, 10]].filter(([, v, d]) => v !== d).map(([k, v]) => `${k}=${v} `).join('')}npx tsx bench/mfa.ts\` (${PASSES} pass${PASSES === 1 ? '' : 'es'} of ${SECONDS} s per case, ${CONNECTIONS} in flight, bcrypt cost 10; ${mfaUsers.length} accounts with TOTP and a passkey, ${plainUsers.length} without, set up in ${setupSeconds.toFixed(0)} s; ${database.description}).`,
    '',
    markdownTable(['case', 'sign-ins/s (median)', 'per pass', 'HTTP requests/s', 'p50 ms', 'p99 ms'], [
      ['password only (login: 200)', rate(med((p) => p.password.perSecond)), passes.map((p) => rate(p.password.perSecond)).join(' / '), rate(med((p) => p.password.perSecond)), formatMs(med((p) => p.password.p50)), formatMs(med((p) => p.password.p99))],
      ['password + TOTP (login: 202, mfa/totp: 200)', rate(med((p) => p.totp.perSecond)), passes.map((p) => rate(p.totp.perSecond)).join(' / '), rate(2 * med((p) => p.totp.perSecond)), formatMs(med((p) => p.totp.p50)), formatMs(med((p) => p.totp.p99))],
      ['passkey, passwordless (options + login)', rate(med((p) => p.passkey.perSecond)), passes.map((p) => rate(p.passkey.perSecond)).join(' / '), rate(2 * med((p) => p.passkey.perSecond)), formatMs(med((p) => p.passkey.p50)), formatMs(med((p) => p.passkey.p99))]
    ]),
    '',
    `Within each pass, password + TOTP / password only: ${passes.map((p) => percent(p.totp.perSecond / p.password.perSecond)).join(' / ')} of the sign-ins a second; passkey / password only: ${passes.map((p) => `${(p.passkey.perSecond / p.password.perSecond).toFixed(1)}x`).join(' / ')}.` +
      (waited > 0 ? ` The TOTP workers waited ${waited} times for an account with a fresh time step.` : '')
  ].join('\n')
  console.log(`\n${report}`)
  if (WRITE) writeSection(path.join(ROOT, 'bench', 'README.md'), 'mfa', report)
} finally {
  await service.stop()
  await database.drop()
}
