/**
 * `npm test`: runs the tap suite against a real PostgreSQL.
 *
 * - With TEST_DATABASE_URL (or DATABASE_URL) set, that server is used: its URL must name a
 *   role allowed to create databases.
 * - Otherwise a throwaway embedded PostgreSQL starts in the OS temp folder and is removed
 *   afterwards.
 *
 * The migrations are applied once, from their SQL as the Prisma CLI records them
 * (test/helpers/migrations.ts: ms instead of the CLI's ~12 s), to a template database; every test
 * file then gets its own copy (`CREATE DATABASE ... TEMPLATE`, test/helpers/database.ts),
 * so files run in parallel without seeing each other's rows.
 * The suite runs on JavaScript compiled once, in a mirror of the checkout under
 * `.test-build/` (scripts/test-build.ts), and tap starts each file without loader hooks
 * (scripts/test-node.sh): no test process pays for a TypeScript or tap loader.
 * Arguments are passed to tap (e.g. `npm test -- test/users.test.ts`). With none, the whole
 * suite runs, then the tests in Chromium (two at a time), then the deployment tests
 * (test/deploy: the rolling restart behind a host HAProxy, and compose.test.ts: Docker
 * Compose for real, skipped with COMPOSE_TEST=0).
 * The whole suite also records every problem answer (TEST_PROBLEM_LOG, test/helpers/build.ts)
 * and fails unless each operation's answers are exactly the codes the OpenAPI document lists
 * for it, both ways (scripts/problem-codes.ts).
 */
