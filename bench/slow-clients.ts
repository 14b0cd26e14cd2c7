/**
 * What a slow-client attack costs: how many attacking
 * connections, from how many addresses, at how many bytes a second, push the p99 of normal
 * requests past 1 s (or their success under 99%), for each version of the service, alone
 * and behind HAProxy (deploy/haproxy.cfg of that version), defaults as shipped.
 *
 * The normal load: GET /api/user/:id with a token, NORMAL_RATE (200) a second in an open loop
 * (bench/lib/open-loop.ts, its own process) from 16 addresses (127.1.0.x: many clients, each
 * far below the per-address limits); latency from each request's
 * scheduled time; a request unanswered after 10 s is a timeout; a non-2xx is a failure.
 * The attacker (in this process, node:net) keeps N connections open from 127.0.0.2... (one
 * address, or one address per PER_ADDRESS connections), reconnecting RECONNECT_MS after
 * each one ends, one of:
 * - `slow-body`: POST /api/auth/refresh-token, Content-Length: 100, then one byte of the body
 *   at once and one every DRIP_MS (2 s), never the whole body;
 * - `stalled-read`: GET /api/product/:id/image (a 4 MiB PNG), never reads a byte (an empty line
 *   every second, as a real attacker would write, to see when the connection was cut);
 * - `slow-read`: the same image read at READ_RATE bytes a second (4096: 4x the shipped minimum
 *   rate, paced per chunk), the cheapest way to keep a place once stalled readers are cut.
 * For each setup N grows through the steps until the normal load fails (p99 > 1 s or under 99%
 * 2xx); the attack gets RAMP_MS to take hold before the normal load runs for SECONDS.
 *
 *   SLOW_TREES=8be4c33 npx tsx bench/slow-clients.ts   the working tree and 8be4c33 (no per-client
 *                                                        limits); rewrites "Slow-client attacks"
 *                                                        in bench/README.md (~17 min)
 *   npx tsx bench/slow-clients.ts --quick               the working tree only, N of 64 and 256,
 *                                                        3 s per step, prints only (~3 min)
 *   SLOW_SECONDS, SLOW_STEPS=32,64,..., SLOW_ATTACKS=slow-body,stalled-read,slow-read,
 *   SLOW_NORMAL_RATE=200, SLOW_READ_RATE=4096, SLOW_PER_ADDRESS=32, SLOW_WRITE=0 (print only)
 *   DATABASE_URL=postgresql://...                       a fresh database on that server
 * Needs `haproxy` (Debian: apt-get install haproxy) for the proxy setups.
 */
import { randomBytes } from 'node:crypto'
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'
import { freePort } from '../src/db/embedded.js'
import { hostConfig } from '../test/deploy/helpers/haproxy.js'
import { benchDatabase } from './lib/database.js'
import { settle } from './lib/load.js'
import { describeMachine, formatLoad, machine } from './lib/machine.js'
import { openLoop, quantile } from './lib/open-loop.js'
import { noisePng } from './lib/png.js'
import { ROOT, startServer } from './lib/processes.js'
import { formatMs, markdownTable, writeSection } from './lib/report.js'
import { serviceEnv, userPool, type BenchUser } from './lib/service.js'
import { prepareTree, workingTree, type ServiceTree } from './lib/trees.js'

type AttackKind = 'slow-body' | 'stalled-read' | 'slow-read'
const KINDS: readonly AttackKind[] = ['slow-body', 'stalled-read', 'slow-read']

