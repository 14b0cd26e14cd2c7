/**
 * Applies the migrations of prisma/migrations with the Prisma CLI (`migrate deploy`), the
 * same command the container runs. The CLI runs with the project's prisma.config.ts, so no
 * native engine is needed.
 */
import { spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')
const require = createRequire(import.meta.url)

export async function migrateDeploy (databaseUrl: string): Promise<string> {
  const cli = path.join(path.dirname(require.resolve('prisma/package.json')), 'build', 'index.js')
  return await new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, 'migrate', 'deploy'], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: databaseUrl, PRISMA_HIDE_UPDATE_MESSAGE: '1' },
      stdio: ['ignore', 'pipe', 'pipe']
    })
    let output = ''
    child.stdout.on('data', (chunk) => { output += chunk })
    child.stderr.on('data', (chunk) => { output += chunk })
    child.on('error', reject)
    child.on('close', (code) => {
      if (code === 0) resolve(output)
      else reject(new Error(`prisma migrate deploy failed (exit ${code}):\n${output}`))
    })
  })
}
