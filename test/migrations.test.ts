/**
 * The migrations and the Prisma schema describe the same database: the SQL Prisma derives
 * from schema.prisma alone is applied to one empty database, prisma/migrations to another
 * (the template of scripts/test.ts), and their catalogs are compared.
 */
import { readdir, readFile } from 'node:fs/promises'
import path from 'node:path'
import pg from 'pg'
import t from 'tap'
import { MIGRATIONS_DIR } from '../src/db/pending.js'
import { prismaCli } from '../src/db/prisma-cli.js'
import { createEmptyDatabase, createTestDatabase, sqlClient } from './helpers/database.js'

async function catalog (client: pg.Client): Promise<Record<string, unknown[]>> {
  const q = async (sql: string) => (await client.query(sql)).rows
  return {
    extensions: await q("SELECT extname FROM pg_extension WHERE extname <> 'plpgsql' ORDER BY 1"),
    columns: await q(`SELECT table_name, column_name, data_type, udt_name, is_nullable, column_default,
                             character_maximum_length, numeric_precision, datetime_precision
                        FROM information_schema.columns
                       WHERE table_schema = 'public' AND table_name <> '_prisma_migrations'
                       ORDER BY table_name, column_name`),
    indexes: await q("SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename <> '_prisma_migrations' ORDER BY 1, 2"),
    // The images migration adds its foreign key NOT VALID (rows of a deployment whose images were
    // still files); new and changed rows are checked all the same, so the schemas agree.
    constraints: await q(`SELECT c.conrelid::regclass::text AS table_name, c.conname, replace(pg_get_constraintdef(c.oid), ' NOT VALID', '') AS definition
                            FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
                           WHERE n.nspname = 'public' AND c.conrelid::regclass::text <> '_prisma_migrations'
                           ORDER BY 1, 2`)
  }
}

t.test('prisma/migrations and prisma/schema.prisma agree', async (t) => {
  const migrated = await sqlClient(t, await createTestDatabase(t))

  const fromSchemaUrl = await createEmptyDatabase(t)
  const diff = await prismaCli(['migrate', 'diff', '--from-empty', '--to-schema-datamodel', 'prisma/schema.prisma', '--script'], fromSchemaUrl)
  t.equal(diff.code, 0, diff.stderr)
  const fromSchema = await sqlClient(t, fromSchemaUrl)
  await fromSchema.query(diff.stdout)

  const expected = await catalog(fromSchema)
  t.ok(expected.columns!.length > 10, 'the schema has tables')
  t.same(await catalog(migrated), expected)
})

t.test('every migration keeps the schema.prisma it leads to; the newest one is the working schema (npm run db:migration diffs from it)', async (t) => {
  const folders = (await readdir(MIGRATIONS_DIR, { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name).sort()
  for (const folder of folders) {
    t.ok(await readFile(path.join(MIGRATIONS_DIR, folder, 'schema.prisma')).then(() => true, () => false), `${folder} has its schema.prisma`)
  }
  const newest = path.join(MIGRATIONS_DIR, folders.at(-1)!, 'schema.prisma')
  const diff = await prismaCli(['migrate', 'diff', '--from-schema-datamodel', newest, '--to-schema-datamodel', 'prisma/schema.prisma', '--exit-code'], await createEmptyDatabase(t))
  t.equal(diff.code, 0, `prisma/schema.prisma has changes no migration holds: run npm run db:migration -- <name>\n${diff.stdout}${diff.stderr}`)
})
