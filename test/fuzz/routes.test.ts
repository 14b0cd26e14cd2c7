/**
 * Fuzz every route (the OpenAPI document lists them, so a new route is fuzzed too) with
 * generated hostile requests (test/fuzz/arbitraries.ts). Properties, checked on every
 * answer: no 5xx; every error in the problem-details shape (key-auth keeps its own text
 * bodies, SPEC.md); no stack trace, password hash or password field in any answer. At
 * the end: the service still answers, Object.prototype is untouched, and the database
 * holds exactly the users and products that 2xx answers created and did not delete (no
 * partial records).
 *
 * Bounded for CI: a fixed seed and FUZZ_RUNS cases (default 5000); the count tried is printed.
 *   FUZZ_RUNS=20000 FUZZ_SEED=7 npm run test:fuzz
 */
import fc from 'fast-check'
import t from 'tap'
import { Value } from 'typebox/value'
import { Problem } from '../../src/lib/problem.js'
import { build, registerAndLogin, TEST_ENV } from '../helpers/build.js'
import { sqlClient } from '../helpers/database.js'
import { signToken } from '../faults/helpers/http.js'
import { bodyArb, contentEncodingArb, contentTypeArb, idArb, percentEncode, queryArb, type FuzzRequest, type RouteInfo } from './arbitraries.js'

const RUNS = Number(process.env.FUZZ_RUNS ?? 5000)
const SEED = Number(process.env.FUZZ_SEED ?? 20261122)
const ADMIN_KEY = TEST_ENV.ADMIN_API_KEYS!.split(',')[0]!

