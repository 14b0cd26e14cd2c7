/**
 * The app's one Redis client (ioredis), when REDIS_URL is set: decorated as `app.redis`
 * (null otherwise) and quit when the app closes. The limits keep their counts there
 * (src/plugins/redis-attempts.ts, @fastify/rate-limit's Redis store), so replicas share them.
 *
 * Bounded waits, so a Redis that is down or hangs costs a request at most
 * COMMAND_TIMEOUT_MS (docs/operations.md, "Redis"):
 * - no offline queue: while the connection is down a command fails at once (the limits
 *   then answer 503 with Retry-After: they fail closed) instead of waiting for a reconnect;
 * - a command with no answer fails after `commandTimeout` (a frozen server or network);
 * - a connection attempt gives up after `connectTimeout`, and reconnects back off to 2 s.
 * Start does not need Redis: the app waits for the first connection at most
 * `connectTimeout`, then starts anyway and keeps reconnecting in the background.
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { Redis, type RedisOptions } from 'ioredis'

declare module 'fastify' {
  interface FastifyInstance {
    /** The shared Redis client, or null when REDIS_URL is not set. */
    redis: Redis | null
  }
}

/**
 * A connection attempt gives up after this long (ms) and retries in the background; the
 * start waits for it at most this long too. A Redis beside the service answers in
 * milliseconds, so this only bounds the wait for one that is down.
 */
export const CONNECT_TIMEOUT_MS = 2000
/** A command with no answer fails after this long (ms): the request answers 503 rather than hang. */
export const COMMAND_TIMEOUT_MS = 1000

export interface RedisPluginOptions {
  /** redis:// or rediss:// URL; undefined: no Redis (`app.redis` is null). */
  url?: string
  /** Prefix of every key (ioredis `keyPrefix`). */
  keyPrefix: string
  /** CONNECT_TIMEOUT_MS unless a test sets it. */
  connectTimeoutMs?: number
  /** COMMAND_TIMEOUT_MS unless a test sets it. */
  commandTimeoutMs?: number
}

/** The ioredis options of the service (also used by tests to open their own clients alike). */
export function redisClientOptions (options: Omit<RedisPluginOptions, 'url'>): RedisOptions {
  return {
    keyPrefix: options.keyPrefix,
    connectTimeout: options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS,
    commandTimeout: options.commandTimeoutMs ?? COMMAND_TIMEOUT_MS,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    // Reconnect forever, backing off to 2 s between attempts.
    retryStrategy: (times: number) => Math.min(times * 100, 2000)
  }
}

async function redisPlugin (app: FastifyInstance, options: RedisPluginOptions): Promise<void> {
  if (options.url === undefined) {
    app.decorate('redis', null)
    return
  }
  const client = new Redis(options.url, redisClientOptions(options))
  app.decorate('redis', client)

  // Log changes of state, not every failed reconnect (one a second or more while it is down).
  let up = false
  let reported = false
  client.on('ready', () => {
    up = true
    reported = false
    app.log.info('Redis connected')
  })
  client.on('error', (error: Error) => {
    if (up || !reported) app.log.warn({ err: { message: error.message, code: (error as NodeJS.ErrnoException).code } }, 'Redis unavailable: the limits answer 503 until it is back')
    up = false
    reported = true
  })

  app.addHook('onReady', async () => {
    if (client.status === 'ready') return
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS)
      client.once('ready', done)
      function done (): void {
        clearTimeout(timer)
        client.off('ready', done)
        resolve()
      }
    })
  })
  app.addHook('onClose', async () => {
    // quit() waits for a live server's answer; a dead one would keep it retrying.
    if (client.status === 'ready') await client.quit().catch(() => client.disconnect())
    else client.disconnect()
  })
}

/** Whether Redis answers a PING within `timeoutMs`. */
export async function redisAnswers (client: Redis, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  try {
    return await Promise.race([
      client.ping().then(() => true, () => false),
      new Promise<boolean>((resolve) => { timer = setTimeout(() => resolve(false), timeoutMs) })
    ])
  } finally {
    clearTimeout(timer)
  }
}

export default fp(redisPlugin, { name: 'redis', fastify: '5.x' })
