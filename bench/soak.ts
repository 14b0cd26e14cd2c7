/**
 * Soak: the real server (src/server.ts, production settings, bcrypt cost 10) on its own
 * embedded PostgreSQL, loaded on loopback at a steady arrival rate with a mixed workload
 * for a few minutes: register, login, get and patch one's own user, list and create
 * products. Records throughput, p50/p99 per operation, errors, and the server's memory
 * (RSS and heap after a forced GC) after the warm-up and at the end; fails when the heap
 * grew by more than SOAK_MAX_HEAP_GROWTH_MB or any request failed.
 *
 *   npx tsx bench/soak.ts                      180 s at 60 req/s, printed only
 *   SOAK_SECONDS=20 npx tsx bench/soak.ts      a short check
 *   SOAK_WRITE=1 npx tsx bench/soak.ts         also write the "Soak" section of bench/README.md
 *   SOAK_RATE=100 SOAK_MAX_HEAP_GROWTH_MB=10 ...
 *   SOAK_ENTRY=dist/server.js npx tsx bench/soak.ts   the compiled service (npm run build first)
 */
import { readFileSync, mkdtempSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { benchDatabase } from './lib/database.js'
import { describeMachine, formatLoad, machine } from './lib/machine.js'
import { startServer } from './lib/processes.js'
import { formatMs, markdownTable } from './lib/report.js'
import { BENCH_PASSWORD, serviceEnv } from './lib/service.js'

const SECONDS = Number(process.env.SOAK_SECONDS ?? 180)
const RATE = Number(process.env.SOAK_RATE ?? 60)
const WARMUP_SECONDS = Number(process.env.SOAK_WARMUP_SECONDS ?? 10)
const MAX_HEAP_GROWTH_MB = Number(process.env.SOAK_MAX_HEAP_GROWTH_MB ?? 20)
const MAX_IN_FLIGHT = 200
const WRITE = process.env.SOAK_WRITE === '1'
const README = path.join(path.dirname(new URL(import.meta.url).pathname), 'README.md')

/** Share of each operation in the mix, in percent. */
const MIX = { register: 5, login: 5, getUser: 30, patchUser: 10, listProducts: 35, createProduct: 15 } as const
type Op = keyof typeof MIX

interface Session { id: number, username: string, token: string }
interface Memory { at: number, rss: number, heapUsed: number, heapTotal: number, external: number }

const sleep = async (ms: number) => await new Promise((resolve) => setTimeout(resolve, ms))
const mb = (bytes: number) => (bytes / 1024 / 1024).toFixed(1)
const percentile = (sorted: number[], p: number) => sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!

if (!(SECONDS >= 5) || !(RATE > 0) || !(WARMUP_SECONDS >= 0)) {
  console.error('SOAK_SECONDS must be >= 5, SOAK_RATE > 0, SOAK_WARMUP_SECONDS >= 0')
  process.exit(2)
}

const started = new Date()
const before = machine()
const probeDir = mkdtempSync(path.join(os.tmpdir(), 'ups-soak-'))
const memoryFile = path.join(probeDir, 'memory.json')
const database = await benchDatabase()
// SOAK_ENTRY=dist/server.js (after `npm run build`): the compiled service, as production runs
// it; under tsx the loader's thread adds 25-45 MB of RSS.
const ENTRY = process.env.SOAK_ENTRY ?? 'src/server.ts'
const server = await startServer({
  entry: ENTRY,
  nodeArgs: ['--expose-gc', '--import', './bench/soak-probe.mjs'],
  env: { ...serviceEnv(database.url), SOAK_MEMORY_FILE: memoryFile },
  readyPath: '/health/ready',
  logFile: path.join(probeDir, 'server.log')
})

async function memory (): Promise<Memory> {
  rmSync(memoryFile, { force: true })
  process.kill(server.pid, 'SIGWINCH')
  for (let i = 0; i < 50; i++) {
    await sleep(100)
    try { return JSON.parse(readFileSync(memoryFile, 'utf8')) as Memory } catch {}
  }
  throw new Error('the server did not report its memory')
}

let counter = 0
const sessions: Session[] = []
const latencies: Record<Op, number[]> = { register: [], login: [], getUser: [], patchUser: [], listProducts: [], createProduct: [] }
const failures: string[] = []
let measuring = false
let inFlight = 0
let skipped = 0

async function request (method: string, url: string, body?: unknown, token?: string): Promise<{ status: number, json: any }> {
  const headers: Record<string, string> = {}
  if (body !== undefined) headers['content-type'] = 'application/json'
  if (token) headers.authorization = `Bearer ${token}`
  const res = await fetch(server.url + url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(30_000) })
  const text = await res.text()
  return { status: res.status, json: text ? JSON.parse(text) : undefined }
}

