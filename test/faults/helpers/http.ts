/**
 * A small HTTP client for tests against a listening server: every call is bounded in
 * time, and what came back (or the network error) is recorded with its latency. Plus the
 * problem-details check for such answers, and an HS256 token signer.
 */
import { createHmac } from 'node:crypto'
import { Value } from 'typebox/value'
import { Problem } from '../../../src/lib/problem.js'
import { TEST_SECRET } from '../../helpers/build.js'

export interface Answer {
  method: string
  path: string
  status: number
  headers: Headers
  body: string
  json: any
  ms: number
  /** When the request started, ms since the epoch. */
  at: number
}

export interface Failure { method: string, path: string, error: string, ms: number, at: number }

export async function call (base: string, method: string, path: string, options: { body?: unknown, token?: string, timeoutMs?: number, headers?: Record<string, string> } = {}): Promise<Answer | Failure> {
  const at = Date.now()
  const headers: Record<string, string> = { ...options.headers }
  if (options.body !== undefined) headers['content-type'] = 'application/json'
  if (options.token) headers.authorization = `Bearer ${options.token}`
  try {
    const res = await fetch(base + path, {
      method,
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      signal: AbortSignal.timeout(options.timeoutMs ?? 15_000)
    })
    const body = await res.text()
    let json: unknown
    try { json = body === '' ? undefined : JSON.parse(body) } catch { json = undefined }
    return { method, path, status: res.status, headers: res.headers, body, json, ms: Date.now() - at, at }
  } catch (error) {
    const e = error as Error & { cause?: { code?: string, message?: string } }
    return { method, path, error: e.cause?.code ?? e.cause?.message ?? e.name ?? e.message, ms: Date.now() - at, at }
  }
}

export function isAnswer (r: Answer | Failure): r is Answer {
  return 'status' in r
}

/** What is wrong with an error answer's shape (empty when it is right). */
export function problemViolations (a: Answer): string[] {
  const out: string[] = []
  const where = `${a.method} ${a.path} -> ${a.status}`
  if (!/^application\/problem\+json/.test(a.headers.get('content-type') ?? '')) out.push(`${where}: content type ${a.headers.get('content-type')}`)
  if (!Value.Check(Problem, a.json)) out.push(`${where}: not problem details: ${a.body.slice(0, 200)}`)
  else if (a.json.status !== a.status) out.push(`${where}: body status ${a.json.status}`)
  if (/\bat .+\.(ts|js):\d+/.test(a.body)) out.push(`${where}: stack trace in body`)
  if (a.status === 503 && !/^\d+$/.test(a.headers.get('retry-after') ?? '')) out.push(`${where}: 503 without Retry-After`)
  return out
}

/** A token signed like the service's own (HS256 with the test secret). */
export function signToken (claims: Record<string, unknown>, secret = TEST_SECRET): string {
  const part = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url')
  const now = Math.floor(Date.now() / 1000)
  const unsigned = `${part({ alg: 'HS256', typ: 'JWT' })}.${part({ iat: now, exp: now + 3600, ...claims })}`
  return `${unsigned}.${createHmac('sha256', secret).update(unsigned).digest('base64url')}`
}
