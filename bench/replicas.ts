/**
 * Replicas behind a proxy on this machine: GET /api/user/:id (the
 * authenticated read: JWT, the token's user read, the user read) with 50 connections
 *
 *   - straight to one service process (no proxy): the reference;
 *   - through HAProxy (Debian's package, `haproxy` on PATH) to 1, 2 and 3 replicas;
 *   - the proxy's own cost: bare Fastify hello-world straight and through the same HAProxy;
 *
 * then PostgreSQL's own ceiling for the token check's query (pgbench, prepared statements,
 * 10 clients), all in each pass, with the load average at each case. Ratios are taken
 * within a pass (the machine is shared); each pass starts at another case.
 *
 *   DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres npx tsx bench/replicas.ts
 *   ... --quick      1 pass of 3 s per case, prints only
 *   REPLICAS_SECONDS=10 REPLICAS_PASSES=3 (defaults), REPLICAS_WRITE=0 prints only
 */
import { spawn, execFile } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { freePort } from '../src/db/embedded.js'
import { benchDatabase } from './lib/database.js'
import { load, settle, type LoadFigures } from './lib/load.js'
import { describeMachine, formatLoad, machine } from './lib/machine.js'
import { startServer, ROOT, type RunningServer } from './lib/processes.js'
import { formatRps, markdownTable, median, percent, writeSection } from './lib/report.js'
import { getUserRequests, serviceEnv, userPool } from './lib/service.js'

const quick = process.argv.includes('--quick')
const SECONDS = quick ? 3 : Number(process.env.REPLICAS_SECONDS ?? 10)
const PASSES = quick ? 1 : Number(process.env.REPLICAS_PASSES ?? 3)
const WRITE = !quick && process.env.REPLICAS_WRITE !== '0'
const CONNECTIONS = 50
const PGBENCH_CLIENTS = 10

interface Case { name: string, figures: LoadFigures[], load: string[] }

function haproxyConfig (frontends: Array<{ port: number, servers: number[] }>): string {
  const lines = [
    'global', '  maxconn 8192',
    'defaults', '  mode http', '  timeout connect 3s', '  timeout client 60s', '  timeout server 60s',
    '  option http-keep-alive', '  http-reuse always'
  ]
  frontends.forEach((frontend, i) => {
    lines.push(`frontend f${i}`, `  bind 127.0.0.1:${frontend.port}`, '  unique-id-format %[uuid()]',
      '  http-request set-header X-Request-Id %[unique-id]', '  option forwardfor', `  default_backend b${i}`)
    lines.push(`backend b${i}`, '  balance roundrobin')
    frontend.servers.forEach((port, j) => lines.push(`  server s${j} 127.0.0.1:${port}`))
  })
  return lines.join('\n') + '\n'
}

async function startHaproxy (config: string): Promise<() => void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ups-bench-haproxy-'))
  const file = path.join(dir, 'haproxy.cfg')
  writeFileSync(file, config)
  await promisify(execFile)('haproxy', ['-c', '-q', '-f', file])
  const child = spawn('haproxy', ['-db', '-f', file], { stdio: ['ignore', 'ignore', 'inherit'] })
  process.once('exit', () => child.kill('SIGKILL'))
  await new Promise((resolve) => setTimeout(resolve, 500))
  return () => { child.kill('SIGTERM'); rmSync(dir, { recursive: true, force: true }) }
}