const quick = process.argv.includes('--quick')
const SECONDS = Number(process.env.SLOW_SECONDS ?? (quick ? 3 : 6))
const STEPS = (process.env.SLOW_STEPS ?? (quick ? '64,256' : '32,64,128,256,512')).split(',').map(Number)
const ATTACKS = (process.env.SLOW_ATTACKS ?? KINDS.join(',')).split(',') as AttackKind[]
const NORMAL_RATE = Number(process.env.SLOW_NORMAL_RATE ?? 200)
const READ_RATE = Number(process.env.SLOW_READ_RATE ?? 4096)
const PER_ADDRESS = Number(process.env.SLOW_PER_ADDRESS ?? 32)
const REVISIONS = (process.env.SLOW_TREES ?? '').split(',').filter((s) => s !== '')
const WRITE = process.env.SLOW_WRITE !== undefined ? process.env.SLOW_WRITE !== '0' : !quick
/** Past the first window of the minimum rates (5 s): the attack's steady state, cuts and reconnections included. */
const RAMP_MS = quick ? 2000 : 6000
const RECONNECT_MS = 200
const DRIP_MS = 2000
const IMAGE_KB = 4096
/** The normal load fails past this p99 (ms) or under this share of 2xx. */
const P99_LIMIT_MS = 1000
/** The normal load is many clients: its connections come from 16 addresses in turn, none an attacker's. */
const NORMAL_ADDRESSES = Array.from({ length: 16 }, (_, i) => `127.1.0.${i + 1}`)
const SUCCESS_LIMIT = 0.99

for (const [name, value] of Object.entries({ SECONDS, NORMAL_RATE, READ_RATE, PER_ADDRESS })) {
  if (!(value > 0)) { console.error(`SLOW_${name} must be positive`); process.exit(2) }
}
if (STEPS.some((n) => !Number.isInteger(n) || n < 1)) { console.error('SLOW_STEPS: positive integers'); process.exit(2) }
if (ATTACKS.some((a) => !KINDS.includes(a))) { console.error(`SLOW_ATTACKS: some of ${KINDS.join(', ')}`); process.exit(2) }

interface AttackStats {
  opened: number
  /** Bytes written, and read by the attacker's code (a stalled reader reads none: the kernel's buffer takes a few hundred KB). */
  sent: number
  read: number
  /** How connections ended: the status of the answer read, or `cut` (closed with none). */
  ends: Record<string, number>
}

/** N connections that keep attacking until stop(); each one reconnects RECONNECT_MS after it ended. */
function attack (kind: AttackKind, port: number, n: number, addresses: readonly string[], imagePath: string): { stats: AttackStats, stop: () => void } {
  const stats: AttackStats = { opened: 0, sent: 0, read: 0, ends: {} }
  const sockets = new Set<net.Socket>()
  let running = true
  const request = kind === 'slow-body'
    ? 'POST /api/auth/refresh-token HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{'
    : `GET ${imagePath} HTTP/1.1\r\nHost: api\r\n\r\n`
  const open = (localAddress: string): void => {
    if (!running) return
    const socket = net.connect({ host: '127.0.0.1', port, localAddress })
    sockets.add(socket)
    stats.opened += 1
    let head = ''
    let dripped = 1
    let timer: NodeJS.Timeout | undefined
    socket.on('error', () => {})
    socket.once('connect', () => {
      socket.write(request)
      if (kind === 'slow-body') {
        timer = setInterval(() => { if (dripped++ < 99) socket.write(' ') }, DRIP_MS)
      } else if (kind === 'stalled-read') {
        socket.pause()
        timer = setInterval(() => socket.write('\r\n'), 1000)
      }
    })
    if (kind !== 'stalled-read') {
      socket.on('data', (chunk: Buffer) => {
        if (head.length < 16) head += chunk.toString('latin1', 0, 16)
        if (kind === 'slow-read') {
          socket.pause()
          setTimeout(() => socket.resume(), chunk.length * 1000 / READ_RATE)
        }
      })
    }
    socket.once('close', () => {
      clearInterval(timer)
      sockets.delete(socket)
      stats.sent += socket.bytesWritten
      stats.read += socket.bytesRead
      const end = /^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 'cut'
      if (running) stats.ends[end] = (stats.ends[end] ?? 0) + 1
      if (running) setTimeout(() => open(localAddress), RECONNECT_MS)
    })
  }
  for (let i = 0; i < n; i++) open(addresses[i % addresses.length]!)
  return {
    stats,
    stop: () => {
      running = false
      for (const socket of sockets) {
        stats.sent += socket.bytesWritten
        stats.read += socket.bytesRead
        socket.destroy()
      }
    }
  }
}

