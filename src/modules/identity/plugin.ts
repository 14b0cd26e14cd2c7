/**
 * The identity plugin: sign-in (password, second step, passkeys), sessions (tokens, refresh
 * rotation, logout, the token check, cookies, CSRF) and factors (TOTP, recovery codes,
 * passkeys, challenges), with their budgets, built once. It decorates the app with two
 * things: `app.authenticate`, the token check every signed-in subtree runs as its
 * `onRequest` hook, and `app.identity`, the one service its routes and the user routes call.
 * Its tables (`sessions`, `refresh_tokens`, `totp_factors`, `recovery_codes`, `passkeys`)
 * are queried here only; users are read through the users repository.
 */
import fastifyJwt from '@fastify/jwt'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import type { AuthSettings, LimitsSettings } from '../../config.js'
import type { SessionModeValue, SessionResultBody } from '../../lib/session-schemas.js'
import { attemptStore } from '../../plugins/redis-attempts.js'
import { prepareSecurityNotice, SECURITY_NOTICE_KIND, SECURITY_NOTICE_WINDOW_MS, type SecurityNotice } from '../mail/index.js'
import { authenticator } from './authenticate.js'
import { accountLimiter, clientBudget, type AuthBudget } from './budgets.js'
import { MemoryChallengeStore, RedisChallengeStore } from './challenges.js'
import { deliverSession, sessionCookies, type SessionCookies } from './cookies.js'
import { originCheck as createOriginCheck, type OriginCheck } from './csrf.js'
import { factorsRepository } from './factors-repository.js'
import { CHALLENGES_PER_CLIENT, factorsService, type FactorsService } from './factors.js'
import { securityActivity, type SecurityActivity, type SecurityEventKind } from './activity.js'
import { sessionsRepository } from './repository.js'
import { deviceOf, sessionsService, type IssuedSession, type SessionsService, type SignInMethod } from './sessions.js'
import { passwordChecks, type PasswordChecks } from './sign-in.js'

/** The one service of identity, `app.identity`. */
export interface Identity extends PasswordChecks {
  /** The per-client budget of bcrypt-costing requests (RATE_LIMIT_AUTH_MAX), an `onRequest` hook. */
  authBudget: AuthBudget
  /** The per-client budget of sign-ins completed by a code or a passkey (RATE_LIMIT_SECOND_STEP_MAX), an `onRequest` hook. */
  secondStepBudget: AuthBudget
  /** The CSRF check of browser requests (csrf.ts). */
  originCheck: OriginCheck
  sessions: SessionsService
  /** The account's security activity (activity.ts). */
  activity: SecurityActivity
  /**
   * Records an event of a change that has committed, from the request's device: a failure to
   * record it is logged, never the change's answer.
   */
  recordActivity: (request: FastifyRequest, userId: number, kind: SecurityEventKind, detail?: string | null) => Promise<void>
  cookies: SessionCookies
  factors: FactorsService
  /** Hands a new session to the client in `mode`: tokens in the body, or cookies. */
  deliver: (reply: FastifyReply, issued: IssuedSession, mode: SessionModeValue) => SessionResultBody
  /**
   * A new session after a password change ended every other one: signed in as the
   * request's own session was, and delivered as it was authenticated (cookie or token).
   */
  renew: (request: FastifyRequest, reply: FastifyReply, user: { id: number, tokenVersion: number }) => Promise<SessionResultBody>
}

declare module 'fastify' {
  interface FastifyInstance {
    identity: Identity
  }
}

export interface IdentityOptions {
  auth: AuthSettings
  limits: Pick<LimitsSettings, 'authMax' | 'secondStepMax' | 'loginFailuresMax' | 'loginFailuresWindowMs'>
  /** Tests only: smaller bounds and a clock (src/app.ts, `Tuning`). */
  tuning?: {
    /** Rotated refresh tokens kept per session (repository.ts). */
    refreshTokensKept?: number
    /** Live values of each in-memory challenge store, and WebAuthn challenges per client (challenges.ts). */
    challenges?: { maxKeys?: number, perOwner?: number }
    /** The clock of TOTP codes, ms (factors.ts). */
    clock?: () => number
  }
}

const ALGORITHM = 'HS256'

