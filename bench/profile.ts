/**
 * Where the CPU of GET /api/user/:id goes: the service (src/server.ts, the bench's
 * production settings) runs under `node --cpu-prof` while autocannon reads for
 * PROFILE_SECONDS; the profile, cut to the load period, is summarised by package and
 * component (bench/summarise-profile.ts) and kept in bench/results/ (git-ignored).
 *
 *   npx tsx bench/profile.ts                 20 s of load, summary printed
 *   PROFILE_SECONDS=10 npx tsx bench/profile.ts
 *   PROFILE_TREE=HEAD~1 npx tsx bench/profile.ts   profile that revision (or project copy) instead
 *   PROFILE_ENTRY=dist/server.js npx tsx bench/profile.ts   the compiled service, as the image runs it (`npm run build` first)
 *   PROFILE_ENTRY=bench/servers/fastify-jwt-floor.ts FLOOR_ADD=session npx tsx bench/profile.ts
 *                                               a floor (bench/servers/), its users made by the service first
 *   PROFILE_WRITE=1 npx tsx bench/profile.ts    also write the summary to bench/README.md
 *                                               (section "profile", or "profile-<PROFILE_TREE>")
 */
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { benchDatabase } from './lib/database.js'
import { load } from './lib/load.js'
import { describeMachine, formatLoad, machine } from './lib/machine.js'
import { ROOT, startServer } from './lib/processes.js'
import { formatMs, formatRps, writeSection } from './lib/report.js'
import { getUserRequests, serviceEnv, userPool, type BenchUser } from './lib/service.js'
import { prepareTree, workingTree } from './lib/trees.js'
import { formatSummary, readProfile, summarise } from './summarise-profile.js'

const SECONDS = Number(process.env.PROFILE_SECONDS ?? 20)
const READERS = 50

const nowUs = (): number => Number(process.hrtime.bigint() / 1000n)

const TREE = process.env.PROFILE_TREE
const ENTRY = process.env.PROFILE_ENTRY ?? 'src/server.ts'
const tree = TREE ? prepareTree(TREE) : workingTree()
const startedAt = new Date()
const database = await benchDatabase()
const profileDir = mkdtempSync(path.join(os.tmpdir(), 'ups-profile-'))
const loadAverage = formatLoad(machine().load)
let window: { fromUs: number, toUs: number }
let figures: Awaited<ReturnType<typeof load>>
/** A floor has no registration: the service makes the users, then the floor reads them. */
const FLOOR = ENTRY.startsWith('bench/servers/')
let users: BenchUser[] | undefined
if (FLOOR) {
  const service = await startServer({ entry: 'src/server.ts', env: serviceEnv(database.url), readyPath: '/health/live' })
  try { users = await userPool(service.url, 20) } finally { await service.stop() }
}
try {
  const server = await startServer({
    entry: ENTRY,
    cwd: tree.dir,
    nodeArgs: ['--cpu-prof', '--cpu-prof-dir', profileDir],
    env: serviceEnv(database.url),
    readyPath: '/health/live'
  })
  try {
    users ??= await userPool(server.url, 20)
    await load({ url: server.url, connections: READERS, seconds: 3, requests: getUserRequests(users) }) // warm-up
    const fromUs = nowUs()
    figures = await load({ url: server.url, connections: READERS, seconds: SECONDS, requests: getUserRequests(users) })
    window = { fromUs, toUs: nowUs() }
  } finally {
    await server.stop() // the profile is written when the process exits
  }
} finally {
  await database.drop()
  tree.cleanup()
}

const file = readdirSync(profileDir).find((name) => name.endsWith('.cpuprofile'))
if (file === undefined) throw new Error(`no .cpuprofile in ${profileDir}: did the server exit normally?`)
mkdirSync(path.join(ROOT, 'bench', 'results'), { recursive: true })
const kept = path.join(ROOT, 'bench', 'results', `get-user${TREE ? `-${tree.name}` : ''}.cpuprofile`)
copyFileSync(path.join(profileDir, file), kept)
rmSync(profileDir, { recursive: true, force: true })

const summary = formatSummary(summarise(readProfile(kept), 25, window))
const text = [
  `Profiled ${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC on ${describeMachine(machine())}; load average at the start ${loadAverage}.`,
  `Command: \`${process.env.PROFILE_SECONDS ? `PROFILE_SECONDS=${SECONDS} ` : ''}${TREE ? `PROFILE_TREE=${TREE} ` : ''}${process.env.PROFILE_ENTRY ? `PROFILE_ENTRY=${ENTRY} ` : ''}npx tsx bench/profile.ts\`: the service${TREE ? ` at ${tree.name}` : ''} under \`node --cpu-prof\`, GET /api/user/:id with ${READERS} connections for ${SECONDS} s ` +
    `(${formatRps(figures.rps)} req/s under the profiler, p50 ${formatMs(figures.p50)} ms, p99 ${formatMs(figures.p99)} ms); samples outside the load period are left out.`,
  '',
  '```',
  summary,
  '```'
].join('\n')
console.log(text)
console.log(`\nprofile kept in ${path.relative(ROOT, kept)} (open it in Chrome DevTools or speedscope); the load period: ${window.fromUs}-${window.toUs} us, ${figures.total} requests`)
if (process.env.PROFILE_WRITE === '1') {
  writeSection(path.join(ROOT, 'bench', 'README.md'), TREE ? `profile-${tree.name}` : 'profile', text)
  console.log('profile: summary written to bench/README.md')
}
