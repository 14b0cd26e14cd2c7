/**
 * `npm run bench`: the service (src/server.ts, production settings) on its own database,
 * loaded with autocannon on loopback, next to two references measured in the same pass:
 * bare Fastify "hello world" (the ceiling) and one raw `pg` query per request.
 * Three passes; the table shows medians and is written to bench/README.md.
 *
 *   npm run bench                       3 passes of 10 s per case (~5 minutes)
 *   npm run bench -- --quick            1 pass of 3 s per case, README left alone
 *   BENCH_SECONDS=5 BENCH_PASSES=1 npm run bench
 *   DATABASE_URL=postgresql://... npm run bench   a fresh database on that server
 *   BENCH_COMPARE=HEAD~1 npm run bench  also measure that revision (or a project copy's
 *                                       folder) in every pass: before/after figures
 *   BENCH_WRITE=0                       print only
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { benchDatabase } from './lib/database.js'
import { load, settle, type LoadFigures } from './lib/load.js'
import { describeMachine, formatLoad, machine } from './lib/machine.js'
import { ROOT, startServer } from './lib/processes.js'
import { formatMs, formatRps, markdownTable, median, medianFigures, percent, writeSection } from './lib/report.js'
import { getUserCookieRequests, getUserRequests, loginRequests, rawPgRequests, refreshRequests, registerRequests, serviceEnv, userPool, type BenchUser } from './lib/service.js'
import { prepareTree, workingTree, type ServiceTree } from './lib/trees.js'

const quick = process.argv.includes('--quick')
const SECONDS = Number(process.env.BENCH_SECONDS ?? (quick ? 3 : 10))
const PASSES = Number(process.env.BENCH_PASSES ?? (quick ? 1 : 3))
const WRITE = process.env.BENCH_WRITE !== undefined ? process.env.BENCH_WRITE !== '0' : !quick
const COMPARE = (process.env.BENCH_COMPARE ?? '').split(',').filter((spec) => spec !== '')
const WARMUP_SECONDS = Math.min(2, SECONDS)
const READERS = 50
const LOGINS = 10
const POOL_USERS = 20

interface Case { id: string, label: string, connections: number }
type Pass = { results: Record<string, LoadFigures>, load: number[], logLines: number }

/** The working tree's cases, in the order of the table; other trees get get/login/mixed. */
function casesFor (trees: ServiceTree[]): Case[] {
  const suffix = (tree: ServiceTree): string => tree.dir === ROOT ? '' : ` [${tree.name}]`
  const key = (tree: ServiceTree, id: string): string => tree.dir === ROOT ? id : `${id}@${tree.name}`
  return [
    { id: 'hello', label: 'bare Fastify hello world (ceiling)', connections: READERS },
    { id: 'raw-pg', label: 'bare Fastify + one raw pg query', connections: READERS },
    ...trees.flatMap((tree) => [
      { id: key(tree, 'get'), label: `GET /api/user/:id${suffix(tree)}`, connections: READERS },
      ...(tree.dir === ROOT ? [{ id: 'get-cookie', label: 'GET /api/user/:id, token in the cookie', connections: READERS }] : []),
      { id: key(tree, 'login'), label: `POST /api/auth/login (cost 10)${suffix(tree)}`, connections: LOGINS },
      ...(tree.dir === ROOT ? [{ id: 'register', label: 'POST /api/user (cost 10)', connections: LOGINS }] : []),
      ...(tree.dir === ROOT ? [{ id: 'refresh', label: 'POST /api/auth/refresh-token (rotation)', connections: LOGINS }] : []),
      { id: key(tree, 'mixed-get'), label: `mixed: GET /api/user/:id${suffix(tree)}`, connections: READERS },
      { id: key(tree, 'mixed-login'), label: `mixed: POST /api/auth/login${suffix(tree)}`, connections: LOGINS }
    ])
  ]
}

if (!Number.isFinite(SECONDS) || SECONDS < 1 || !Number.isInteger(PASSES) || PASSES < 1) {
  console.error('BENCH_SECONDS must be >= 1 and BENCH_PASSES a positive integer')
  process.exit(2)
}

function command (): string {
  const env = ['BENCH_SECONDS', 'BENCH_PASSES', 'BENCH_COMPARE', 'BENCH_WRITE']
    .filter((name) => process.env[name] !== undefined)
    .map((name) => `${name}=${process.env[name]}`)
  if (process.env.DATABASE_URL) env.push('DATABASE_URL=<set>')
  const args = process.argv.slice(2)
  return [...env, 'npm run bench', ...(args.length > 0 ? ['--', ...args] : [])].join(' ')
}

function show (label: string, f: LoadFigures): void {
  console.log(`  ${label.padEnd(46)} ${formatRps(f.rps).padStart(8)} req/s  p50 ${formatMs(f.p50).padStart(6)} ms  p99 ${formatMs(f.p99).padStart(6)} ms  errors ${f.errors}  non-2xx ${f.non2xx}`)
}

