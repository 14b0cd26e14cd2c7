/**
 * Password hashing at cost 10: bcryptjs on the event loop, bcryptjs in a piscina pool,
 * @node-rs/bcrypt on libuv's pool (and the pooled, lower-priority variants), measured
 *   1. alone: compares per second, and how late the event loop runs meanwhile;
 *   2. inside the real service: login alone, GET /api/user/:id alone, and both at once
 *      (10 connections logging in while 50 read), each variant in the same pass.
 * It first asserts that a hash made by either library verifies with the other.
 *
 *   npx tsx bench/bcrypt.ts                 3 passes, 5 s per case
 *   BENCH_SECONDS=3 BENCH_PASSES=1 npx tsx bench/bcrypt.ts
 *   BENCH_VARIANTS=node-rs,bcryptjs-pool npx tsx bench/bcrypt.ts
 *   BENCH_WRITE=0                           print only
 */
import assert from 'node:assert/strict'
import path from 'node:path'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { hash as nativeHash, verify as nativeVerify, verifySync as nativeVerifySync } from '@node-rs/bcrypt'
import bcryptjs from 'bcryptjs'
import { benchDatabase } from './lib/database.js'
import { createHasher, isVariant, POOL_NICE, POOL_THREADS, VARIANTS, type Variant } from './lib/hashers.js'
import { load, settle, type LoadFigures } from './lib/load.js'
import { describeMachine, formatLoad, machine } from './lib/machine.js'
import { ROOT, startServer } from './lib/processes.js'
import { formatMs, formatRps, markdownTable, median, medianFigures, percent, writeSection } from './lib/report.js'
import { BENCH_PASSWORD, getUserRequests, loginRequests, serviceEnv, userPool } from './lib/service.js'

const COST = 10
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5)
const PASSES = Number(process.env.BENCH_PASSES ?? 3)
const WRITE = process.env.BENCH_WRITE !== '0'
const READERS = 50
const LOGINS = 10
const variants: Variant[] = (process.env.BENCH_VARIANTS?.split(',') ?? Object.keys(VARIANTS)).map((name) => {
  if (!isVariant(name)) throw new Error(`unknown variant ${name}; known: ${Object.keys(VARIANTS).join(', ')}`)
  return name
})

/** A hash from one library verifies with the other, both ways (test/bench-compat has the service's). */
async function assertCompatible (): Promise<string> {
  const password = 'correct horse battery staple'
  const fromJs = await bcryptjs.hash(password, COST)
  const fromNative = await nativeHash(password, COST)
  assert.match(fromJs, /^\$2b\$10\$/)
  assert.match(fromNative, /^\$2[by]\$10\$/) // 1.x writes $2y$, the same algorithm; the service stores $2b$
  assert.equal(await nativeVerify(password, fromJs), true)
  assert.equal(await nativeVerify('wrong password', fromJs), false)
  assert.equal(await bcryptjs.compare(password, fromNative), true)
  assert.equal(await bcryptjs.compare('wrong password', fromNative), false)
  return `a bcryptjs hash (${fromJs.slice(0, 7)}...) verifies with @node-rs/bcrypt and a @node-rs/bcrypt hash (${fromNative.slice(0, 7)}...) with bcryptjs; wrong passwords fail both ways`
}

/**
 * One compare on this thread, 20 times in a row: the minimum is the library's own speed,
 * the least disturbed by other load on the machine.
 */
function singleCompareMs (compare: () => boolean): { min: number, median: number } {
  compare()
  const times: number[] = []
  for (let i = 0; i < 20; i++) {
    const started = process.hrtime.bigint()
    assert.equal(compare(), true)
    times.push(Number(process.hrtime.bigint() - started) / 1e6)
  }
  return { min: Math.min(...times), median: median(times) }
}

interface Alone { perSecond: number, loopDelayP99: number, loopDelayMax: number }

/** Compares per second with 8 in flight, and the event loop's delay meanwhile. */
async function alone (variant: Variant): Promise<Alone> {
  const hasher = await createHasher(variant, COST)
  try {
    const stored = await hasher.hash(BENCH_PASSWORD)
    await Promise.all(Array.from({ length: 4 }, async () => await hasher.verify(BENCH_PASSWORD, stored))) // warm-up
    const delay = monitorEventLoopDelay({ resolution: 10 })
    delay.enable()
    let done = 0
    const until = Date.now() + SECONDS * 1000
    await Promise.all(Array.from({ length: 8 }, async () => {
      while (Date.now() < until) {
        assert.equal(await hasher.verify(BENCH_PASSWORD, stored), true)
        done++
      }
    }))
    delay.disable()
    return { perSecond: done / SECONDS, loopDelayP99: delay.percentile(99) / 1e6, loopDelayMax: delay.max / 1e6 }
  } finally {
    await hasher.close()
  }
}

interface InService { login: LoadFigures, get: LoadFigures, mixedGet: LoadFigures, mixedLogin: LoadFigures }

async function inService (variant: Variant, databaseUrl: string): Promise<InService> {
  const server = await startServer({
    entry: 'bench/servers/hasher-service.ts',
    env: { ...serviceEnv(databaseUrl), BENCH_HASHER: variant },
    readyPath: '/health/live'
  })
  try {
    const url = server.url
    const users = await userPool(url, 20)
    await load({ url, connections: READERS, seconds: Math.min(2, SECONDS), requests: getUserRequests(users) }) // warm-up
    const get = await load({ url, connections: READERS, seconds: SECONDS, requests: getUserRequests(users) })
    await settle()
    const login = await load({ url, connections: LOGINS, seconds: SECONDS, requests: loginRequests(users) })
    await settle()
    const [mixedGet, mixedLogin] = await Promise.all([
      load({ url, connections: READERS, seconds: SECONDS, requests: getUserRequests(users) }),
      load({ url, connections: LOGINS, seconds: SECONDS, requests: loginRequests(users) })
    ])
    return { login, get, mixedGet, mixedLogin }
  } finally {
    await server.stop()
  }
}

