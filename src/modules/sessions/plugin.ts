/**
 * Decorates the app with the sessions service (`app.sessions`) and the session cookies
 * (`app.sessionCookies`), built once for every route that starts, rotates or ends a session
 * (docs/architecture.md).
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { sessionCookies, type SessionCookies } from './cookies.js'
import { sessionsService, type SessionsService } from './service.js'

declare module 'fastify' {
  interface FastifyInstance {
    sessions: SessionsService
    sessionCookies: SessionCookies
  }
}

export interface SessionsPluginOptions {
  /** Lifetime of a refresh token, in ms (REFRESH_TOKEN_TTL). */
  refreshTokenTtlMs: number
  /** COOKIE_SECURE. */
  cookieSecure: boolean
  /** COOKIE_SAMESITE. */
  cookieSameSite: 'strict' | 'none'
}

async function sessions (app: FastifyInstance, options: SessionsPluginOptions): Promise<void> {
  app.decorate('sessions', sessionsService({ sessions: app.sessionsRepository, signToken: app.signToken, jwt: app.jwt, refreshTtlMs: options.refreshTokenTtlMs }))
  app.decorate('sessionCookies', sessionCookies({ secure: options.cookieSecure, sameSite: options.cookieSameSite }))
}

export default fp(sessions, { name: 'sessions-service', fastify: '5.x', dependencies: ['sessions-repository', 'authentication'] })
