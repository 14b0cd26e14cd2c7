/**
 * Load shedding under a 3x overload (issue 14, item 6; docs/operations.md).
 *
 * In one run, against the same database and the same user pool:
 * 1. capacity: GET /api/user/:id with 50 connections (closed loop) on the service as shipped;
 * 2. the same service (shedding at its defaults) offered 3x that rate in an open loop;
 * 3. the service with no shedding (both triggers 0) offered the same 3x rate.
 * Latencies are split by answer: p50/p99 of the accepted (2xx) requests, and of the 503s.
 *
 *   npx tsx bench/overload.ts            10 s per phase; rewrites "Load shedding" in bench/README.md
 *   npx tsx bench/overload.ts --quick    3 s per phase, prints only
 *   OVERLOAD_FACTOR=3 BENCH_SECONDS=10 BENCH_WRITE=0
 *   OVERLOAD_MAX_DELAY_MS=50 OVERLOAD_MAX_DB_WAITING=20   other thresholds for the shedding phase
 *   DATABASE_URL=postgresql://...        a fresh database on that server
 */
import os from 'node:os'
import path from 'node:path'
import http from 'node:http'
import { performance } from 'node:perf_hooks'
import { benchDatabase } from './lib/database.js'
import { load, settle } from './lib/load.js'
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
  ok: number[]
  shed: number
  other: number
  errors: number
  timeouts: number
  okP50: number
  okP99: number
  okMax: number
  shedP99: number
}

function quantile (sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
}

/**
 * An open loop: `rate` requests per second, each on its own schedule (every 10 ms a batch),
 * whatever happened to the earlier ones, as independent clients arrive; a client that gets
 * a 503 goes away (it would come back after Retry-After). Over keep-alive sockets, as many
 * as needed. autocannon is a closed loop (a connection sends its next request when the
 * last one is answered), in which a fast 503 only invites the next request at once.
 */
