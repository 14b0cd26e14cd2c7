/**
 * Liveness (the process answers) and readiness (the database answers and its schema is
 * current: every migration of prisma/migrations is applied). Both answer at once; a
 * database that is down makes `/ready` a 503 within the pool's connection timeout.
 */
import { readdir } from 'node:fs/promises'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from 'typebox'
import { MIGRATIONS_DIR } from '../../db/pending.js'
import { ServiceUnavailable } from '../../lib/problem.js'
import { problems } from '../../lib/responses.js'

const Status = Type.Object({ status: Type.Literal('ok') })

/** The migrations this code expects; none when the folder is not shipped (then only the connection counts). */
async function expectedMigrations (): Promise<string[]> {
  try {
    const entries = await readdir(MIGRATIONS_DIR, { withFileTypes: true })
    return entries.filter((e) => e.isDirectory()).map((e) => e.name)
  } catch {
    return []
  }
}

export const healthRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const expected = await expectedMigrations()

  app.get('/live', {
    config: { rateLimit: false },
    schema: { tags: ['health'], summary: 'The process is up', response: { 200: Status } }
  }, async () => ({ status: 'ok' as const }))

  app.get('/ready', {
    config: { rateLimit: false },
    schema: { tags: ['health'], summary: 'The database answers and its migrations are applied', response: { 200: Status, ...problems(503) } }
  }, async () => {
    let applied: Set<string>
    try {
      const rows = expected.length === 0
        ? await app.prisma.$queryRaw<{ name: string }[]>`SELECT 'none' AS name`
        : await app.prisma.$queryRaw<{ name: string }[]>`SELECT migration_name AS name FROM _prisma_migrations WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL`
      applied = new Set(rows.map((r) => r.name))
    } catch (error) {
      if (isUndefinedTable(error)) applied = new Set()
      else throw new ServiceUnavailable('The database is unavailable')
    }
    const pending = expected.filter((name) => !applied.has(name))
    if (pending.length > 0) {
      throw new ServiceUnavailable(`The database schema is not up to date: ${pending.length} migration(s) pending`)
    }
    return { status: 'ok' as const }
  })
}

function isUndefinedTable (error: unknown): boolean {
  const e = error as { meta?: { driverAdapterError?: { cause?: { originalCode?: string } } } }
  return e.meta?.driverAdapterError?.cause?.originalCode === '42P01'
}
