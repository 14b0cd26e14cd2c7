/**
 * Before/after of one route: GET /api/user/:id on the working tree and on other versions of
 * the service (AB_TREES: git revisions or project copies, comma-separated), interleaved in
 * every pass (the order rotates from pass to pass), each on the same database and users.
 * Three names in AB_TREES are not versions:
 * - `floor`: bench/servers/floor.ts, the same read with node:http and one prepared pg query
 *   (no framework, no token): the working tree's req/s over the floor's is the share of the
 *   physical limit the service reaches;
 * - `fastify`: bench/servers/fastify-floor.ts, that read as one bare Fastify route: the
 *   framework's own share;
 * - `cookie`: the working tree, the token sent in the access cookie instead of the header;
 * - `jwt-floor`: bench/servers/fastify-jwt-floor.ts, the floor with the service's token check
 *   (@fastify/jwt, the owner check, one read, a response schema): the 85% target's base;
 * - `compiled`, `compiled-system`: the working tree compiled (`npm run build` first:
 *   dist/server.js, as the image runs it) on the bench's Node (npm scripts: Node 24) and on
 *   the machine's own (AB_SYSTEM_NODE, /usr/bin/node by default).
 *
 * Two figures per run, because the machine is shared and throughput swings with it:
 * - req/s (autocannon, 50 connections), compared within a pass;
 * - CPU per request: the service process's user+system time (/proc/<pid>/stat) and that of
 *   the PostgreSQL backends serving its pool, divided by the requests answered. CPU time is
 *   what a request costs whatever else runs, so it is far steadier than req/s on a busy box.
 *   The service's is also split by thread: its JavaScript thread, V8's workers (parallel and
 *   concurrent garbage collection, background compilation) and the rest (libuv's pool: the
 *   log's writes).
 *
 *   AB_TREES=99a32e6 npx tsx bench/get-ab.ts          3 passes of 8 s
 *   AB_TREES=floor,fastify,cookie npx tsx bench/get-ab.ts   the service against both floors and its cookie path
 *   AB_TREES=a,b AB_PASSES=5 AB_SECONDS=5 npx tsx bench/get-ab.ts
 *   AB_ENV_<tree>=NAME=value;NAME=value               extra environment for one tree (by the
 *                                                     AB_TREES entry: AB_ENV_99a32e6=...)
 *   AB_TREES=compiled#quiet AB_ENV_compiled_quiet=LOG_LEVEL=warn   a variant again, with its own environment
 *                                                     (AB_ENV_<name> with `_` for every other character: see envName)
 *   AB_BASE=compiled                                  the version the others are compared with
 *                                                     (default: the working tree under tsx)
 *   AB_WRITE=<section>                                also write the table into bench/README.md
 *                                                     between <!-- bench:<section>:start/end -->
 */
import { readdirSync, readFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import { benchDatabase } from './lib/database.js'
import { load, settle } from './lib/load.js'
import { describeMachine, formatLoad, machine } from './lib/machine.js'
import { ROOT, startServer } from './lib/processes.js'
import { formatMs, formatRps, markdownTable, median, percent, writeSection } from './lib/report.js'
import { getUserCookieRequests, getUserRequests, serviceEnv, userPool, type BenchUser } from './lib/service.js'
import { prepareTree, workingTree, type ServiceTree } from './lib/trees.js'

const SECONDS = Number(process.env.AB_SECONDS ?? 8)
const PASSES = Number(process.env.AB_PASSES ?? 3)
const REVISIONS = (process.env.AB_TREES ?? '').split(',').filter((s) => s !== '')
const READERS = 50
/** The version the others are compared with: the working tree under tsx, or any AB_TREES name (`compiled`: as the image runs it). */
const BASE = process.env.AB_BASE === undefined || process.env.AB_BASE === '' ? undefined : process.env.AB_BASE
const TICK_US = 1e6 / 100 // USER_HZ: /proc times are in 1/100 s on Linux

interface Run { rps: number, p99: number, non2xx: number, errors: number, serviceUs: number, databaseUs: number, threadsUs: Threads }

/** A process's CPU time (us) by thread: its JavaScript thread, V8's workers (garbage collection, compilation) and the rest (libuv's pool, others). */
interface Threads { main: number, v8: number, other: number }

/** user + system CPU time of a process, in microseconds. */
function cpuUs (pid: number): number {
  try {
    // Fields after the command (which may hold spaces) start after the last ')'.
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(')').pop()!.trim().split(' ')
    return (Number(fields[11]) + Number(fields[12])) * TICK_US
  } catch { return 0 } // gone: a backend that closed (rare under load)
}

/** `cpuUs` by thread (/proc/<pid>/task/<tid>/stat; a thread's name is its `comm`). */
function threadsUs (pid: number): Threads {
  const threads: Threads = { main: 0, v8: 0, other: 0 }
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8')
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    const us = (Number(fields[11]) + Number(fields[12])) * TICK_US
    threads[tid === String(pid) ? 'main' : name.startsWith('V8') ? 'v8' : 'other'] += us
  }
  return threads
}

