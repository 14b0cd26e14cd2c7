/**
 * Maps database errors to answers: a unique violation is a 409 (also when two
 * registrations race, since the database decides), a missing row a 404, an unreachable
 * database a 503 that the client may retry.
 */
interface Classified { status: number, code: string, detail: string }

/** PostgreSQL SQLSTATE classes and Node socket errors that mean "the database is not there". */
const UNAVAILABLE_SQLSTATE = /^(08|57P0|53)/
const UNAVAILABLE_ERRNO = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'EAI_AGAIN'])

function uniqueFields (error: Record<string, any>): string[] {
  const target = error.meta?.target ?? error.meta?.driverAdapterError?.cause?.constraint?.fields
  if (Array.isArray(target)) return target.map(String)
  if (typeof target === 'string') return [target]
  return []
}

export function classifyDatabaseError (error: unknown): Classified | undefined {
  if (typeof error !== 'object' || error === null) return undefined
  const e = error as Record<string, any>
  switch (e.code) {
    case 'P2002': {
      const fields = uniqueFields(e)
      const which = fields.length > 0 ? fields.join(', ') : 'a unique field'
      return { status: 409, code: 'CONFLICT', detail: `A record with this ${which} already exists` }
    }
    case 'P2025':
      return { status: 404, code: 'NOT_FOUND', detail: 'The record does not exist' }
    case 'P1001': case 'P1002': case 'P1017': case 'P2024':
      return unavailable()
  }
  const cause = e.cause ?? e.meta?.driverAdapterError?.cause ?? {}
  const sqlState = String(cause.originalCode ?? cause.code ?? e.originalCode ?? '')
  const errno = String(cause.code ?? e.errno ?? e.code ?? '')
  if (UNAVAILABLE_SQLSTATE.test(sqlState) || UNAVAILABLE_ERRNO.has(errno) || cause.kind === 'DatabaseNotReachable' ||
      /Can't reach database|Connection terminated|connect ECONNREFUSED|terminating connection/.test(String(e.message))) {
    return unavailable()
  }
  return undefined
}

function unavailable (): Classified {
  return { status: 503, code: 'SERVICE_UNAVAILABLE', detail: 'The database is unavailable; retry shortly' }
}