/** Percent-encodes what cannot travel raw in a request line. */
const sendable = (url: string) => url.replace(/[^!-~]|#/gu, percentEncode)

t.test('fuzz every route', async (t) => {
  const app = await build(t, { env: { RATE_LIMIT_AUTH_MAX: '1000000', LOGIN_FAILURES_MAX: '1000000' } })
  const sql = await sqlClient(t, app.databaseUrl)
  const protoBefore = Object.getOwnPropertyNames(Object.prototype).sort()

  // The model: what the answers say exists.
  const users = new Set<number>()
  const products = new Map<number, number>() // id -> creator
  const tokens: string[] = []
  for (let i = 0; i < 3; i++) {
    const s = await registerAndLogin(app)
    users.add(s.id)
    tokens.push(s.token)
    for (let j = 0; j < 2; j++) {
      const p = await app.inject({ method: 'POST', url: '/api/product', headers: s.auth, payload: { title: `p${j}`, amount: j } })
      products.set(p.json().id, s.id)
    }
  }
  const knownIds = () => [...users, ...products.keys()]

  const spec = app.swagger() as { paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: { properties?: object } }> }, parameters?: { in: string, name: string }[] }>> }
  const routes: RouteInfo[] = Object.entries(spec.paths).flatMap(([path, ops]) => Object.entries(ops).map(([method, op]) => ({
    method: method.toUpperCase(),
    path,
    bodyFields: op.requestBody ? Object.keys(op.requestBody.content['application/json']?.schema.properties ?? {}) : undefined,
    queryFields: (op.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name)
  })))
  routes.push({ method: 'GET', path: '/docs' }, { method: 'GET', path: '/docs/json' }, { method: 'GET', path: '/no/such/route/{id}' })
  t.comment(`routes fuzzed: ${routes.map((r) => `${r.method} ${r.path}`).join(', ')}`)

  const authArb = fc.oneof(
    { arbitrary: fc.nat().map((i) => `Bearer ${tokens[i % tokens.length]}`), weight: 8 },
    { arbitrary: fc.constant(undefined), weight: 3 },
    {
      arbitrary: fc.constantFrom('Bearer', 'Bearer ', 'bearer x.y.z', 'Basic dXNlcjpwYXNz', 'Bearer a.b', `Bearer ${'a'.repeat(5000)}`,
        `Bearer ${signToken({ sub: '999999', ver: 0 })}`, `Bearer ${signToken({ sub: '0', ver: 0 })}`, `Bearer ${signToken({ sub: '1e3', ver: 0 })}`,
        `Bearer ${signToken({ sub: 1, ver: 0 })}`, `Bearer ${signToken({ ver: 0 })}`, `Bearer ${signToken({ sub: '1', ver: '0' })}`,
        `Bearer ${signToken({ sub: '1', ver: 0, exp: 1 })}`, `Bearer ${signToken({ sub: '1', ver: 0 }, 'another secret of enough length 0123456789')}`,
        `Bearer ${Buffer.from('{"alg":"none"}').toString('base64url')}.${Buffer.from('{"sub":"1","ver":0}').toString('base64url')}.`),
      weight: 3
    }
  )
  const routeArb = (route: RouteInfo): fc.Arbitrary<FuzzRequest> => fc.record({
    method: fc.oneof({ arbitrary: fc.constant(route.method), weight: 12 }, { arbitrary: fc.constantFrom('GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'), weight: 1 }),
    id: idArb(knownIds),
    query: queryArb(route.queryFields ?? []),
    body: route.bodyFields ? bodyArb(route) : fc.oneof({ arbitrary: fc.constant(undefined), weight: 6 }, { arbitrary: bodyArb(route), weight: 1 }),
    contentType: contentTypeArb,
    contentEncoding: contentEncodingArb,
    authorization: authArb,
    adminKey: fc.oneof({ arbitrary: fc.constant(ADMIN_KEY), weight: 3 }, fc.constant(undefined), fc.constantFrom('', 'wrong-key-0123456789', ADMIN_KEY.toUpperCase())),
    extra: fc.dictionary(fc.constantFrom('accept', 'accept-language', 'cookie', 'x-forwarded-for', 'origin', 'if-none-match', 'range', 'x-request-id'),
      fc.oneof(fc.stringMatching(/^[ -~]{0,60}$/), fc.constantFrom('*/*', 'application/json;q=0', 'bytes=0-1', '__proto__=1; constructor=2', 'a'.repeat(4000))), { maxKeys: 2 })
  }).map((c): FuzzRequest => {
    const headers: Record<string, string> = { ...c.extra }
    if (c.authorization !== undefined) headers.authorization = c.authorization
    if (c.adminKey !== undefined && route.path.startsWith('/api/admin')) headers['x-api-key'] = c.adminKey
    if (c.body !== undefined && c.contentType !== undefined) headers['content-type'] = c.contentType
    if (c.body !== undefined && c.contentEncoding !== undefined) headers['content-encoding'] = c.contentEncoding
    return {
      method: c.method,
      route: `${route.method} ${route.path}`,
      url: sendable(route.path.replace('{id}', c.id) + c.query),
      headers,
      body: c.body?.body,
      kind: c.body?.kind ?? 'none'
    }
  })
  // One arbitrary per route, built once (building them per case costs more than the requests).
  const requestArb = fc.oneof(...routes.map(routeArb))

  const statuses: Record<string, number> = {}
  const byKind: Record<string, { n: number, ms: number }> = {}
  let tried = 0
  const check = async (req: FuzzRequest): Promise<void> => {
    tried++
    const began = Date.now()
    const res = await app.inject({ method: req.method as 'GET', url: req.url, headers: req.headers, payload: req.body })
    const ms = Date.now() - began
    byKind[req.kind] = { n: (byKind[req.kind]?.n ?? 0) + 1, ms: (byKind[req.kind]?.ms ?? 0) + ms }
    statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1
    const where = `${req.method} ${req.url.slice(0, 120)} [${req.kind}] -> ${res.statusCode}: ${res.body.slice(0, 300)}`
    if (res.statusCode >= 500) throw new Error(`5xx: ${where}`)
    // The OpenAPI document names the password field; no answer holds a hash or a password value.
    const secrets = req.url.startsWith('/docs') ? /\$2[aby]\$\d\d\$|password_hash/ : /\$2[aby]\$\d\d\$|"password(Hash)?"|password_hash/
    if (secrets.test(res.body)) throw new Error(`secret in the answer: ${where}`)
    if (/\bat .+\.(ts|js):\d+/.test(res.body)) throw new Error(`stack trace in the answer: ${where}`)
    const keyAuthText = req.url.startsWith('/api/admin') && /^text\/plain/.test(String(res.headers['content-type']))
    if (res.statusCode >= 400 && req.method !== 'HEAD' && !keyAuthText) {
      const body = JSON.parse(res.body) as { status: number, requestId: string }
      if (!/^application\/problem\+json/.test(String(res.headers['content-type'])) || !Value.Check(Problem, body) ||
          body.status !== res.statusCode || body.requestId !== res.headers['x-request-id']) {
        throw new Error(`not problem details: ${where}`)
      }
    }
    // Keep the model in step with what the service acknowledged.
    const path = req.url.split('?')[0]!.replace(/\/+$/, '')
    const id = Number(path.split('/').pop())
    if (res.statusCode === 201 && (path === '/api/user' || path === '/api/auth/register')) users.add(res.json().id)
    if (res.statusCode === 201 && path === '/api/product') products.set(res.json().id, res.json().creatorId)
    if (res.statusCode === 200 && path === '/api/auth/login' && tokens.length < 50) tokens.push(res.json().token)
    if (res.statusCode === 200 && req.method === 'PATCH' && res.json().token) tokens.push(res.json().token)
    if (res.statusCode === 204 && /^\/api\/(admin\/)?users?\/\d+$/.test(path)) {
      users.delete(id)
      for (const [p, creator] of products) if (creator === id) products.delete(p)
    }
    if (res.statusCode === 204 && /^\/api\/(admin\/products|product)\/\d+$/.test(path)) products.delete(id)
  }

  const started = Date.now()
  try {
    await fc.assert(fc.asyncProperty(requestArb, check), { numRuns: RUNS, seed: SEED, endOnFailure: true, includeErrorInReport: true })
    t.pass(`no 5xx, every error in problem details, no secret or stack in ${tried} answers`)
  } catch (error) {
    t.fail((error as Error).message.slice(0, 3000))
  }
  t.comment(`fuzz: ${tried} cases tried (FUZZ_RUNS=${RUNS}, FUZZ_SEED=${SEED}) in ${Date.now() - started} ms; statuses ${JSON.stringify(statuses)}; body kinds (count, ms) ${JSON.stringify(byKind)}`)

  t.equal((await app.inject({ method: 'GET', url: '/health/ready' })).statusCode, 200, 'the service still answers, database included')
  t.same(Object.getOwnPropertyNames(Object.prototype).sort(), protoBefore, 'Object.prototype is untouched')
  t.equal(({} as Record<string, unknown>).polluted, undefined, 'no polluted property on plain objects')

  const dbUsers = (await sql.query<{ id: number }>('SELECT id FROM users ORDER BY id')).rows.map((r) => r.id)
  const dbProducts = (await sql.query<{ id: number, creator_id: number }>('SELECT id, creator_id FROM products ORDER BY id')).rows
  t.same(dbUsers, [...users].sort((a, b) => a - b), `the users in the database are exactly those acknowledged (${users.size})`)
  t.same(dbProducts.map((p) => [p.id, p.creator_id]), [...products].sort((a, b) => a[0] - b[0]), `the products too, with their creators (${products.size})`)
  const bad = await sql.query('SELECT id FROM users WHERE password_hash NOT LIKE \'$2b$%\' OR username = \'\' OR email NOT LIKE \'%@%\'')
  t.equal(bad.rowCount, 0, 'no partial or malformed user record')
})