async function register (): Promise<Session> {
  const username = `soak_${process.pid}_${++counter}`
  const created = await request('POST', '/api/user', { username, email: `${username}@example.com`, password: BENCH_PASSWORD })
  if (created.status !== 201) throw new Error(`register: ${created.status} ${JSON.stringify(created.json)}`)
  const login = await request('POST', '/api/auth/login', { username, password: BENCH_PASSWORD })
  if (login.status !== 200) throw new Error(`login: ${login.status}`)
  return { id: created.json.id, username, token: login.json.token }
}

const pick = () => sessions[Math.floor(Math.random() * sessions.length)]!
/** A session that has logged in (users made by `register` get a token at their first `login`). */
const pickLoggedIn = () => { for (let i = 0; i < 5; i++) { const s = pick(); if (s.token !== '') return s } return sessions[0]! }
/**
 * The first WRITERS sessions keep their tokens (no password change in the mix): they write,
 * in turn. A user changes their own record at most 10 times per 15 minutes (429 past it), so
 * there are enough of them for every patch of any 15 minutes of the run to find a user with
 * changes left.
 */
const WRITERS = Math.max(20, Math.ceil(RATE * MIX.patchUser / 100 * Math.min(900, SECONDS + WARMUP_SECONDS) / 9))
const turns = { patch: 0, create: 0 }
const pickWriter = (op: keyof typeof turns) => sessions[turns[op]++ % Math.min(WRITERS, sessions.length)]!
const expect = (status: number, wanted: number, op: string) => { if (status !== wanted) throw new Error(`${op}: ${status}`) }

const OPS: Record<Op, () => Promise<void>> = {
  async register () {
    const username = `soak_${process.pid}_${++counter}`
    const r = await request('POST', '/api/user', { username, email: `${username}@example.com`, password: BENCH_PASSWORD })
    expect(r.status, 201, 'register')
    if (sessions.length < 500) sessions.push({ id: r.json.id, username, token: '' })
  },
  async login () {
    const s = pick()
    const r = await request('POST', '/api/auth/login', { username: s.username, password: BENCH_PASSWORD })
    expect(r.status, 200, 'login')
    s.token = r.json.token
  },
  async getUser () {
    const s = pickLoggedIn()
    expect((await request('GET', `/api/user/${s.id}`, undefined, s.token)).status, 200, 'get user')
  },
  async patchUser () {
    const s = pickWriter('patch')
    const r = await request('PATCH', `/api/user/${s.id}`, { email: `${s.username}.${++counter}@example.com` }, s.token)
    expect(r.status, 200, 'patch user')
  },
  async listProducts () {
    const cursor = Math.floor(Math.random() * counter)
    expect((await request('GET', `/api/product?limit=20&cursor=${cursor}`)).status, 200, 'list products')
  },
  async createProduct () {
    const s = pickWriter('create')
    const r = await request('POST', '/api/product', { title: `Soak item ${++counter}`, description: 'from the soak', amount: counter % 10_000 }, s.token)
    expect(r.status, 201, 'create product')
  }
}

const weighted: Op[] = (Object.entries(MIX) as [Op, number][]).flatMap(([op, share]) => Array<Op>(share).fill(op))

async function fire (op: Op): Promise<void> {
  inFlight++
  const t0 = performance.now()
  try {
    await OPS[op]()
    if (measuring) latencies[op].push(performance.now() - t0)
  } catch (error) {
    if (measuring) failures.push(`${op}: ${(error as Error).message}`)
  } finally {
    inFlight--
  }
}

/** Issues requests at RATE per second for `seconds`, whatever the answers' pace (open model). */
async function run (seconds: number): Promise<number> {
  const begin = performance.now()
  let issued = 0
  const pending = new Set<Promise<void>>()
  while (performance.now() - begin < seconds * 1000) {
    const due = Math.floor((performance.now() - begin) / 1000 * RATE)
    for (; issued < due; issued++) {
      if (inFlight >= MAX_IN_FLIGHT) { skipped++; continue }
      const p = fire(weighted[Math.floor(Math.random() * weighted.length)]!)
      pending.add(p)
      p.then(() => pending.delete(p), () => pending.delete(p))
    }
    await sleep(5)
  }
  await Promise.all(pending)
  return (performance.now() - begin) / 1000
}