interface Normal { p50: number, p99: number, success: number, byStatus: Record<number, number>, timeouts: number, errors: number }

async function normalLoad (url: string, users: readonly BenchUser[]): Promise<Normal> {
  const requests = users.map((u) => Buffer.from(`GET /api/user/${u.id} HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer ${u.token}\r\n\r\n`, 'latin1'))
  const r = await openLoop({ url, requests, rate: NORMAL_RATE, seconds: SECONDS, timeoutMs: 10_000, preconnect: 20, localAddresses: NORMAL_ADDRESSES })
  return { p50: quantile(r.okLatencies, 0.5), p99: quantile(r.okLatencies, 0.99), success: r.okLatencies.length / r.scheduled, byStatus: r.byStatus, timeouts: r.timeouts, errors: r.errors }
}

interface Step {
  n: number
  addresses: number
  normal: Normal
  attack: AttackStats
  bytesPerSecond: number
  seconds: number
  failed: boolean
  /** The service's requests in progress (http_requests_in_flight) when the normal load starts: the places the attack holds. */
  held: number
  /** Its refusals and cuts during the step (http_client_limited_total, http_load_shed_total), by reason. */
  refusals: Record<string, number>
}

const ADMIN_KEY = randomBytes(32).toString('base64url')

/** The service's gauge of requests in progress and its counters of refusals and cuts (0 for those a version lacks). */
async function serviceMetrics (url: string): Promise<{ inFlight: number, counters: Record<string, number> }> {
  const text = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${ADMIN_KEY}` } }).then(async (r) => await r.text(), () => '')
  const counters: Record<string, number> = {}
  for (const [, name, reason, value] of text.matchAll(/^http_(client_limited|load_shed)_total\{reason="(\w+)"\} (\d+)$/gm)) {
    counters[`${name === 'load_shed' ? '503' : 'limited'} ${reason}`] = Number(value)
  }
  return { inFlight: Number(/^http_requests_in_flight (\d+)$/m.exec(text)?.[1] ?? Number.NaN), counters }
}

function difference (after: Record<string, number>, before: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(after).map(([k, v]) => [k, v - (before[k] ?? 0)]).filter(([, v]) => (v as number) > 0))
}
interface Setup { tree: string, placement: 'alone' | 'proxy', spread: 'one' | 'many', kind: AttackKind, steps: Step[] }

/** The version's deploy/haproxy.cfg: the working tree's, a revision's, or a project copy's. */
function proxyConfigText (spec: string | undefined): string {
  if (spec === undefined) return readFileSync(path.join(ROOT, 'deploy', 'haproxy.cfg'), 'utf8')
  const file = path.join(spec, 'deploy', 'haproxy.cfg')
  if (existsSync(file)) return readFileSync(file, 'utf8')
  return execFileSync('git', ['show', `${spec}:deploy/haproxy.cfg`], { cwd: ROOT, encoding: 'utf8' })
}

/** HAProxy on a version's deploy/haproxy.cfg, all its limits kept, its request log off. */
async function startProxy (serverPort: number, configText: string): Promise<{ url: string, port: number, stop: () => void }> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'ups-bench-slow-'))
  const port = await freePort()
  const config = (await hostConfig(port, [serverPort], path.join(dir, 'admin.sock'), configText)).replace(/^\s*log stdout.*$/m, '')
  writeFileSync(path.join(dir, 'haproxy.cfg'), config)
  const child: ChildProcess = spawn('haproxy', ['-db', '-f', path.join(dir, 'haproxy.cfg')], { stdio: 'ignore' })
  const url = `http://127.0.0.1:${port}`
  for (let i = 0; ; i++) {
    const status = await fetch(`${url}/health/ready`).then((res) => res.status, () => 0)
    if (status === 200) break
    if (i > 150) { child.kill('SIGKILL'); throw new Error('HAProxy did not pass requests within 15 s') }
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  return { url, port, stop: () => { child.kill('SIGKILL'); rmSync(dir, { recursive: true, force: true }) } }
}

/** Waits until a normal request is answered 200 within 200 ms again (the last step's attack has let go), 20 s at most. */
async function recovered (url: string, user: BenchUser): Promise<void> {
  const deadline = Date.now() + 20_000
  while (Date.now() < deadline) {
    const started = Date.now()
    const status = await fetch(`${url}/api/user/${user.id}`, { headers: { authorization: `Bearer ${user.token}` }, signal: AbortSignal.timeout(2000) }).then((r) => r.status, () => 0)
    if (status === 200 && Date.now() - started < 200) return
    await settle(500)
  }
  console.log('    (not recovered after 20 s; next step anyway)')
}

function describeNormal (s: Step): string {
  const statuses = Object.entries(s.normal.byStatus).map(([k, v]) => `${k}: ${v}`).join(', ')
  return `p50 ${formatMs(s.normal.p50)} p99 ${formatMs(s.normal.p99)} ms, ${(s.normal.success * 100).toFixed(1)}% 2xx (${statuses}${s.normal.timeouts > 0 ? `, timeouts ${s.normal.timeouts}` : ''}${s.normal.errors > 0 ? `, errors ${s.normal.errors}` : ''})`
}

function describeAttack (s: Step): string {
  const ends = Object.entries(s.attack.ends).map(([k, v]) => `${k} ${v}`).join(', ')
  const refusals = Object.entries(s.refusals).map(([k, v]) => `${k} ${v}`).join(', ')
  return `${s.attack.opened} connections opened, ${formatBytes(s.bytesPerSecond)}/s; ended: ${ends === '' ? 'none' : ends}; service: ${s.held} in progress after the ramp, ${refusals === '' ? 'no refusals' : refusals}`
}

function p99Text (normal: Normal): string {
  return Number.isNaN(normal.p99) ? 'no 2xx' : formatMs(normal.p99)
}

function formatBytes (b: number): string {
  return b >= 1e6 ? `${(b / 1e6).toFixed(1)} MB` : b >= 1e3 ? `${(b / 1e3).toFixed(1)} kB` : `${b.toFixed(0)} B`
}

async function main (): Promise<void> {
  const startedAt = new Date()
  const loadAtStart = os.loadavg()
  console.log(`slow-clients: steps ${STEPS.join(', ')}, ${SECONDS} s per step, ${NORMAL_RATE} req/s normal load, on ${describeMachine(machine())}; load ${formatLoad(loadAtStart)}`)
  const trees: Array<{ tree: ServiceTree, spec?: string }> = [{ tree: workingTree() }, ...REVISIONS.map((spec) => ({ tree: prepareTree(spec), spec }))]
  const database = await benchDatabase()
  const uploads = mkdtempSync(path.join(os.tmpdir(), 'ups-bench-slow-uploads-'))
  const setups: Setup[] = []
  let users: BenchUser[] = []
  let imagePath = ''
  const loads: string[] = []
  try {
    for (const { tree, spec } of trees) {
      for (const placement of ['alone', 'proxy'] as const) {
        // Shipped defaults: serviceEnv turns the per-client share off for the other benches.
        const env = serviceEnv(database.url, { LOG_LEVEL: 'warn', UPLOAD_DIR: uploads, ADMIN_API_KEYS: ADMIN_KEY, ...(placement === 'proxy' ? { TRUST_PROXY: '127.0.0.1' } : {}) })
        delete env.LOAD_SHED_MAX_IN_FLIGHT_PER_CLIENT
        const service = await startServer({ entry: 'src/server.ts', cwd: tree.dir, env, readyPath: '/health/live' })
        const proxy = placement === 'proxy' ? await startProxy(service.port, proxyConfigText(spec)) : undefined
        const url = proxy?.url ?? service.url
        const port = proxy?.port ?? service.port
        try {
          if (users.length === 0) {
            users = await userPool(service.url, 10, 'slow')
            imagePath = await uploadImage(service.url, users[0]!)
          }
          // Just started on a busy machine, a version may still shed load (503): retried.
          for (let attempt = 1; ; attempt++) {
            const image = await fetch(`${url}${imagePath}`)
            const bytes = (await image.arrayBuffer()).byteLength
            if (image.status === 200 && bytes >= IMAGE_KB * 1000) break
            if (image.status !== 503 || attempt === 20) throw new Error(`${tree.name}: image GET ${image.status}, ${bytes} bytes`)
            await settle(1000)
          }
          loads.push(`${tree.name} ${placement}: ${formatLoad(os.loadavg())}`)
          // A version without per-client limits does not tell addresses apart: many are one there.
          const spreads = spec === undefined ? ['one', 'many'] as const : ['one'] as const
          for (const kind of ATTACKS) {
            for (const spread of spreads) {
              const setup: Setup = { tree: tree.name, placement, spread, kind, steps: [] }
              setups.push(setup)
              console.log(`  ${tree.name}, ${placement}, ${kind}, ${spread === 'one' ? 'one address' : `${PER_ADDRESS} connections per address`}:`)
              for (const n of STEPS) {
                const count = spread === 'one' ? 1 : Math.ceil(n / PER_ADDRESS)
                const addresses = Array.from({ length: count }, (_, i) => `127.0.${Math.floor((i + 2) / 256)}.${(i + 2) % 256}`)
                const started = Date.now()
                const counted = await serviceMetrics(service.url)
                const attacker = attack(kind, port, n, addresses, imagePath)
                let normal: Normal
                let held: number
                try {
                  await settle(RAMP_MS)
                  held = (await serviceMetrics(service.url)).inFlight
                  normal = await normalLoad(url, users)
                } finally { attacker.stop() }
                const refusals = difference((await serviceMetrics(service.url)).counters, counted.counters)
                const seconds = (Date.now() - started) / 1000
                const step: Step = { n, addresses: count, normal, attack: attacker.stats, seconds, bytesPerSecond: (attacker.stats.sent + attacker.stats.read) / seconds, failed: normal.p99 > P99_LIMIT_MS || normal.success < SUCCESS_LIMIT || Number.isNaN(normal.p99), held, refusals }
                setup.steps.push(step)
                console.log(`    N=${n} from ${count} address(es): normal ${describeNormal(step)}; attack ${describeAttack(step)}${step.failed ? '  <- normal load failed' : ''}`)
                await recovered(url, users[0]!)
                if (step.failed) break
              }
            }
          }
        } finally {
          proxy?.stop()
          await service.stop()
        }
      }
    }
  } finally {
    await database.drop()
    rmSync(uploads, { recursive: true, force: true })
    for (const { tree } of trees) tree.cleanup()
  }

  const text = report(setups, startedAt, loadAtStart, loads, database.description, await haproxyVersion())
  console.log(`\n${text}\n`)
  if (WRITE) {
    writeSection(path.join(ROOT, 'bench', 'README.md'), 'slow-clients', text)
    console.log('slow-clients: results written to bench/README.md')
  }
}

async function uploadImage (url: string, user: BenchUser): Promise<string> {
  const headers = { authorization: `Bearer ${user.token}` }
  const created = await fetch(`${url}/api/product`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify({ title: 'Poster', amount: 1200 }) })
  const product = await created.json() as { id: number }
  if (created.status !== 201) throw new Error(`create product: ${created.status} ${JSON.stringify(product)}`)
  const form = new FormData()
  form.append('image', new Blob([noisePng(IMAGE_KB)], { type: 'image/png' }), 'poster.png')
  const uploaded = await fetch(`${url}/api/product/${product.id}/image`, { method: 'POST', headers, body: form })
  if (uploaded.status !== 201) throw new Error(`upload: ${uploaded.status} ${await uploaded.text()}`)
  return `/api/product/${product.id}/image`
}

