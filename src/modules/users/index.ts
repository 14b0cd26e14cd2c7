/** The users module as the app and other modules use it: import nothing else of it (lint: docs/architecture.md). */
export { passwordResetRoutes, registrationRoute, resendVerificationRoute, verifyEmailRoute } from './account-routes.js'
export { default as usersRepository, publicUserColumns, type TokenUser, type UsersRepository } from './repository.js'
export { userRoutes } from './routes.js'
export { default as emailVerification } from './email-verification.js'
export { default as passwordReset } from './password-reset.js'
export { passwordToCheck, User, type PublicUser } from './schemas.js'
export { default as usersService } from './service.js'
