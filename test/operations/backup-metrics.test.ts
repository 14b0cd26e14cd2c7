/**
 * /metrics and the backups (src/db/backup-state.ts, src/plugins/metrics.ts): the API reads
 * what the backup scheduler records in the database (deploy/pgbackrest/record-info.sql, run
 * here by psql exactly as deploy/pgbackrest/backup-scheduler.sh runs it, with a real
 * `pgbackrest info --output=json` of the compose deployment) and pg_stat_archiver.
 * The whole chain with pgBackRest itself runs in test/durability/restore-drill.test.ts.
 */
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { promisify } from 'node:util'
import t from 'tap'
import { build, TEST_ENV } from '../helpers/build.js'
import { query } from '../helpers/database.js'

const exec = promisify(execFile)
const ADMIN_KEY = TEST_ENV.ADMIN_API_KEYS!.split(',')[0]!
const scrape = { method: 'GET' as const, url: '/metrics', headers: { authorization: `Bearer ${ADMIN_KEY}` } }
const RECORD_SQL = new URL('../../deploy/pgbackrest/record-info.sql', import.meta.url).pathname
/** `pgbackrest info --output=json` of stanza main: a full backup, then an incremental. */
const INFO = readFileSync(new URL('fixtures/pgbackrest-info.json', import.meta.url), 'utf8')

function sample (text: string, name: string, labels = ''): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `))
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1))
}

/** What the scheduler does after a round: psql with the same variables. */
async function record (databaseUrl: string, info: string, error: string): Promise<void> {
  await exec('psql', ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-v', 'stanza=main', '-v', `info=${info}`, '-v', `error=${error}`, '-f', RECORD_SQL, databaseUrl])
}

// One app and database for the three steps, in order (each database costs the suite seconds).
const app = await build(t)

t.test('with no backup scheduler recording (npm start, tests), no backup metrics at all', async (t) => {
  const res = await app.inject(scrape)
  t.equal(res.statusCode, 200)
  t.notMatch(res.body, /^(backup|wal_archive)_\w+\{/m, 'no sample: an absent metric, not a made-up age of 0')
})

t.test('the ages of the last backups come from pgbackrest info, the archive state from pg_stat_archiver', async (t) => {
  await record(app.databaseUrl, INFO, '')
  const parsed = JSON.parse(INFO) as Array<{ backup: Array<{ type: string, timestamp: { stop: number } }> }>
  const stops = parsed[0]!.backup.map((b) => b.timestamp.stop)
  const fullStop = parsed[0]!.backup.filter((b) => b.type === 'full').map((b) => b.timestamp.stop)
  const now = Date.now() / 1000
  const text = (await app.inject(scrape)).body
  const last = sample(text, 'backup_last_success_age_seconds', '{stanza="main"}')
  const full = sample(text, 'backup_last_full_age_seconds', '{stanza="main"}')
  t.ok(last !== undefined && Math.abs(last - (now - Math.max(...stops))) < 5, `newest backup (the incremental): ${last}`)
  t.ok(full !== undefined && Math.abs(full - (now - Math.max(...fullStop))) < 5, `newest full backup: ${full}`)
  t.ok(full! > last!, 'the full backup is older than the incremental after it')
  t.ok((sample(text, 'backup_check_age_seconds', '{stanza="main"}') ?? 99) < 5, 'the scheduler checked just now')
  t.equal(sample(text, 'backup_ok', '{stanza="main"}'), 1)
  // The test database archives nothing (archive_mode off): no last success, not failing.
  t.equal(sample(text, 'wal_archive_last_success_age_seconds', '{stanza="main"}'), undefined, 'never archived: absent')
  t.equal(sample(text, 'wal_archive_failing', '{stanza="main"}'), 0)
  const archiver = await query<{ last_archived_time: Date | null }>(app, 'SELECT last_archived_time FROM pg_stat_archiver')
  t.equal(archiver[0]?.last_archived_time, null, 'as pg_stat_archiver says')
})

t.test('a failed round keeps the last info and says so: backup_ok 0, the backup age keeps growing', async (t) => {
  const before = sample((await app.inject(scrape)).body, 'backup_last_success_age_seconds', '{stanza="main"}')!
  await record(app.databaseUrl, '', 'incr backup failed: ERROR: [104]: archive-push-queue-max / repository unreachable')
  await new Promise((resolve) => setTimeout(resolve, 1100))
  const text = (await app.inject(scrape)).body
  t.equal(sample(text, 'backup_ok', '{stanza="main"}'), 0, 'backup_ok 0')
  t.ok(sample(text, 'backup_last_success_age_seconds', '{stanza="main"}')! >= before + 1, 'the last good backup is still the one in the kept info, older now')
  const [row] = await query<{ last_error: string }>(app, 'SELECT last_error FROM backup.pgbackrest_info')
  t.match(row?.last_error, /repository unreachable/, 'the error is kept for the operator')
  // The next good round clears it.
  await record(app.databaseUrl, INFO, '')
  await new Promise((resolve) => setTimeout(resolve, 1100))
  t.equal(sample((await app.inject(scrape)).body, 'backup_ok', '{stanza="main"}'), 1)
})