let code = 0
try {
  // The writers first (their tokens stay valid), four registrations at a time.
  console.log(`soak: registering ${WRITERS} writers`)
  while (sessions.length < WRITERS) sessions.push(...await Promise.all(Array.from({ length: Math.min(4, WRITERS - sessions.length) }, register)))
  console.log(`soak: warm-up ${WARMUP_SECONDS} s at ${RATE} req/s`)
  await run(WARMUP_SECONDS)
  const start = await memory()
  measuring = true
  console.log(`soak: ${SECONDS} s at ${RATE} req/s (mix ${JSON.stringify(MIX)})`)
  // RSS and heap every 30 s, to see whether memory still grows at the end.
  const samples: Memory[] = []
  let sampling = Promise.resolve()
  const sampler = setInterval(() => { sampling = memory().then((m) => { samples.push(m) }, () => {}) }, 30_000)
  const elapsed = await run(SECONDS)
  clearInterval(sampler)
  await sampling
  measuring = false
  const end = await memory()
  samples.push(end)
  // The sample closest to two minutes before the end.
  const twoMinutesBefore = samples.reduce((best, m) => Math.abs(end.at - 120_000 - m.at) < Math.abs(end.at - 120_000 - best.at) ? m : best, start)

  const all = Object.values(latencies).flat().sort((a, b) => a - b)
  const total = all.length + failures.length
  const rows = (Object.keys(MIX) as Op[]).map((op) => {
    const xs = [...latencies[op]].sort((a, b) => a - b)
    return [op, String(xs.length), formatMs(percentile(xs, 0.5)), formatMs(percentile(xs, 0.99))]
  })
  const heapGrowth = (end.heapUsed - start.heapUsed) / 1024 / 1024
  const passed = failures.length === 0 && skipped === 0 && heapGrowth <= MAX_HEAP_GROWTH_MB
  const after = machine()
  const report = [
    `Run ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC: \`SOAK_SECONDS=${SECONDS} SOAK_RATE=${RATE}${ENTRY === 'src/server.ts' ? '' : ` SOAK_ENTRY=${ENTRY}`} npx tsx bench/soak.ts\`, ${describeMachine(before)}; load average ${formatLoad(before.load)} before, ${formatLoad(after.load)} after.`,
    `The server: ${ENTRY}${ENTRY.endsWith('.js') ? ' (plain node, as production runs it)' : ' (under tsx)'}, NODE_ENV=production, LOG_LEVEL=info (to a file), bcrypt cost 10, on ${database.description}; loopback only.`,
    '',
    markdownTable(['', 'value'], [
      ['requests (after a ' + WARMUP_SECONDS + ' s warm-up)', String(total)],
      ['throughput', `${(all.length / elapsed).toFixed(1)} req/s (target ${RATE})`],
      ['p50 / p99, all operations', `${formatMs(percentile(all, 0.5))} / ${formatMs(percentile(all, 0.99))} ms`],
      ['errors (non-2xx or network)', String(failures.length)],
      ['not sent (over ' + MAX_IN_FLIGHT + ' in flight)', String(skipped)],
      ['RSS after warm-up / at the end', `${mb(start.rss)} / ${mb(end.rss)} MB`],
      ['RSS after GC every 30 s', samples.map((m) => mb(m.rss)).join(', ') + ' MB'],
      ['RSS over the last two minutes', `${mb(twoMinutesBefore.rss)} -> ${mb(end.rss)} MB (${end.rss >= twoMinutesBefore.rss ? '+' : ''}${mb(end.rss - twoMinutesBefore.rss)} MB)`],
      ['heap used after GC, after warm-up / at the end', `${mb(start.heapUsed)} / ${mb(end.heapUsed)} MB (${heapGrowth >= 0 ? '+' : ''}${heapGrowth.toFixed(1)} MB; bound +${MAX_HEAP_GROWTH_MB} MB)`],
      ['result', passed ? 'pass' : 'FAIL']
    ]),
    '',
    markdownTable(['operation', 'requests', 'p50 ms', 'p99 ms'], rows)
  ].join('\n')
  console.log(`\n${report}\n`)
  if (failures.length > 0) console.log(`first failures:\n${failures.slice(0, 10).join('\n')}`)
  if (WRITE) {
    const text = readFileSync(README, 'utf8')
    const section = '## Soak\n\n`bench/soak.ts` (docs/reliability.md): the real server under a steady mixed load for minutes, ' +
      'its memory after a forced GC compared at start and end. Rerun with `SOAK_WRITE=1` to replace this section.\n\n' + `${report}\n`
    const at = text.search(/^## Soak$/m)
    // Only the Soak section is replaced: up to the next heading, or the end of the file.
    const next = at === -1 ? -1 : text.slice(at + 1).search(/^## /m)
    const rest = next === -1 ? '' : `\n${text.slice(at + 1 + next)}`
    const { writeFileSync } = await import('node:fs')
    writeFileSync(README, at === -1 ? `${text.trimEnd()}\n\n${section}` : `${text.slice(0, at)}${section}${rest}`)
    console.log(`written to ${README}`)
  }
  code = passed ? 0 : 1
} catch (error) {
  console.error(error)
  console.error(`the end of the server's output:\n${readFileSync(path.join(probeDir, 'server.log'), 'utf8').split('\n').slice(-20).join('\n')}`)
  code = 1
} finally {
  await server.stop()
  await database.drop()
  rmSync(probeDir, { recursive: true, force: true })
}
process.exit(code)
