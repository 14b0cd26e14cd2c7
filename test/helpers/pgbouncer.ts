/**
 * A real PgBouncer (Debian's `pgbouncer` package) of the test's own, in transaction pooling
 * mode on a free port in front of a test database, stopped at teardown. Without the binary,
 * in CI the test fails with what to install; elsewhere it is skipped with that message.
 */
import { spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import type { Test } from 'tap'
import { freePort } from '../../src/db/embedded.js'

export const NO_PGBOUNCER_MESSAGE = 'This test needs PgBouncer: install the pgbouncer package (Debian: `apt-get install pgbouncer`)'

export function pgbouncerBinary (): string | undefined {
  for (const candidate of ['pgbouncer', '/usr/sbin/pgbouncer']) {
    const found = spawnSync('sh', ['-c', `command -v ${candidate}`], { encoding: 'utf8' })
    if (found.status === 0 && found.stdout.trim() !== '') return found.stdout.trim()
  }
  return undefined
}

export interface PgBouncer {
  /** The database URL through PgBouncer. */
  url: string
  /** Server connections PgBouncer opens per database and user. */
  poolSize: number
}

/**
 * PgBouncer in front of `databaseUrl` (a test database): `pool_mode = transaction`, at most
 * `poolSize` server connections, so many clients share few server connections, as in
 * production. Returns undefined when skipped (no binary, not in CI).
 */
export async function startPgBouncer (t: Pick<Test, 'teardown' | 'plan'>, databaseUrl: string, poolSize = 3): Promise<PgBouncer | undefined> {
  const binary = pgbouncerBinary()
  if (binary === undefined) {
    if (process.env.CI) throw new Error(NO_PGBOUNCER_MESSAGE)
    t.plan(0, `skipped: ${NO_PGBOUNCER_MESSAGE}`)
    return undefined
  }
  const target = new URL(databaseUrl)
  const user = decodeURIComponent(target.username || 'postgres')
  const password = decodeURIComponent(target.password)
  const database = target.pathname.slice(1)
  const port = await freePort()
  const dir = await mkdtemp(path.join(os.tmpdir(), 'ups-pgbouncer-'))
  // PgBouncer refuses to run as root: as root it runs as `postgres` (-u), which must read the files.
  await chmod(dir, 0o755)
  const hostPart = `host=${target.hostname} port=${target.port || 5432} dbname=${database} user=${user}${password ? ` password=${password}` : ''}`
  const ini = [
    '[databases]',
    `${database} = ${hostPart} pool_size=${poolSize}`,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    'unix_socket_dir =',
    'auth_type = trust',
    `auth_file = ${path.join(dir, 'userlist.txt')}`,
    'pool_mode = transaction',
    'max_client_conn = 500',
    `default_pool_size = ${poolSize}`,
    // pg sends none of these, but node-postgres users often do; harmless.
    'ignore_startup_parameters = extra_float_digits',
    'server_reset_query =',
    'log_connections = 0',
    'log_disconnections = 0'
  ].join('\n') + '\n'
  await writeFile(path.join(dir, 'pgbouncer.ini'), ini, { mode: 0o644 })
  await writeFile(path.join(dir, 'userlist.txt'), `"${user}" ""\n`, { mode: 0o644 })

  const args = [...(process.getuid?.() === 0 ? ['-u', 'postgres'] : []), path.join(dir, 'pgbouncer.ini')]
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stdout.on('data', (chunk: Buffer) => { output += chunk.toString() })
  child.stderr.on('data', (chunk: Buffer) => { output += chunk.toString() })
  const exited = once(child, 'exit')
  t.teardown(async () => {
    if (child.exitCode === null) { child.kill('SIGTERM'); await exited }
    await rm(dir, { recursive: true, force: true })
  })

  const url = new URL(databaseUrl)
  url.hostname = '127.0.0.1'
  url.port = String(port)
  const deadline = Date.now() + 15_000
  for (;;) {
    const client = new pg.Client({ connectionString: url.toString() })
    try {
      await client.connect()
      await client.query('SELECT 1')
      await client.end()
      break
    } catch (error) {
      await client.end().catch(() => {})
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`PgBouncer did not start: ${(error as Error).message}\n${output}`)
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }
  return { url: url.toString(), poolSize }
}
