/**
 * Load shedding under a 3x overload (docs/operations.md, "Load shedding").
 *
 * In one run, against the same database and the same user pool, GET /api/user/:id:
 * 1. capacity: 50 connections in a closed loop (autocannon) on the service as shipped;
 * 2. then 3x that rate offered in an open loop (bench/lib/open-loop.ts, a process of its
 *    own: requests on a fixed schedule whatever the answers, a 503 not retried) to
 *    - the service alone, as shipped (admission: LOAD_SHED_MAX_IN_FLIGHT, src/plugins/admission.ts);
 *    - the service alone with every shedding condition off;
 *    - the service behind HAProxy running deploy/haproxy.cfg, as compose ships it (its
 *      per-replica maxconn and queue limit);
 *    - the same proxy without those limits, and the service without shedding.
 * Latencies count from each request's scheduled time and are split by answer: p50/p99 of
 * the accepted (2xx), and of the 503s; the 2xx p99 is also given by second of the run.
 *
 *   npx tsx bench/overload.ts            10 s per phase; rewrites "Load shedding" in bench/README.md
 *   npx tsx bench/overload.ts --quick    3 s per phase, prints only
 *   OVERLOAD_FACTOR=3 BENCH_SECONDS=10 BENCH_WRITE=0
 *   OVERLOAD_MAX_IN_FLIGHT=64 OVERLOAD_MAX_DELAY_MS=50 OVERLOAD_MAX_DB_WAITING=20
 *                                        other thresholds for the service as shipped
 *   DATABASE_URL=postgresql://...        a fresh database on that server
 * Needs `haproxy` on PATH (Debian: apt-get install haproxy) for the proxy phases.
 */