function command (): string {
  const env = ['SLOW_TREES', 'SLOW_SECONDS', 'SLOW_STEPS', 'SLOW_ATTACKS', 'SLOW_NORMAL_RATE', 'SLOW_READ_RATE', 'SLOW_PER_ADDRESS', 'SLOW_WRITE']
    .filter((name) => process.env[name] !== undefined)
    .map((name) => `${name}=${process.env[name]}`)
  if (process.env.DATABASE_URL) env.push('DATABASE_URL=<set>')
  return [...env, 'npx tsx bench/slow-clients.ts', ...process.argv.slice(2)].join(' ')
}

/** The smallest step that failed the normal load, or "not reached" with the largest tried. */
function verdict (setup: Setup): string[] {
  const failed = setup.steps.find((s) => s.failed)
  const last = setup.steps.at(-1)!
  const shown = failed ?? last
  const where = setup.spread === 'one' ? 'one' : 'many'
  return [
    setup.tree, setup.placement, setup.kind, where,
    failed === undefined ? `not reached at N=${last.n} (${last.addresses} addr.)` : `**N=${failed.n}** (${failed.addresses} addr.)`,
    formatBytes(shown.bytesPerSecond) + '/s',
    `${p99Text(shown.normal)} / ${(shown.normal.success * 100).toFixed(1)}%`,
    Object.entries(shown.attack.ends).map(([k, v]) => `${k} ${v}`).join(', ') || '–'
  ]
}

