/**
 * The password-hashing variants bench/bcrypt.ts compares, each behind the service's
 * PasswordHasher interface so the real service can run with any of them.
 */
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { hash as nativeHash, verify as nativeVerify } from '@node-rs/bcrypt'
import bcryptjs from 'bcryptjs'
import { Piscina } from 'piscina'
import { createPasswordHasher, type PasswordHasher } from '../../src/plugins/password.js'
import type { Task, WorkerSettings } from './bcrypt-worker.js'

export const VARIANTS = {
  'bcryptjs-main': 'bcryptjs, async API, on the event loop',
  'bcryptjs-pool': 'bcryptjs in piscina, 2 threads',
  service: 'the service as shipped (src/plugins/password.ts): bcryptjs in piscina, 2 threads at nice 10',
  'node-rs': '@node-rs/bcrypt async (libuv pool, 4 threads): the previous hasher',
  'node-rs-pool': '@node-rs/bcrypt sync in piscina, 2 threads',
  'node-rs-pool-nice': '@node-rs/bcrypt sync in piscina, 2 threads at nice 10'
} as const
export type Variant = keyof typeof VARIANTS

export const POOL_THREADS = 2
export const POOL_NICE = 10

export interface BenchHasher extends PasswordHasher {
  close: () => Promise<void>
}

const here = path.dirname(fileURLToPath(import.meta.url))
const workerFile = path.join(here, `bcrypt-worker${path.extname(fileURLToPath(import.meta.url))}`)

function pooled (settings: WorkerSettings, cost: number): Omit<BenchHasher, 'verifyDummy' | 'queueSize' | 'onTask'> {
  const pool = new Piscina({ filename: workerFile, minThreads: POOL_THREADS, maxThreads: POOL_THREADS, workerData: settings })
  return {
    hash: async (password) => await pool.run({ op: 'hash', password, cost } satisfies Task) as string,
    verify: async (password, hash) => await pool.run({ op: 'verify', password, hash } satisfies Task) as boolean,
    close: async () => { await pool.destroy() }
  }
}

export async function createHasher (variant: Variant, cost: number): Promise<BenchHasher> {
  let base: Omit<BenchHasher, 'verifyDummy' | 'queueSize' | 'onTask'>
  switch (variant) {
    case 'bcryptjs-main':
      base = {
        hash: async (password) => await bcryptjs.hash(password, cost),
        verify: async (password, hash) => await bcryptjs.compare(password, hash),
        close: async () => {}
      }
      break
    case 'bcryptjs-pool': base = pooled({ library: 'bcryptjs', nice: 0 }, cost); break
    case 'node-rs':
      base = {
        hash: async (password) => await nativeHash(password, cost),
        verify: async (password, hash) => await nativeVerify(password, hash),
        close: async () => {}
      }
      break
    case 'node-rs-pool': base = pooled({ library: 'node-rs', nice: 0 }, cost); break
    case 'node-rs-pool-nice': base = pooled({ library: 'node-rs', nice: POOL_NICE }, cost); break
    case 'service': return await createPasswordHasher({ cost, threads: POOL_THREADS, nice: POOL_NICE })
  }
  const dummyHash = await base.hash('dummy password for timing')
  // No queue to report and no timings: these variants run only in the bcrypt bench.
  return { ...base, verifyDummy: async (password) => { await base.verify(password, dummyHash); return false }, queueSize: () => 0, onTask: () => {} }
}

export function isVariant (name: string): name is Variant {
  return Object.hasOwn(VARIANTS, name)
}