/** The PostgreSQL backends of the service's pool (every client backend but our own). */
async function backendPids (databaseUrl: string): Promise<number[]> {
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    const { rows } = await client.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()")
    return rows.map((r) => r.pid)
  } finally { await client.end() }
}

/**
 * The variable a version's extra environment is read from: `AB_ENV_<name>`, or the same with
 * every character other than a letter, digit or `_` written `_` (`AB_ENV_jwt_floor_guarantees`
 * for `jwt-floor#guarantees`). Only the second reaches this process through `npx`: the shell
 * npm runs the command in drops variables whose names are not shell identifiers.
 */
function envName (spec: string): string[] {
  return [`AB_ENV_${spec}`, `AB_ENV_${spec.replace(/[^A-Za-z0-9_]/g, '_')}`]
}

function treeEnv (spec: string | undefined): Record<string, string> {
  const raw = spec === undefined ? process.env.AB_ENV : envName(spec).map((name) => process.env[name]).find((value) => value !== undefined)
  if (raw === undefined && spec?.includes('#') === true) throw new Error(`${spec}: no ${envName(spec)[1]!} (a variant without its own environment measures the same thing twice)`)
  if (!raw) return {}
  return Object.fromEntries(raw.split(';').filter((s) => s.includes('=')).map((s) => [s.slice(0, s.indexOf('=')), s.slice(s.indexOf('=') + 1)]))
}

/** Registers and logs in the readers once, through the working tree (the routes are the same in every version). */
async function readers (databaseUrl: string): Promise<BenchUser[]> {
  const service = await startServer({ entry: 'src/server.ts', env: serviceEnv(databaseUrl), readyPath: '/health/live' })
  try { return await userPool(service.url, 20) } finally { await service.stop() }
}

/** What runs for one AB_TREES entry: a version of the service, or one of the named variants. */
interface Variant extends ServiceTree { entry: string, node?: string, requests: (users: readonly BenchUser[]) => ReturnType<typeof getUserRequests> }

/** The machine's own Node (the one npm runs on), for `compiled-system`. */
const SYSTEM_NODE = process.env.AB_SYSTEM_NODE ?? '/usr/bin/node'

function variant (spec: string | undefined): Variant {
  // `<name>#<label>`: the same variant again under its own name, for its own AB_ENV_<name>#<label>.
  if (spec?.includes('#') === true) return { ...variant(spec.slice(0, spec.indexOf('#'))), name: spec }
  if (spec === undefined) return { ...workingTree(), entry: 'src/server.ts', requests: getUserRequests }
  if (spec === 'floor') return { ...workingTree(), name: 'floor', entry: 'bench/servers/floor.ts', requests: getUserRequests }
  if (spec === 'fastify') return { ...workingTree(), name: 'fastify', entry: 'bench/servers/fastify-floor.ts', requests: getUserRequests }
  if (spec === 'cookie') return { ...workingTree(), name: 'cookie', entry: 'src/server.ts', requests: getUserCookieRequests }
  if (spec === 'jwt-floor') return { ...workingTree(), name: 'jwt-floor', entry: 'bench/servers/fastify-jwt-floor.ts', requests: getUserRequests }
  if (spec === 'compiled') return { ...workingTree(), name: `compiled (Node ${process.versions.node})`, entry: 'dist/server.js', requests: getUserRequests }
  if (spec === 'compiled-system') return { ...workingTree(), name: `compiled (${SYSTEM_NODE})`, entry: 'dist/server.js', node: SYSTEM_NODE, requests: getUserRequests }
  return { ...prepareTree(spec), entry: 'src/server.ts', requests: getUserRequests }
}

async function measure (tree: Variant, env: Record<string, string>, databaseUrl: string, users: readonly BenchUser[]): Promise<Run> {
  const service = await startServer({ entry: tree.entry, node: tree.node, cwd: tree.dir, env: { ...serviceEnv(databaseUrl), ...env }, readyPath: '/health/live' })
  try {
    const requests = tree.requests(users)
    await load({ url: service.url, connections: READERS, seconds: 2, requests })
    const backends = await backendPids(databaseUrl)
    const before = { service: cpuUs(service.pid), threads: threadsUs(service.pid), database: backends.reduce((t, pid) => t + cpuUs(pid), 0) }
    const figures = await load({ url: service.url, connections: READERS, seconds: SECONDS, requests })
    const after = { service: cpuUs(service.pid), threads: threadsUs(service.pid), database: backends.reduce((t, pid) => t + cpuUs(pid), 0) }
    return {
      rps: figures.rps,
      p99: figures.p99,
      non2xx: figures.non2xx,
      errors: figures.errors,
      serviceUs: (after.service - before.service) / figures.total,
      databaseUs: (after.database - before.database) / figures.total,
      threadsUs: {
        main: (after.threads.main - before.threads.main) / figures.total,
        v8: (after.threads.v8 - before.threads.v8) / figures.total,
        other: (after.threads.other - before.threads.other) / figures.total
      }
    }
  } finally {
    await service.stop()
    await settle(500)
  }
}

