/**
 * A steady mixed load for the rolling-restart tests (host and compose): a few workers, each
 * looping over a read of the list, a login (whose token the user's later requests use), a
 * product creation and a read of a created product, through the proxy. Every request is bounded in time; anything but the expected
 * status (a network error, a 502/503 from the proxy, a 500) is a failure, recorded with its
 * time and request id. Created products are remembered, to check afterwards that none was lost.
 */
import { call, isAnswer } from '../../faults/helpers/http.js'

export interface LoadUser { username: string, password: string, token: string }

/** A request that did not get its expected answer: when it began (`at`) and when its answer or error came (`end`), ms since the epoch. */
export interface LoadFailure { op: string, at: number, end: number, status?: number, error?: string, body?: string, requestId?: string | null }

export interface LoadResult {
  sent: number
  /** Answers by operation and status, e.g. { 'login 200': 41 }. */
  answers: Record<string, number>
  failures: LoadFailure[]
  /** Ids of the products answered 201. */
  created: number[]
  /** Request ids the proxy gave, in order. */
  requestIds: string[]
}

interface Op { name: string, method: string, path: string, expect: number, body?: unknown, token?: string, user?: LoadUser }

export function mixedLoad (base: string, users: LoadUser[], options: { workers?: number, pauseMs?: number } = {}): { stop: () => Promise<LoadResult> } {
  const result: LoadResult = { sent: 0, answers: {}, failures: [], created: [], requestIds: [] }
  const state = { running: true }
  const pick = <T>(list: T[], n: number): T => list[n % list.length]!
  const op = (n: number): Op => {
    const user = pick(users, n)
    switch (n % 4) {
      case 0: return { name: 'list', method: 'GET', path: '/api/product?limit=5', expect: 200 }
      case 1: return { name: 'login', method: 'POST', path: '/api/auth/login', expect: 200, body: { username: user.username, password: user.password }, user }
      case 2: return { name: 'create', method: 'POST', path: '/api/product', expect: 201, token: user.token, body: { title: `load ${n}`, amount: n } }
      default: {
        const id = result.created.length > 0 ? pick(result.created, n) : undefined
        return id === undefined
          ? { name: 'list', method: 'GET', path: '/api/product?limit=1', expect: 200 }
          : { name: 'read', method: 'GET', path: `/api/product/${id}`, expect: 200 }
      }
    }
  }
  const worker = async (w: number): Promise<void> => {
    for (let n = w; state.running; n += 1) {
      const o = op(n)
      result.sent += 1
      const r = await call(base, o.method, o.path, { body: o.body, token: o.token, timeoutMs: 20_000 })
      if (!isAnswer(r)) {
        result.failures.push({ op: o.name, at: r.at, end: r.at + r.ms, error: r.error })
        continue
      }
      const requestId = r.headers.get('x-request-id')
      if (requestId) result.requestIds.push(requestId)
      result.answers[`${o.name} ${r.status}`] = (result.answers[`${o.name} ${r.status}`] ?? 0) + 1
      if (r.status !== o.expect) result.failures.push({ op: o.name, at: r.at, end: r.at + r.ms, status: r.status, body: r.body.slice(0, 300), requestId })
      else if (o.name === 'create') result.created.push(r.json.id as number)
      // As a client that logs in again does: the new session's token from now on (a user keeps
      // SESSIONS_MAX_PER_USER sessions; hundreds of logins end the older ones).
      else if (o.name === 'login' && o.user !== undefined) o.user.token = r.json.token as string
      if (options.pauseMs) await new Promise((resolve) => setTimeout(resolve, options.pauseMs))
    }
  }
  const workers = Array.from({ length: options.workers ?? 4 }, async (_, w) => await worker(w))
  return {
    async stop () {
      state.running = false
      await Promise.all(workers)
      return result
    }
  }
}

/** Registers and logs in `count` users through `base`. */
export async function loadUsers (base: string, count: number, tag: string): Promise<LoadUser[]> {
  const users: LoadUser[] = []
  for (let i = 0; i < count; i++) {
    const user = { username: `load_${tag}_${i}`, email: `load_${tag}_${i}@example.com`, password: 'steady load password' }
    const created = await call(base, 'POST', '/api/user', { body: user })
    if (!isAnswer(created) || created.status !== 201) throw new Error(`cannot register a load user: ${JSON.stringify(created)}`)
    const login = await call(base, 'POST', '/api/auth/login', { body: { username: user.username, password: user.password } })
    if (!isAnswer(login) || login.status !== 200) throw new Error(`cannot log in a load user: ${JSON.stringify(login)}`)
    users.push({ username: user.username, password: user.password, token: login.json.token as string })
  }
  return users
}

/** The created products that cannot be read back (should be none). */
export async function lostWrites (base: string, ids: number[]): Promise<number[]> {
  const lost: number[] = []
  for (const id of ids) {
    const r = await call(base, 'GET', `/api/product/${id}`)
    if (!isAnswer(r) || r.status !== 200 || r.json.id !== id) lost.push(id)
  }
  return lost
}
