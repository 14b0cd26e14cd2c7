/**
 * JWT authentication: @fastify/jwt with HS256 pinned for signing and verifying, and the
 * `authenticate` hook protected routes run on `onRequest` (before the body is read).
 * A token is accepted only when its user still exists and its `ver` claim equals the
 * user's token version, which a password change bumps: deleting a user or changing the
 * password revokes every earlier token. The check loads the public user record once, with
 * the `findUser` it is given (the users repository's prepared statement), and keeps it on
 * `request.currentUser`, so a route that needs that record asks no second query.
 */
import fastifyJwt from '@fastify/jwt'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { Unauthorized } from '../lib/problem.js'
import { MAX_INT4 } from '../lib/schemas.js'
import type { TokenUser } from '../modules/users/repository.js'
import type { PublicUser } from '../modules/users/schemas.js'

interface TokenClaims {
  /** The user id, as a string (RFC 7519). */
  sub: string
  /** The user's token version when the token was issued. */
  ver: number
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
    signToken: (user: { id: number, tokenVersion: number }) => Promise<string>
  }
  interface FastifyRequest {
    /** The authenticated user, set by `authenticate`; null on public routes. */
    currentUser: PublicUser | null
  }
}

interface AuthenticationOptions {
  secret: string
  expiresIn: string
  /** The user a token names, with its token version, or null: runs on every authenticated request. */
  findUser: (id: number) => Promise<TokenUser | null>
}

const ALGORITHM = 'HS256'
const SUB_PATTERN = /^[1-9][0-9]{0,9}$/

/** The user id a `sub` claim names, or undefined when it is not one this service issues. */
function subjectId (sub: unknown): number | undefined {
  if (typeof sub !== 'string' || !SUB_PATTERN.test(sub)) return undefined
  const id = Number(sub)
  // Ids are PostgreSQL `integer`s: a larger `sub` names no user (and would fail the query).
  return id <= MAX_INT4 ? id : undefined
}

async function authentication (app: FastifyInstance, options: AuthenticationOptions): Promise<void> {
  await app.register(fastifyJwt, {
    secret: options.secret,
    sign: { algorithm: ALGORITHM, expiresIn: options.expiresIn },
    verify: { algorithms: [ALGORITHM] }
  })

  app.decorateRequest('currentUser', null)
  const { findUser } = options

  app.decorate('signToken', async function signToken (user: { id: number, tokenVersion: number }) {
    return app.jwt.sign({ sub: String(user.id), ver: user.tokenVersion })
  })

  app.decorate('authenticate', async function authenticate (request: FastifyRequest) {
    let claims: TokenClaims
    try {
      claims = await request.jwtVerify<TokenClaims>()
    } catch (error) {
      throw new Unauthorized(describeJwtError(error))
    }
    const id = subjectId(claims.sub)
    if (id === undefined || !Number.isSafeInteger(claims.ver)) {
      throw new Unauthorized('The token is not one this service issued')
    }
    const user = await findUser(id)
    if (user === null || user.tokenVersion !== claims.ver) {
      throw new Unauthorized('The token has been revoked')
    }
    const { tokenVersion: _, ...publicUser } = user
    request.currentUser = publicUser
  })
}

function describeJwtError (error: unknown): string {
  const code = (error as { code?: string }).code
  switch (code) {
    case 'FST_JWT_NO_AUTHORIZATION_IN_HEADER': return 'The Authorization header is missing'
    case 'FST_JWT_BAD_REQUEST': return 'The Authorization header must be `Bearer <token>`'
    case 'FST_JWT_AUTHORIZATION_TOKEN_EXPIRED': return 'The token has expired'
    default: return 'The token is invalid'
  }
}

export default fp(authentication, { name: 'authentication', fastify: '5.x' })
