/**
 * A start that cannot succeed because of its set-up (a wrong configuration, an embedded
 * database it cannot run) ends with its one-line message and exit 78 (EX_CONFIG), no stack
 * trace. Shared by the server and `npm run db:migrate`; anything else is rethrown. The
 * errors of such a set-up (ConfigError, EmbeddedDatabaseError) extend `SetupError`.
 */
export class SetupError extends Error {
  override name = 'SetupError'
}

export function exitOnSetupError (error: unknown): never {
  if (error instanceof SetupError) {
    console.error(error.message)
    process.exit(78)
  }
  throw error
}
