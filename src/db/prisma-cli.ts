/**
 * Runs the Prisma CLI with the project's prisma.config.ts (no native engines) and a given
 * DATABASE_URL. The CLI's adapter connects even for commands that only compute SQL, so
 * every call needs a reachable PostgreSQL.
 */
import { spawn } from 'node:child_process'
import { realpathSync } from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

/**
 * The folder of the project's package.json: the checkout, or /app in the image. Resolved
 * through links, because the test suite runs compiled copies of these files in a mirror
 * whose package.json links back to the checkout (scripts/test-build.ts).
 */
export const PROJECT_ROOT = path.dirname(realpathSync(fileURLToPath(new URL('../../package.json', import.meta.url))))
const require = createRequire(import.meta.url)

export interface CliResult { code: number, stdout: string, stderr: string }

export async function prismaCli (args: string[], databaseUrl: string): Promise<CliResult> {
  const cli = path.join(path.dirname(require.resolve('prisma/package.json')), 'build', 'index.js')
  return await new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cli, ...args], {
      cwd: PROJECT_ROOT,
      env: { ...process.env, DATABASE_URL: databaseUrl, PRISMA_HIDE_UPDATE_MESSAGE: '1' },
      stdio: ['ignore', 'pipe', 'pipe']
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk) => { stdout += chunk })
    child.stderr.on('data', (chunk) => { stderr += chunk })
    child.on('error', reject)
    child.on('close', (code) => resolve({ code: code ?? 1, stdout, stderr }))
  })
}
