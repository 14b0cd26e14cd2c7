/**
 * Refresh tokens: 256 random bits, base64url (43 characters), stored only as their SHA-256
 * digest.
 *
 * Why SHA-256 and not bcrypt: bcrypt's cost protects *guessable* secrets (passwords) when a
 * digest leaks; a 256-bit random token cannot be guessed however fast the hash is, so a
 * slow hash would buy nothing and cost ~50 ms of CPU per refresh. A salted hash also could
 * not be looked up: SHA-256 is deterministic, so the digest is the row's primary key and a
 * refresh is one indexed read. Timing of that lookup tells an attacker nothing usable: to
 * steer it they would need digests' preimages.
 */
import { createHash, randomBytes } from 'node:crypto'

/** What a refresh token this service issues looks like: 32 bytes in base64url, no padding. */
export const REFRESH_TOKEN_PATTERN = '^[A-Za-z0-9_-]{43}$'
const REFRESH_TOKEN_RE = new RegExp(REFRESH_TOKEN_PATTERN)

export interface NewRefreshToken {
  /** Given to the client once; never stored. */
  token: string
  /** SHA-256 of the token: what the database keeps. */
  hash: Buffer
}

export function newRefreshToken (): NewRefreshToken {
  const token = randomBytes(32).toString('base64url')
  return { token, hash: hashRefreshToken(token) }
}

export function hashRefreshToken (token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest()
}

/** True when `value` could be a token this service issued (checked before any query). */
export function isRefreshTokenShaped (value: unknown): value is string {
  return typeof value === 'string' && REFRESH_TOKEN_RE.test(value)
}
