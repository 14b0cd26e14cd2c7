/** Schemas of login. */
import { Type } from 'typebox'
import { SessionMode } from '../sessions/index.js'
import { passwordToCheck } from '../users/index.js'

/**
 * `username` and `identity` are two names of one field, so clients of either route set log in.
 * Either may hold the username or the e-mail address; exactly one must be present.
 */
const LoginName = Type.String({ minLength: 1, maxLength: 254, description: 'your username or e-mail address' })

export const LoginBody = Type.Object({
  username: Type.Optional(LoginName),
  identity: Type.Optional(LoginName),
  password: passwordToCheck('your password'),
  mode: Type.Optional(SessionMode)
}, { additionalProperties: false, examples: [{ username: 'alice', password: 'wonderland!' }, { identity: 'alice@example.com', password: 'wonderland!' }, { username: 'alice', password: 'wonderland!', mode: 'cookie' }] })