async function main (): Promise<void> {
  if (REVISIONS.length === 0) { console.error('AB_TREES: one or more git revisions or project copies to compare with the working tree'); process.exit(2) }
  const startedAt = new Date()
  const trees = [variant(BASE), ...REVISIONS.map(variant)]
  const envs = [treeEnv(BASE), ...REVISIONS.map(treeEnv)]
  const names = trees.map((t) => t.name)
  const database = await benchDatabase()
  console.log(`get-ab: ${PASSES} passes of ${SECONDS} s, ${names.join(' vs ')}; ${database.description}; load ${formatLoad(os.loadavg())}`)
  const runs: Run[][] = trees.map(() => [])
  const loads: number[][] = []
  try {
    const users = await readers(database.url)
    for (let pass = 0; pass < PASSES; pass++) {
      loads.push(os.loadavg())
      for (let k = 0; k < trees.length; k++) {
        const i = (k + pass) % trees.length
        const run = await measure(trees[i]!, envs[i]!, database.url, users)
        runs[i]!.push(run)
        console.log(`  pass ${pass + 1} ${names[i]!.padEnd(14)} ${formatRps(run.rps).padStart(7)} req/s  p99 ${formatMs(run.p99)} ms  CPU/request: service ${run.serviceUs.toFixed(0)} us (threads ${run.threadsUs.main.toFixed(0)}/${run.threadsUs.v8.toFixed(0)}/${run.threadsUs.other.toFixed(0)}), PostgreSQL ${run.databaseUs.toFixed(0)} us  non-2xx ${run.non2xx} errors ${run.errors}`)
      }
    }
  } finally {
    for (const tree of trees) tree.cleanup()
    await database.drop()
  }

  const rows = trees.map((_, i) => {
    const r = runs[i]!
    const base = runs[0]!
    return [
      names[i]!,
      formatRps(median(r.map((x) => x.rps))),
      r.map((x) => formatRps(x.rps)).join(' / '),
      i === 0 ? '–' : percent(median(r.map((x, p) => base[p]!.rps / x.rps))),
      median(r.map((x) => x.serviceUs)).toFixed(0),
      (['main', 'v8', 'other'] as const).map((k) => median(r.map((x) => x.threadsUs[k])).toFixed(0)).join(' / '),
      median(r.map((x) => x.databaseUs)).toFixed(0),
      i === 0 ? '–' : percent(median(r.map((x, p) => (x.serviceUs + x.databaseUs) / (base[p]!.serviceUs + base[p]!.databaseUs)))),
      formatMs(median(r.map((x) => x.p99))),
      String(r.reduce((t, x) => t + x.non2xx + x.errors, 0))
    ]
  })
  const m = machine()
  const text = [
    `Measured ${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC on ${describeMachine(m)}; load average at the start of each pass: ${loads.map(formatLoad).join('; ')}.`,
    `Command: \`${['AB_BASE', 'AB_TREES', 'AB_PASSES', 'AB_SECONDS', ...Object.keys(process.env).filter((k) => k.startsWith('AB_ENV'))].filter((k) => process.env[k] !== undefined).map((k) => `${k}=${process.env[k]}`).join(' ')} npx tsx bench/get-ab.ts\` (${PASSES} passes of ${SECONDS} s, GET /api/user/:id with ${READERS} connections, the versions interleaved in each pass).`,
    '',
    markdownTable(['version', 'req/s (median)', 'per pass', `${names[0]} / this, req/s (same pass)`, 'service CPU us/request', 'of which JavaScript thread / V8 workers / other threads', 'PostgreSQL CPU us/request', `this / ${names[0]}, CPU per request (same pass)`, 'p99 ms', 'non-2xx + errors'], rows),
    '',
    `Ratios above 100% favour ${names[0]}: it answers more requests per second than this version, or this version spends more CPU (service and PostgreSQL) per request.`
  ].join('\n')
  console.log(`\n${text}\n`)
  if (process.env.AB_WRITE) writeSection(path.join(ROOT, 'bench', 'README.md'), process.env.AB_WRITE, text)
}

await main()
