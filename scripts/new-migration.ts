/**
 * Writes a new migration offline: `npm run db:migration -- <name>`.
 *
 * `prisma migrate dev` needs a shadow database, and `migrate diff --from-migrations` /
 * `--from-url` are refused with a driver adapter (docs/database.md), so the migrations folder
 * keeps, beside each `migration.sql`, the `schema.prisma` it brings the database to. This
 * diffs the newest of those snapshots against the working prisma/schema.prisma (so a second,
 * uncommitted migration does not repeat the first), writes the SQL to
 * prisma/migrations/<UTC timestamp>_<name>/migration.sql and the snapshot beside it.
 * test/migrations.test.ts checks that the snapshots and the SQL agree.
 * The Prisma CLI connects even to compute a diff: DATABASE_URL is used when set, otherwise
 * a throwaway embedded PostgreSQL runs for the few seconds it takes.
 */
import { chmod, copyFile, mkdir, mkdtemp, readdir, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { startEmbeddedPostgres } from '../src/db/embedded.js'
import { MIGRATIONS_DIR } from '../src/db/pending.js'
import { PROJECT_ROOT, prismaCli } from '../src/db/prisma-cli.js'

export const SNAPSHOT = 'schema.prisma'

const name = process.argv[2]
if (!name || !/^[a-z0-9_]+$/.test(name)) {
  console.error('usage: npm run db:migration -- <name>   (lower-case letters, digits and _)')
  process.exit(64)
}

const migrations = (await readdir(MIGRATIONS_DIR, { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name).sort()
const newest = migrations.at(-1)
const from = newest === undefined ? ['--from-empty'] : ['--from-schema-datamodel', path.join(MIGRATIONS_DIR, newest, SNAPSHOT)]

const temp = await mkdtemp(path.join(os.tmpdir(), 'migration-'))
await chmod(temp, 0o755)
const embedded = process.env.DATABASE_URL ? undefined : await startEmbeddedPostgres({ dataDir: path.join(temp, 'pg'), database: 'postgres', ephemeral: true })
try {
  const url = process.env.DATABASE_URL ?? embedded!.url
  const { code, stdout, stderr } = await prismaCli(['migrate', 'diff', ...from, '--to-schema-datamodel', 'prisma/schema.prisma', '--script'], url)
  if (code !== 0) throw new Error(`prisma migrate diff failed:\n${stderr}`)
  if (!/^\s*[A-Z]/m.test(stdout.replace(/^--.*$/gm, ''))) {
    console.log(`prisma/schema.prisma does not differ from the newest migration (${newest ?? 'none'}): no migration written.`)
  } else {
    const stamp = new Date().toISOString().replace(/\D/g, '').slice(0, 14)
    const dir = path.join(MIGRATIONS_DIR, `${stamp}_${name}`)
    await mkdir(dir, { recursive: true })
    await writeFile(path.join(dir, 'migration.sql'), stdout)
    await copyFile(path.join(PROJECT_ROOT, 'prisma', 'schema.prisma'), path.join(dir, SNAPSHOT))
    console.log(`Wrote ${path.relative(PROJECT_ROOT, dir)}/migration.sql (and the ${SNAPSHOT} it leads to):\n\n${stdout}`)
    console.log('Next: read the SQL; `npm run db:generate` regenerates the Prisma client for the changed schema (the code sees the new fields only then);')
    console.log('`npm start` or `npm run db:migrate` applies the migration; commit the schema and the migration folder together.')
  }
} finally {
  await embedded?.stop()
}
