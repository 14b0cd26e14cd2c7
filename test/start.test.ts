/**
 * The local start (`npm start`) is as sturdy as the container: the real server process on
 * the embedded PostgreSQL, killed and restarted, started twice, misconfigured. The first
 * test makes a data folder from nothing; the others start on copies of it.
 */
import path from 'node:path'
import { readFile, stat } from 'node:fs/promises'
import pg from 'pg'
import t from 'tap'
import { call, isAnswer } from './faults/helpers/http.js'
import { SERVER_ENV, spawnServer, waitFor } from './faults/helpers/server.js'
import { dataFolders, openFolder, runToExit } from './helpers/local-start.js'

const folders = dataFolders(t)
// Each test starts real processes and sets its own limit; the file's (tap's 180 s by
// default) must not cut them short when the machine is loaded.
t.setTimeout(900_000)

t.test('the embedded superuser has a random password kept with the data (mode 0600), not postgres/postgres', { timeout: 240_000 }, async (t) => {
  const dir = await openFolder(t)
  const dataDir = path.join(dir, 'pg')
  const server = await spawnServer(t, { EMBEDDED_DB_DIR: dataDir }, 120_000)
  // No ADMIN_API_KEYS here: one warning, though two scopes (/api/admin, /metrics) check the keys.
  t.equal(server.output().match(/ADMIN_API_KEYS is empty/g)?.length, 1, 'the empty ADMIN_API_KEYS warned of once')
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
  t.equal((await server.exited).code, 0, 'the server closes cleanly')
  await folders.keep(dataDir)
})

t.test('a server killed with SIGKILL leaves its PostgreSQL running: the next start stops it and loses nothing', { timeout: 240_000 }, async (t) => {
  const dataDir = await folders.copy(t)
  const env = { EMBEDDED_DB_DIR: dataDir }
  const first = await spawnServer(t, env, 120_000)
  const user = { username: `killed_${process.pid}`, email: `killed_${process.pid}@example.com`, password: 'survives a SIGKILL' }
  const created = await call(first.url, 'POST', '/api/auth/register', { body: user })
  t.ok(isAnswer(created) && created.status === 201, 'registered')

  const pidFile = path.join(dataDir, 'postmaster.pid')
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
  const dataDir = await folders.copy(t)
  const env = { EMBEDDED_DB_DIR: dataDir }
  const first = await spawnServer(t, env, 120_000)
  const postmaster = Number((await readFile(path.join(dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0])

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
  await t.rejects(readFile(path.join(dataDir, '.app-owner')), { code: 'ENOENT' }, 'and gives the folder up')

  // The folder is free again: the next start takes it.
  const next = await spawnServer(t, env, 120_000)
  const login = await call(next.url, 'POST', '/api/auth/login', { body: { username: user.username, password: user.password } })
  t.ok(isAnswer(login) && login.status === 200, 'the next start serves the same data')
  next.child.kill('SIGTERM')
  await next.exited
})

t.test('NODE_ENV=production without SMTP_URL stops with one clear line, exit 78: password reset needs e-mail', { timeout: 60_000 }, async (t) => {
  const { code, output } = await runToExit(['src/server.ts'], { ...SERVER_ENV, NODE_ENV: 'production', DATABASE_URL: 'postgresql://nobody@127.0.0.1:1/none', PUBLIC_URL: 'https://shop.example.com' })
  t.equal(code, 78)
  t.match(output, /SMTP_URL is required in production/)
  t.notMatch(output, /\n\s+at /, 'no stack trace')
})

t.test('NODE_ENV=production with no database configured stops with one clear line, exit 78', { timeout: 60_000 }, async (t) => {
  const { code, output } = await runToExit(['src/server.ts'], { ...SERVER_ENV, NODE_ENV: 'production' })
  t.equal(code, 78)
  t.match(output, /no database configured in production.*EMBEDDED_DB=true/)
  t.notMatch(output, /\n\s+at /, 'no stack trace')
})
