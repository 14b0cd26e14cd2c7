import { mkdtempSync, readdirSync, readFileSync, renameSync } from 'node:fs'
import path from 'node:path'
import { benchDatabase } from './lib/database.js'
import { load } from './lib/load.js'
import { startServer } from './lib/processes.js'
import { getUserRequests, serviceEnv, userPool, type BenchUser } from './lib/service.js'

const nowUs = (): number => Number(process.hrtime.bigint() / 1000n)
const cpu = (pid: number): number => { const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' '); return (Number(f[11]) + Number(f[12])) * 10000 }
const database = await benchDatabase()
let users: BenchUser[]
const starts = Number(process.env.STARTS ?? 6)
const prof = process.env.PROF === '1'
try {
  const svc = await startServer({ entry: 'src/server.ts', env: serviceEnv(database.url), readyPath: '/health/live' })
  try { users = await userPool(svc.url, 20) } finally { await svc.stop() }
  for (let i = 0; i < starts; i++) {
    const dir = mkdtempSync('/tmp/benchtmp/start-')
    const server = await startServer({ entry: process.env.ENTRY ?? 'dist/server.js', nodeArgs: [...(prof ? ['--cpu-prof', '--cpu-prof-dir', dir] : []), ...(process.env.NODE_ARGS ?? '').split(' ').filter(Boolean)], logFile: `${dir}/out.log`, env: { ...serviceEnv(database.url), FLOOR_ADD: process.env.FLOOR_ADD ?? '' }, readyPath: '/health/live' })
    let line = ''
    try {
      await load({ url: server.url, connections: 50, seconds: 3, requests: getUserRequests(users) })
      const c0 = cpu(server.pid); const from = nowUs()
      const f = await load({ url: server.url, connections: 50, seconds: 6, requests: getUserRequests(users) })
      const to = nowUs(); const c1 = cpu(server.pid)
      line = `${dir} rps ${Math.round(f.rps)} cpu/req ${Math.round((c1 - c0) / f.total)} window ${from} ${to} reqs ${f.total}`
    } finally { await server.stop() }
    if (prof) { const p = readdirSync(dir).find((x) => x.endsWith('.cpuprofile')); if (p) renameSync(path.join(dir, p), path.join(dir, 'p.cpuprofile')) }
    console.log(line)
  }
} finally { await database.drop() }
