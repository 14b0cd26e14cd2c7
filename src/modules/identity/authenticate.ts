/**
 * The token check, `app.authenticate`: the `onRequest` hook of every signed-in subtree (before
 * the body is read). @fastify/jwt verifies with HS256 pinned (plugin.ts registers it). A
 * token is accepted only when its user still exists, its `ver` claim equals the user's token
 * version (a password change bumps it) and its session (`sid`) has not been revoked (logout,
 * reuse of a refresh token): one prepared statement reads the user and checks the session
 * (repository.ts, `tokenUser`). The public user record is kept on `request.currentUser`, so a
 * route that needs it asks no second query.
 *
 * The token comes from the `Authorization: Bearer` header or, when the request has no
 * Authorization header at all, from the access-token cookie of browser clients: the header
 * wins, and a bad header is a 401 even with a good cookie. A cookie-authenticated request
 * with an unsafe method must pass the origin check (csrf.ts) first.
 */
import type { JWT } from '@fastify/jwt'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { Unauthorized } from '../../lib/problem.js'
import { MAX_INT4 } from '../../lib/schemas.js'
import type { PublicUser, TokenUser } from '../users/index.js'
import { isSafeMethod, type OriginCheck } from './csrf.js'

export interface TokenClaims {
  /** The user id, as a string (RFC 7519). */
  sub: string
  /** The user's token version when the token was issued. */
  ver: number
  /** The session the token belongs to (a UUID). */
  sid: string
}

declare module '@fastify/jwt' {
  interface FastifyJWT {
    payload: TokenClaims
    user: TokenClaims
  }
}

declare module 'fastify' {
  interface FastifyInstance {
    authenticate: (request: FastifyRequest, reply: FastifyReply) => Promise<void>
  }
  interface FastifyRequest {
    /** The authenticated user, set by `authenticate`; null on public routes. */
    currentUser: PublicUser | null
    /** The session of the request's access token, set by `authenticate`. */
    sessionId: string | null
    /** Where `authenticate` found the access token. */
    authenticatedBy: 'header' | 'cookie' | null
  }
}

export interface AuthenticatorOptions {
  /** @fastify/jwt's verifier, HS256 only. */
  jwt: Pick<JWT, 'verify'>
  /** The user a token names, with their token version, if the token's session is live, or null. */
  tokenUser: (id: number, sessionId: string) => Promise<TokenUser | null>
  /** Name of the access-token cookie of browser clients. */
  accessCookie: string
  /** The CSRF check of cookie-authenticated unsafe requests. */
  originCheck: OriginCheck
}

const SUB_PATTERN = /^[1-9][0-9]{0,9}$/
/** Session ids (the `sid` claim) are UUIDs: checked before they reach a `uuid` column. */
const SESSION_ID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/** The user id a `sub` claim names, or undefined when it is not one this service issues. */
function subjectId (sub: unknown): number | undefined {
  if (typeof sub !== 'string' || !SUB_PATTERN.test(sub)) return undefined
  const id = Number(sub)
  // Ids are PostgreSQL `integer`s: a larger `sub` names no user (and would fail the query).
  return id <= MAX_INT4 ? id : undefined
}

/** The `authenticate` hook. */
export function authenticator (options: AuthenticatorOptions): (request: FastifyRequest) => Promise<void> {
  const { jwt, tokenUser } = options
  return async function authenticate (request: FastifyRequest) {
    let claims: TokenClaims
    // Any Authorization header wins over the cookie (a malformed one is a 401, not a fallback).
    const header = request.headers.authorization
    const cookie = header === undefined ? request.cookies?.[options.accessCookie] : undefined
    const byCookie = cookie !== undefined && cookie !== ''
    // Checked before the token: a forged cross-site request learns nothing from a 401.
    if (byCookie && !isSafeMethod(request.method)) options.originCheck(request, { requireOrigin: true })
    const token = byCookie ? cookie : bearerToken(header)
    // The verifier @fastify/jwt built at registration (HS256 only), called directly:
    // `request.jwtVerify` would merge options, decode the token a second time and go
    // through callbacks on every request (bench/README.md, "The floor").
    try {
      claims = jwt.verify<TokenClaims>(token)
    } catch (error) {
      throw new Unauthorized(describeJwtError(error))
    }
    const id = subjectId(claims.sub)
    if (id === undefined || !Number.isSafeInteger(claims.ver) || (typeof claims.sid !== 'string' || !SESSION_ID_PATTERN.test(claims.sid))) {
      throw new Unauthorized('The token is not one this service issued')
    }
    const user = await tokenUser(id, claims.sid)
    if (user === null || user.tokenVersion !== claims.ver) {
      throw new Unauthorized('The token has been revoked')
    }
    const { tokenVersion: _, ...publicUser } = user
    request.currentUser = publicUser
    request.sessionId = claims.sid
    request.authenticatedBy = byCookie ? 'cookie' : 'header'
  }
}

/** The token of an `Authorization: Bearer <token>` header (the scheme in any case). */
function bearerToken (header: string | undefined): string {
  if (header === undefined || !/^Bearer\s/i.test(header)) throw new Unauthorized('The Authorization header (or the session cookie) is missing')
  const parts = header.split(' ')
  if (parts.length !== 2 || parts[1] === '') throw new Unauthorized('The Authorization header must be `Bearer <token>`')
  return parts[1]!
}

function describeJwtError (error: unknown): string {
  return (error as { code?: string }).code === 'FAST_JWT_EXPIRED' ? 'The token has expired' : 'The token is invalid'
}
