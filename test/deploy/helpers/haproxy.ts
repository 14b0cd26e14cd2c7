/**
 * HAProxy from the host's packages (Debian's `haproxy`) running deploy/haproxy.cfg, the file
 * the compose deployment mounts, with its Docker-only lines (marked `# docker`: the DNS
 * resolvers and the server template) replaced by fixed servers on 127.0.0.1, a loopback bind
 * and an admin socket to read the servers' states. Killed at teardown.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { PROJECT_ROOT } from '../../../src/db/prisma-cli.js'

interface Teardown { teardown: (fn: () => unknown) => void }

export interface Haproxy {
  url: string
  child: ChildProcess
  output: () => string
  /** Each server's status (`UP`, `DOWN`, `MAINT`, `UP 1/2`...) in a backend (`api` unless named), by name (api1, api2, ...). */
  states: (backend?: string) => Promise<Map<string, string>>
  /** Each server's total of requests sent to it (HAProxy's `stot`) in a backend (`api` unless named). */
  totals: (backend?: string) => Promise<Map<string, number>>
  /** Requests waiting in the backend's queue for a free server slot now (its `qcur`). */
  queued: () => Promise<number>
  /** The most requests that ever waited at once in a backend's queue for a free server slot (its `qmax`; `api` unless named). */
  queuedMost: (backend?: string) => Promise<number>
  /** Requests in progress on a backend's servers now (their `scur`, summed): the replica slots held (`api`, or the large answers' lane `api_bulk`). */
  current: (backend?: string) => Promise<number>
}

/** The haproxy binary: on PATH, or where Debian puts it (/usr/sbin, off a non-root PATH). */
const HAPROXY = ['haproxy', '/usr/sbin/haproxy'].find((bin) => spawnSync(bin, ['-v']).status === 0)

/** Why HAProxy cannot run here, or undefined when it can. */
export function haproxyMissing (): string | undefined {
  return HAPROXY !== undefined ? undefined : 'no `haproxy` (Debian: apt-get install haproxy; .ci/run installs it)'
}

/** deploy/haproxy.cfg (or `text`, another version of it) for local servers. */
export async function hostConfig (proxyPort: number, serverPorts: number[], socket: string, text?: string): Promise<string> {
  text ??= await readFile(path.join(PROJECT_ROOT, 'deploy', 'haproxy.cfg'), 'utf8')
  // Each backend's `server-template` line becomes the local servers, in its place.
  const servers = serverPorts.map((port, i) => `  server api${i + 1} 127.0.0.1:${port}`).join('\n')
  let templates = 0
  const lines = text.split('\n').flatMap((line) => {
    if (!/#\s*docker\s*$/.test(line)) return [line]
    if (/^\s*server-template\s/.test(line)) { templates++; return [servers] }
    return []
  })
  const out = lines.join('\n')
    .replace(/^(global\n)/m, `$1  stats socket ${socket} mode 600 level admin\n`)
    .replace(/^(\s*bind) :8080$/m, `$1 127.0.0.1:${proxyPort}`)
  if (out === lines.join('\n') || !out.includes(`127.0.0.1:${proxyPort}`) || templates === 0) throw new Error('deploy/haproxy.cfg: no `global` section, no `bind :8080` line or no `server-template ... # docker` line to adapt')
  return out.trimEnd() + '\n'
}

async function adminCommand (socket: string, command: string): Promise<string> {
  return await new Promise((resolve, reject) => {
    let data = ''
    const client = net.createConnection(socket, () => client.end(`${command}\n`))
    client.on('data', (chunk) => { data += chunk.toString() })
    client.on('end', () => resolve(data))
    client.on('error', reject)
  })
}

async function stat (socket: string): Promise<Record<string, string>[]> {
  const [header = '', ...rows] = (await adminCommand(socket, 'show stat')).split('\n').filter(Boolean)
  const names = header.replace(/^# /, '').split(',')
  return rows.map((row) => Object.fromEntries(row.split(',').map((value, i) => [names[i] ?? String(i), value])))
}

/**
 * @param timeouts shorter deadlines for a test, by the words that precede the value in the
 *   shipped file (`{ 'timeout client': '3s', 'http-request wait-for-body time': '2s' }`); a
 *   line that is not there is an error.
 * @param edit any other change to the file for one test (it must change something).
 */
export async function startHaproxy (t: Teardown, proxyPort: number, serverPorts: number[], timeouts: Record<string, string> = {}, edit?: (config: string) => string): Promise<Haproxy> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'haproxy-'))
  const socket = path.join(dir, 'admin.sock')
  const file = path.join(dir, 'haproxy.cfg')
  let config = await hostConfig(proxyPort, serverPorts, socket)
  for (const [words, value] of Object.entries(timeouts)) {
    const line = new RegExp(`^(\\s*${words.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}) \\S+$`, 'm')
    if (!line.test(config)) throw new Error(`deploy/haproxy.cfg has no \`${words} <value>\` line`)
    config = config.replace(line, `$1 ${value}`)
  }
  if (edit !== undefined) {
    const edited = edit(config)
    if (edited === config) throw new Error('the edit changed nothing in deploy/haproxy.cfg')
    config = edited
  }
  await writeFile(file, config)
  const check = spawnSync(HAPROXY ?? 'haproxy', ['-c', '-f', file], { encoding: 'utf8' })
  if (check.status !== 0) throw new Error(`haproxy -c refused the configuration:\n${check.stdout}${check.stderr}`)
  const child = spawn(HAPROXY ?? 'haproxy', ['-W', '-db', '-f', file], { stdio: ['ignore', 'pipe', 'pipe'] })
  let text = ''
  child.stdout.on('data', (chunk: Buffer) => { text += chunk.toString() })
  child.stderr.on('data', (chunk: Buffer) => { text += chunk.toString() })
  const exited = new Promise((resolve) => child.on('exit', resolve))
  t.teardown(async () => {
    if (child.exitCode === null) { child.kill('SIGKILL'); await exited }
    await rm(dir, { recursive: true, force: true })
  })
  const backend = async (name = 'api'): Promise<Record<string, string>[]> => (await stat(socket)).filter((row) => row.pxname === name && /^api\d+$/.test(row.svname ?? ''))
  // The socket appears once HAProxy has started.
  for (let i = 0; ; i++) {
    try { await backend(); break } catch (error) {
      if (i > 100 || child.exitCode !== null) throw new Error(`haproxy did not start: ${String(error)}\n${text}`)
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }
  return {
    url: `http://127.0.0.1:${proxyPort}`,
    child,
    output: () => text,
    states: async (name = 'api') => new Map((await backend(name)).map((row) => [row.svname!, row.status!])),
    totals: async (name = 'api') => new Map((await backend(name)).map((row) => [row.svname!, Number(row.stot)])),
    queued: async () => Number((await stat(socket)).find((row) => row.pxname === 'api' && row.svname === 'BACKEND')?.qcur ?? Number.NaN),
    queuedMost: async (name = 'api') => Number((await stat(socket)).find((row) => row.pxname === name && row.svname === 'BACKEND')?.qmax ?? Number.NaN),
    current: async (name = 'api') => (await backend(name)).reduce((sum, row) => sum + Number(row.scur), 0)
  }
}
