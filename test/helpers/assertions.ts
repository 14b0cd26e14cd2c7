/** Shared assertions: the problem-details shape, and that no response leaks a secret. */
import type { LightMyRequestResponse } from 'fastify'
import type { Test } from 'tap'
import { Value } from 'typebox/value'
import { Problem } from '../../src/lib/problem.js'

type Asserts = Pick<Test, 'equal' | 'ok' | 'match' | 'notMatch'>

/** An answer of `app.inject`, or one read off a real socket with the same four members. */
export type Answer = Pick<LightMyRequestResponse, 'statusCode' | 'headers' | 'body' | 'json'>

/** The response is problem details with this status and code, in the documented shape. */
export function assertProblem (t: Asserts, res: Answer, status: number, code: string): Record<string, any> {
  t.equal(res.statusCode, status, `status ${status} (${res.body.slice(0, 200)})`)
  t.match(res.headers['content-type'], /^application\/problem\+json/, 'problem content type')
  const body = res.json()
  t.ok(Value.Check(Problem, body), 'body has the problem-details shape')
  t.equal(body.status, status, 'status in the body')
  t.equal(body.code, code, `code ${code}`)
  t.equal(body.requestId, res.headers['x-request-id'], 'request id in body and header')
  t.notMatch(res.body, /\bat .+\.(ts|js):\d+/, 'no stack trace')
  return body
}

/**
 * A problem as the page a browser gets when it navigates to the answer (`Sec-Fetch-Dest:
 * document`: a form posted without JavaScript): the status, an HTML page naming the code and
 * the request id, no stack. Returns the page.
 */
export function assertProblemPage (t: Asserts, res: Answer, status: number, code: string): string {
  t.equal(res.statusCode, status, `status ${status} (${res.body.slice(0, 200)})`)
  t.match(res.headers['content-type'], /^text\/html; charset=utf-8/, 'an HTML page')
  t.match(res.body, `<code>${code}</code>`, `code ${code} on the page`)
  t.match(res.body, `<code>${String(res.headers['x-request-id'])}</code>`, 'the request id on the page')
  t.notMatch(res.body, /\bat .+\.(ts|js):\d+/, 'no stack trace')
  return res.body
}

/** Neither the password nor any bcrypt hash appears in the response. */
export function assertNoSecrets (t: Asserts, res: LightMyRequestResponse, password?: string): void {
  t.notMatch(res.body, /\$2[aby]\$\d\d\$/, 'no bcrypt hash in the response')
  t.notMatch(res.body, /password/i, 'no password field in the response')
  if (password) t.notMatch(res.body, password, 'the password itself is not echoed')
}
