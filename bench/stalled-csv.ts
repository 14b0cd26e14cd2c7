/**
 * Memory held by stalled CSV readers: the service as shipped
 * (src/server.ts, production settings) with a catalogue of long rows, and STALLED_READERS
 * (250) connections that each ask for the whole catalogue as CSV, read the answer's head,
 * then stop reading (the socket paused: the kernel buffers fill, then nothing moves). The
 * service's RSS (VmRSS of its process) is read before, once it has settled with every reader
 * stalled, and after they have gone; its peak (VmHWM) too.
 *
 * Each version runs in turn on the same database: the working tree, and every revision (or
 * project copy) in STALLED_TREES, so the figures are before/after of one run.
 *
 *   STALLED_TREES=8be4c33 npx tsx bench/stalled-csv.ts   the working tree and main at 8be4c33;
 *                                                         rewrites "Stalled CSV readers" in
 *                                                         bench/README.md (~2 min)
 *   npx tsx bench/stalled-csv.ts --quick                 50 readers, 500 rows, prints only
 *   STALLED_READERS=250, STALLED_ROWS=2000 (products, each a 200-character title and a
 *   5,000-character description: the longest the API takes, ~10 KB of UTF-8),
 *   STALLED_WRITE=0 (print only)
 *   DATABASE_URL=postgresql://...                        a fresh database on that server
 */
import { randomBytes } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import { readFileSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import { benchDatabase } from './lib/database.js'
import { settle } from './lib/load.js'
import { describeMachine, formatLoad, machine } from './lib/machine.js'
import { ROOT, startServer } from './lib/processes.js'
import { formatMs, markdownTable, median, writeSection } from './lib/report.js'
import { serviceEnv, userPool } from './lib/service.js'
import { prepareTree, workingTree, type ServiceTree } from './lib/trees.js'

const quick = process.argv.includes('--quick')
const READERS = Number(process.env.STALLED_READERS ?? (quick ? 50 : 250))
const ROWS = Number(process.env.STALLED_ROWS ?? (quick ? 500 : 2000))
const REVISIONS = (process.env.STALLED_TREES ?? '').split(',').filter((s) => s !== '')
const WRITE = process.env.STALLED_WRITE !== undefined ? process.env.STALLED_WRITE !== '0' : !quick
/** RSS has settled when it moved less than this over SETTLE_MS. */
const SETTLE_MB = 2
/** Whole exports read at full speed before the readers stall (the warm-up, timed). */
const EXPORTS = 3
const SETTLE_MS = 3000
const SETTLE_MAX_MS = 60_000

for (const [name, value] of Object.entries({ READERS, ROWS })) {
  if (!Number.isInteger(value) || value < 1) {
    console.error(`STALLED_${name} must be a positive integer`)
    process.exit(2)
  }
}

function kib (line: string | undefined): number {
  return Number(/(\d+)\s*kB/.exec(line ?? '')?.[1] ?? Number.NaN) / 1024
}

/** VmRSS and VmHWM of a process, in MB. */
function memory (pid: number): { rss: number, hwm: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  return { rss: kib(/^VmRSS:.*$/m.exec(status)?.[0]), hwm: kib(/^VmHWM:.*$/m.exec(status)?.[0]) }
}

/** Long rows, one statement: a 200-character title and a 5,000-character description of 2- and 3-byte UTF-8 characters. */
async function seed (databaseUrl: string, creatorId: number, rows: number): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    await client.query(`
      INSERT INTO products (title, description, amount, creator_id, created_at, updated_at)
      SELECT left(i || ' ' || repeat('Título «largo» ', 20), 200),
             left(i || ' ' || repeat('Descripción «muy» larga, 日本語の説明, "quoted" ', 200), 5000),
             100 + i, $1, now(), now()
        FROM generate_series(1, $2::int) AS i`, [creatorId, rows])
  } finally { await client.end() }
}

/** Resets the peak RSS (VmHWM) of a process to its current RSS; false where the kernel or the user does not allow it. */
function resetPeak (pid: number): boolean {
  try { writeFileSync(`/proc/${pid}/clear_refs`, '5'); return true } catch { return false }
}

interface Reader { socket: net.Socket, status: Promise<number> }

