/**
 * No Docker engine runs on these machines, so this proves the container's start command on
 * the host, as the Dockerfile's runtime stage runs it: the build output, production
 * dependencies only (`npm ci --omit=dev`), NODE_ENV=production, migrations applied by the
 * Prisma CLI on an empty real PostgreSQL database, then a register -> login -> use-token
 * flow over real HTTP and a graceful SIGTERM.
 */
import { execFile, spawn } from 'node:child_process'
import { cp, mkdtemp, readFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { freePort } from '../src/db/embedded.js'
import { PROJECT_ROOT } from '../src/db/prisma-cli.js'
import { createEmptyDatabase } from './helpers/database.js'

const run = promisify(execFile)

t.test('the Dockerfile start command serves the API with production dependencies only', { timeout: 170_000 }, async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'container-'))
  t.teardown(async () => { await run('rm', ['-rf', dir]) })

  // Build stage: the compiled service.
  await run(process.execPath, [path.join(PROJECT_ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json', '--outDir', path.join(dir, 'dist')], { cwd: PROJECT_ROOT })
  // Runtime stage: the files the Dockerfile copies, then production dependencies.
  const dockerfile = await readFile(path.join(PROJECT_ROOT, 'Dockerfile'), 'utf8')
  for (const file of ['package.json', 'package-lock.json', 'prisma', 'prisma.config.ts']) {
    t.ok(dockerfile.split('\n').some((line) => line.startsWith('COPY ') && line.split(/\s+/).includes(file)), `the Dockerfile copies ${file}`)
    await cp(path.join(PROJECT_ROOT, file), path.join(dir, file), { recursive: true })
  }
  await run('npm', ['ci', '--omit=dev', '--ignore-scripts', '--prefer-offline', '--no-audit', '--no-fund'], { cwd: dir, maxBuffer: 1 << 24 })
  const installed = JSON.parse((await run('npm', ['ls', '--omit=dev', '--depth=0', '--json'], { cwd: dir, maxBuffer: 1 << 24 })).stdout).dependencies
  t.notOk(installed.tap || installed.typescript || installed.tsx, 'no development dependency is installed')

  const url = await createEmptyDatabase(t)

  const command = /CMD \["sh", "-c", "(.+)"\]/.exec(dockerfile)?.[1]
  t.ok(command, 'the start command is read from the Dockerfile')
  const port = await freePort()
  const server = spawn('sh', ['-c', command!], {
    cwd: dir,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      NODE_ENV: 'production',
      DATABASE_URL: url,
      SECRET: 'container-test-secret-0123456789-0123456789',
      HOST: '127.0.0.1',
      PORT: String(port),
      LOG_LEVEL: 'info',
      BCRYPT_COST: '4'
    },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let output = ''
  server.stdout.on('data', (chunk) => { output += chunk })
  server.stderr.on('data', (chunk) => { output += chunk })
  const exited = new Promise<number | null>((resolve) => server.on('exit', (code) => resolve(code)))
  t.teardown(() => { if (server.exitCode === null) server.kill('SIGKILL') })

  const base = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 90_000
  let ready = false
  while (!ready && Date.now() < deadline && server.exitCode === null) {
    ready = await fetch(`${base}/health/ready`).then((r) => r.ok, () => false)
    if (!ready) await new Promise((resolve) => setTimeout(resolve, 250))
  }
  t.ok(ready, `ready (output so far:\n${output.slice(-2000)})`)
  t.match(output, /migrations have been successfully applied|All migrations/i, 'migrations applied before listening')

  const user = { username: 'container_user', email: 'container@example.com', password: 'a container password' }
  const created = await fetch(`${base}/api/auth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(user) })
  t.equal(created.status, 201)
  const login = await fetch(`${base}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: user.username, password: user.password }) })
  t.equal(login.status, 200)
  const { token, userId } = await login.json() as { token: string, userId: number }
  const me = await fetch(`${base}/api/user/${userId}`, { headers: { authorization: `Bearer ${token}` } })
  t.equal(me.status, 200)
  t.equal((await me.json() as { email: string }).email, user.email)
  t.equal((await fetch(`${base}/docs`)).status, 200, 'the OpenAPI page is served')

  server.kill('SIGTERM')
  t.equal(await exited, 0, 'SIGTERM: graceful exit 0')
  t.notMatch(output, /download|Downloading/i, 'nothing was downloaded')
  t.notMatch(output, user.password, 'the password is not logged')
})
