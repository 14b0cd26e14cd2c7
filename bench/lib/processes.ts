/**
 * Servers under test run in child processes, so the load generator (autocannon, in the
 * bench process) never shares their event loop. A child is ready when `readyPath` answers
 * 200; it is stopped with SIGTERM (the service closes gracefully) and killed if it lingers.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { freePort } from '../../src/db/embedded.js'

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')

export interface ServerSpec {
  /** The entry, relative to `cwd`: TypeScript (run under tsx) or compiled JavaScript (`.js`: plain node, as production runs it). */
  entry: string
  /** The project folder it runs in; the repository root by default. */
  cwd?: string
  env?: Record<string, string>
  /** Extra node flags (e.g. `--cpu-prof`). */
  nodeArgs?: string[]
  /** The node binary; the one running the bench by default. */
  node?: string
  /** A command that runs node, with its arguments (`['valgrind', '--tool=callgrind']`): the server is its child then. */
  wrapper?: string[]
  /** How long the server has to answer `readyPath` (90 s by default; under valgrind it starts some 50 times slower). */
  readyWithinMs?: number
  /** stdout and stderr go here (the service logs to stdout); a temp file by default. */
  logFile?: string
  readyPath?: string
}

export interface RunningServer {
  url: string
  port: number
  pid: number
  stop: () => Promise<void>
}

async function waitForExit (child: ChildProcess, ms: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return true
  return await new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms)
    child.once('exit', () => { clearTimeout(timer); resolve(true) })
  })
}

export async function startServer (spec: ServerSpec): Promise<RunningServer> {
  const port = await freePort()
  const tempDir = spec.logFile === undefined ? mkdtempSync(path.join(os.tmpdir(), 'ups-bench-server-')) : undefined
  const logFile = spec.logFile ?? path.join(tempDir!, 'output.log')
  const removeTemp = (): void => { if (tempDir !== undefined) rmSync(tempDir, { recursive: true, force: true }) }
  const out = openSync(logFile, 'a')
  const loader = spec.entry.endsWith('.js') ? [] : ['--import', 'tsx']
  const [command, ...args] = [...(spec.wrapper ?? []), spec.node ?? process.execPath, ...(spec.nodeArgs ?? []), ...loader, spec.entry]
  const child = spawn(command!, args, {
    cwd: spec.cwd ?? ROOT,
    env: { ...process.env, ...spec.env, HOST: '127.0.0.1', PORT: String(port) },
    stdio: ['ignore', out, out]
  })
  closeSync(out)
  // If the bench dies, its servers die with it.
  const killOnExit = (): void => { child.kill('SIGKILL') }
  process.once('exit', killOnExit)
  const url = `http://127.0.0.1:${port}`
  let exited: string | undefined
  child.once('exit', (code, signal) => {
    exited = `exit code ${code}, signal ${signal}`
    process.removeListener('exit', killOnExit)
  })

  const stop = async (): Promise<void> => {
    if (exited === undefined) {
      child.kill('SIGTERM')
      if (!await waitForExit(child, 20_000)) {
        child.kill('SIGKILL')
        await waitForExit(child, 5000)
      }
    }
    removeTemp()
  }

  const readyWithinMs = spec.readyWithinMs ?? 90_000
  const deadline = Date.now() + readyWithinMs
  for (;;) {
    if (exited !== undefined) {
      const tail = readFileSync(logFile, 'utf8').split('\n').slice(-15).join('\n')
      removeTemp()
      throw new Error(`${spec.entry} stopped before it was ready (${exited}); the end of ${logFile}:\n${tail}`)
    }
    if (Date.now() > deadline) { await stop(); throw new Error(`${spec.entry} not ready after ${readyWithinMs / 1000} s`) }
    const ready = await fetch(url + (spec.readyPath ?? '/'), { signal: AbortSignal.timeout(2000) }).then((r) => r.ok, () => false)
    if (ready) break
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  return { url, port, pid: child.pid ?? -1, stop }
}