/** Asks for the catalogue as CSV, reads up to the end of the answer's head, then stops reading. */
function stalledReader (port: number, rows: number): Reader {
  const socket = net.connect({ host: '127.0.0.1', port })
  socket.on('error', () => {})
  const status = new Promise<number>((resolve) => {
    let head = ''
    const onData = (chunk: Buffer): void => {
      head += chunk.toString('latin1')
      if (!head.includes('\r\n\r\n')) return
      socket.off('data', onData)
      socket.pause()
      resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0))
    }
    socket.on('data', onData)
    socket.once('close', () => resolve(0))
  })
  socket.write(`GET /api/product?limit=${rows} HTTP/1.1\r\nHost: bench\r\nAccept: text/csv\r\n\r\n`)
  return { socket, status }
}

/** Waits until RSS moves less than SETTLE_MB over SETTLE_MS (or SETTLE_MAX_MS passed). */
async function settled (pid: number): Promise<{ rss: number, ms: number }> {
  const started = Date.now()
  const samples: Array<{ at: number, rss: number }> = []
  for (;;) {
    const now = Date.now()
    samples.push({ at: now, rss: memory(pid).rss })
    const window = samples.filter((s) => s.at >= now - SETTLE_MS)
    const spread = Math.max(...window.map((s) => s.rss)) - Math.min(...window.map((s) => s.rss))
    if ((now - samples[0]!.at >= SETTLE_MS && spread < SETTLE_MB) || now - started > SETTLE_MAX_MS) return { rss: samples.at(-1)!.rss, ms: now - started }
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
}

/**
 * No load shedding in the way (an in-flight cap above the readers, no share per client: they
 * all come from one address; no event-loop check on a shared machine), and no minimum read
 * rate (SLOW_CLIENT_WINDOW_MS=0: it would cut a stalled reader after a window, while one
 * that reads just above the rate stays): this measures what an admitted reader holds.
 */
const ADMIT_ALL = { LOAD_SHED_MAX_IN_FLIGHT: String(READERS * 4), LOAD_SHED_MAX_IN_FLIGHT_PER_CLIENT: '0', MAX_EVENT_LOOP_DELAY_MS: '0', SLOW_CLIENT_WINDOW_MS: '0' }

/** The admin key that reads /metrics (the heap and external memory of the process). */
const ADMIN_KEY = randomBytes(32).toString('base64')

/** V8's heap in use and the memory of Buffers outside it (prom-client's default metrics), in MB. */
async function heap (url: string): Promise<{ used: number, external: number }> {
  const text = await (await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } })).text()
  const value = (name: string): number => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1] ?? Number.NaN) / 1e6
  return { used: value('nodejs_heap_size_used_bytes'), external: value('nodejs_external_memory_bytes') }
}

interface Run { tree: string, idle: number, stalled: number, peak: number, after: number, settleMs: number, statuses: Record<number, number>, csvMb: number, exportMs: number[], heapIdle: { used: number, external: number }, heapStalled: { used: number, external: number } }

async function measure (tree: ServiceTree, databaseUrl: string): Promise<Run> {
  const service = await startServer({ entry: 'src/server.ts', cwd: tree.dir, env: serviceEnv(databaseUrl, { CSV_MAX_ROWS: String(Math.max(ROWS, 100)), ADMIN_API_KEYS: ADMIN_KEY, ...ADMIT_ALL }), readyPath: '/health/live' })
  try {
    // Warm-up: whole exports read at full speed (the code paths compiled, the pools open),
    // timed: what the batches cost a client that reads.
    let csvMb = 0
    const exportMs: number[] = []
    for (let i = 0; i < EXPORTS; i++) {
      const started = performance.now()
      const res = await fetch(`${service.url}/api/product?limit=${ROWS}`, { headers: { accept: 'text/csv' } })
      const bytes = (await res.arrayBuffer()).byteLength
      if (res.status !== 200) throw new Error(`warm-up export: ${res.status}`)
      exportMs.push(performance.now() - started)
      csvMb = bytes / 1e6
    }
    await settle(1000)
    const idle = (await settled(service.pid)).rss
    const heapIdle = await heap(service.url)
    const peakReset = resetPeak(service.pid)
    const readers: Reader[] = []
    for (let i = 0; i < READERS; i++) {
      readers.push(stalledReader(service.port, ROWS))
      if (i % 25 === 24) await new Promise((resolve) => setTimeout(resolve, 50))
    }
    const statuses: Record<number, number> = {}
    for (const status of await Promise.all(readers.map(async (r) => await r.status))) statuses[status] = (statuses[status] ?? 0) + 1
    const { rss: stalled, ms: settleMs } = await settled(service.pid)
    const peak = peakReset ? memory(service.pid).hwm : Number.NaN
    const heapStalled = await heap(service.url)
    for (const r of readers) r.socket.destroy()
    await settle(2000)
    const after = memory(service.pid).rss
    const run = { tree: tree.name, idle, stalled, peak, after, settleMs, statuses, csvMb, exportMs, heapIdle, heapStalled }
    console.log(`  ${tree.name}: RSS idle ${idle.toFixed(0)} MB, with ${READERS} stalled readers ${stalled.toFixed(0)} MB (settled after ${(settleMs / 1000).toFixed(1)} s), peak ${peak.toFixed(0)} MB, after they left ${after.toFixed(0)} MB; heap used ${heapIdle.used.toFixed(0)} -> ${heapStalled.used.toFixed(0)} MB, external ${heapIdle.external.toFixed(0)} -> ${heapStalled.external.toFixed(0)} MB; answers ${JSON.stringify(statuses)}; exports read at full speed ${exportMs.map((ms) => formatMs(ms)).join(' / ')} ms`)
    return run
  } finally { await service.stop() }
}

