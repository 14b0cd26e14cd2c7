/**
 * `build(t)`: the service as `npm start` builds it (same options builder, same plugins),
 * on a database of its own, closed at teardown. Limits are set here, not read from the
 * environment, so a developer's `.env` cannot change what the tests see.
 */
import { appendFileSync } from 'node:fs'
import type { ServerResponse } from 'node:http'
import path from 'node:path'
import type { FastifyInstance, InjectOptions } from 'fastify'
import { buildApp, type Tuning } from '../../src/app.js'
import { loadConfig, type Config } from '../../src/config.js'
import { createTestDatabase, query } from './database.js'

export const TEST_SECRET = 'test-secret-that-is-long-enough-for-hs256-0123456789'

export const TEST_ENV: Record<string, string> = {
  NODE_ENV: 'test',
  LOG_LEVEL: 'silent',
  SECRET: TEST_SECRET,
  BCRYPT_COST: '4',
  RATE_LIMIT_AUTH_MAX: '1000',
  RATE_LIMIT_SECOND_STEP_MAX: '1000',
  // No load shedding: on a shared machine a starved test process could shed the requests
  // another test measures; test/operations/load-shedding.test.ts turns it on.
  MAX_EVENT_LOOP_DELAY_MS: '0',
  // Tests refresh right after logging in; test/quotas.test.ts sets its own interval.
  REFRESH_MIN_INTERVAL_MS: '0',
  // Two keys as `openssl rand -base64 32` makes them (weak keys stop the service).
  ADMIN_API_KEYS: 'cQXHu+OADM8lmuQm07Z89qTn09F5X/SLMMaTFhU+hQs=,6uk+AOEMsMv6XC/mmfvyTsIKCaoFHb/VAsagZiOsTvE='
}

export interface TestApp extends FastifyInstance {
  config: Config
  databaseUrl: string
}

interface Tap { teardown: (fn: () => unknown) => void }

export interface BuildOptions {
  /** Variables on top of TEST_ENV. */
  env?: Record<string, string>
  /** Use this database instead of a fresh one. */
  databaseUrl?: string
  /** Read the logs (set `env.LOG_LEVEL` too). */
  logStream?: NodeJS.WritableStream
  /** The plugins' constants that no variable sets (src/app.ts, `Tuning`). */
  tuning?: Tuning
}

export async function build (t: Tap, options: BuildOptions = {}): Promise<TestApp> {
  const config = loadConfig({ ...TEST_ENV, ...options.env }, false)
  const url = options.databaseUrl ?? await createTestDatabase(t)
  // E-mail (a registration's verification, a reset) stays in the outbox unless a test sends
  // it (tuning.mail): the other tests neither pay for it nor see its queries.
  const tuning = { mail: { paused: true }, ...options.tuning }
  const app = await buildApp({ config, databaseUrl: url, logStream: options.logStream, tuning }) as TestApp
  app.config = config
  app.databaseUrl = url
  if (process.env.TEST_PROBLEM_LOG) recordProblems(app)
  t.teardown(async () => { await app.close() })
  await app.ready()
  return app
}

/** The problem answers of this process, as `[method, path, status, code]` lines. */
const answers: string[] = []
// Written once, as the process ends: the timing-sensitive tests pay no write per answer.
process.once('exit', () => { if (answers.length > 0) appendFileSync(path.join(process.env.TEST_PROBLEM_LOG!, `${process.pid}.jsonl`), answers.join('\n') + '\n') })

/**
 * Records every problem answer of `app` in TEST_PROBLEM_LOG/<pid>.jsonl: those of `inject`,
 * and those of a socket, refusals before routing included (a listener put before the app's
 * own). The code is read from the JSON, or from the page a browser gets
 * (src/plugins/error-handler.ts). scripts/problem-codes.ts compares them with the codes the
 * OpenAPI document lists per operation.
 */
function recordProblems (app: FastifyInstance): void {
  const record = (method: string, url: string, status: number, body: () => string) => {
    if (status < 400) return
    const code = /"code":"([A-Z_]+)"|Error <code>([A-Z_]+)<\/code>/.exec(body())?.slice(1).find(Boolean)
    if (code !== undefined) answers.push(JSON.stringify([method, url.split('?')[0], status, code]))
  }
  const inject = app.inject.bind(app) as (options: InjectOptions | string) => ReturnType<FastifyInstance['inject']>
  app.inject = (async (options: InjectOptions | string) => {
    const response = await inject(options)
    record(response.raw.req.method ?? 'GET', response.raw.req.url ?? '/', response.statusCode, () => response.body)
    return response
  }) as FastifyInstance['inject']
  app.server.prependListener('request', (request, response: ServerResponse) => {
    const end = response.end.bind(response) as (...args: unknown[]) => ServerResponse
    response.end = ((...args: unknown[]) => {
      const chunk = args[0]
      if (typeof chunk === 'string' || Buffer.isBuffer(chunk)) record(request.method ?? 'GET', request.url ?? '/', response.statusCode, () => String(chunk))
      return end(...args)
    }) as ServerResponse['end']
  })
}

let counter = 0
/** A unique, valid registration body. */
export function newUser (overrides: Partial<{ username: string, email: string, password: string }> = {}) {
  counter += 1
  const tag = `${process.pid}x${counter}x${Math.random().toString(36).slice(2, 7)}`
  return { username: `user_${tag}`, email: `user_${tag}@example.com`, password: 'correct horse battery', ...overrides }
}

export interface Session {
  id: number
  username: string
  email: string
  password: string
  token: string
  /** The session's refresh token (token mode). */
  refreshToken: string
  /** The session id (the token's `sid` claim). */
  sid: string
  auth: { authorization: string }
}

/** Registers a user and logs in: the id, the credentials and a bearer header. */
export async function registerAndLogin (app: FastifyInstance, overrides: Parameters<typeof newUser>[0] = {}): Promise<Session> {
  const body = newUser(overrides)
  const created = await app.inject({ method: 'POST', url: '/api/user', payload: body })
  if (created.statusCode !== 201) throw new Error(`register failed: ${created.statusCode} ${created.body}`)
  const login = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: body.username, password: body.password } })
  if (login.statusCode !== 200) throw new Error(`login failed: ${login.statusCode} ${login.body}`)
  const { token, refreshToken } = login.json() as { token: string, refreshToken: string }
  const sid = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()).sid as string
  return { ...body, id: created.json().id, token, refreshToken, sid, auth: { authorization: `Bearer ${token}` } }
}

/**
 * Marks user `id`'s address verified, as its link would, but keeps its sessions (a first
 * verification ends them): for tests that add a factor (only an account with a verified
 * address may) for reasons of their own.
 */
export async function markVerified (app: FastifyInstance, id: number): Promise<void> {
  await query(app, 'UPDATE users SET email_verified_at = now() WHERE id = $1', [id])
}

/** `registerAndLogin`, with the address verified (`markVerified`). */
export async function verifiedUser (app: FastifyInstance, overrides: Parameters<typeof newUser>[0] = {}): Promise<Session> {
  const session = await registerAndLogin(app, overrides)
  await markVerified(app, session.id)
  return session
}

/** `app.inject` with the session's bearer token. */
export async function injectAs (app: FastifyInstance, session: Session, options: InjectOptions) {
  return await app.inject({ ...options, headers: { ...options.headers, ...session.auth } })
}