/** pgbench with the token check's statement: `{ tps, latencyMs }` over `seconds`. */
async function pgbenchTokenCheck (url: string, maxId: number, seconds: number): Promise<{ tps: number, latencyMs: number }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ups-bench-pgbench-'))
  const script = path.join(dir, 'token-check.sql')
  // The statement of src/modules/identity/repository.ts (the token's user), by primary key.
  writeFileSync(script, `\\set id random(1, ${maxId})\nSELECT id, username, email, created_at, updated_at, token_version FROM users WHERE id = :id;\n`)
  const u = new URL(url)
  try {
    const { stdout } = await promisify(execFile)('pgbench', ['-n', '-M', 'prepared', '-c', String(PGBENCH_CLIENTS), '-j', '2', '-T', String(seconds), '-f', script,
      '-h', u.hostname, '-p', u.port || '5432', '-U', decodeURIComponent(u.username || 'postgres'), u.pathname.slice(1)],
    { env: { ...process.env, PGPASSWORD: decodeURIComponent(u.password) } })
    const tps = Number(/tps = ([0-9.]+)/.exec(stdout)?.[1])
    const latencyMs = Number(/latency average = ([0-9.]+) ms/.exec(stdout)?.[1])
    return { tps, latencyMs }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

async function main (): Promise<void> {
  const started = machine()
  const db = await benchDatabase()
  const servers: RunningServer[] = []
  let stopProxy: (() => void) | undefined
  try {
    for (let i = 0; i < 3; i++) {
      servers.push(await startServer({ entry: 'src/server.ts', env: serviceEnv(db.url, { TRUST_PROXY: '127.0.0.1' }), readyPath: '/health/ready' }))
    }
    const hello = await startServer({ entry: 'bench/servers/hello.ts', cwd: ROOT, readyPath: '/' })
    servers.push(hello)
    const users = await userPool(servers[0]!.url, 20, 'replicas')
    const ports = await Promise.all([0, 1, 2, 3].map(async () => await freePort()))
    const backends = servers.slice(0, 3).map((s) => s.port)
    stopProxy = await startHaproxy(haproxyConfig([
      { port: ports[0]!, servers: backends.slice(0, 1) },
      { port: ports[1]!, servers: backends.slice(0, 2) },
      { port: ports[2]!, servers: backends },
      { port: ports[3]!, servers: [hello.port] }
    ]))
    const proxied = (i: number): string => `http://127.0.0.1:${ports[i]!}`
    const cases: Array<{ name: string, url: string, requests?: ReturnType<typeof getUserRequests> }> = [
      { name: 'GET /api/user/:id, one process, no proxy', url: servers[0]!.url, requests: getUserRequests(users) },
      { name: 'GET /api/user/:id, HAProxy -> 1 replica', url: proxied(0), requests: getUserRequests(users) },
      { name: 'GET /api/user/:id, HAProxy -> 2 replicas', url: proxied(1), requests: getUserRequests(users) },
      { name: 'GET /api/user/:id, HAProxy -> 3 replicas', url: proxied(2), requests: getUserRequests(users) },
      { name: 'hello world, no proxy', url: hello.url },
      { name: 'hello world, HAProxy', url: proxied(3) }
    ]
    // Warm-up: every replica and the proxy.
    await load({ url: proxied(2), connections: CONNECTIONS, seconds: 2, requests: getUserRequests(users) })
    await settle()
    const results: Case[] = cases.map((c) => ({ name: c.name, figures: [], load: [] }))
    const pg: Array<{ tps: number, latencyMs: number, load: string }> = []
    for (let pass = 0; pass < PASSES; pass++) {
      // Each pass starts at another case: no case always runs first (after the previous
      // pass's pgbench) or last.
      for (let k = 0; k < cases.length; k++) {
        const i = (k + pass) % cases.length
        const c = cases[i]!
        results[i]!.load.push(formatLoad(machine().load))
        const figures = await load({ url: c.url, connections: CONNECTIONS, seconds: SECONDS, requests: c.requests })
        results[i]!.figures.push(figures)
        console.log(`pass ${pass + 1} ${c.name}: ${formatRps(figures.rps)} req/s, p99 ${figures.p99} ms, errors ${figures.errors}, non-2xx ${figures.non2xx} (load ${results[i]!.load.at(-1)})`)
        await settle()
      }
      const loadNow = formatLoad(machine().load)
      const bench = await pgbenchTokenCheck(db.url, Math.max(...users.map((u) => u.id)), SECONDS)
      pg.push({ ...bench, load: loadNow })
      console.log(`pass ${pass + 1} pgbench token check: ${formatRps(bench.tps)} tps, ${bench.latencyMs} ms average (load ${loadNow})`)
      await settle()
    }

    const rps = (i: number, pass: number): number => results[i]!.figures[pass]!.rps
    const passes = [...Array(PASSES).keys()]
    const ratio = (a: number, b: number): string[] => {
      const values = passes.map((p) => rps(a, p) / rps(b, p))
      return [...values.map(percent), percent(median(values))]
    }
    const table = markdownTable(['case', 'req/s (median)', 'req/s per pass', 'p99 ms (median)', 'errors', 'non-2xx', 'load average (1/5/15) at each pass'],
      results.map((r) => [r.name, formatRps(median(r.figures.map((f) => f.rps))), r.figures.map((f) => formatRps(f.rps)).join(' / '),
        String(median(r.figures.map((f) => f.p99))), String(r.figures.reduce((n, f) => n + f.errors, 0)), String(r.figures.reduce((n, f) => n + f.non2xx, 0)), r.load.join('; ')]))
    const ratios = markdownTable(['ratio (same pass)', ...passes.map((p) => `pass ${p + 1}`), 'median'], [
      ['HAProxy -> 1 replica / no proxy', ...ratio(1, 0)],
      ['HAProxy -> 2 replicas / no proxy', ...ratio(2, 0)],
      ['HAProxy -> 3 replicas / no proxy', ...ratio(3, 0)],
      ['HAProxy -> 3 / HAProxy -> 1', ...ratio(3, 1)],
      ['hello world through HAProxy / straight', ...ratio(5, 4)]
    ])
    const pgTable = markdownTable(['pgbench, token check (prepared, 10 clients)', ...passes.map((p) => `pass ${p + 1}`), 'median'], [
      ['transactions/s', ...pg.map((p) => formatRps(p.tps)), formatRps(median(pg.map((p) => p.tps)))],
      ['average latency ms', ...pg.map((p) => p.latencyMs.toFixed(2)), median(pg.map((p) => p.latencyMs)).toFixed(2)],
      ['load average at its start', ...pg.map((p) => p.load), '']
    ])
    const ended = machine()
    const report = [
      `Measured ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC on ${describeMachine(started)}.`,
      `Command: \`${quick ? 'npx tsx bench/replicas.ts --quick' : `REPLICAS_SECONDS=${SECONDS} REPLICAS_PASSES=${PASSES} npx tsx bench/replicas.ts`}\` (${PASSES} pass(es) of ${SECONDS} s per case, ${CONNECTIONS} connections; load average at the start ${formatLoad(started.load)}, at the end ${formatLoad(ended.load)}).`,
      `Database: ${db.description}. Three service processes (src/server.ts, production settings as in "What runs", pool of 10 each), HAProxy ${await haproxyVersion()} (round robin, keep-alive, http-reuse always, X-Request-Id set), autocannon and PostgreSQL all on the same ${started.cores} cores.`,
      '', table, '', ratios, '', pgTable
    ].join('\n')
    console.log('\n' + report)
    if (WRITE) writeSection(path.join(ROOT, 'bench/README.md'), 'replicas', report)
  } finally {
    stopProxy?.()
    for (const server of servers) await server.stop()
    await db.drop()
  }
}

async function haproxyVersion (): Promise<string> {
  const { stdout } = await promisify(execFile)('haproxy', ['-v'])
  return /version ([0-9.]+)/.exec(stdout)?.[1] ?? 'unknown'
}

await main()