function command (): string {
  const env = ['STALLED_TREES', 'STALLED_READERS', 'STALLED_ROWS', 'STALLED_WRITE']
    .filter((name) => process.env[name] !== undefined)
    .map((name) => `${name}=${process.env[name]}`)
  if (process.env.DATABASE_URL) env.push('DATABASE_URL=<set>')
  return [...env, 'npx tsx bench/stalled-csv.ts', ...process.argv.slice(2)].join(' ')
}

async function main (): Promise<void> {
  const startedAt = new Date()
  const loadAtStart = os.loadavg()
  console.log(`stalled-csv: ${READERS} stalled readers of ${ROWS} long products on ${describeMachine(machine())}; load ${formatLoad(loadAtStart)}`)
  const trees = [workingTree(), ...REVISIONS.map(prepareTree)]
  const database = await benchDatabase()
  const runs: Run[] = []
  try {
    const setup = await startServer({ entry: 'src/server.ts', env: serviceEnv(database.url), readyPath: '/health/live' })
    try {
      const [user] = await userPool(setup.url, 1, 'stalled')
      await seed(database.url, user!.id, ROWS)
    } finally { await setup.stop() }
    for (const tree of trees) runs.push(await measure(tree, database.url))
  } finally {
    await database.drop()
    for (const tree of trees) tree.cleanup()
  }

  const m = machine()
  const text = [
    `Measured ${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC on ${describeMachine(m)}; load average at the start ${formatLoad(loadAtStart)}, at the end ${formatLoad(m.load)}.`,
    `Command: \`${command()}\`. Database: ${database.description}. The service: src/server.ts with the bench's production settings, no load shedding and no minimum read rate (${Object.entries(ADMIT_ALL).map(([name, value]) => `\`${name}=${value}\``).join(', ')}: every reader admitted and kept).`,
    '',
    `${READERS} connections each ask for \`GET /api/product?limit=${ROWS}\` with \`Accept: text/csv\` (${ROWS} products with a 200-character title and a 5,000-character description: ${runs[0]!.csvMb.toFixed(1)} MB of CSV), read the answer's head and stop reading. The service's RSS once settled (it moved less than ${SETTLE_MB} MB in ${SETTLE_MS / 1000} s):`,
    '',
    markdownTable(['version', 'RSS idle MB', `RSS, ${READERS} stalled MB`, 'per reader MB', 'peak (VmHWM) MB', 'RSS after they left MB', 'V8 heap used, idle / stalled MB', 'Buffers (external), idle / stalled MB', 'answers', `whole export read at full speed, ms (median of ${EXPORTS})`], runs.map((r) => [
      r.tree, r.idle.toFixed(0), r.stalled.toFixed(0), ((r.stalled - r.idle) / READERS).toFixed(2), r.peak.toFixed(0), r.after.toFixed(0),
      `${r.heapIdle.used.toFixed(0)} / ${r.heapStalled.used.toFixed(0)}`, `${r.heapIdle.external.toFixed(0)} / ${r.heapStalled.external.toFixed(0)}`,
      Object.entries(r.statuses).map(([s, n]) => `${n} x ${s}`).join(', '), formatMs(median(r.exportMs))
    ]))
  ].join('\n')
  console.log(`\n${text}\n`)
  if (WRITE) {
    writeSection(path.join(ROOT, 'bench', 'README.md'), 'stalled-csv', text)
    console.log('stalled-csv: results written to bench/README.md')
  }
}

await main()
