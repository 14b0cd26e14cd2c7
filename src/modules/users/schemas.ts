/** Schemas of the user resource; the TypeScript types come from them. */
import { Type, type Static } from 'typebox'
import { Id, Timestamp } from '../../lib/schemas.js'
import { CookieSession, TokenSession } from '../../lib/session-schemas.js'

/** Letters, digits, `.`, `_` and `-`: never `@`, so a login name with `@` is an e-mail. */
const Username = Type.String({ minLength: 3, maxLength: 32, pattern: '^[A-Za-z0-9._-]+$', description: '3-32 letters, digits, `.`, `_` or `-`' })
const Email = Type.String({ format: 'email', minLength: 3, maxLength: 254 })
/**
 * A new password: 8 to 72 characters here; at most 72 *bytes* (bcrypt reads no more) and not
 * one of the most common passwords are checked by the service (a JSON schema cannot count
 * UTF-8 bytes), src/lib/password-rule.ts.
 */
const Password = Type.String({ minLength: 8, maxLength: 72, description: 'at least 8 characters, at most 72 bytes in UTF-8, not one of the most common passwords (any case): 400 `PASSWORD_TOO_COMMON`' })

/**
 * The display name (as in the original recipes' `names`): free text, 1-100 characters, no
 * control characters (which would garble logs and terminals); NUL and lone surrogates are
 * refused like in every string (src/lib/validation.ts).
 */
export const Names = Type.String({ minLength: 1, maxLength: 100, pattern: '^(?!\\s*$)[^\\p{Cc}]+$', description: 'display name, 1-100 characters, not only spaces, no control characters' })

export const RegisterBody = Type.Object({
  username: Username,
  email: Email,
  password: Password,
  names: Type.Optional(Names)
}, { additionalProperties: false, examples: [{ username: 'alice', email: 'alice@example.com', password: 'wonderland!', names: 'Alice Liddell' }] })
export type RegisterInput = Static<typeof RegisterBody>

/** A password to check (not to set): any length a login accepts; a wrong one is a 403, not a 400. */
export const passwordToCheck = (description: string) => Type.String({ minLength: 1, maxLength: 1024, description })

export const UpdateUserBody = Type.Object({
  username: Type.Optional(Username),
  email: Type.Optional(Type.String({ format: 'email', minLength: 3, maxLength: 254, description: 'a new address takes effect when the link e-mailed to it is followed (`pendingEmail` until then); your current address cancels a pending change (so does a new password)' })),
  names: Type.Optional(Type.Union([Names, Type.Null()], { description: 'your display name; `null` removes it' })),
  password: Type.Optional(Password),
  currentPassword: Type.Optional(passwordToCheck('your current password: required with `password`, checked whenever sent'))
}, {
  additionalProperties: false,
  minProperties: 1,
  examples: [{ email: 'alice@example.org' }, { password: 'a new password', currentPassword: 'wonderland!' }]
})
export type UpdateUserInput = Static<typeof UpdateUserBody>

export const DeleteUserBody = Type.Object({
  password: passwordToCheck('your current password')
}, { additionalProperties: false, examples: [{ password: 'wonderland!' }] })

const userExample = { id: 1, username: 'alice', email: 'alice@example.com', names: 'Alice Liddell', emailVerifiedAt: '2026-11-23T20:05:00.000Z', pendingEmail: null, createdAt: '2026-11-23T20:00:00.000Z', updatedAt: '2026-11-23T20:05:00.000Z' }
const changingExample = { ...userExample, pendingEmail: 'alice@example.org', updatedAt: '2026-11-24T09:30:00.000Z' }

export const User = Type.Object({
  id: Id,
  username: Type.String(),
  email: Type.String(),
  names: Type.Union([Type.String(), Type.Null()], { description: 'display name; null when none was given' }),
  emailVerifiedAt: Type.Union([Timestamp, Type.Null()], { description: 'when the owner of `email` followed its verification link; null: not verified (a registration\'s address starts unverified)' }),
  pendingEmail: Type.Union([Type.String(), Type.Null()], { description: 'the address a change asked for, waiting for its verification link to be followed (then it becomes `email`, verified); null: no change pending' }),
  createdAt: Timestamp,
  updatedAt: Timestamp
}, {
  description: 'A user; the password and its hash are never part of it',
  examples: [userExample, changingExample]
})
/** A user as it may leave the service (and as `request.currentUser` holds it). */
export type PublicUser = Static<typeof User>

/**
 * A password change ends every session, this one too, and starts a new one: its fields
 * (as login's: the tokens in token mode, cookies in cookie mode) come with the user only
 * then. Three shapes, tried in this order by the serializer: token mode, cookie mode, the
 * user alone.
 */
export const UpdatedUser = Type.Union([
  Type.Object({ user: User, ...TokenSession.properties }, { description: 'the password changed, token mode: a new session\'s tokens (earlier ones stop working)' }),
  Type.Object({ user: User, ...CookieSession.properties }, { description: 'the password changed, cookie mode: a new session in the cookies (`Set-Cookie`)' }),
  Type.Object({ user: User }, { description: 'no password change: the user alone' })
], { description: 'The changed user, and a new session when the password changed; a new `email` is in `pendingEmail` until confirmed', examples: [{ user: changingExample }] })

const ResetEmail = Type.String({ format: 'email', minLength: 3, maxLength: 254, description: 'the e-mail address of the account' })

export const PasswordResetBody = Type.Object({ email: ResetEmail }, { additionalProperties: false, examples: [{ email: 'alice@example.com' }] })

export const PasswordResetAccepted = Type.Object({
  detail: Type.String()
}, {
  description: 'the same answer whether or not an account has the address',
  examples: [{ detail: 'If an account has this address, a link to reset its password is on its way' }]
})

/** The token of a reset link: 32 random bytes in base64url. */
const ResetToken = Type.String({ minLength: 1, maxLength: 128, description: 'the `token` of the reset link (after `#token=`)' })

export const PasswordResetConfirmBody = Type.Object({
  token: ResetToken,
  password: Password
}, { additionalProperties: false, examples: [{ token: 'q3Yl3Qp0cS7b0n1Z8M2v3hX9wR4t5y6u7i8o9p0aBcD', password: 'a new password' }] })

export const VerifyEmailBody = Type.Object({
  token: Type.String({ minLength: 1, maxLength: 128, description: 'the `token` of the verification link (after `#token=`)' })
}, { additionalProperties: false, examples: [{ token: 'q3Yl3Qp0cS7b0n1Z8M2v3hX9wR4t5y6u7i8o9p0aBcD' }] })

export const VerificationQueued = Type.Object({
  detail: Type.String()
}, { description: 'a verification link is on its way, unless the address is verified already', examples: [{ detail: 'A verification link is on its way to alice@example.com, unless it is verified already' }] })
