/**
 * Short-lived single-use values kept server-side: WebAuthn challenges and the tickets of a
 * login's second step. `put` keeps a value for `ttlMs`; `take` returns it and deletes it in
 * one step, so of two requests presenting one challenge, one gets it; `peek` reads without
 * taking (a ticket survives a wrong code).
 *
 * In this process's memory by default, in Redis when REDIS_URL is set, so that a challenge
 * issued by one replica is verified by another. A store that fails (Redis down) rejects: the
 * routes answer 503 (src/plugins/error-handler.ts classifies the cause).
 */
import type { Redis } from 'ioredis'

export interface ChallengeStore {
  put: (key: string, value: string, ttlMs: number) => Promise<void>
  take: (key: string) => Promise<string | null>
  peek: (key: string) => Promise<string | null>
}

/** One process's store, bounded to `maxKeys` live entries (the oldest go first). */
export class MemoryChallengeStore implements ChallengeStore {
  private readonly entries = new Map<string, { value: string, expiresAt: number }>()

  constructor (private readonly maxKeys = 100_000, private readonly now: () => number = Date.now) {}

  async put (key: string, value: string, ttlMs: number): Promise<void> {
    this.entries.delete(key)
    for (const [old, entry] of this.entries) {
      if (this.entries.size < this.maxKeys && entry.expiresAt > this.now()) break
      this.entries.delete(old)
    }
    this.entries.set(key, { value, expiresAt: this.now() + ttlMs })
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
}

/** Keys `<REDIS_KEY_PREFIX>challenges:<key>`, expiring by themselves; `take` is GETDEL (atomic). */
export class RedisChallengeStore implements ChallengeStore {
  constructor (private readonly redis: Redis) {}

  async put (key: string, value: string, ttlMs: number): Promise<void> {
    await this.redis.set(`challenges:${key}`, value, 'PX', ttlMs)
  }

  async take (key: string): Promise<string | null> {
    return await this.redis.getdel(`challenges:${key}`)
  }

  async peek (key: string): Promise<string | null> {
    return await this.redis.get(`challenges:${key}`)
  }
}
