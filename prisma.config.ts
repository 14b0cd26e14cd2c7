// Prisma CLI configuration. The adapter makes every CLI command run without a native
// engine binary (the schema engine runs as WebAssembly), so nothing is downloaded at
// install or run time. See docs/database.md.
import path from 'node:path'
import { defineConfig } from 'prisma/config'
import { PrismaPg } from '@prisma/adapter-pg'

// `prisma generate` needs a well-formed URL even though it never connects.
process.env.DATABASE_URL ??= 'postgresql://localhost:5432/unused'

export default defineConfig({
  experimental: { adapter: true },
  engine: 'js',
  schema: path.join('prisma', 'schema.prisma'),
  migrations: { path: path.join('prisma', 'migrations') },
  async adapter () {
    return new PrismaPg({ connectionString: process.env.DATABASE_URL })
  }
})
