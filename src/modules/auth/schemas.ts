/** Schemas of login. */
import { Type } from 'typebox'
import { SessionMode } from '../sessions/index.js'
import { passwordToCheck } from '../users/index.js'

/**
 * `username` and `identity` are two names of one field, so clients of either route set log in.
 * Either may hold the username or the e-mail address; exactly one must be present.
 */
const LoginName = Type.String({ minLength: 1, maxLength: 254, description: 'your username or e-mail address' })

/**
 * Where the browser goes after a successful login in cookie mode (303 See Other): a path of
 * this service, never another host. One leading `/` and not `//` or `/\` (both mean "another
 * host" to a browser), visible ASCII only, no backslash anywhere (browsers read it as `/`),
 * no spaces, tabs or newlines (browsers drop tabs and newlines from URLs, so `/<TAB>/evil.com`
 * would become `//evil.com`). Anything else is a 400 naming the field.
 */
export const RedirectPath = Type.String({
  maxLength: 2048,
  pattern: '^/(?!/)[!-\\[\\]-~]*$',
  description: 'cookie mode only: after a successful login answer 303 with this `Location` instead of 200 with a body; ' +
    'a path of this service (`/docs`, `/app/?tab=2`): one leading `/`, not `//`, visible ASCII without `\\`. A failed login still answers its problem (e.g. 401)'
})

export const LoginBody = Type.Object({
  username: Type.Optional(LoginName),
  identity: Type.Optional(LoginName),
  password: passwordToCheck('your password'),
  mode: Type.Optional(SessionMode),
  redirect: Type.Optional(RedirectPath)
}, { additionalProperties: false, examples: [{ username: 'alice', password: 'wonderland!' }, { identity: 'alice@example.com', password: 'wonderland!' }, { username: 'alice', password: 'wonderland!', mode: 'cookie' }] })

/** Logout reads nothing from the body; one may still be sent (an HTML form's, `{}`), never with fields. */
export const LogoutBody = Type.Object({}, { additionalProperties: false, description: 'nothing: send no body, `{}` or an empty form', examples: [{}] })
