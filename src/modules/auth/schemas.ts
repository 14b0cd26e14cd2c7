/** Schemas of login. */
import { Type } from 'typebox'
import { passwordToCheck } from '../users/schemas.js'

/**
 * `username` is the Variant A field; `identity` the original Variant B one. Either may hold
 * the username or the e-mail address; exactly one must be present.
 */
const LoginName = Type.String({ minLength: 1, maxLength: 254, description: 'your username or e-mail address' })

export const LoginBody = Type.Object({
  username: Type.Optional(LoginName),
  identity: Type.Optional(LoginName),
  password: passwordToCheck('your password')
}, { additionalProperties: false, examples: [{ username: 'alice', password: 'wonderland!' }, { identity: 'alice@example.com', password: 'wonderland!' }] })

export const LoginResult = Type.Object({
  token: Type.String({ description: 'JWT (HS256); send it as `Authorization: Bearer <token>`' }),
  tokenType: Type.Literal('Bearer'),
  expiresIn: Type.String({ description: 'lifetime, e.g. `72h`' }),
  userId: Type.Integer()
}, { examples: [{ token: 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxIiwidmVyIjowfQ.signature', tokenType: 'Bearer', expiresIn: '72h', userId: 1 }] })
