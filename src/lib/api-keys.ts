/**
 * ADMIN_API_KEYS: parsing and the strength every key must have, checked when the
 * configuration loads (src/config.ts), so a weak key stops the service before it starts.
 *
 * A key must be at least 32 characters and carry an estimated 128 bits: the lower of two
 * Shannon sums (-sum p log2 p, times the count): over its characters, and over the steps
 * between successive characters (the difference of their code points). The first refuses
 * repeated characters (`aaaa...`: 0 bits), short alphabets and words padded to length
 * (`admin-key-...`); the second refuses sequences, whose steps repeat even when their
 * characters do not (`0123456789abcdef0123...`: 128 bits by its characters, 16 by its
 * steps; `abcdefgh...`, `a1b2c3...`, a keyboard row). The output of `openssl rand -base64 32`
 * (44 characters) and `openssl rand -hex 32` (64) estimate above 180 bits both ways (the
 * lowest of 200,000 of each). A predictable key with random-looking characters and steps
 * still passes: generate keys, never type them.
 */

const MIN_API_KEY_LENGTH = 32
const MIN_API_KEY_BITS = 128

/** Count times the Shannon entropy (bits per item) of the items' own frequencies. */
function shannonBits (items: ReadonlyArray<string | number>): number {
  const counts = new Map<string | number, number>()
  for (const item of items) counts.set(item, (counts.get(item) ?? 0) + 1)
  let perItem = 0
  for (const count of counts.values()) {
    const p = count / items.length
    perItem -= p * Math.log2(p)
  }
  return perItem * items.length
}

/** The key's estimated bits: the lower of its characters' and its steps' Shannon sums. */
export function estimatedKeyBits (key: string): number {
  const points = [...key].map((c) => c.codePointAt(0) ?? 0)
  const steps = points.slice(1).map((point, i) => point - (points[i] ?? 0))
  return Math.min(shannonBits(points), shannonBits(steps))
}

/** Why a key is too weak, or undefined when it is strong enough. */
export function apiKeyWeakness (key: string): string | undefined {
  const length = [...key].length
  if (length < MIN_API_KEY_LENGTH) return `is ${length} characters, shorter than ${MIN_API_KEY_LENGTH}`
  const bits = Math.floor(estimatedKeyBits(key))
  if (bits < MIN_API_KEY_BITS) return `is too predictable (about ${bits} bits by the frequencies of its characters and of the steps between them, at least ${MIN_API_KEY_BITS} needed)`
  return undefined
}

/**
 * The keys of ADMIN_API_KEYS (comma-separated, blanks around each ignored). Throws an
 * Error naming the first weak key by position (never the key itself: it may be in logs).
 */
export function parseApiKeys (value: string): string[] {
  const keys = value.split(',').map((key) => key.trim()).filter((key) => key !== '')
  for (const [index, key] of keys.entries()) {
    const weakness = apiKeyWeakness(key)
    if (weakness !== undefined) {
      throw new Error(`ADMIN_API_KEYS key #${index + 1} ${weakness}; generate one with \`openssl rand -base64 32\``)
    }
  }
  return keys
}
