/** The health module as the app uses it: import nothing else of it (lint: docs/architecture.md). */
export { healthRoutes } from './routes.js'
