/**
 * The service under load: its production settings for the bench, a pool of users with
 * tokens, and the autocannon request definitions of each case.
 */
import type { AddressInfo } from 'node:net'
import type autocannon from 'autocannon'
import { SMTPServer } from 'smtp-server'

export const BENCH_SECRET = 'bench-secret-0123456789-abcdefghijklmnopqrstuvwxyz'
export const BENCH_PASSWORD = 'correct horse battery staple'

// Registrations e-mail a verification link: an SMTP server that accepts and discards every
// message, in this process, so the service's sender delivers at once rather than retrying
// in the background of the measurements.
const mailSink = new SMTPServer({ authOptional: true, disabledCommands: ['STARTTLS', 'AUTH'], logger: false, onData (stream, _session, callback) { stream.resume(); stream.on('end', () => { callback() }) } })
await new Promise<void>((resolve) => { mailSink.listen(0, '127.0.0.1', resolve) })
mailSink.server.unref()
const MAIL_SINK_URL = `smtp://127.0.0.1:${(mailSink.server.address() as AddressInfo).port}`

/**
 * Production settings: NODE_ENV=production, logs at info (pino on stdout, which the
 * bench sends to a file), bcrypt cost 10, the default pool size. Only the rate limit of
 * registration and login is raised and the refresh interval lifted, or the login and refresh
 * cases would measure 429s, the sessions per user raised (see below), and the per-client
 * share of the in-flight cap is off: the load generator is one address standing for many
 * clients (bench/slow-clients.ts measures it).
 */
export function serviceEnv (databaseUrl: string, overrides: Record<string, string> = {}): Record<string, string> {
  return {
    NODE_ENV: 'production',
    SECRET: BENCH_SECRET,
    // Required in production: the sink above.
    SMTP_URL: MAIL_SINK_URL,
    PUBLIC_URL: 'http://localhost:3000',
    DATABASE_URL: databaseUrl,
    LOG_LEVEL: 'info',
    BCRYPT_COST: '10',
    RATE_LIMIT_AUTH_MAX: '1000000000',
    LOAD_SHED_MAX_IN_FLIGHT_PER_CLIENT: '0',
    MIGRATE_ON_START: 'false', // the bench migrated its database already
    // The pool's tokens are made once and read in every pass: they must outlive the bench.
    ACCESS_TOKEN_TTL: '2h',
    // The refresh case rotates each session as fast as it can: it measures the rotation, not
    // the 429 of REFRESH_MIN_INTERVAL_MS.
    REFRESH_MIN_INTERVAL_MS: '0',
    // The login cases log the pool's users in thousands of times: at the default cap (10
    // live sessions per user) each login would end the session whose token the reads use,
    // and the reads would measure 401s.
    SESSIONS_MAX_PER_USER: '1000',
    ...overrides
  }
}

export interface BenchUser {
  id: number
  username: string
  token: string
  /** The session's refresh token (absent from trees older than sessions). */
  refreshToken?: string
}

/** The access-token cookie of browser sessions in production (COOKIE_SECURE=true). */
export const ACCESS_COOKIE = '__Secure-access_token'

/**
 * POSTs JSON; a 503 (the service sheds load while a busy machine delays its event loop, as
 * right after it starts) is retried after its Retry-After, up to 10 times.
 */
async function postJson (url: string, body: unknown): Promise<{ status: number, json: Record<string, unknown> }> {
  for (let attempt = 1; ; attempt++) {
    const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
    const json = await response.json() as Record<string, unknown>
    if (response.status !== 503 || attempt === 10) return { status: response.status, json }
    await new Promise((resolve) => setTimeout(resolve, 1000 * Number(response.headers.get('retry-after') ?? 1)))
  }
}

