/**
 * A real Redis for the tests, never a mock:
 * - `testRedis(t)`: a key prefix of this test's own on a shared Redis (TEST_REDIS_URL, else
 *   the machine's 127.0.0.1:6379 when it answers, else a redis-server of our own), its keys
 *   deleted at teardown;
 * - `redisServer(t)`: a throwaway redis-server of our own on a free port (no persistence),
 *   for the tests that stop and restart it; the shared one is never stopped.
 * Without Redis, in CI the test fails with a message that says what to install; elsewhere
 * (a developer's machine with no Redis) it is skipped with that message.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { Redis } from 'ioredis'
import type { Test } from 'tap'
import { freePort } from '../../src/db/embedded.js'

type Tap = Pick<Test, 'teardown' | 'plan'>

export const NO_REDIS_MESSAGE = 'These tests need Redis: install the redis-server package (Debian: `apt-get install redis-server`) or set TEST_REDIS_URL'

export interface TestRedis {
  /** The URL to give the app (REDIS_URL). */
  url: string
  /** A key prefix no other test uses (REDIS_KEY_PREFIX). */
  prefix: string
  /** A client without prefix, to look at the keys behind the app's back. */
  client: Redis
}

/** Whether a Redis answers PING at `url` within `timeoutMs`. */
export async function redisAnswersAt (url: string, timeoutMs = 500): Promise<boolean> {
  const client = new Redis(url, { connectTimeout: timeoutMs, commandTimeout: timeoutMs, maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true })
  client.on('error', () => {})
  try {
    await client.connect()
    return (await client.ping()) === 'PONG'
  } catch {
    return false
  } finally {
    client.disconnect()
  }
}

export function redisServerBinary (): string | undefined {
  const found = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' })
  const path = found.stdout.trim()
  return found.status === 0 && path !== '' ? path : undefined
}

/** Fails (CI) or skips (elsewhere) the test; returns false so callers can `return`. */
function noRedis (t: Tap): false {
  if (process.env.CI) throw new Error(NO_REDIS_MESSAGE)
  t.plan(0, `skipped: ${NO_REDIS_MESSAGE}`)
  return false
}

let sharedUrl: Promise<string | undefined> | undefined

/** A shared Redis for this test file: TEST_REDIS_URL, the machine's, or our own server. */
async function sharedRedisUrl (t: Tap): Promise<string | undefined> {
  sharedUrl ??= (async () => {
    if (process.env.TEST_REDIS_URL) return process.env.TEST_REDIS_URL
    if (await redisAnswersAt('redis://127.0.0.1:6379')) return 'redis://127.0.0.1:6379'
    return undefined
  })()
  const url = await sharedUrl
  if (url !== undefined) return url
  if (redisServerBinary() === undefined) return undefined
  return (await redisServer(t)).url
}

/** A prefix of our own on a real Redis, cleaned at teardown; undefined when skipped. */
export async function testRedis (t: Tap): Promise<TestRedis | undefined> {
  const url = await sharedRedisUrl(t)
  if (url === undefined) return noRedis(t) || undefined
  const prefix = `ups-test:${process.pid}-${randomBytes(4).toString('hex')}:`
  const client = new Redis(url, { maxRetriesPerRequest: 1 })
  t.teardown(async () => {
    await deleteKeys(client, prefix).catch(() => {})
    client.disconnect()
  })
  return { url, prefix, client }
}

/** Deletes every key under `prefix`. */
export async function deleteKeys (client: Redis, prefix: string): Promise<void> {
  let cursor = '0'
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500)
    if (keys.length > 0) await client.del(...keys)
    cursor = next
  } while (cursor !== '0')
}

export interface RedisServer {
  url: string
  port: number
  /** Kills the server (SIGKILL: as abrupt as a crash) and waits until it has exited. */
  stop: () => Promise<void>
  /** Starts it again on the same port (empty: no persistence). */
  start: () => Promise<void>
}

/** A redis-server of our own on a free port, killed at teardown; fails (CI) or skips without the binary. */
export async function redisServer (t: Tap): Promise<RedisServer> {
  const binary = redisServerBinary()
  if (binary === undefined) {
    noRedis(t)
    throw new Error(NO_REDIS_MESSAGE)
  }
  const port = await freePort()
  const url = `redis://127.0.0.1:${port}`
  let child: ChildProcess | undefined

  async function start (): Promise<void> {
    const proc = spawn(binary as string, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--protected-mode', 'no'], { stdio: ['ignore', 'ignore', 'pipe'] })
    child = proc
    let stderr = ''
    proc.stderr?.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
    const deadline = Date.now() + 10_000
    while (!(await redisAnswersAt(url, 300))) {
      if (proc.exitCode !== null || Date.now() > deadline) {
        proc.kill('SIGKILL')
        throw new Error(`redis-server did not start on port ${port}: ${stderr}`)
      }
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }

  async function stop (): Promise<void> {
    const proc = child
    child = undefined
    if (proc === undefined || proc.exitCode !== null) return
    const exited = once(proc, 'exit')
    proc.kill('SIGKILL')
    await exited
  }

  await start()
  t.teardown(stop)
  return { url, port, stop, start }
}