async function main (): Promise<void> {
  const startedAt = new Date()
  console.log(`bcrypt: cost ${COST}, ${PASSES} pass(es) of ${SECONDS} s on ${describeMachine(machine())}; load ${formatLoad(machine().load)}`)
  const compatibility = await assertCompatible()
  console.log(`bcrypt: ${compatibility}`)

  const stored = bcryptjs.hashSync(BENCH_PASSWORD, COST)
  const js = singleCompareMs(() => bcryptjs.compareSync(BENCH_PASSWORD, stored))
  const native = singleCompareMs(() => nativeVerifySync(BENCH_PASSWORD, stored))
  const single = `one compare on one thread, 20 in a row: bcryptjs ${js.min.toFixed(1)} ms at best (median ${js.median.toFixed(1)} ms), ` +
    `so ${(1000 / js.min).toFixed(1)}/s per core; @node-rs/bcrypt ${native.min.toFixed(1)} ms (median ${native.median.toFixed(1)} ms), ${(1000 / native.min).toFixed(1)}/s per core`
  console.log(`bcrypt: ${single}`)

  const database = await benchDatabase()
  const aloneRuns = new Map<Variant, Alone[]>(variants.map((v) => [v, []]))
  const serviceRuns = new Map<Variant, InService[]>(variants.map((v) => [v, []]))
  const loads: string[] = []
  try {
    for (let pass = 1; pass <= PASSES; pass++) {
      loads.push(formatLoad(machine().load))
      console.log(`pass ${pass}/${PASSES} (load ${loads.at(-1)})`)
      // Alternate the order, so a drift in the machine's load does not favour one variant.
      for (const variant of pass % 2 === 0 ? [...variants].reverse() : variants) {
        const a = await alone(variant)
        aloneRuns.get(variant)!.push(a)
        const s = await inService(variant, database.url)
        serviceRuns.get(variant)!.push(s)
        console.log(`  ${variant.padEnd(20)} ${a.perSecond.toFixed(1)} compares/s (loop delay p99 ${formatMs(a.loopDelayP99)} ms); ` +
          `service: login ${formatRps(s.login.rps)}/s, GET ${formatRps(s.get.rps)} req/s; mixed GET ${formatRps(s.mixedGet.rps)} req/s p99 ${formatMs(s.mixedGet.p99)} ms, login ${formatRps(s.mixedLogin.rps)}/s`)
      }
    }
  } finally {
    await database.drop()
  }

  const rows = variants.map((variant) => {
    const a = aloneRuns.get(variant)!
    const s = serviceRuns.get(variant)!
    const pick = (key: keyof InService): LoadFigures => medianFigures(s.map((run) => run[key]))
    const share = median(s.map((run) => run.mixedGet.rps / run.get.rps))
    const mixedGet = pick('mixedGet')
    const mixedLogin = pick('mixedLogin')
    const perPass = (pick: (run: InService) => string): string => s.map(pick).join(' / ')
    return [
      `${variant}: ${VARIANTS[variant]}`,
      median(a.map((r) => r.perSecond)).toFixed(1),
      formatMs(median(a.map((r) => r.loopDelayP99))),
      `${formatRps(pick('login').rps)} (${perPass((run) => formatRps(run.login.rps))})`,
      formatRps(pick('get').rps),
      `${formatRps(mixedGet.rps)}, ${percent(share)} (${perPass((run) => percent(run.mixedGet.rps / run.get.rps))})`,
      formatMs(mixedGet.p99),
      `${formatRps(mixedLogin.rps)} / ${formatMs(mixedLogin.p99)}`,
      String(mixedGet.errors + mixedLogin.errors + pick('login').errors + pick('get').errors)
    ]
  })
  const m = machine()
  const text = [
    `Measured ${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC on ${describeMachine(m)}; cost ${COST}.`,
    `Command: \`${['BENCH_SECONDS', 'BENCH_PASSES', 'BENCH_VARIANTS'].filter((n) => process.env[n]).map((n) => `${n}=${process.env[n]}`).concat('npx tsx bench/bcrypt.ts').join(' ')}\` ` +
      `(${PASSES} pass${PASSES > 1 ? 'es' : ''}, ${SECONDS} s per case, medians; load average at the start of each pass: ${loads.join('; ')}).`,
    `Pools: piscina, ${POOL_THREADS} threads; "nice" variants lower the worker threads' priority to ${POOL_NICE}. Compatibility, asserted: ${compatibility}.`,
    `Library speed, ${single}.`,
    '',
    markdownTable([
      'variant', 'compares/s alone', 'event-loop delay p99 ms (alone)', 'login/s (10 conn.; per pass)', 'GET req/s alone (50 conn.)',
      'mixed: GET req/s, share of alone (per pass)', 'mixed: GET p99 ms', 'mixed: login/s / p99 ms', 'errors'
    ], rows),
    '',
    '"Alone": 8 compares in flight in one process, no server. The service columns run the real service (bench/servers/hasher-service.ts) with each hasher; the mixed run is 10 connections logging in while 50 read.'
  ].join('\n')
  console.log(`\n${text}\n`)
  if (WRITE) {
    writeSection(path.join(ROOT, 'bench', 'README.md'), 'bcrypt', text)
    console.log('bcrypt: results written to bench/README.md')
  }
}

await main()
