// Prisma CLI configuration. The adapter makes every CLI command run without a native
// engine binary (the schema engine runs as WebAssembly), so nothing is downloaded at
// install or run time. See docs/database.md.
import path from 'node:path'
import { defineConfig } from 'prisma/config'
import { PrismaPg } from '@prisma/adapter-pg'
import pg from 'pg'

// `prisma generate` needs a well-formed URL even though it never connects.
process.env.DATABASE_URL ??= 'postgresql://localhost:5432/unused'

// The migration engine reads PostgreSQL's catalogs, whose identifiers are of type `name`
// (OID 19), a column type @prisma/adapter-pg 6.19 cannot describe ("Column type 'name'
// could not be deserialized"). A `name` is text to every client, so the CLI's connections
// report it as `text` (OID 25). Only the CLI uses this client; the service's queries never
// read a `name` column.
const NAME_OID = 19
const TEXT_OID = 25
function nameAsText<T> (result: T): T {
  for (const one of [result].flat() as Array<{ fields?: pg.FieldDef[] } | undefined>) {
    for (const field of one?.fields ?? []) if (field.dataTypeID === NAME_OID) field.dataTypeID = TEXT_OID
  }
  return result
}
class CatalogClient extends pg.Client {
  // pg's Pool calls query(text, values, callback); the adapter's own clients await a promise.
  override query (...args: unknown[]): any {
    const last = args.at(-1)
    if (typeof last === 'function') {
      args[args.length - 1] = (error: Error | null, result: unknown) => last(error, error === null ? nameAsText(result) : result)
    }
    const answer: unknown = (super.query as (...a: unknown[]) => unknown)(...args)
    return answer instanceof Promise ? answer.then(nameAsText) : answer
  }
}

export default defineConfig({
  experimental: { adapter: true },
  engine: 'js',
  schema: path.join('prisma', 'schema.prisma'),
  migrations: { path: path.join('prisma', 'migrations') },
  async adapter () {
    return new PrismaPg(new pg.Pool({ connectionString: process.env.DATABASE_URL, Client: CatalogClient }))
  }
})