import { execFile, spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { freePort } from '../src/db/embedded.js'
import { hostConfig } from '../test/deploy/helpers/haproxy.js'
import { benchDatabase } from './lib/database.js'
import { load, settle } from './lib/load.js'
import { openLoop, quantile } from './lib/open-loop.js'
import { describeMachine, formatLoad, machine } from './lib/machine.js'
import { ROOT, startServer } from './lib/processes.js'
import { formatMs, formatRps, markdownTable, writeSection } from './lib/report.js'
import { getUserRequests, serviceEnv, userPool, type BenchUser } from './lib/service.js'

const quick = process.argv.includes('--quick')
const SECONDS = Number(process.env.BENCH_SECONDS ?? (quick ? 3 : 10))
const WRITE = process.env.BENCH_WRITE !== undefined ? process.env.BENCH_WRITE !== '0' : !quick
const FACTOR = Number(process.env.OVERLOAD_FACTOR ?? 3)
const CAPACITY_CONNECTIONS = 50
const WARMUP_SECONDS = Math.min(2, SECONDS)
/** A request unanswered after this long counts as a timeout (autocannon's default is 10 s). */
const TIMEOUT_SECONDS = 10
/** The shedding phase's threshold: the service's default unless set. */
const SHED_DELAY_MS = process.env.OVERLOAD_MAX_DELAY_MS

interface Split {
  offered: number
  /** Answers per second, any status, from the first request to the last answer. */
  rps: number
  /** 2xx answers per second: the useful work. */
  goodput: number
  shed: number
  other: number
  errors: number
  timeouts: number
  okP50: number
  okP99: number
  okMax: number
  shedP99: number
  /** The generator's lag p99 (ms): well above 1 ms, the client side held requests back. */
  lagP99: number
  /** The generator's CPU per request (µs). */
  generatorMicros: number
  /** 2xx answers and their p99 (ms) by second of the schedule. */
  bySecond: Array<{ count: number, p99: number }>
}

/** GET /api/user/:id as raw HTTP/1.1 bytes, one per user, for the open-loop generator. */
function rawGetUserRequests (url: string, users: readonly BenchUser[]): Buffer[] {
  const { host } = new URL(url)
  return users.map((user) => Buffer.from(`GET /api/user/${user.id} HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${user.token}\r\n\r\n`, 'latin1'))
}

/**
 * An open loop (bench/lib/open-loop.ts, in a process of its own): `rate` requests per
 * second on a fixed schedule whatever happened to the earlier ones, as independent clients
 * arrive; a client that gets a 503 goes away (it would come back after Retry-After).
 * Latencies count from each request's scheduled time. autocannon is a closed loop (a
 * connection sends its next request when the last one is answered), in which a fast 503
 * only invites the next request at once.
 */
async function overload (url: string, users: readonly BenchUser[], rate: number, seconds: number): Promise<Split> {
  const result = await openLoop({ url, requests: rawGetUserRequests(url, users), rate, seconds, timeoutMs: TIMEOUT_SECONDS * 1000, preconnect: 200 })
  return {
    offered: result.offeredPerSecond,
    rps: result.answeredPerSecond,
    goodput: result.okLatencies.length / result.drainedSeconds,
    shed: result.shedLatencies.length,
    other: result.otherStatus,
    errors: result.errors + result.timeouts,
    timeouts: result.timeouts,
    okP50: quantile(result.okLatencies, 0.5),
    okP99: quantile(result.okLatencies, 0.99),
    okMax: result.okLatencies.at(-1) ?? Number.NaN,
    shedP99: quantile(result.shedLatencies, 0.99),
    lagP99: result.lagP99Ms,
    generatorMicros: result.cpuMicrosPerRequest,
    bySecond: result.okBySecond
  }
}

function command (): string {
  const env = ['BENCH_SECONDS', 'BENCH_WRITE', 'OVERLOAD_FACTOR', 'OVERLOAD_MAX_DELAY_MS', 'OVERLOAD_MAX_DB_WAITING']
    .filter((name) => process.env[name] !== undefined)
    .map((name) => `${name}=${process.env[name]}`)
  if (process.env.DATABASE_URL) env.push('DATABASE_URL=<set>')
  return [...env, 'npx tsx bench/overload.ts', ...process.argv.slice(2)].join(' ')
}

function row (label: string, s: Split): string[] {
  return [
    label, formatRps(s.offered), formatRps(s.rps), formatRps(s.goodput),
    formatMs(s.okP50), formatMs(s.okP99), formatMs(s.okMax),
    s.shed.toLocaleString('en-US'), Number.isNaN(s.shedP99) ? '–' : formatMs(s.shedP99),
    String(s.timeouts), String(s.errors - s.timeouts), String(s.other)
  ]
}

interface Phase {
  name: string
  /** The service's shedding settings. */
  env: Record<string, string>
  /** Through HAProxy running deploy/haproxy.cfg: with its limits, or with them taken out. */
  proxy?: 'limits' | 'no limits'
}

const SHIPPED: Record<string, string> = {
  ...(SHED_DELAY_MS === undefined ? {} : { MAX_EVENT_LOOP_DELAY_MS: SHED_DELAY_MS }),
  ...(process.env.OVERLOAD_MAX_DB_WAITING === undefined ? {} : { LOAD_SHED_MAX_DB_WAITING: process.env.OVERLOAD_MAX_DB_WAITING }),
  ...(process.env.OVERLOAD_MAX_IN_FLIGHT === undefined ? {} : { LOAD_SHED_MAX_IN_FLIGHT: process.env.OVERLOAD_MAX_IN_FLIGHT })
}
const NO_SHEDDING = { MAX_EVENT_LOOP_DELAY_MS: '0', LOAD_SHED_MAX_DB_WAITING: '0', LOAD_SHED_MAX_IN_FLIGHT: '0' }
const PHASES: Phase[] = [
  { name: 'service alone, shedding as shipped', env: SHIPPED },
  { name: 'service alone, no shedding', env: NO_SHEDDING },
  { name: 'behind HAProxy (deploy/haproxy.cfg), as shipped', env: SHIPPED, proxy: 'limits' },
  { name: 'behind HAProxy without its limits, no shedding', env: NO_SHEDDING, proxy: 'no limits' }
]

/**
 * HAProxy on deploy/haproxy.cfg for one local server (test/deploy/helpers/haproxy.ts), its
 * request log off (the bench measures the limits, not log lines); 'no limits' takes out the
 * per-replica maxconn and the queue rule.
 */
async function startProxy (serverPort: number, limits: boolean): Promise<{ url: string, stop: () => void }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ups-bench-overload-'))
  const port = await freePort()
  // The per-address connection limits are out in both modes: the generator is one address
  // standing for many clients (bench/slow-clients.ts measures them).
  let config = (await hostConfig(port, [serverPort], path.join(dir, 'admin.sock'))).replace(/^\s*log stdout.*$/m, '')
    .replace(/^\s*(tcp-request connection reject|http-request deny deny_status 429) if \{ sc_conn_cur.*$/gm, '')
  if (!limits) config = config.replace(/ maxconn 64$/m, '').replace(/^\s*http-request deny deny_status 503 if \{ queue\(api\).*$/m, '')
  writeFileSync(path.join(dir, 'haproxy.cfg'), config)
  const child = spawn('haproxy', ['-db', '-f', path.join(dir, 'haproxy.cfg')], { stdio: 'ignore' })
  const url = `http://127.0.0.1:${port}`
  // Up once its health check has seen the server (inter 1 s, rise 2).
  for (let i = 0; ; i++) {
    const status = await fetch(`${url}/health/live`).then((res) => res.status, () => 0)
    if (status === 200) break
    if (i > 100) { child.kill('SIGKILL'); throw new Error('HAProxy did not pass requests within 10 s') }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  return { url, stop: () => { child.kill('SIGKILL'); rmSync(dir, { recursive: true, force: true }) } }
}

async function main (): Promise<void> {
  const startedAt = new Date()
  const loadAtStart = os.loadavg()
  console.log(`overload: ${SECONDS} s per phase, ${FACTOR}x, on ${describeMachine(machine())}; load ${formatLoad(loadAtStart)}`)
  const database = await benchDatabase()
  let users: BenchUser[] = []
  const results: Array<{ phase: Phase, split: Split }> = []
  let capacity = 0
  let capacityLine = ''
  try {
    for (const phase of PHASES) {
      // Logs at warn: the bench measures the shedding, not 3x as many log lines.
      const service = await startServer({ entry: 'src/server.ts', env: serviceEnv(database.url, { LOG_LEVEL: 'warn', ...phase.env }), readyPath: '/health/live' })
      const proxy = phase.proxy === undefined ? undefined : await startProxy(service.port, phase.proxy === 'limits')
      const url = proxy?.url ?? service.url
      try {
        if (users.length === 0) users = await userPool(service.url, 20, 'overload')
        await load({ url, connections: CAPACITY_CONNECTIONS, seconds: WARMUP_SECONDS, requests: getUserRequests(users) })
        if (capacity === 0) {
          const measured = await load({ url: service.url, connections: CAPACITY_CONNECTIONS, seconds: SECONDS, requests: getUserRequests(users) })
          capacity = measured.rps
          capacityLine = `${formatRps(capacity)} req/s, p50 ${formatMs(measured.p50)} ms, p99 ${formatMs(measured.p99)} ms`
          console.log(`  capacity (${CAPACITY_CONNECTIONS} connections, closed loop): ${capacityLine}, non-2xx ${measured.non2xx}`)
        }
        await settle()
        const split = await overload(url, users, Math.round(capacity * FACTOR), SECONDS)
        results.push({ phase, split })
        console.log(`  ${phase.name}: offered ${formatRps(split.offered)}/s, answered ${formatRps(split.rps)}/s, 2xx ${formatRps(split.goodput)}/s, 2xx p50 ${formatMs(split.okP50)} p99 ${formatMs(split.okP99)} max ${formatMs(split.okMax)} ms, 503 ${split.shed}, timeouts ${split.timeouts}, errors ${split.errors}, other ${split.other}; generator lag p99 ${formatMs(split.lagP99)} ms, ${split.generatorMicros.toFixed(0)} µs CPU/request`)
        console.log(`    2xx by second (count @ p99 ms): ${bySecond(split)}`)
        await settle(3000)
      } finally {
        proxy?.stop()
        await service.stop()
      }
    }
  } finally {
    await database.drop()
  }

  const text = [
    `Measured ${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC on ${describeMachine(machine())}; load average at the start ${formatLoad(loadAtStart)}, at the end ${formatLoad(os.loadavg())}. HAProxy ${await haproxyVersion()}.`,
    `Command: \`${command()}\`. Database: ${database.description}.`,
    `Capacity: GET /api/user/:id on the service alone, ${CAPACITY_CONNECTIONS} connections, closed loop: **${capacityLine}**. Then ${FACTOR}x that rate offered for ${SECONDS} s in an open loop to each setup (bench/lib/open-loop.ts: requests on a fixed schedule whatever the answers, latency from the scheduled time, a 503 not retried, timeout ${TIMEOUT_SECONDS} s). "As shipped": the defaults of .env.example and deploy/haproxy.cfg${Object.keys(SHIPPED).length > 0 ? `, with ${Object.entries(SHIPPED).map(([k, v]) => `${k}=${v}`).join(', ')}` : ''}.`,
    '',
    markdownTable(['setup', 'offered/s', 'answered/s', '2xx/s', '2xx p50 ms', '2xx p99 ms', '2xx max ms', '503s', '503 p99 ms', 'timeouts', 'errors', 'other'], results.map(({ phase, split }) => row(phase.name, split))),
    '',
    'The 2xx p99 (ms) by second of the run (count of 2xx @ p99):',
    '',
    ...results.map(({ phase, split }) => `- ${phase.name}: ${bySecond(split)}`)
  ].join('\n')
  console.log(`\n${text}\n`)
  if (WRITE) {
    writeSection(path.join(ROOT, 'bench', 'README.md'), 'overload', text)
    console.log('overload: results written to bench/README.md')
  }
}

function bySecond (split: Split): string {
  return split.bySecond.map((b) => b.count === 0 ? '0' : `${b.count}@${formatMs(b.p99)}`).join(' ')
}

async function haproxyVersion (): Promise<string> {
  const { stdout } = await promisify(execFile)('haproxy', ['-v'])
  return /version (\S+)/.exec(stdout)?.[1] ?? 'unknown'
}

await main()
