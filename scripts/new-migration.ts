/**
 * Writes a new migration offline: `npm run db:migration -- <name>`.
 *
 * `prisma migrate dev` needs a shadow database, which the engine-free set-up cannot drive
 * (docs/database.md). Instead this diffs the schema at git HEAD against the working
 * prisma/schema.prisma and writes the SQL to prisma/migrations/<UTC timestamp>_<name>/.
 * Review it, then apply it with `npm run db:migrate` (or just `npm start`).
 * The Prisma CLI connects even to compute a diff: DATABASE_URL is used when set, otherwise
 * a throwaway embedded PostgreSQL runs for the few seconds it takes.
 */
import { execFileSync } from 'node:child_process'
import { chmod, mkdir, mkdtemp, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { startEmbeddedPostgres } from '../src/db/embedded.js'
import { PROJECT_ROOT, prismaCli } from '../src/db/prisma-cli.js'

const name = process.argv[2]
if (!name || !/^[a-z0-9_]+$/.test(name)) {
  console.error('usage: npm run db:migration -- <name>   (lower-case letters, digits and _)')
  process.exit(64)
}

const temp = await mkdtemp(path.join(os.tmpdir(), 'migration-'))
await chmod(temp, 0o755)
const previous = path.join(temp, 'previous.prisma')
let from: string[]
try {
  const schema = execFileSync('git', ['show', 'HEAD:prisma/schema.prisma'], { cwd: PROJECT_ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
  await writeFile(previous, schema)
  from = ['--from-schema-datamodel', previous]
} catch {
  from = ['--from-empty'] // no committed schema yet
}

const embedded = process.env.DATABASE_URL ? undefined : await startEmbeddedPostgres({ dataDir: path.join(temp, 'pg'), database: 'postgres', ephemeral: true })
try {
  const url = process.env.DATABASE_URL ?? embedded!.url
  const { code, stdout, stderr } = await prismaCli(['migrate', 'diff', ...from, '--to-schema-datamodel', 'prisma/schema.prisma', '--script'], url)
  if (code !== 0) throw new Error(`prisma migrate diff failed:\n${stderr}`)
  if (!/^\s*[A-Z]/m.test(stdout.replace(/^--.*$/gm, ''))) {
    console.log('The working schema does not differ from the one at git HEAD: no migration written.')
  } else {
    const stamp = new Date().toISOString().replace(/\D/g, '').slice(0, 14)
    const dir = path.join(PROJECT_ROOT, 'prisma', 'migrations', `${stamp}_${name}`)
    await mkdir(dir, { recursive: true })
    await writeFile(path.join(dir, 'migration.sql'), stdout)
    console.log(`Wrote ${path.relative(PROJECT_ROOT, dir)}/migration.sql:\n\n${stdout}`)
  }
} finally {
  await embedded?.stop()
}
