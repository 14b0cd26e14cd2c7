/**
 * A start that cannot succeed because of its set-up (a wrong configuration, an embedded
 * database it cannot run) ends with its one-line message and exit 78 (EX_CONFIG), no stack
 * trace. Shared by the server and `npm run db:migrate`; anything else is rethrown.
 */
import { ConfigError } from '../config.js'
import { EmbeddedDatabaseError } from '../db/embedded-error.js'

export function exitOnSetupError (error: unknown): never {
  if (error instanceof ConfigError || error instanceof EmbeddedDatabaseError) {
    console.error(error.message)
    process.exit(78)
  }
  throw error
}
