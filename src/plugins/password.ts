/**
 * Password hashing, off the event loop: bcrypt (bcryptjs, `$2b$`, the configured cost) in
 * a pool of worker threads (piscina) at a lower scheduling priority than the event loop
 * (src/plugins/password-worker.js). On the event loop, bcryptjs let 10 concurrent logins
 * take reads down to a few percent of their throughput; on libuv's pool at normal
 * priority (@node-rs/bcrypt), to 11-32%. bench/README.md, "Password hashing", has the
 * figures behind this choice.
 * bcrypt reads at most 72 bytes, so longer new passwords are refused (src/lib/password-rule.ts)
 * rather than silently truncated.
 */
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { Piscina } from 'piscina'

export interface PasswordHasher {
  hash: (password: string) => Promise<string>
  verify: (password: string, passwordHash: string) => Promise<boolean>
  /**
   * Spends the time of one verification without a stored hash, so that a login for an
   * unknown user takes as long as one with a wrong password.
   */
  verifyDummy: (password: string) => Promise<false>
  /** Tasks waiting for a worker thread (metrics: src/plugins/metrics.ts). */
  queueSize: () => number
  /** Calls `listener` after every task with its time in seconds, queue wait included. */
  onTask: (listener: TaskListener) => void
}

type TaskListener = (op: PasswordTask['op'], seconds: number) => void

declare module 'fastify' {
  interface FastifyInstance {
    passwords: PasswordHasher
  }
}

/** What the worker (src/plugins/password-worker.js) is asked to do. */
export type PasswordTask =
  | { op: 'hash', password: string, cost: number }
  | { op: 'verify', password: string, hash: string }

export interface PasswordHasherOptions {
  cost: number
  /** Worker threads hashing at once; by default one per CPU, at most 4. */
  threads?: number
  /** Nice value of the worker threads on Linux (0 to 19); 0 keeps normal priority. */
  nice?: number
}

const WORKER_FILE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'password-worker.js')

export async function createPasswordHasher (options: PasswordHasherOptions): Promise<PasswordHasher & { close: () => Promise<void> }> {
  const { cost } = options
  const threads = options.threads ?? Math.min(os.availableParallelism(), 4)
  const pool = new Piscina({ filename: WORKER_FILE, minThreads: threads, maxThreads: threads, execArgv: [], workerData: { nice: options.nice ?? 10 } })
  const listeners: TaskListener[] = []
  const run = async <T>(task: PasswordTask): Promise<T> => {
    if (listeners.length === 0) return await pool.run(task) as T
    const start = process.hrtime.bigint()
    try {
      return await pool.run(task) as T
    } finally {
      const seconds = Number(process.hrtime.bigint() - start) / 1e9
      for (const listener of listeners) listener(task.op, seconds)
    }
  }
  // Made in the background: awaiting it here would hold the app's start behind a worker
  // thread's start-up and one hash, which under load outlasted Fastify's plugin timeout.
  const dummyHash = run<string>({ op: 'hash', password: 'dummy password for timing', cost })
  dummyHash.catch(() => {}) // a pool closed before it finished; verifyDummy would rethrow
  return {
    hash: async (password) => await run<string>({ op: 'hash', password, cost }),
    verify: async (password, passwordHash) => await run<boolean>({ op: 'verify', password, hash: passwordHash }),
    verifyDummy: async (password) => { await run<boolean>({ op: 'verify', password, hash: await dummyHash }); return false },
    queueSize: () => pool.queueSize,
    onTask: (listener) => { listeners.push(listener) },
    close: async () => { await pool.destroy() }
  }
}

/** The auth settings' `bcryptCost` (BCRYPT_COST). */
export interface PasswordPluginOptions extends Omit<PasswordHasherOptions, 'cost'> {
  bcryptCost: number
}

async function passwordPlugin (app: FastifyInstance, options: PasswordPluginOptions): Promise<void> {
  const { close, ...hasher } = await createPasswordHasher({ ...options, cost: options.bcryptCost })
  app.decorate('passwords', hasher)
  app.addHook('onClose', close)
}

export default fp(passwordPlugin, { name: 'passwords', fastify: '5.x' })