function report (setups: Setup[], startedAt: Date, loadAtStart: number[], loads: string[], database: string, haproxy: string): string {
  return [
    `Measured ${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC on ${describeMachine(machine())}; load average at the start ${formatLoad(loadAtStart)}, at the end ${formatLoad(os.loadavg())}; at the start of each service: ${loads.join('; ')}. HAProxy ${haproxy}.`,
    `Command: \`${command()}\`. Database: ${database}. Normal load: GET /api/user/:id, ${NORMAL_RATE}/s open loop from ${NORMAL_ADDRESSES.length} addresses (127.1.0.x) for ${SECONDS} s per step, after ${RAMP_MS / 1000} s of attack alone; it fails when its p99 passes ${P99_LIMIT_MS} ms or under ${SUCCESS_LIMIT * 100}% of it is 2xx. Attack steps N = ${STEPS.join(', ')} connections, from one address (127.0.0.2) or ${PER_ADDRESS} per address ("many"); reconnecting ${RECONNECT_MS} ms after each end; slow-read at ${READ_RATE} B/s per connection. Bytes/s: what the attacker wrote and read, per second of the step.`,
    '',
    markdownTable(['version', 'setup', 'attack', 'addresses', 'smallest N that failed the normal load', 'attacker bytes/s', 'normal p99 ms / 2xx', 'attack connections ended by'], setups.map(verdict)),
    '',
    'Every step (normal p99 ms / share of 2xx; attacker bytes/s; the service\'s requests in progress once the attack had taken hold, before the normal load):',
    '',
    ...setups.map((s) => `- ${s.tree}, ${s.placement}, ${s.kind}, ${s.spread}: ${s.steps.map((st) => `N=${st.n}: ${p99Text(st.normal)} / ${(st.normal.success * 100).toFixed(1)}%, ${formatBytes(st.bytesPerSecond)}/s, ${st.held} held`).join('; ')}`)
  ].join('\n')
}

async function haproxyVersion (): Promise<string> {
  const { stdout } = await promisify(execFile)('haproxy', ['-v'])
  return /version (\S+)/.exec(stdout)?.[1] ?? 'unknown'
}

await main()
