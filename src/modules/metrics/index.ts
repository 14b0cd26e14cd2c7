/** The metrics module as the app uses it: import nothing else of it (lint: docs/architecture.md). */
export { metricsRoutes } from './routes.js'
