/**
 * An AttemptStore (src/lib/attempts.ts) in Redis, shared by every replica: each key's
 * window is one hash (`s`: the window's start in ms, by Redis's clock; `c`: the attempts
 * counted) that expires when the window ends. `reserve` and `release` are Lua scripts, which
 * Redis runs one at a time, so check-and-count is atomic across replicas: at most `max`
 * attempts per key and window are ever let through, however many arrive at once anywhere.
 * A release counts only in the window its reservation was made in (the start must match).
 *
 * Keys: `<REDIS_KEY_PREFIX>attempts:<store name>:<key>` (the prefix is the client's).
 * Errors (Redis down, a timeout) reject; the budget turns them into a 503 (fail closed).
 */
import type { Redis } from 'ioredis'
import { MemoryAttemptStore, type AttemptStore, type Reservation, type ReserveResult } from '../lib/attempts.js'

const RESERVE = `
local key = KEYS[1]
local max = tonumber(ARGV[1])
local start = redis.call('HGET', key, 's')
if not start then
  local now = redis.call('TIME')
  start = now[1] .. string.sub(string.format('%06d', tonumber(now[2])), 1, 3)
  redis.call('HSET', key, 's', start, 'c', 0)
  redis.call('PEXPIRE', key, ARGV[2])
end
if tonumber(redis.call('HGET', key, 'c')) >= max then
  return {0, redis.call('PTTL', key)}
end
redis.call('HINCRBY', key, 'c', 1)
return {1, start}
`

const RELEASE = `
if redis.call('HGET', KEYS[1], 's') == ARGV[1] and tonumber(redis.call('HGET', KEYS[1], 'c')) > 0 then
  redis.call('HINCRBY', KEYS[1], 'c', -1)
end
return 0
`

declare module 'ioredis' {
  // The type parameter must match ioredis's own declaration to merge.
  // eslint-disable-next-line @typescript-eslint/no-unused-vars
  interface RedisCommander<Context> {
    attemptReserve: (key: string, max: number, windowMs: number) => Promise<[number, string | number]>
    attemptRelease: (key: string, windowStart: number) => Promise<number>
  }
}

export class RedisAttemptStore implements AttemptStore {
  private readonly prefix: string

  /**
   * @param name this store's part of the keys; one name per budget (one window length each)
   */
  constructor (private readonly redis: Redis, name: string) {
    this.prefix = `attempts:${name}:`
    // Defined once per client; ioredis sends EVALSHA and falls back to EVAL after a Redis restart.
    if (typeof (redis as Partial<Redis>).attemptReserve !== 'function') {
      redis.defineCommand('attemptReserve', { numberOfKeys: 1, lua: RESERVE })
      redis.defineCommand('attemptRelease', { numberOfKeys: 1, lua: RELEASE })
    }
  }

  async reserve (key: string, max: number, windowMs: number): Promise<ReserveResult> {
    const [allowed, value] = await this.redis.attemptReserve(this.prefix + key, max, windowMs)
    if (allowed === 1) return { allowed: true, reservation: { key, windowStart: Number(value) } }
    return { allowed: false, retryAfterMs: Math.max(0, Number(value)) }
  }

  async release (reservation: Reservation): Promise<void> {
    await this.redis.attemptRelease(this.prefix + reservation.key, reservation.windowStart)
  }
}

/** The store of budget `name`: in Redis when the service has one (every replica counts together), else in this process. */
export function attemptStore (redis: Redis | null, name: string): AttemptStore {
  return redis === null ? new MemoryAttemptStore() : new RedisAttemptStore(redis, name)
}
