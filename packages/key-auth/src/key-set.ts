/**
 * A set of valid keys, checked in constant time (README.md "Constant-time key check").
 *
 * Both sides are hashed with SHA-256 and the digests compared with `timingSafeEqual`, so
 * the comparison always covers 32 bytes: neither the content nor the length of a key leaks
 * through timing. Every configured key is compared on every check (no early return on a
 * match), so the time does not tell which key matched or how many there are before it.
 * Several keys make rotation possible: add the new key, move clients over, drop the old.
 */
import { createHash, timingSafeEqual } from 'node:crypto'
import { KeyAuthOptionError } from './errors.js'

export interface KeySet {
  /** True when `candidate` is one of the keys. Constant time in the candidate. */
  has: (candidate: string | Buffer) => boolean
  /** How many keys the set holds. */
  readonly size: number
}

function digest (value: string | Buffer): Buffer {
  return createHash('sha256').update(value).digest()
}

/**
 * @param keys the valid keys (strings are read as UTF-8); at least one, none empty.
 *   Their digests are computed once, here; the keys themselves are not kept.
 */
export function createKeySet (keys: Iterable<string | Buffer>): KeySet {
  const digests: Buffer[] = []
  for (const key of keys) {
    if ((typeof key !== 'string' && !Buffer.isBuffer(key)) || key.length === 0) {
      throw new KeyAuthOptionError('createKeySet: every key must be a non-empty string or Buffer')
    }
    digests.push(digest(key))
  }
  if (digests.length === 0) throw new KeyAuthOptionError('createKeySet: at least one key is needed')

  return {
    size: digests.length,
    has (candidate) {
      if (typeof candidate !== 'string' && !Buffer.isBuffer(candidate)) return false
      const probe = digest(candidate)
      let match = 0
      // `|=` rather than `||` or `some`: every digest is compared, whatever matched first.
      for (const known of digests) match |= timingSafeEqual(known, probe) ? 1 : 0
      return match === 1
    }
  }
}