/** Registers `count` users (or finds them registered) and logs each in. */
export async function userPool (baseUrl: string, count: number, tag = 'pool'): Promise<BenchUser[]> {
  const users: BenchUser[] = []
  for (let i = 0; i < count; i++) {
    const username = `bench_${tag}_${i}`
    const created = await postJson(`${baseUrl}/api/user`, { username, email: `${username}@example.com`, password: BENCH_PASSWORD })
    if (created.status !== 201 && created.status !== 409) throw new Error(`register ${username}: ${created.status} ${JSON.stringify(created.json)}`)
    const login = await postJson(`${baseUrl}/api/auth/login`, { username, password: BENCH_PASSWORD })
    if (login.status !== 200) throw new Error(`login ${username}: ${login.status} ${JSON.stringify(login.json)}`)
    users.push({ id: Number(login.json.userId), username, token: String(login.json.token), refreshToken: login.json.refreshToken as string | undefined })
  }
  return users
}

function roundRobin<T> (items: readonly T[]): () => T {
  let next = 0
  return () => items[next++ % items.length]!
}

/** GET /api/user/:id, each request as the next user of the pool with that user's token. */
export function getUserRequests (users: readonly BenchUser[]): autocannon.Request[] {
  const next = roundRobin(users)
  return [{
    method: 'GET',
    setupRequest: (request) => {
      const user = next()
      return { ...request, path: `/api/user/${user.id}`, headers: { ...request.headers, authorization: `Bearer ${user.token}` } }
    }
  }]
}

/** The same, with the token in the access cookie as a browser sends it (no Authorization header). */
export function getUserCookieRequests (users: readonly BenchUser[]): autocannon.Request[] {
  const next = roundRobin(users)
  return [{
    method: 'GET',
    setupRequest: (request) => {
      const user = next()
      return { ...request, path: `/api/user/${user.id}`, headers: { ...request.headers, cookie: `${ACCESS_COOKIE}=${user.token}` } }
    }
  }]
}

/**
 * POST /api/auth/refresh-token in token mode: a queue of live refresh tokens, one per session
 * (as many sessions as connections); a request takes one, its answer puts the new one back,
 * so no token is ever sent twice (a reuse would revoke the session: 401s, shown as non-2xx).
 * Not autocannon's per-connection context: it is reset after each pass over `requests`.
 */
export function refreshRequests (sessions: readonly BenchUser[]): autocannon.Request[] {
  const live = sessions.map((s) => s.refreshToken!)
  return [{
    method: 'POST',
    path: '/api/auth/refresh-token',
    headers: { 'content-type': 'application/json' },
    setupRequest: (request) => ({ ...request, body: JSON.stringify({ refreshToken: live.shift() ?? 'none-left' }) }),
    onResponse: (status, body) => {
      if (status === 200) live.push((JSON.parse(body) as { refreshToken: string }).refreshToken)
    }
  }]
}

/** The raw-pg reference reads the same rows. */
export function rawPgRequests (users: readonly BenchUser[]): autocannon.Request[] {
  const next = roundRobin(users)
  return [{ method: 'GET', setupRequest: (request) => ({ ...request, path: `/user/${next().id}` }) }]
}

const json = { 'content-type': 'application/json' }

/** POST /api/auth/login with the right password, as the next user of the pool. */
export function loginRequests (users: readonly BenchUser[]): autocannon.Request[] {
  const next = roundRobin(users)
  return [{
    method: 'POST',
    path: '/api/auth/login',
    headers: json,
    setupRequest: (request) => ({ ...request, body: JSON.stringify({ username: next().username, password: BENCH_PASSWORD }) })
  }]
}

/** POST /api/user with a new username and e-mail on every request. */
export function registerRequests (tag: string): autocannon.Request[] {
  let counter = 0
  return [{
    method: 'POST',
    path: '/api/user',
    headers: json,
    setupRequest: (request) => {
      const username = `bench_${tag}_${++counter}`
      return { ...request, body: JSON.stringify({ username, email: `${username}@example.com`, password: BENCH_PASSWORD }) }
    }
  }]
}