async function runPass (pass: number, trees: ServiceTree[], cases: Case[], databaseUrl: string, logDir: string, getUsers: (url: string) => Promise<BenchUser[]>): Promise<Pass> {
  const loadAtStart = os.loadavg()
  const results: Record<string, LoadFigures> = {}
  const measure = async (id: string, run: Promise<LoadFigures>): Promise<void> => {
    results[id] = await run
    show(cases.find((c) => c.id === id)!.label, results[id])
  }

  // The ceiling first, alone on the machine.
  const hello = await startServer({ entry: 'bench/servers/hello.ts' })
  try {
    await load({ url: hello.url, connections: READERS, seconds: WARMUP_SECONDS })
    await measure('hello', load({ url: hello.url, connections: READERS, seconds: SECONDS }))
  } finally { await hello.stop() }

  // The service: its real entry point, logging at info to a file.
  let users: BenchUser[] = []
  let logLines = 0
  for (const tree of trees) {
    const key = (id: string): string => tree.dir === ROOT ? id : `${id}@${tree.name}`
    const logFile = path.join(logDir, `service-pass-${pass}-${tree.dir === ROOT ? 'main' : tree.name}.log`)
    const service = await startServer({ entry: 'src/server.ts', cwd: tree.dir, env: serviceEnv(databaseUrl), logFile, readyPath: '/health/live' })
    try {
      users = await getUsers(service.url)
      const url = service.url
      await load({ url, connections: READERS, seconds: WARMUP_SECONDS, requests: getUserRequests(users) })
      await measure(key('get'), load({ url, connections: READERS, seconds: SECONDS, requests: getUserRequests(users) }))
      if (tree.dir === ROOT) {
        await settle()
        await measure('get-cookie', load({ url, connections: READERS, seconds: SECONDS, requests: getUserCookieRequests(users) }))
      }
      await settle()
      await measure(key('login'), load({ url, connections: LOGINS, seconds: SECONDS, requests: loginRequests(users) }))
      if (tree.dir === ROOT) {
        await settle()
        await measure('register', load({ url, connections: LOGINS, seconds: SECONDS, requests: registerRequests(`p${pass}r${Date.now().toString(36).slice(-5)}`) }))
        await settle()
        // One fresh session per connection (the pool's sessions stay untouched for the reads).
        const sessions = await userPool(url, LOGINS, `refresh${pass}`)
        await measure('refresh', load({ url, connections: LOGINS, seconds: SECONDS, requests: refreshRequests(sessions) }))
      }
      await settle()
      await Promise.all([
        measure(key('mixed-get'), load({ url, connections: READERS, seconds: SECONDS, requests: getUserRequests(users) })),
        measure(key('mixed-login'), load({ url, connections: LOGINS, seconds: SECONDS, requests: loginRequests(users) }))
      ])
    } finally { await service.stop() }
    if (tree.dir === ROOT) logLines = readFileSync(logFile, 'utf8').split('\n').length - 1
  }

  const raw = await startServer({ entry: 'bench/servers/raw-pg.ts', env: { DATABASE_URL: databaseUrl } })
  try {
    await load({ url: raw.url, connections: READERS, seconds: WARMUP_SECONDS, requests: rawPgRequests(users) })
    await measure('raw-pg', load({ url: raw.url, connections: READERS, seconds: SECONDS, requests: rawPgRequests(users) }))
  } finally { await raw.stop() }

  return { results, load: loadAtStart, logLines }
}

function ratios (pass: Pass, trees: ServiceTree[]): Record<string, number> {
  const r = pass.results
  const out: Record<string, number> = {
    'GET / hello world': r.get!.rps / r.hello!.rps,
    'GET / raw pg': r.get!.rps / r['raw-pg']!.rps,
    'mixed GET / solo GET': r['mixed-get']!.rps / r.get!.rps,
    'GET, token in the cookie / in the header': r['get-cookie']!.rps / r.get!.rps
  }
  for (const tree of trees.filter((t) => t.dir !== ROOT)) {
    out[`GET / GET [${tree.name}]`] = r.get!.rps / r[`get@${tree.name}`]!.rps
    out[`GET [${tree.name}] / hello world`] = r[`get@${tree.name}`]!.rps / r.hello!.rps
    out[`mixed GET / solo GET [${tree.name}]`] = r[`mixed-get@${tree.name}`]!.rps / r[`get@${tree.name}`]!.rps
  }
  return out
}