async function overload (url: string, users: readonly BenchUser[], rate: number, seconds: number): Promise<Split> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 4000 })
  const { hostname, port } = new URL(url)
  const ok: number[] = []
  const shedTimes: number[] = []
  let other = 0
  let errors = 0
  let timeouts = 0
  let sent = 0
  const pending = new Set<Promise<void>>()
  const one = (user: BenchUser): Promise<void> => new Promise<void>((resolve) => {
    const start = performance.now()
    const request = http.request({ agent, hostname, port, path: `/api/user/${user.id}`, headers: { authorization: `Bearer ${user.token}` }, timeout: TIMEOUT_SECONDS * 1000 }, (response) => {
      response.resume()
      response.on('end', () => {
        const ms = performance.now() - start
        const status = response.statusCode ?? 0
        if (status >= 200 && status < 300) ok.push(ms)
        else if (status === 503) shedTimes.push(ms)
        else other += 1
        resolve()
      })
    })
    let timedOut = false
    request.on('timeout', () => { timedOut = true; timeouts += 1; request.destroy(new Error('timeout')) })
    request.on('error', () => { if (!timedOut) errors += 1; resolve() })
    request.end()
  })
  const tick = 10
  const perTick = rate * tick / 1000
  const startedAt = performance.now()
  let owed = 0
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      const elapsed = performance.now() - startedAt
      if (elapsed >= seconds * 1000) { clearInterval(timer); resolve(); return }
      // Catch up on the schedule even when this process was late.
      owed = rate * elapsed / 1000 - sent
      for (let i = 0; i < Math.floor(Math.min(owed, perTick * 20)); i++) {
        const p = one(users[sent % users.length]!)
        sent += 1
        pending.add(p)
        p.then(() => { pending.delete(p) }, () => {})
      }
    }, tick)
  })
  await Promise.all(pending)
  const drained = (performance.now() - startedAt) / 1000
  agent.destroy()
  ok.sort((a, b) => a - b)
  shedTimes.sort((a, b) => a - b)
  const answered = ok.length + shedTimes.length + other
  return {
    offered: sent / seconds,
    rps: answered / drained,
    goodput: ok.length / drained,
    ok,
    shed: shedTimes.length,
    other,
    errors: errors + timeouts,
    timeouts,
    okP50: quantile(ok, 0.5),
    okP99: quantile(ok, 0.99),
    okMax: ok.at(-1) ?? Number.NaN,
    shedP99: quantile(shedTimes, 0.99)
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

async function main (): Promise<void> {
  const startedAt = new Date()
  const loadAtStart = os.loadavg()
  console.log(`overload: ${SECONDS} s per phase, ${FACTOR}x, on ${describeMachine(machine())}; load ${formatLoad(loadAtStart)}`)
  const database = await benchDatabase()
  let users: BenchUser[] = []
  const phases: Record<string, Split> = {}
  let capacity = 0
  try {
    for (const [name, overrides] of [['shedding', { ...(SHED_DELAY_MS === undefined ? {} : { MAX_EVENT_LOOP_DELAY_MS: SHED_DELAY_MS }), ...(process.env.OVERLOAD_MAX_DB_WAITING === undefined ? {} : { LOAD_SHED_MAX_DB_WAITING: process.env.OVERLOAD_MAX_DB_WAITING }), ...(process.env.OVERLOAD_MAX_IN_FLIGHT === undefined ? {} : { LOAD_SHED_MAX_IN_FLIGHT: process.env.OVERLOAD_MAX_IN_FLIGHT }) }], ['no shedding', { MAX_EVENT_LOOP_DELAY_MS: '0', LOAD_SHED_MAX_DB_WAITING: '0', LOAD_SHED_MAX_IN_FLIGHT: '0' }]] as const) {
      // Logs at warn: the bench measures the shedding, not 3x as many log lines.
      const service = await startServer({ entry: 'src/server.ts', env: serviceEnv(database.url, { LOG_LEVEL: 'warn', ...overrides }), readyPath: '/health/live' })
      try {
        if (users.length === 0) users = await userPool(service.url, 20, 'overload')
        await load({ url: service.url, connections: CAPACITY_CONNECTIONS, seconds: WARMUP_SECONDS, requests: getUserRequests(users) })
        if (capacity === 0) {
          const measured = await load({ url: service.url, connections: CAPACITY_CONNECTIONS, seconds: SECONDS, requests: getUserRequests(users) })
          capacity = measured.rps
          console.log(`  capacity (${CAPACITY_CONNECTIONS} connections, closed loop): ${formatRps(capacity)} req/s, p50 ${formatMs(measured.p50)} ms, p99 ${formatMs(measured.p99)} ms, non-2xx ${measured.non2xx}`)
          await settle()
        }
        const split = await overload(service.url, users, Math.round(capacity * FACTOR), SECONDS)
        phases[name] = split
        console.log(`  ${name}: offered ${formatRps(split.offered)}/s, answered ${formatRps(split.rps)}/s, 2xx ${formatRps(split.goodput)}/s, 2xx p50 ${formatMs(split.okP50)} p99 ${formatMs(split.okP99)} max ${formatMs(split.okMax)} ms, 503 ${split.shed}, timeouts ${split.timeouts}, errors ${split.errors}, other ${split.other}`)
        await settle(3000)
      } finally { await service.stop() }
    }
  } finally {
    await database.drop()
  }

  const shed = phases.shedding!
  const none = phases['no shedding']!
  const text = [
    `Measured ${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC on ${describeMachine(machine())}; load average at the start ${formatLoad(loadAtStart)}, at the end ${formatLoad(os.loadavg())}.`,
    `Command: \`${command()}\`. Database: ${database.description}.`,
    `Capacity: GET /api/user/:id, ${CAPACITY_CONNECTIONS} connections, closed loop: **${formatRps(capacity)} req/s**. Then ${FACTOR}x that rate offered for ${SECONDS} s in an open loop (bench/overload.ts: requests on a fixed schedule whatever the answers, a 503 not retried, timeout ${TIMEOUT_SECONDS} s), first to the service with MAX_EVENT_LOOP_DELAY_MS=${SHED_DELAY_MS ?? '200 (default)'} and LOAD_SHED_MAX_DB_WAITING=${process.env.OVERLOAD_MAX_DB_WAITING ?? '0 (default)'}, then to the same code with MAX_EVENT_LOOP_DELAY_MS=0 and LOAD_SHED_MAX_DB_WAITING=0.`,
    '',
    markdownTable(['service', 'offered/s', 'answered/s', '2xx/s', '2xx p50 ms', '2xx p99 ms', '2xx max ms', '503s', '503 p99 ms', 'timeouts', 'errors', 'other'], [row('shedding (default)', shed), row('no shedding', none)]),
    '',
    `Ratios, shedding / no shedding: 2xx p99 ${(shed.okP99 / none.okP99).toFixed(2)}x, 2xx per second ${(shed.goodput / none.goodput).toFixed(2)}x, timeouts ${shed.timeouts} vs ${none.timeouts}.`
  ].join('\n')
  console.log(`\n${text}\n`)
  if (WRITE) {
    writeSection(path.join(ROOT, 'bench', 'README.md'), 'overload', text)
    console.log('overload: results written to bench/README.md')
  }
}

await main()
