/**
 * The swarm lab for test/swarm/ (scripts/swarm-stack.sh builds it): the manager's docker CLI,
 * the API service's tasks and update state, and a load of image uploads to run beside the
 * mixed load of test/deploy/helpers/load.ts.
 */
import { createHash } from 'node:crypto'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { PROJECT_ROOT } from '../../src/db/prisma-cli.js'
import { run, type Run } from '../deploy/helpers/docker.js'
import { call, isAnswer } from '../faults/helpers/http.js'
import type { LoadUser } from '../deploy/helpers/load.js'

export const STACK = 'ups'
export const MANAGER = 'lab-swnode1'
const script = path.join(PROJECT_ROOT, 'scripts', 'swarm-stack.sh')

export async function stack (args: string[], timeoutMs = 900_000): Promise<Run> {
  return await run('sh', [script, ...args], { cwd: PROJECT_ROOT, timeoutMs })
}

/** `docker ...` on the manager node. */
export async function manager (...args: string[]): Promise<Run> {
  return await run('docker', ['exec', MANAGER, 'docker', ...args], { timeoutMs: 120_000 })
}

export async function must (r: Promise<Run>): Promise<string> {
  const done = await r
  if (done.code !== 0) throw new Error(`exit ${done.code}: ${done.stderr.slice(-2000)}${done.stdout.slice(-1000)}`)
  return done.stdout
}

export interface Task { node: string, state: string, image: string }

/** The API's tasks Swarm wants running, with where they run and their current state. */
export async function apiTasks (): Promise<Task[]> {
  const out = await must(manager('service', 'ps', `${STACK}_api`, '--filter', 'desired-state=running', '--format', '{{.Node}}\t{{.CurrentState}}\t{{.Image}}'))
  return out.trim().split('\n').filter(Boolean).map((line) => {
    const [node, state, image] = line.split('\t') as [string, string, string]
    return { node, state: state.split(' ')[0]!, image }
  })
}

/** Running (so healthy: Swarm counts a task with a health check running once it passes) API tasks. */
export async function runningApi (): Promise<Task[]> {
  return (await apiTasks()).filter((task) => task.state === 'Running')
}

export async function updateState (): Promise<string> {
  return (await must(manager('service', 'inspect', `${STACK}_api`, '-f', '{{if .UpdateStatus}}{{.UpdateStatus.State}}{{end}}'))).trim()
}

/** Waits (bounded) until `check` holds; the time it took, in ms. */
export async function waitFor (what: string, check: () => Promise<boolean>, ms: number): Promise<number> {
  const started = Date.now()
  while (!await check().catch(() => false)) {
    if (Date.now() - started > ms) throw new Error(`not within ${ms / 1000} s: ${what}`)
    await sleep(500)
  }
  return Date.now() - started
}

export async function nodeIps (): Promise<string[]> {
  return (await must(stack(['ips']))).trim().split('\n')
}

// A real PNG header (the service judges the type by the bytes), padded per upload.
const PNG_HEAD = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64')

export interface ImageFailure { op: string, at: number, end: number, status?: number, error?: string, body?: string }
export interface Uploaded { id: number, sha256: string }
export interface ImageLoadResult { sent: number, failures: ImageFailure[], uploaded: Uploaded[] }

/** One worker: a product created, then its image uploaded (multipart), in a loop. */
export function imageLoad (base: string, user: LoadUser, pauseMs: number): { stop: () => Promise<ImageLoadResult> } {
  const result: ImageLoadResult = { sent: 0, failures: [], uploaded: [] }
  const state = { running: true }
  const loop = (async () => {
    for (let n = 0; state.running; n++) {
      result.sent += 1
      const created = await call(base, 'POST', '/api/product', { body: { title: `image ${n}`, amount: n }, token: user.token, timeoutMs: 20_000 })
      if (!isAnswer(created) || created.status !== 201) {
        result.failures.push({ op: 'create', at: created.at, end: created.at + created.ms, status: isAnswer(created) ? created.status : undefined, error: isAnswer(created) ? undefined : created.error, body: isAnswer(created) ? created.body.slice(0, 200) : undefined })
        continue
      }
      const id = created.json.id as number
      const bytes = Buffer.concat([PNG_HEAD, Buffer.alloc(2000 + (n % 500), n % 251)])
      const form = new FormData()
      form.set('image', new Blob([bytes], { type: 'image/png' }), 'p.png')
      result.sent += 1
      const at = Date.now()
      try {
        const res = await fetch(`${base}/api/product/${id}/image`, { method: 'POST', headers: { authorization: `Bearer ${user.token}` }, body: form, signal: AbortSignal.timeout(20_000) })
        const body = await res.text()
        if (res.status === 201) result.uploaded.push({ id, sha256: createHash('sha256').update(bytes).digest('hex') })
        else result.failures.push({ op: 'upload', at, end: Date.now(), status: res.status, body: body.slice(0, 200) })
      } catch (error) {
        result.failures.push({ op: 'upload', at, end: Date.now(), error: String((error as Error & { cause?: Error }).cause ?? error) })
      }
      await sleep(pauseMs)
    }
  })()
  return {
    async stop () {
      state.running = false
      await loop
      return result
    }
  }
}

/** The uploaded images that `base` does not serve with the same bytes. */
export async function unreadableImages (base: string, uploaded: Uploaded[]): Promise<number[]> {
  const bad: number[] = []
  for (const { id, sha256 } of uploaded) {
    const res = await fetch(`${base}/api/product/${id}/image`, { signal: AbortSignal.timeout(10_000) }).catch(() => undefined)
    const bytes = res?.status === 200 ? Buffer.from(await res.arrayBuffer()) : undefined
    if (bytes === undefined || createHash('sha256').update(bytes).digest('hex') !== sha256) bad.push(id)
  }
  return bad
}

/** Memory used per lab node (its whole container: dockerd and every task), in MiB. */
export async function nodeMemory (): Promise<Record<string, number>> {
  const out = await must(run('docker', ['stats', '--no-stream', '--format', '{{.Name}}\t{{.MemUsage}}']))
  const memory: Record<string, number> = {}
  for (const line of out.trim().split('\n')) {
    const [name, usage] = line.split('\t') as [string, string]
    if (!/^lab-swnode\d+$/.test(name)) continue
    const m = /^([\d.]+)\s*([KMG]i?B)/.exec(usage)
    if (m === null) continue
    const factor = m[2]!.startsWith('G') ? 1024 : m[2]!.startsWith('K') ? 1 / 1024 : 1
    memory[name] = Math.round(Number(m[1]) * factor)
  }
  return memory
}
