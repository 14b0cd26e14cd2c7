/**
 * Instructions per request of GET /api/user/:id, counted by valgrind's callgrind: a count the
 * machine's load does not move, where req/s and CPU time on these shared virtual machines
 * move by 20-40% from one pass to the next. Two processes of one build still differ (by 1-11%
 * here: V8's tiering and collections come at moments that differ from one start to the
 * next), so compare medians of several processes (bench/README.md, "Instructions per request").
 *
 * Each version runs under `valgrind --tool=callgrind` on the Node that production runs, with
 * collection on only inside `node::LibuvStreamWrap::OnUvRead`: the work a socket's data
 * sets off, run to its end (the HTTP parser, Fastify's hooks and handler, the token check,
 * the query sent, and, when the database's answer arrives, its parsing, the reply, the log
 * line and the microtasks each callback leaves). What runs on timers (the log's periodic
 * flush, load shedding's samples, the slow-client sweep, the mail poll) and on other threads
 * (the garbage collector's workers, libuv's pool) is left out: under valgrind the process
 * runs about 50 times slower, so timed work would weigh 50 times more per request than in
 * production. What is counted is the request path, which is what the versions differ in.
 *
 *   npx tsx bench/instructions.ts                 compiled service, jwt-floor, jwt-floor with the guarantees
 *   INSTR_TARGETS='compiled;jwt-floor' npx tsx bench/instructions.ts
 *   INSTR_TARGETS='compiled;compiled|LOG_LEVEL=warn' ...   a target with environment variables
 *   INSTR_RUNS=5 INSTR_REQUESTS=2000 ...          fresh processes per target (3); requests counted (2000)
 *   INSTR_WRITE=1 ...                             also write the table to bench/README.md
 *
 * Targets: `compiled` (dist/server.js: `npm run build` first), `jwt-floor`
 * (bench/servers/fastify-jwt-floor.ts), or any entry file; `|NAME=value,NAME=value`
 * adds environment variables (commas inside a value: `FLOOR_ADD=session+headers+log`).
 */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import autocannon from 'autocannon'
import { benchDatabase } from './lib/database.js'
import { describeMachine, machine } from './lib/machine.js'
import { ROOT, startServer } from './lib/processes.js'
import { writeSection } from './lib/report.js'
import { getUserRequests, serviceEnv, userPool, type BenchUser } from './lib/service.js'

const TARGETS = (process.env.INSTR_TARGETS ?? 'compiled;jwt-floor;jwt-floor|FLOOR_ADD=session+headers+log').split(';').filter((s) => s !== '')
const RUNS = Number(process.env.INSTR_RUNS ?? 3)
const WARM_UP = Number(process.env.INSTR_WARM_UP ?? 3000)
const REQUESTS = Number(process.env.INSTR_REQUESTS ?? 2000)
const CONNECTIONS = 10
/** The Node of the npm scripts (the `node` package: the version the image runs). */
const NODE = process.execPath
const COLLECT = 'node::LibuvStreamWrap::OnUvRead*'

/**
 * Under valgrind, 50 times slower, the service would trip its own bounds: the database's connect and
 * statement timeouts and the event loop delay that sheds load (raised to their largest:
 * their checks still run), and Fastify's 10 s for each plugin to start, which the web app's
 * start (its files read and compressed) misses: it is off, which takes its routes out of the
 * router and changes nothing on GET /api/user/:id's path.
 */
const UNDER_VALGRIND = { DB_CONNECT_TIMEOUT_MS: '60000', DB_STATEMENT_TIMEOUT_MS: '60000', MAX_EVENT_LOOP_DELAY_MS: '60000', WEB_APP: 'false' }

interface Target { label: string, entry: string, env: Record<string, string> }

function target (spec: string): Target {
  const [name, vars] = spec.split('|') as [string, string | undefined]
  const env: Record<string, string> = {}
  for (const pair of (vars ?? '').split(',').filter((s) => s !== '')) {
    const at = pair.indexOf('=')
    env[pair.slice(0, at)] = pair.slice(at + 1).replaceAll('+', ',')
  }
  const entry = name === 'compiled' ? 'dist/server.js' : name === 'jwt-floor' ? 'bench/servers/fastify-jwt-floor.ts' : name
  return { label: spec, entry, env }
}

async function requests (url: string, amount: number, users: readonly BenchUser[]): Promise<{ non2xx: number, errors: number }> {
  const result = await autocannon({ url, connections: CONNECTIONS, amount, requests: getUserRequests(users), timeout: 120 })
  return { non2xx: result.non2xx, errors: result.errors }
}

