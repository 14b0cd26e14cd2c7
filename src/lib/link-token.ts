/**
 * The single-use tokens of e-mailed links (password reset, e-mail verification) and of a
 * login's second step (src/modules/identity): 32 random
 * bytes in base64url, stored only as their SHA-256 (a 256-bit random value cannot be guessed
 * whatever the hash's speed, and the digest can be looked up by index).
 */
import { createHash, randomBytes } from 'node:crypto'

/** The database's key of a token. */
export function tokenDigest (token: string): Buffer {
  return createHash('sha256').update(token).digest()
}

/** A new token and its digest. */
export function newLinkToken (): { token: string, digest: Buffer } {
  const token = randomBytes(32).toString('base64url')
  return { token, digest: tokenDigest(token) }
}

/** Text made safe for an HTML e-mail's markup and attributes. */
export function escapeHtml (text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)
}
