/** Schemas of the session routes (login's answer, refresh, logout). */
import { Type, type Static } from 'typebox'
import { Timestamp } from '../../lib/schemas.js'

/**
 * `token`: the tokens are in the body, for clients that send `Authorization: Bearer`;
 * `cookie`: they are in HttpOnly cookies only, for browsers (docs/api.md, "Browser clients").
 */
export const SessionMode = Type.Union([Type.Literal('token'), Type.Literal('cookie')], {
  description: '`token` (default for JSON): tokens in the body; `cookie` (default for forms): tokens in HttpOnly cookies only'
})
export type SessionModeValue = Static<typeof SessionMode>

export const SessionResult = Type.Object({
  mode: SessionMode,
  token: Type.Optional(Type.String({ description: 'access token (JWT, HS256): send it as `Authorization: Bearer <token>`; absent in cookie mode' })),
  tokenType: Type.Optional(Type.Literal('Bearer')),
  expiresIn: Type.String({ description: 'the access token\'s lifetime, e.g. `15m` (ACCESS_TOKEN_TTL)' }),
  expiresAt: Timestamp,
  userId: Type.Integer(),
  refreshToken: Type.Optional(Type.String({ description: 'single-use: `POST /api/auth/refresh-token` trades it for new tokens; absent in cookie mode' })),
  refreshTokenExpiresAt: Timestamp
}, {
  description: 'A new session (login, refresh, password change)',
  examples: [{ mode: 'token', token: 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxIiwidmVyIjowLCJzaWQiOiIuLi4ifQ.signature', tokenType: 'Bearer', expiresIn: '15m', expiresAt: '2026-11-23T21:15:00.000Z', userId: 1, refreshToken: 'q3Vx0pX4m2yZk8rT1sW6nB9cD5fG7hJ0lK2aE4uI6oY', refreshTokenExpiresAt: '2026-12-23T21:00:00.000Z' }]
})
export type SessionResultBody = Static<typeof SessionResult>

export const RefreshBody = Type.Object({
  refreshToken: Type.Optional(Type.String({ minLength: 1, maxLength: 512, description: 'the refresh token; browsers send none (the refresh cookie is used)' }))
}, { additionalProperties: false, examples: [{ refreshToken: 'q3Vx0pX4m2yZk8rT1sW6nB9cD5fG7hJ0lK2aE4uI6oY' }, {}] })
