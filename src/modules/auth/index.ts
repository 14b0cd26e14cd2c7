/** The auth module as the app uses it: import nothing else of it (lint: docs/architecture.md). */
export { authRoutes } from './routes.js'
