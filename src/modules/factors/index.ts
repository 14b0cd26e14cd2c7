/** The factors module (TOTP, recovery codes, passkeys) as the app uses it: import nothing else of it (lint: docs/architecture.md). */
export { default as factors } from './plugin.js'
export { default as factorsRepository } from './repository.js'
export { securityRoutes, signInRoutes } from './routes.js'
export { SecondStep } from './schemas.js'
export { CHALLENGES_PER_CLIENT } from './service.js'
