/** The users module as the app and other modules use it: import nothing else of it (lint: docs/architecture.md). */
export { accountLimiter } from './account-limit.js'
export { authBudget, type AuthBudget } from './budget.js'
export { registrationRoute } from './registration.js'
export { default as usersRepository } from './repository.js'
export { userRoutes } from './routes.js'
export { default as passwordReset } from './password-reset.js'
export { PasswordResetAccepted, PasswordResetBody, PasswordResetConfirmBody, passwordToCheck, User } from './schemas.js'
export { default as usersService } from './service.js'