/** Total instructions (Ir) of a callgrind output file. */
function totalIr (file: string): number {
  const line = readFileSync(file, 'utf8').split('\n').find((l) => l.startsWith('totals:') || l.startsWith('summary:'))
  if (line === undefined) throw new Error(`no totals in ${file}`)
  return Number(line.split(/\s+/)[1])
}

/**
 * callgrind_control finds the process by a pipe valgrind names after its user and $HOST: the
 * service's HOST (its listen address) must be the one callgrind_control sees too.
 */
function control (command: string, pid: number): void {
  execFileSync('callgrind_control', [command, String(pid)], { stdio: 'ignore', env: { ...process.env, HOST: '127.0.0.1' } })
}

async function measure (t: Target, databaseUrl: string, users: readonly BenchUser[]): Promise<number> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ups-instr-'))
  const server = await startServer({
    entry: t.entry,
    node: NODE,
    wrapper: ['valgrind', '--tool=callgrind', `--callgrind-out-file=${dir}/callgrind.out`, `--toggle-collect=${COLLECT}`],
    env: { ...serviceEnv(databaseUrl), ...UNDER_VALGRIND, ...t.env },
    logFile: path.join(dir, 'output.log'),
    readyPath: '/health/live',
    readyWithinMs: 10 * 60_000
  })
  try {
    await requests(server.url, WARM_UP, users)
    control('--zero', server.pid)
    const result = await requests(server.url, REQUESTS, users)
    if (result.non2xx + result.errors > 0) throw new Error(`${t.label}: ${result.non2xx} non-2xx answers and ${result.errors} errors`)
    control('--dump', server.pid)
    // callgrind writes the dump when the process next runs (its timers wake it).
    let dump: string | undefined
    for (const until = Date.now() + 60_000; dump === undefined && Date.now() < until;) {
      dump = readdirSync(dir).find((f) => /^callgrind\.out\.\d+$/.test(f))
      if (dump === undefined) await new Promise((resolve) => setTimeout(resolve, 500))
    }
    if (dump === undefined) throw new Error(`${t.label}: callgrind wrote no dump in 60 s`)
    return totalIr(path.join(dir, dump)) / REQUESTS
  } finally {
    await server.stop()
    rmSync(dir, { recursive: true, force: true })
  }
}

const startedAt = new Date()
const database = await benchDatabase()
const targets = TARGETS.map(target)
const rows: Array<{ label: string, counts: number[] }> = []
try {
  const service = await startServer({ entry: 'src/server.ts', env: serviceEnv(database.url), readyPath: '/health/live' })
  let users: BenchUser[]
  try { users = await userPool(service.url, 20) } finally { await service.stop() }
  for (const t of targets) {
    const counts: number[] = []
    for (let run = 0; run < RUNS; run++) {
      counts.push(await measure(t, database.url, users))
      console.log(`${t.label}: run ${run + 1}: ${Math.round(counts.at(-1)!).toLocaleString('en-US')} instructions per request`)
    }
    rows.push({ label: t.label, counts })
  }
} finally {
  await database.drop()
}

const median = (a: number[]): number => {
  const sorted = [...a].sort((x, y) => x - y)
  const half = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[half]! : (sorted[half - 1]! + sorted[half]!) / 2
}
const base = median(rows[0]!.counts)
const fmt = (n: number): string => Math.round(n).toLocaleString('en-US')
const cell = (label: string): string => label.replaceAll('|', '\\|')
const table = [
  `Measured ${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC on ${describeMachine(machine())}, valgrind callgrind, collection inside \`${COLLECT}\`.`,
  `Command: \`${Object.entries(process.env).filter(([k]) => k.startsWith('INSTR_') && k !== 'INSTR_WRITE').map(([k, v]) => `${k}='${v}' `).join('')}npx tsx bench/instructions.ts\` (${RUNS} fresh processes per version; ${WARM_UP} requests of warm-up, then ${REQUESTS} counted, ${CONNECTIONS} connections).`,
  '',
  `| version | instructions per request (median) | each run | this / ${cell(rows[0]!.label)} |`,
  '| --- | --- | --- | --- |',
  ...rows.map((r) => `| ${cell(r.label)} | ${fmt(median(r.counts))} | ${r.counts.map(fmt).join(' / ')} | ${(100 * median(r.counts) / base).toFixed(0)}% |`)
].join('\n')
console.log('\n' + table)
if (process.env.INSTR_WRITE === '1') writeSection(path.join(ROOT, 'bench', 'README.md'), 'instructions', table)
