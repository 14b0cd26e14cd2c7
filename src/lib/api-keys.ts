/**
 * ADMIN_API_KEYS: parsing and the strength every key must have, checked when the
 * configuration loads (src/config.ts), so a weak key stops the service before it starts.
 *
 * A key must be at least 32 characters and carry an estimated 128 bits: its length times
 * the Shannon entropy of its own characters (-sum p log2 p over the characters it uses).
 * This refuses repeated characters (`aaaa...`: 0 bits), short alphabets and words padded
 * to length (`admin-key-...`), and passes the output of `openssl rand -base64 32`
 * (44 characters, about 210 bits by this estimate) and `openssl rand -hex 32` (64, about
 * 240). It cannot tell a random-looking but predictable key (`abcdefgh...` passes):
 * generate keys, never type them.
 */

const MIN_API_KEY_LENGTH = 32
const MIN_API_KEY_BITS = 128

/** Length times the Shannon entropy (bits per character) of the key's own characters. */
export function estimatedKeyBits (key: string): number {
  const chars = [...key]
  const counts = new Map<string, number>()
  for (const c of chars) counts.set(c, (counts.get(c) ?? 0) + 1)
  let perChar = 0
  for (const count of counts.values()) {
    const p = count / chars.length
    perChar -= p * Math.log2(p)
  }
  return perChar * chars.length
}

/** Why a key is too weak, or undefined when it is strong enough. */
export function apiKeyWeakness (key: string): string | undefined {
  const length = [...key].length
  if (length < MIN_API_KEY_LENGTH) return `is ${length} characters, shorter than ${MIN_API_KEY_LENGTH}`
  const bits = Math.floor(estimatedKeyBits(key))
  if (bits < MIN_API_KEY_BITS) return `is too predictable (about ${bits} bits by its character frequencies, at least ${MIN_API_KEY_BITS} needed)`
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
