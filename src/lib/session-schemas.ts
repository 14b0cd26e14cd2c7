/**
 * The answer that carries a new session, in its two modes: login's, a second step's and a
 * refresh's (src/modules/identity/), and a password change's (src/modules/users/), so it
 * lives below both modules.
 */
import { Type, type Static } from 'typebox'
import { Timestamp } from './schemas.js'

/**
 * `token`: the tokens are in the body, for clients that send `Authorization: Bearer`;
 * `cookie`: they are in HttpOnly cookies only, for browsers (docs/api.md, "Browser clients").
 */
export const SessionMode = Type.Union([Type.Literal('token'), Type.Literal('cookie')], {
  description: '`token` (default for JSON): tokens in the body; `cookie` (default for forms): tokens in HttpOnly cookies only'
})
export type SessionModeValue = Static<typeof SessionMode>

/** The fields of a session in both modes. */
const sessionFields = {
  expiresIn: Type.Integer({ description: 'the access token\'s lifetime in seconds (ACCESS_TOKEN_TTL: 900 for `15m`), as the 202 of a second step gives its own' }),
  expiresAt: Timestamp,
  userId: Type.Integer(),
  refreshTokenExpiresAt: Timestamp
}

const TOKEN_SESSION_EXAMPLE = { mode: 'token', token: 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxIiwidmVyIjowLCJzaWQiOiIuLi4ifQ.signature', tokenType: 'Bearer', expiresIn: 900, expiresAt: '2026-11-23T21:15:00.000Z', userId: 1, refreshToken: 'q3Vx0pX4m2yZk8rT1sW6nB9cD5fG7hJ0lK2aE4uI6oY', refreshTokenExpiresAt: '2026-12-23T21:00:00.000Z' }
const COOKIE_SESSION_EXAMPLE = { mode: 'cookie', expiresIn: 900, expiresAt: '2026-11-23T21:15:00.000Z', userId: 1, refreshTokenExpiresAt: '2026-12-23T21:00:00.000Z' }

/** Token mode: the tokens are in the body. */
export const TokenSession = Type.Object({
  mode: Type.Literal('token'),
  token: Type.String({ description: 'access token (JWT, HS256): send it as `Authorization: Bearer <token>`' }),
  tokenType: Type.Literal('Bearer'),
  ...sessionFields,
  refreshToken: Type.String({ description: 'single-use: `POST /api/auth/refresh-token` trades it for new tokens' })
}, { description: 'token mode: the tokens are in the body', examples: [TOKEN_SESSION_EXAMPLE] })

/** Cookie mode: the tokens are in HttpOnly cookies only (`Set-Cookie`), never in the body. */
export const CookieSession = Type.Object({
  mode: Type.Literal('cookie'),
  ...sessionFields
}, { description: 'cookie mode: the tokens are in HttpOnly cookies only (`Set-Cookie`)', examples: [COOKIE_SESSION_EXAMPLE] })

/**
 * A new session (login, refresh): one of the two modes, told apart by `mode`, so that a
 * client of either mode gets its fields typed as present.
 */
export const SessionResult = Type.Union([TokenSession, CookieSession], {
  description: 'A new session (login, refresh, password change), told apart by `mode`',
  examples: [TOKEN_SESSION_EXAMPLE, COOKIE_SESSION_EXAMPLE]
})
export type SessionResultBody = Static<typeof SessionResult>
