/**
 * Applies the migrations of prisma/migrations with the Prisma CLI (`migrate deploy`), the
 * same command the container runs. The CLI runs with the project's prisma.config.ts, so no
 * native engine is needed. It takes ~10 s here (the schema engine is WebAssembly):
 * src/db/pending.ts tells first whether there is anything to apply.
 */
import { prismaCli } from './prisma-cli.js'

export async function migrateDeploy (databaseUrl: string): Promise<string> {
  const { code, stdout, stderr } = await prismaCli(['migrate', 'deploy'], databaseUrl)
  if (code !== 0) throw new Error(`prisma migrate deploy failed (exit ${code}):\n${stdout}${stderr}`)
  return stdout + stderr
}