import { spawn, spawnSync } from 'node:child_process'
import { chmod, mkdtemp, readdir, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../src/db/embedded.js'
import { applyMigrations } from '../test/helpers/migrations.js'
import { compare as compareProblemCodes } from './problem-codes.js'
import { buildTestTree } from './test-build.js'

function isRunning (pid: number): boolean {
  try { process.kill(pid, 0); return true } catch { return false }
}

function withDatabase (url: string, database: string): string {
  const u = new URL(url)
  u.pathname = `/${database}`
  return u.toString()
}

async function admin (url: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try { await client.query(sql) } finally { await client.end() }
}

let embedded: EmbeddedDatabase | undefined
const configured = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL
let adminUrl: string
if (configured) {
  adminUrl = configured
  console.log(`# tests use the configured PostgreSQL at ${new URL(configured).host}`)
} else {
  const parent = await mkdtemp(path.join(os.tmpdir(), 'ups-test-'))
  await chmod(parent, 0o755) // as root, PostgreSQL runs as `postgres`, which must reach the folder
  const dataDir = path.join(parent, 'pg')
  const started = Date.now()
  embedded = await startEmbeddedPostgres({ dataDir, database: 'postgres', ephemeral: true })
  adminUrl = embedded.adminUrl
  console.log(`# tests use an embedded PostgreSQL on port ${embedded.port} (started in ${Date.now() - started} ms)`)
}

const template = `ups_template_${process.pid}`
const args = process.argv.slice(2)
// The compose test's images (the service's, the mail catcher's), built by Docker while the suite runs (test/deploy/helpers/prebuild.ts).
const composeImage = `upsci-prebuild-${process.pid}`
const prebuild = args.length === 0 && process.env.COMPOSE_TEST !== '0'
  ? spawn(process.execPath, ['--import=tsx', path.join('test', 'deploy', 'helpers', 'prebuild.ts'), composeImage], { stdio: ['ignore', 'pipe', 'inherit'] })
  : undefined
const prebuilt = new Promise<string>((resolve) => {
  if (prebuild === undefined) { resolve(''); return }
  let output = ''
  prebuild.stdout?.on('data', (chunk) => { output += String(chunk) })
  prebuild.on('close', () => resolve(output))
})
// Each run compiles into a folder of its own (scripts/test-build.ts); folders left by runs
// that were killed are removed here.
const builds = path.resolve('.test-build')
for (const name of await readdir(builds).catch(() => [])) {
  if (!isRunning(Number(name))) await rm(path.join(builds, name), { recursive: true, force: true })
}
const compiled = path.join(builds, String(process.pid))
// The whole suite's problem answers, compared with the document after it.
const problemLog = args.length === 0 ? await mkdtemp(path.join(os.tmpdir(), 'ups-problems-')) : undefined
if (problemLog !== undefined) process.env.TEST_PROBLEM_LOG = problemLog
// tap starts each test file with this instead of node (the file says why).
const testNode = path.resolve('scripts', 'test-node.sh')
let code = 1
try {
  const started = Date.now()
  await Promise.all([
    (async () => {
      const count = await buildTestTree(process.cwd(), compiled)
      console.log(`# ${count} TypeScript files compiled to ${path.relative(process.cwd(), compiled)} in ${Date.now() - started} ms`)
    })(),
    (async () => {
      await admin(adminUrl, `DROP DATABASE IF EXISTS ${template}`)
      await admin(adminUrl, `CREATE DATABASE ${template}`)
      await applyMigrations(withDatabase(adminUrl, template))
      console.log(`# migrations applied to ${template} in ${Date.now() - started} ms`)
    })()
  ])

  const tap = async (args: string[]): Promise<number> => await new Promise<number>((resolve) => {
    const child = spawn(process.execPath, [`--import=data:text/javascript,process.execPath=${encodeURIComponent(JSON.stringify(testNode))}`, path.resolve('node_modules', 'tap', 'dist', 'esm', 'run.mjs'), ...args.map((arg) => arg.replace(/\.ts$/, '.js'))], {
      stdio: 'inherit',
      cwd: compiled,
      // The embedded cluster goes whole at the end: the files need not drop their databases
      // (each DROP DATABASE waits for a checkpoint, 1-3 s of a test file's end).
      env: { ...process.env, TAP_RCFILE: path.join(compiled, '.taprc'), TEST_NODE: process.execPath, TEST_ADMIN_URL: adminUrl, TEST_TEMPLATE_DB: template, TEST_KEEP_DATABASES: embedded === undefined ? '' : '1', DATABASE_URL: '' }
    })
    child.on('close', (status) => resolve(status ?? 1))
  })
  code = await tap(args)
  // The tests in Chromium (test/browser/, test/browser-*.test.ts, excluded from tap's default
  // set) run next, two at a time: beside four test files and the compose images' build, a
  // page as heavy as Swagger UI took over their 20 s bound to render (2026-11-29). Before the
  // problem codes are compared: their answers count too.
  if (args.length === 0) {
    const browser = await tap(['--jobs=2', 'test/browser/*.test.ts', 'test/browser-*.test.ts'])
    code = code || browser
  }
  if (problemLog !== undefined) {
    const { unlisted, unproduced, answers } = await compareProblemCodes(problemLog, true)
    for (const entry of unlisted) console.log(`not ok - problem codes: received, not listed in the OpenAPI document: ${entry}`)
    for (const entry of unproduced) console.log(`not ok - problem codes: listed in the OpenAPI document, never received: ${entry}`)
    console.log(`# problem codes: ${answers} answers, ${unlisted.length} received but not listed, ${unproduced.length} listed but never received`)
    if (unlisted.length + unproduced.length > 0) code = code || 1
  }
  // The deployment tests (test/deploy/, excluded from tap's default set) run after the rest:
  // their containers and server processes would otherwise load the machine under the
  // timing-sensitive tests. Two at a time: the compose test mostly waits for Docker, beside
  // the host proxy tests. COMPOSE_TEST=0 skips the compose one (it needs Docker; see the
  // file's header); the host proxy tests still run.
  if (args.length === 0) {
    if (process.env.COMPOSE_TEST === '0') console.log('# test/deploy/compose.test.ts skipped (COMPOSE_TEST=0)')
    process.stdout.write(await prebuilt)
    const deploy = await tap(['--timeout=1800', '--jobs=2', 'test/deploy/*.test.ts'])
    code = code || deploy
  }
} finally {
  prebuild?.kill()
  if (prebuild !== undefined) spawnSync('docker', ['rmi', '-f', composeImage, `${composeImage}-mail-catcher`, `${composeImage}-db`], { stdio: 'ignore' })
  await admin(adminUrl, `DROP DATABASE IF EXISTS ${template} WITH (FORCE)`).catch(() => {})
  await embedded?.stop()
  await rm(compiled, { recursive: true, force: true })
  if (problemLog !== undefined) await rm(problemLog, { recursive: true, force: true })
}
process.exit(code)
