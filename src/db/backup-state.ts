/**
 * The state of the database's backups, for /metrics (src/plugins/metrics.ts). The API runs
 * on other hosts than PostgreSQL and pgBackRest's repository, so it reads what reaches it
 * through the database:
 * - backup.pgbackrest_info: `pgbackrest info --output=json` as the backup scheduler recorded
 *   it (deploy/pgbackrest/backup-scheduler.sh, record-info.sql), with its last error;
 * - pg_stat_archiver: when archive_command (pgbackrest archive-push, which succeeds only
 *   once the segment is stored in the repository) last succeeded and last failed.
 * Ages are computed with the database's clock, the one both were written with.
 * No table (no scheduler: `npm start`'s embedded database, tests): no state, no metrics.
 */
import type pg from 'pg'

export interface BackupState {
  stanza: string
  /** Seconds since the newest backup of any type ended; undefined when there is none. */
  lastBackupAge?: number
  /** Seconds since the newest full backup ended. */
  lastFullAge?: number
  /** Seconds since the scheduler last ran `pgbackrest info`. */
  checkedAge: number
  /** The scheduler's last backup or info error; null when its last round went well. */
  error: string | null
  /** Seconds since archive_command last succeeded; undefined when it never has. */
  archivedAge?: number
  /** archive_command failed after its last success: archiving is failing now. */
  archiveFailing: boolean
}

interface InfoBackup { type?: string, timestamp?: { stop?: number } }
interface InfoStanza { name?: string, backup?: InfoBackup[] }

interface Row {
  stanza: string
  info: unknown
  db_now: number
  checked_at: number
  last_error: string | null
  last_archived: number | null
  last_failed: number | null
}

const QUERY = `
SELECT i.stanza, i.info, i.last_error,
       extract(epoch FROM now())::float8 AS db_now,
       extract(epoch FROM i.checked_at)::float8 AS checked_at,
       extract(epoch FROM a.last_archived_time)::float8 AS last_archived,
       extract(epoch FROM a.last_failed_time)::float8 AS last_failed
FROM backup.pgbackrest_info i CROSS JOIN pg_stat_archiver a
ORDER BY i.stanza`

/** The newest stop time (epoch seconds) of a stanza's backups, of one type or any. */
function newestStop (info: unknown, stanza: string, type?: string): number | undefined {
  if (!Array.isArray(info)) return undefined
  let newest: number | undefined
  for (const entry of info as InfoStanza[]) {
    if (entry?.name !== stanza || !Array.isArray(entry.backup)) continue
    for (const backup of entry.backup) {
      const stop = backup?.timestamp?.stop
      if (typeof stop !== 'number' || (type !== undefined && backup.type !== type)) continue
      if (newest === undefined || stop > newest) newest = stop
    }
  }
  return newest
}

/** PostgreSQL's "no such table" and "no such schema". */
const ABSENT = new Set(['42P01', '3F000'])

export async function readBackupState (pool: pg.Pool): Promise<BackupState[]> {
  let rows: Row[]
  try {
    rows = (await pool.query<Row>(QUERY)).rows
  } catch (error) {
    if (ABSENT.has((error as { code?: string }).code ?? '')) return []
    throw error
  }
  return rows.map((row) => {
    const age = (at: number | undefined | null): number | undefined => at === undefined || at === null ? undefined : Math.max(0, row.db_now - at)
    return {
      stanza: row.stanza,
      lastBackupAge: age(newestStop(row.info, row.stanza)),
      lastFullAge: age(newestStop(row.info, row.stanza, 'full')),
      checkedAge: age(row.checked_at) ?? 0,
      error: row.last_error,
      archivedAge: age(row.last_archived),
      archiveFailing: row.last_failed !== null && (row.last_archived === null || row.last_failed > row.last_archived)
    }
  })
}
