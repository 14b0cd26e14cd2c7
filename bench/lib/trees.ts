/**
 * Other versions of the service to measure in the same pass as the working tree
 * (BENCH_COMPARE): a git revision, extracted to a temp folder, or a folder holding a
 * copy of the project (`src/server.ts`). Each runs with the working tree's node_modules
 * (a symlink) and generated Prisma client, so only the source differs.
 */
import { execFileSync, spawnSync } from 'node:child_process'
import { cpSync, existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { ROOT } from './processes.js'

export interface ServiceTree {
  /** A short label for tables: the revision's short hash or the folder's name. */
  name: string
  dir: string
  cleanup: () => void
}

export function workingTree (): ServiceTree {
  return { name: 'working tree', dir: ROOT, cleanup: () => {} }
}

export function prepareTree (spec: string): ServiceTree {
  if (existsSync(path.join(spec, 'src', 'server.ts'))) {
    return { name: path.basename(path.resolve(spec)), dir: path.resolve(spec), cleanup: () => {} }
  }
  const rev = execFileSync('git', ['rev-parse', '--short', spec], { cwd: ROOT, encoding: 'utf8' }).trim()
  const dir = mkdtempSync(path.join(os.tmpdir(), `ups-bench-${rev}-`))
  // The plugin packages (packages/, where the revision has them): tsconfig.json's paths point
  // the service at their sources, so that revision's plugins run, not the working tree's.
  const hasPackages = spawnSync('git', ['cat-file', '-e', `${rev}:packages`], { cwd: ROOT }).status === 0
  const paths = ['src', 'prisma', 'tsconfig.json', 'package.json', 'prisma.config.ts', ...(hasPackages ? ['packages'] : [])]
  const archive = execFileSync('git', ['archive', '--format=tar', rev, ...paths], { cwd: ROOT, maxBuffer: 1 << 28 })
  execFileSync('tar', ['-x', '-C', dir], { input: archive })
  // Not in git: the generated client (same schema assumed) and the installed packages.
  cpSync(path.join(ROOT, 'src', 'generated'), path.join(dir, 'src', 'generated'), { recursive: true })
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'), 'dir')
  return { name: rev, dir, cleanup: () => { rmSync(dir, { recursive: true, force: true }) } }
}
