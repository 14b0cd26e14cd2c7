/**
 * `npm run db:migrate` (src/migrate.ts) as a user runs it: it reads `.env` like the server,
 * and reaches the embedded database when none is configured.
 */
import { execFile } from 'node:child_process'
import path from 'node:path'
import { promisify } from 'node:util'
import { writeFile } from 'node:fs/promises'
import pg from 'pg'
import t from 'tap'
import { PROJECT_ROOT } from '../src/db/prisma-cli.js'
import { createEmptyDatabase } from './helpers/database.js'
import { openFolder, runToExit } from './helpers/local-start.js'

const exec = promisify(execFile)
// Each test starts real processes and sets its own limit; the file's (tap's 180 s by
// default) must not cut them short when the machine is loaded.
t.setTimeout(900_000)

t.test('npm run db:migrate reads .env like the server does', { timeout: 120_000 }, async (t) => {
  const url = await createEmptyDatabase(t)
  const cwd = await openFolder(t)
  await writeFile(path.join(cwd, '.env'), `# as a user writes it\nDATABASE_URL=${url}\n`)
  const { code, output } = await runToExit([path.join(PROJECT_ROOT, 'src/migrate.ts')], {}, cwd)
  t.equal(code, 0, output)
  t.match(output, /Applying 1 migration|Applying \d+ migration/)
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  t.teardown(async () => { await client.end() })
  const { rows } = await client.query("SELECT count(*)::int AS n FROM information_schema.tables WHERE table_name IN ('users', 'products')")
  t.equal(rows[0].n, 2, 'the tables exist in the database .env names')
  const again = await runToExit([path.join(PROJECT_ROOT, 'src/migrate.ts')], {}, cwd)
  t.match(again.output, /up to date/, 'a second run has nothing to do')
})

t.test('npm run db:migrate reaches the embedded database when none is configured', { timeout: 180_000 }, async (t) => {
  const dir = await openFolder(t)
  const dataDir = path.join(dir, 'pg')
  const { code, output } = await runToExit([path.join(PROJECT_ROOT, 'src/migrate.ts')], { EMBEDDED_DB_DIR: dataDir }, dir)
  t.equal(code, 0, output)
  t.match(output, /starting the embedded PostgreSQL/)
  t.match(output, /Applying \d+ migration/)
  t.ok((await exec('ls', [dataDir])).stdout.includes('PG_VERSION'), 'the data folder the server will use')
})