async function identity (app: FastifyInstance, options: IdentityOptions): Promise<void> {
  const { auth, limits, tuning = {} } = options
  await app.register(fastifyJwt, {
    secret: auth.secret,
    sign: { algorithm: ALGORITHM, expiresIn: auth.accessTokenTtl },
    verify: { algorithms: [ALGORITHM] }
  })
  const sessionRows = sessionsRepository(app.prisma, { ...auth, refreshTokensKept: tuning.refreshTokensKept })
  const originCheck = createOriginCheck({ csrfTrustedOrigins: auth.corsOrigins })
  const cookies = sessionCookies({ secure: auth.cookieSecure, sameSite: auth.cookieSameSite })
  // One budget of password guesses per account (login, second steps, current-password checks),
  // one of bcrypt-costing requests per client; in Redis when configured.
  const guesses = accountLimiter(limits, attemptStore(app.redis, 'guesses'))
  const authBudget = clientBudget({ max: limits.authMax, store: attemptStore(app.redis, 'auth') })
  const secondStepBudget = clientBudget({ max: limits.secondStepMax, store: attemptStore(app.redis, 'second-step') })
  const activity = securityActivity(app.prisma)
  const passwords = passwordChecks({ users: app.usersRepository, passwords: app.passwords, guesses, authBudget, requireVerifiedEmail: auth.requireVerifiedEmail, activity })
  const sessions = sessionsService({ sessions: sessionRows, jwt: app.jwt, refreshTtlMs: auth.refreshTokenTtlMs, activity })

  // Challenges and second-step tickets are shared by the replicas through Redis when configured.
  const challengeLimits = { perOwner: CHALLENGES_PER_CLIENT, ...tuning.challenges }
  app.mail.define(SECURITY_NOTICE_KIND, prepareSecurityNotice)
  const factors = factorsService({
    rpId: auth.webauthnRpId,
    rpName: auth.webauthnRpName,
    origins: auth.webauthnOrigins,
    recentSignInMaxAgeMs: auth.recentSignInMaxAgeMs,
    challenges: app.redis === null ? new MemoryChallengeStore(challengeLimits) : new RedisChallengeStore(app.redis, challengeLimits),
    tickets: app.redis === null ? new MemoryChallengeStore({ maxKeys: tuning.challenges?.maxKeys }) : new RedisChallengeStore(app.redis),
    now: tuning.clock,
    factors: factorsRepository(app.prisma),
    guesses,
    checkPassword: passwords.checkCurrentPassword,
    tokenVersion: async (userId) => (await app.usersRepository.findCredentialsById(userId))?.tokenVersion ?? null,
    notify: async (tx, account, event, name) => {
      const notice: SecurityNotice = { event, to: account.email, username: account.username, ...(name === undefined ? {} : { name }) }
      await app.mail.enqueue(SECURITY_NOTICE_KIND, notice, SECURITY_NOTICE_WINDOW_MS, tx)
    },
    wake: app.mail.wake,
    activity
  })

  const deliver = (reply: FastifyReply, issued: IssuedSession, mode: SessionModeValue): SessionResultBody =>
    deliverSession(reply, cookies, issued, mode)

  app.decorateRequest('currentUser', null)
  app.decorateRequest('sessionId', null)
  app.decorateRequest('authenticatedBy', null)
  app.decorate('authenticate', authenticator({ jwt: app.jwt, tokenUser: sessionRows.tokenUser, accessCookie: cookies.names.access, originCheck }))
  app.decorate('identity', {
    ...passwords,
    authBudget,
    secondStepBudget,
    originCheck,
    sessions,
    cookies,
    factors,
    deliver,
    activity,
    async recordActivity (request, userId, kind, detail = null) {
      await activity.record(userId, kind, deviceOf(request), detail)
        .catch((error: unknown) => { request.log.error({ err: error, kind }, 'security activity: the event could not be recorded') })
    },
    async renew (request, reply, user) {
      const methods: SignInMethod[] = await factors.sessionMethods(request.sessionId!)
      return deliver(reply, await sessions.start(user, methods, deviceOf(request), 'password-changed'), request.authenticatedBy === 'cookie' ? 'cookie' : 'token')
    }
  } satisfies Identity)
}

export default fp(identity, { name: 'identity', fastify: '5.x', dependencies: ['prisma', 'redis', 'passwords', 'users-repository', 'mail-sender'] })
