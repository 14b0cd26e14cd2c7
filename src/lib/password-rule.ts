/**
 * The rule for a new password, one for the API and the web app: at least 8 characters (the
 * schemas), at most 72 bytes in UTF-8 (bcrypt reads no more), and not one of the most common
 * passwords, compared case-insensitively. The list is @zxcvbn-ts/language-common's ranked
 * password list (docs/api.md, "Passwords"), reduced to the entries the length rule lets
 * through, lowercased, sorted, one per line: that text is what the server checks against and
 * what the web app downloads (src/plugins/web-app.ts), so both apply the same list.
 */
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import createError from '@fastify/error'
import { BadRequest, atField } from './problem.js'

export const MIN_PASSWORD_CHARACTERS = 8
export const MAX_PASSWORD_BYTES = 72

/** The package's list as JSON, most common first; resolved the way Node resolves the package. */
export const COMMON_PASSWORDS_SOURCE = fileURLToPath(import.meta.resolve('@zxcvbn-ts/language-common/src/passwords.json'))

export const PasswordTooCommon = createError('PASSWORD_TOO_COMMON', '%s', 400)

export interface CommonPasswords {
  /** One lowercased password per line, sorted: the file the web app fetches. */
  text: string
  has: (password: string) => boolean
  size: number
}

let loaded: CommonPasswords | undefined

/** The list, read and reduced once, at the first use. */
export function commonPasswords (): CommonPasswords {
  if (loaded !== undefined) return loaded
  const source = JSON.parse(readFileSync(COMMON_PASSWORDS_SOURCE, 'utf8')) as unknown
  if (!Array.isArray(source) || source.length < 10_000 || !source.every((entry) => typeof entry === 'string')) {
    throw new Error(`${COMMON_PASSWORDS_SOURCE}: expected a JSON array of at least 10,000 passwords`)
  }
  const entries = [...new Set((source as string[])
    .map((entry) => entry.toLowerCase())
    .filter((entry) => [...entry].length >= MIN_PASSWORD_CHARACTERS && Buffer.byteLength(entry, 'utf8') <= MAX_PASSWORD_BYTES))]
    .sort()
  const set = new Set(entries)
  loaded = { text: entries.join('\n') + '\n', has: (password) => set.has(password.toLowerCase()), size: set.size }
  return loaded
}

/**
 * 400 for a new password the rule refuses, at its field (`/password` of the body): past 72
 * bytes (`BAD_REQUEST`: bcrypt would ignore the rest) or one of the most common
 * (`PASSWORD_TOO_COMMON`). The schemas have checked the length in characters already.
 */
export function checkNewPassword (password: string, field = '/password'): void {
  if (Buffer.byteLength(password, 'utf8') > MAX_PASSWORD_BYTES) {
    throw atField(new BadRequest(`The password is longer than ${MAX_PASSWORD_BYTES} bytes in UTF-8; bcrypt would ignore the rest`), field, `must not be longer than ${MAX_PASSWORD_BYTES} bytes in UTF-8`)
  }
  const common = commonPasswords()
  if (common.has(password)) {
    throw atField(new PasswordTooCommon(`This password is one of the ${common.size.toLocaleString('en')} most common passwords, which are tried first by anyone guessing: choose another`), field, 'is one of the most common passwords')
  }
}