function report (passes: Pass[], trees: ServiceTree[], cases: Case[], startedAt: Date, databaseDescription: string): string {
  const m = machine()
  const medians: Record<string, LoadFigures> = Object.fromEntries(cases.map((c) => [c.id, medianFigures(passes.map((p) => p.results[c.id]!))]))
  const rows = cases.map((c) => {
    const f = medians[c.id]!
    const perPass = passes.map((p) => formatRps(p.results[c.id]!.rps)).join(' / ')
    return [c.label, String(c.connections), formatRps(f.rps), perPass, formatMs(f.p50), formatMs(f.p99), String(f.errors), String(f.non2xx)]
  })
  const perPassRatios = passes.map((p) => ratios(p, trees))
  const ratioRows = Object.keys(perPassRatios[0]!).map((name) => [name, ...perPassRatios.map((r) => percent(r[name]!)), percent(median(perPassRatios.map((r) => r[name]!)))])

  const get = medians.get!
  const mixedShare = median(perPassRatios.map((r) => r['mixed GET / solo GET']!))
  const cookieShare = median(perPassRatios.map((r) => r['GET, token in the cookie / in the header']!))
  const check = (ok: boolean): string => ok ? 'met' : '**not met**'
  const refused = passes.reduce((total, p) => total + Object.values(p.results).reduce((n, f) => n + (f?.non2xx ?? 0) + (f?.errors ?? 0), 0), 0)
  const compared = trees.filter((t) => t.dir !== ROOT).map((t) => t.name)
  return [
    `Measured ${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC on ${describeMachine(m)}.`,
    `Command: \`${command()}\` (${PASSES} pass${PASSES > 1 ? 'es' : ''} of ${SECONDS} s per case, after a ${WARMUP_SECONDS} s warm-up per server).`,
    `Load average (1/5/15 min) at the start of each pass: ${passes.map((p) => formatLoad(p.load)).join('; ')}; at the end: ${formatLoad(m.load)}.`,
    `Database: ${databaseDescription}.` + (compared.length > 0 ? ' Rows marked [name] run another version of the service (BENCH_COMPARE: a git revision or a project copy) in the same passes.' : ''),
    '',
    markdownTable(['case', 'conn.', 'req/s (median)', 'req/s per pass', 'p50 ms', 'p99 ms', 'errors', 'non-2xx'], rows),
    '',
    'Medians over the passes; errors (socket errors and timeouts) and non-2xx are totals over all passes.',
    `The service logged ${passes.map((p) => p.logLines.toLocaleString('en-US')).join(' / ')} lines per pass.`,
    '',
    'Ratios within each pass (the machine is shared: compare these rather than figures of different runs):',
    '',
    markdownTable(['ratio', ...passes.map((_, i) => `pass ${i + 1}`), 'median'], ratioRows),
    '',
    'Targets:',
    '',
    `- GET /api/user/:id >= 1,200 req/s: ${formatRps(get.rps)} req/s, ${check(get.rps >= 1200)}`,
    `- login >= 20/s at cost 10: ${formatRps(medians.login!.rps)}/s, ${check(medians.login!.rps >= 20)}`,
    `- mixed run, GET keeps >= 50% of solo with p99 < 300 ms: ${percent(mixedShare)}, p99 ${formatMs(medians['mixed-get']!.p99)} ms, ${check(mixedShare >= 0.5 && medians['mixed-get']!.p99 < 300)}`,
    `- GET with the token in the cookie keeps >= 90% of the header's throughput: ${percent(cookieShare)}, ${check(cookieShare >= 0.9)}`,
    `- the read's p99 while 10 clients log in < 40 ms: ${formatMs(medians['mixed-get']!.p99)} ms, ${check(medians['mixed-get']!.p99 < 40)}`,
    // A refusal (401, 429, 503) is answered faster than the route: any would flatter the figures.
    `- every answer 2xx, no socket error: ${refused} refused or failed, ${check(refused === 0)}`
  ].join('\n')
}

async function main (): Promise<void> {
  const startedAt = new Date()
  console.log(`bench: ${PASSES} pass(es) of ${SECONDS} s per case on ${describeMachine(machine())}; load ${formatLoad(os.loadavg())}`)
  const trees = [workingTree(), ...COMPARE.map(prepareTree)]
  const cases = casesFor(trees)
  const database = await benchDatabase()
  console.log(`bench: ${database.description}`)
  const logDir = mkdtempSync(path.join(os.tmpdir(), 'ups-bench-logs-'))
  let users: BenchUser[] | undefined
  const getUsers = async (url: string): Promise<BenchUser[]> => (users ??= await userPool(url, POOL_USERS))
  const passes: Pass[] = []
  try {
    for (let pass = 1; pass <= PASSES; pass++) {
      console.log(`pass ${pass}/${PASSES} (load ${formatLoad(os.loadavg())})`)
      passes.push(await runPass(pass, trees, cases, database.url, logDir, getUsers))
    }
  } finally {
    const firstLog = path.join(logDir, 'service-pass-1-main.log')
    if (passes.length > 0) console.log(`bench: service log of pass 1: ${(statSync(firstLog).size / 1e6).toFixed(1)} MB (removed)`)
    rmSync(logDir, { recursive: true, force: true })
    for (const tree of trees) tree.cleanup()
    await database.drop()
  }

  const text = report(passes, trees, cases, startedAt, database.description)
  console.log(`\n${text}\n`)
  mkdirSync(path.join(ROOT, 'bench', 'results'), { recursive: true })
  writeFileSync(path.join(ROOT, 'bench', 'results', `${startedAt.toISOString().replace(/[:.]/g, '-')}.raw.json`), JSON.stringify({ startedAt, machine: machine(), command: command(), passes }, null, 2))
  if (WRITE) {
    writeSection(path.join(ROOT, 'bench', 'README.md'), 'results', text)
    console.log('bench: results written to bench/README.md')
  }
}

await main()
