/**
 * Short-lived single-use values kept server-side: WebAuthn challenges and the tickets of a
 * login's second step, each kind in a store of its own so that one can never push the other
 * out. `put` keeps a value for `ttlMs`; `take` returns it and deletes it in one step, so of
 * two requests presenting one challenge, one gets it; `peek` reads without taking (a ticket
 * survives a wrong code).
 *
 * Nothing live is ever evicted: a store refuses a new value instead (`StoreRefusal`), when
 * the value's owner (a client address) holds its share already, or when the store is full.
 * A value counts against its owner's share for its whole life, used or not.
 *
 * In this process's memory by default, in Redis when REDIS_URL is set, so that a challenge
 * issued by one replica is verified by another and the shares hold across replicas. A store
 * that fails (Redis down) rejects with another error: the routes answer 503.
 */
import type { Redis } from 'ioredis'

export interface ChallengeStore {
  /** Keeps `value`; with `owner`, counted in that owner's share. Throws StoreRefusal rather than evict. */
  put: (key: string, value: string, ttlMs: number, owner?: string) => Promise<void>
  take: (key: string) => Promise<string | null>
  peek: (key: string) => Promise<string | null>
}

/** A value refused: its owner holds its share (`owner`), or the store is full (`full`); retry after `retryAfterMs`. */
export class StoreRefusal extends Error {
  constructor (readonly reason: 'owner' | 'full', readonly retryAfterMs: number) {
    super(reason === 'owner' ? 'this client holds its share of live values' : 'the store is full')
  }
}

export interface StoreLimits {
  /** Live values in all (memory only: Redis is bounded by its own memory). */
  maxKeys?: number
  /** Live values per owner. */
  perOwner?: number
}

/** One process's store, bounded to `maxKeys` live values and `perOwner` per owner. */
export class MemoryChallengeStore implements ChallengeStore {
  private readonly entries = new Map<string, { value: string, expiresAt: number }>()
  /** The expiry times of each owner's values, oldest first; the owner put to last is last. */
  private readonly owners = new Map<string, number[]>()
  private readonly maxKeys: number
  private readonly perOwner: number

  constructor (limits: StoreLimits = {}, private readonly now: () => number = Date.now) {
    this.maxKeys = limits.maxKeys ?? 100_000
    this.perOwner = limits.perOwner ?? Infinity
  }

  async put (key: string, value: string, ttlMs: number, owner?: string): Promise<void> {
    const now = this.now()
    this.sweep(now)
    let times: number[] = []
    if (owner !== undefined) {
      times = (this.owners.get(owner) ?? []).filter((t) => t > now)
      if (times.length >= this.perOwner) throw new StoreRefusal('owner', times[0]! - now)
      if (times.length === 0 && this.owners.size >= this.maxKeys) throw new StoreRefusal('full', this.owners.values().next().value!.at(-1)! - now)
    }
    if (!this.entries.has(key) && this.entries.size >= this.maxKeys) throw new StoreRefusal('full', this.entries.values().next().value!.expiresAt - now)
    this.entries.delete(key)
    this.entries.set(key, { value, expiresAt: now + ttlMs })
    if (owner !== undefined) {
      times.push(now + ttlMs)
      this.owners.delete(owner)
      this.owners.set(owner, times)
    }
  }

  async take (key: string): Promise<string | null> {
    const value = await this.peek(key)
    this.entries.delete(key)
    return value
  }

  async peek (key: string): Promise<string | null> {
    const entry = this.entries.get(key)
    if (entry === undefined) return null
    if (entry.expiresAt > this.now()) return entry.value
    this.entries.delete(key)
    return null
  }

  /** Drops what has expired from the front of both maps (insertion order: the oldest first). */
  private sweep (now: number): void {
    for (const [key, entry] of this.entries) {
      if (entry.expiresAt > now) break
      this.entries.delete(key)
    }
    for (const [owner, times] of this.owners) {
      if (times.at(-1)! > now) break
      this.owners.delete(owner)
    }
  }
}

/**
 * Checks the owner's share and keeps the value in one step (Redis runs a script at a time):
 * KEYS[1] the value's key, KEYS[2] the owner's sorted set of its values' expiry times.
 * Returns -1 when kept, else the ms until the owner's oldest value expires.
 */
const PUT_OWNED = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) then
  local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  return math.max(1, tonumber(first[2]) - now)
end
redis.call('ZADD', KEYS[2], now + ttl, KEYS[1])
redis.call('PEXPIRE', KEYS[2], ttl)
redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
return -1
`

declare module 'ioredis' {
  // The type parameter must match ioredis's own declaration to merge.
  // eslint-disable-next-line @typescript-eslint/no-unused-vars
  interface RedisCommander<Context> {
    challengePutOwned: (key: string, ownerKey: string, value: string, ttlMs: number, perOwner: number) => Promise<number>
  }
}

/**
 * Keys `<REDIS_KEY_PREFIX>challenges:<key>`, expiring by themselves; `take` is GETDEL (atomic);
 * an owner's share is the sorted set `challenges:owner:<owner>`, shared by every replica.
 */
export class RedisChallengeStore implements ChallengeStore {
  private readonly perOwner: number

  constructor (private readonly redis: Redis, limits: StoreLimits = {}) {
    this.perOwner = limits.perOwner ?? Infinity
    if (typeof (redis as Partial<Redis>).challengePutOwned !== 'function') redis.defineCommand('challengePutOwned', { numberOfKeys: 2, lua: PUT_OWNED })
  }

  async put (key: string, value: string, ttlMs: number, owner?: string): Promise<void> {
    if (owner === undefined || this.perOwner === Infinity) {
      await this.redis.set(`challenges:${key}`, value, 'PX', ttlMs)
      return
    }
    const wait = await this.redis.challengePutOwned(`challenges:${key}`, `challenges:owner:${owner}`, value, ttlMs, this.perOwner)
    if (wait >= 0) throw new StoreRefusal('owner', wait)
  }

  async take (key: string): Promise<string | null> {
    return await this.redis.getdel(`challenges:${key}`)
  }

  async peek (key: string): Promise<string | null> {
    return await this.redis.get(`challenges:${key}`)
  }
}
