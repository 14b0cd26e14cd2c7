/**
 * TOTP (RFC 6238) with otpauth: SHA-1, 6 digits, 30 s steps, the form every authenticator
 * app reads. A code is accepted for its own step and one step either side (clocks drift);
 * the caller stores the step of each accepted code, and a code of that step or an earlier
 * one is refused after (factors-repository.ts: one UPDATE decides, so of two
 * logins racing with one code, one wins).
 *
 * Recovery codes: 16 characters of base32 (80 random bits) in groups of four; stored as
 * SHA-256 digests (80 random bits cannot be guessed from a digest whatever the hash's speed).
 */
import { createHash, randomBytes } from 'node:crypto'
import { Secret, TOTP } from 'otpauth'
import QRCode from 'qrcode'

export const TOTP_PERIOD_S = 30
/** Steps accepted either side of the current one. */
export const TOTP_WINDOW = 1
export const RECOVERY_CODES = 10
const ISSUER = 'User and product service'

/** A new secret: 160 bits, RFC 4226's recommended length. */
export function newTotpSecret (): Buffer {
  return randomBytes(20)
}

function totp (secret: Buffer, label = 'account'): TOTP {
  return new TOTP({ issuer: ISSUER, label, secret: new Secret({ buffer: Uint8Array.from(secret).buffer }), algorithm: 'SHA1', digits: 6, period: TOTP_PERIOD_S })
}

/** What an authenticator app is given: the base32 secret, its `otpauth://` URI and that URI as a QR code (an SVG data URL). */
export async function enrolment (secret: Buffer, label: string): Promise<{ secret: string, uri: string, qrCode: string }> {
  const generator = totp(secret, label)
  const uri = generator.toString()
  const svg = await QRCode.toString(uri, { type: 'svg', errorCorrectionLevel: 'M', margin: 2 })
  return { secret: generator.secret.base32, uri, qrCode: `data:image/svg+xml;base64,${Buffer.from(svg).toString('base64')}` }
}

/** The time step of a valid `code` at `now` (ms), or null when the code is not valid then. */
export function codeStep (secret: Buffer, code: string, now: number): number | null {
  if (!/^[0-9]{6}$/.test(code)) return null
  const delta = totp(secret).validate({ token: code, timestamp: now, window: TOTP_WINDOW })
  if (delta === null) return null
  return Math.floor(now / 1000 / TOTP_PERIOD_S) + delta
}

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567'

/** Ten new recovery codes (`xxxx-xxxx-xxxx-xxxx`) and their digests. */
export function newRecoveryCodes (): { codes: string[], digests: Buffer[] } {
  const codes = Array.from({ length: RECOVERY_CODES }, () => {
    const bytes = randomBytes(16)
    const chars = Array.from(bytes, (b) => BASE32[b & 31]).join('')
    return chars.match(/.{4}/g)!.join('-')
  })
  return { codes, digests: codes.map(recoveryDigest) }
}

/** The digest of a recovery code as typed: case, spaces and hyphens do not matter. */
export function recoveryDigest (code: string): Buffer {
  return createHash('sha256').update(code.toLowerCase().replace(/[\s-]/g, '')).digest()
}
