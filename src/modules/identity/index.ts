/** The identity module as the app uses it: import nothing else of it (lint: docs/architecture.md). */
export { default as identity } from './plugin.js'
export { identityRoutes } from './routes.js'
export { sessionCookieNames } from './cookies.js'
