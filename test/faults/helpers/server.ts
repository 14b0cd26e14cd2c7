/**
 * The real server (`node --import tsx src/server.ts`) as a child process on a free
 * loopback port, its JSON log lines collected, killed at teardown if still running.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { TEST_SECRET } from '../../helpers/build.js'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..')

interface Teardown { teardown: (fn: () => unknown) => void }

export interface LogLine { level?: number, msg?: string, reqId?: string, requestId?: string, res?: { statusCode?: number }, [key: string]: unknown }

export interface Exit { code: number | null, signal: NodeJS.Signals | null, at: number }

export interface ServerProcess {
  child: ChildProcess
  /** http://127.0.0.1:<port> */
  url: string
  /** Parsed JSON log lines so far. */
  logs: LogLine[]
  /** Everything written to stdout and stderr so far. */
  output: () => string
  exited: Promise<Exit>
  alive: () => boolean
}

/** The variables every spawned server gets; `env` adds to or overrides them. */
export const SERVER_ENV: Record<string, string> = {
  NODE_ENV: 'test',
  LOG_LEVEL: 'info',
  SECRET: TEST_SECRET,
  HOST: '127.0.0.1',
  PORT: '0',
  BCRYPT_COST: '4',
  RATE_LIMIT_AUTH_MAX: '100000',
  // No load shedding (as in test/helpers/build.ts): these tests measure other faults.
  MAX_EVENT_LOOP_DELAY_MS: '0'
}

/** `cwd`: the project folder the server runs in (another checkout). */
export async function spawnServer (t: Teardown, env: Record<string, string>, startTimeoutMs = 60_000, cwd = root): Promise<ServerProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
    cwd,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...SERVER_ENV, ...env },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let text = ''
  let pending = ''
  const logs: LogLine[] = []
  let alive = true
  const exited = new Promise<Exit>((resolve) => {
    child.on('exit', (code, signal) => { alive = false; resolve({ code, signal, at: Date.now() }) })
  })
  t.teardown(async () => {
    if (alive) { child.kill('SIGKILL'); await exited }
  })

  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the server did not listen within ${startTimeoutMs} ms:\n${text}`)), startTimeoutMs)
    child.stderr.on('data', (chunk: Buffer) => { text += chunk.toString() })
    child.stdout.on('data', (chunk: Buffer) => {
      const s = chunk.toString()
      text += s
      pending += s
      const lines = pending.split('\n')
      pending = lines.pop() ?? ''
      for (const line of lines) {
        if (!line.startsWith('{')) continue
        const entry = JSON.parse(line) as LogLine
        logs.push(entry)
        const match = /^listening on (http:\/\/[^ ]+)/.exec(entry.msg ?? '')
        if (match) { clearTimeout(timer); resolve(match[1]!) }
      }
    })
    exited.then((exit) => { clearTimeout(timer); reject(new Error(`the server exited (${exit.code ?? exit.signal}) before listening:\n${text}`)) }, reject)
  })
  return { child, url, logs, output: () => text, exited, alive: () => alive }
}

/** Polls `check` until it returns true, or fails after `timeoutMs`. */
export async function waitFor (what: string, check: () => Promise<boolean> | boolean, timeoutMs: number, everyMs = 100): Promise<number> {
  const started = Date.now()
  while (Date.now() - started < timeoutMs) {
    if (await check()) return Date.now() - started
    await new Promise((resolve) => setTimeout(resolve, everyMs))
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
}
