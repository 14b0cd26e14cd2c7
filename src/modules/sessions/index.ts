/** The sessions module as the app and other modules use it: import nothing else of it (lint: docs/architecture.md). */
export { sessionCookieNames } from './cookies.js'
export { default as sessionsService } from './plugin.js'
export { default as sessionsRepository } from './repository.js'
export { deliverSession } from './respond.js'
export type { SignInMethod } from './service.js'
export { CookieSession, RefreshBody, SessionMode, SessionResult, TokenSession, type SessionModeValue } from './schemas.js'
