/**
 * The local start as a user runs it (`npm start`, `npm run db:migrate`): folders the embedded
 * PostgreSQL can reach, an entry point run to its exit, and a data folder prepared once per
 * test file and copied for each test that only needs one that exists.
 */
import { execFile, spawn } from 'node:child_process'
import { chmod, mkdtemp, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { PROJECT_ROOT } from '../../src/db/prisma-cli.js'

const exec = promisify(execFile)

interface Teardown { teardown: (fn: () => unknown) => void }

/** A folder PostgreSQL (the `postgres` user, as root) can reach, removed at teardown. */
export async function openFolder (t: Teardown): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'start-'))
  await chmod(dir, 0o755)
  t.teardown(async () => { await rm(dir, { recursive: true, force: true }) })
  return dir
}

/** Runs the server (or another entry) to its exit: code and output. */
export async function runToExit (args: string[], env: Record<string, string>, cwd = PROJECT_ROOT): Promise<{ code: number | null, output: string }> {
  return await new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', import.meta.resolve('tsx'), ...args], {
      cwd,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
      stdio: ['ignore', 'pipe', 'pipe']
    })
    let output = ''
    child.stdout.on('data', (chunk) => { output += chunk })
    child.stderr.on('data', (chunk) => { output += chunk })
    child.on('close', (code) => resolve({ code, output }))
  })
}

/**
 * Data folders made once and copied: `initdb` and the migrations take most of a start, and a
 * test about what happens to a folder that exists (a restart, a second start) needs them
 * done, not done again. `keep` takes a folder a server made and stopped cleanly; `copy` gives
 * a copy of it (owner and modes kept: `cp -a`), or a path with nothing there when none was
 * kept, so the start makes one as it would.
 */
export function dataFolders (t: Teardown): { keep: (dataDir: string) => Promise<void>, copy: (t: Teardown) => Promise<string> } {
  let kept: string | undefined
  return {
    async keep (dataDir) {
      const parent = await openFolder(t)
      await exec('cp', ['-a', dataDir, path.join(parent, 'pg')])
      kept = path.join(parent, 'pg')
    },
    async copy (t) {
      const dataDir = path.join(await openFolder(t), 'pg')
      if (kept !== undefined) await exec('cp', ['-a', kept, dataDir])
      return dataDir
    }
  }
}
