/** The admin module as the app and other modules use it: import nothing else of it (lint: docs/architecture.md). */
export { adminApiKeyScheme, adminKeyAuthOptions, type KeyFailureLimit } from './api-keys.js'
export { adminRoutes } from './routes.js'
