/**
 * Fuzz every route (the OpenAPI document lists them, so a new route is fuzzed too) with
 * generated hostile requests (test/fuzz/arbitraries.ts). Properties, checked on every
 * answer: no 5xx; every error in the problem-details shape (a text/plain answer of key-auth
 * on /api/admin is let through); no stack trace, password hash or password field in any answer. At
 * the end: the service still answers, Object.prototype is untouched, and the database
 * holds exactly the users and products that 2xx answers created and did not delete (no
 * partial records).
 *
 * Bounded for CI: a fixed seed and FUZZ_RUNS cases (default 10000); the count tried is printed.
 *   FUZZ_RUNS=20000 FUZZ_SEED=7 npm run test:fuzz
 */
import fc from 'fast-check'
import t from 'tap'
import { Value } from 'typebox/value'
import { Problem } from '../../src/lib/problem.js'
import { build, registerAndLogin, TEST_ENV } from '../helpers/build.js'
import { sqlClient } from '../helpers/database.js'
import { signToken } from '../faults/helpers/http.js'
import { bodyArb, contentEncodingArb, contentTypeArb, idArb, percentEncode, queryArb, SELF, type FuzzRequest, type RouteInfo } from './arbitraries.js'

const RUNS = Number(process.env.FUZZ_RUNS ?? 10000)
const SEED = Number(process.env.FUZZ_SEED ?? 20261122)
const ADMIN_KEY = TEST_ENV.ADMIN_API_KEYS!.split(',')[0]!
/** Placeholders in a generated Authorization header, filled in when the request is sent. */
const LIVE = 'Bearer ~live~'
const STALE = 'Bearer ~stale~'
/**
 * Ill-formed strings each body string field must receive in a clean request (see `coverage`).
 * The check is that the generator reaches every field at all; the count per field falls as routes and fields are added (5 or more
 * at 10000 runs with today's routes: at 5000, one field got 1), so the floor is low and scales with FUZZ_RUNS.
 */
const MIN_ILL_FORMED_PER_FIELD = Math.max(2, Math.floor(RUNS / 5000))
// The cases run one after another, each a real request; in CI beside three other test files
// and the compose images' build on two cores, the 10000 took over tap's 180 s per file
// (168 s of cases on 2026-11-29): the file's bound scales with the run count instead.
t.setTimeout(Math.max(180_000, RUNS * 50))

/** Percent-encodes what cannot travel raw in a request line. */
const sendable = (url: string) => url.replace(/[^!-~]|#/gu, percentEncode)

t.test('fuzz every route', async (t) => {
  const app = await build(t, { env: { RATE_LIMIT_AUTH_MAX: '1000000', LOGIN_FAILURES_MAX: '1000000' }, tuning: { accountChanges: { max: 1_000_000 }, keyFailures: { max: 1_000_000 } } })
  const sql = await sqlClient(t, app.databaseUrl)
  const protoBefore = Object.getOwnPropertyNames(Object.prototype).sort()

  // The model: what the answers say exists.
  const users = new Set<number>()
  const products = new Map<number, number>() // id -> creator
  // Tokens: the current one of each live user, and tokens a password change or a deletion
  // revoked. Generated requests name "a live token" and get a real one when sent, so the
  // bodies of protected routes keep being read all run long (with revoked tokens only, most
  // requests would stop at a 401 before their body is looked at).
  const live = new Map<number, string>() // user id -> current token
  const stale: string[] = []
  const addUser = async () => {
    const s = await registerAndLogin(app)
    users.add(s.id)
    live.set(s.id, s.token)
    return s
  }
  for (let i = 0; i < 3; i++) {
    const s = await addUser()
    for (let j = 0; j < 2; j++) {
      const p = await app.inject({ method: 'POST', url: '/api/product', headers: s.auth, payload: { title: `p${j}`, amount: j } })
      products.set(p.json().id, s.id)
    }
  }
  const knownIds = () => [...users, ...products.keys()]
  const revoke = (id: number) => {
    const token = live.get(id)
    if (token !== undefined && stale.length < 50) stale.push(token)
    live.delete(id)
  }

  const spec = app.swagger() as { paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: { properties?: object, required?: string[] } }> }, parameters?: { in: string, name: string }[] }>> }
  const routes: RouteInfo[] = Object.entries(spec.paths).flatMap(([path, ops]) => Object.entries(ops).map(([method, op]) => {
    const body = op.requestBody?.content['application/json']?.schema
    const properties = (body?.properties ?? {}) as Record<string, { type?: string }>
    return {
      method: method.toUpperCase(),
      path,
      bodyFields: op.requestBody ? Object.keys(properties) : undefined,
      bodyStringFields: Object.entries(properties).filter(([, s]) => s.type === 'string').map(([name]) => name),
      bodyRequired: body?.required ?? [],
      queryFields: (op.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name)
    }
  }))
  routes.push({ method: 'GET', path: '/docs' }, { method: 'GET', path: '/docs/json' }, { method: 'GET', path: '/no/such/route/{id}' })
  t.comment(`routes fuzzed: ${routes.map((r) => `${r.method} ${r.path}`).join(', ')}`)

  const authArb = fc.oneof(
    { arbitrary: fc.nat().map((i) => `${LIVE}${i}`), weight: 8 },
    { arbitrary: fc.nat().map((i) => `${STALE}${i}`), weight: 1 },
    { arbitrary: fc.constant(undefined), weight: 3 },
    {
      arbitrary: fc.constantFrom('Bearer', 'Bearer ', 'bearer x.y.z', 'Basic dXNlcjpwYXNz', 'Bearer a.b', `Bearer ${'a'.repeat(5000)}`,
        `Bearer ${signToken({ sub: '999999', ver: 0 })}`, `Bearer ${signToken({ sub: '9999999999', ver: 0 })}`, `Bearer ${signToken({ sub: '2147483648', ver: 0 })}`, `Bearer ${signToken({ sub: '0', ver: 0 })}`, `Bearer ${signToken({ sub: '1e3', ver: 0 })}`,
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
    // Two ill-formed bodies in three go in an otherwise clean request, so that only the
    // hostile field can stop them; the third keeps the other hostile parts.
    focus: fc.nat(2),
    adminKey: fc.oneof({ arbitrary: fc.constant(ADMIN_KEY), weight: 3 }, fc.constant(undefined), fc.constantFrom('', 'wrong-key-0123456789', ADMIN_KEY.toUpperCase())),
    extra: fc.dictionary(fc.constantFrom('accept', 'accept-language', 'cookie', 'x-forwarded-for', 'origin', 'if-none-match', 'range', 'x-request-id'),
      fc.oneof(fc.stringMatching(/^[ -~]{0,60}$/), fc.constantFrom('*/*', 'application/json;q=0', 'bytes=0-1', '__proto__=1; constructor=2', 'a'.repeat(4000))), { maxKeys: 2 })
  }).map((c): FuzzRequest => {
    if (c.body?.kind === 'ill-formed' && c.focus > 0) {
      c = { ...c, method: route.method, id: SELF, query: '', contentType: 'application/json', contentEncoding: undefined, authorization: `${LIVE}${c.focus}`, extra: {} }
    }
    const headers: Record<string, string> = { ...c.extra }
    if (c.authorization !== undefined) headers.authorization = c.authorization
    // Admin keys travel as `Authorization: Bearer <key>` (docs/keyauth.md): key-auth reads no other header.
    if (c.adminKey !== undefined && route.path.startsWith('/api/admin')) headers.authorization = `Bearer ${c.adminKey}`
    if (c.body !== undefined && c.contentType !== undefined) headers['content-type'] = c.contentType
    if (c.body !== undefined && c.contentEncoding !== undefined) headers['content-encoding'] = c.contentEncoding
    return {
      method: c.method,
      route: `${route.method} ${route.path}`,
      url: sendable(route.path.replace('{id}', c.id) + c.query),
      headers,
      body: c.body?.body,
      kind: c.body?.kind ?? 'none',
      target: c.body?.target
    }
  })
  const routeQueryFields = new Map(routes.map((r) => [`${r.method} ${r.path}`, r.queryFields ?? []]))
  // One arbitrary per route, built once (building them per case costs more than the requests).
  const requestArb = fc.oneof(...routes.map(routeArb))

  const statuses: Record<string, number> = {}
  const byKind: Record<string, { n: number, ms: number }> = {}
  let tried = 0
  // Per body string field: ill-formed values sent in an otherwise clean request (the
  // route's method, JSON, a live token where needed), and how many were refused naming it.
  const coverage: Record<string, { sent: number, named: number }> = {}
  const check = async (generated: FuzzRequest): Promise<void> => {
    tried++
    const req = { ...generated, headers: { ...generated.headers } }
    let self: number | undefined
    const auth = req.headers.authorization
    if (auth?.startsWith(LIVE)) {
      if (live.size === 0) await addUser()
      const entries = [...live]
      const [id, token] = entries[Number(auth.slice(LIVE.length)) % entries.length]!
      req.headers.authorization = `Bearer ${token}`
      self = id
    } else if (auth?.startsWith(STALE)) {
      req.headers.authorization = `Bearer ${stale[Number(auth.slice(STALE.length)) % Math.max(1, stale.length)] ?? 'no.stale.token'}`
    }
    const [routeMethod, routePath] = req.route.split(' ') as [string, string]
    // A passkey is named by a UUID of the service's: a well-formed one (nobody's) gets past the params to the body.
    req.url = req.url.replaceAll(SELF, routePath.startsWith('/api/security/passkeys/') ? '00000000-0000-4000-8000-000000000000' : String(self ?? knownIds()[0] ?? 1))
    const needsToken = routePath.startsWith('/api/product') || routePath.startsWith('/api/user/') || routePath.startsWith('/api/security')
    // Params are validated before the body: a clean request names a valid id (the caller's own).
    const clean = req.kind === 'ill-formed' && req.method === routeMethod && req.headers['content-type'] === 'application/json' &&
      req.headers['content-encoding'] === undefined && (!needsToken || self !== undefined) &&
      (!routePath.includes('{id}') || generated.url.includes(SELF)) && (generated.url.includes('?') ? (routeQueryFields.get(req.route) ?? []).length === 0 : true)
    const began = Date.now()
    const res = await app.inject({ method: req.method as 'GET', url: req.url, headers: req.headers, payload: req.body })
    const ms = Date.now() - began
    byKind[req.kind] = { n: (byKind[req.kind]?.n ?? 0) + 1, ms: (byKind[req.kind]?.ms ?? 0) + ms }
    statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1
    const body = req.body === undefined ? '' : ` ${JSON.stringify(req.body.toString('utf8').slice(0, 200))}`
    const where = `${req.method} ${req.url.slice(0, 120)} [${req.kind}]${body} -> ${res.statusCode}: ${res.body.slice(0, 300)}`
    if (res.statusCode >= 500) throw new Error(`5xx: ${where}`)
    if (clean) {
      const key = `${req.route} ${req.target}`
      const entry = coverage[key] ??= { sent: 0, named: 0 }
      entry.sent++
      const problem = res.statusCode === 400 ? res.json() as { errors?: { field: string }[] } : undefined
      if (problem?.errors?.[0]?.field !== `/${req.target}`) throw new Error(`an ill-formed ${req.target} was not refused with a 400 naming it: ${where}`)
      entry.named++
    }
    // The OpenAPI document names the password field; no answer holds a hash or a password
    // field (a session's sign-in `methods` may say "password").
    const secrets = req.url.startsWith('/docs') ? /\$2[aby]\$\d\d\$|password_hash/ : /\$2[aby]\$\d\d\$|"password(Hash)?"\s*:|password_hash/
    if (secrets.test(res.body)) throw new Error(`secret in the answer: ${where}`)
    if (/\bat .+\.(ts|js):\d+/.test(res.body)) throw new Error(`stack trace in the answer: ${where}`)
    // Credentials (a token in the body, a session cookie) are never left to caches. (The
    // OpenAPI document's examples show tokens, not credentials.)
    const credentials = res.headers['set-cookie'] !== undefined || (!req.url.startsWith('/docs') && /"(token|refreshToken)":"/.test(res.body))
    if (credentials && res.headers['cache-control'] !== 'no-store') {
      throw new Error(`credentials without Cache-Control: no-store: ${where}`)
    }
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
    if (res.statusCode === 200 && path === '/api/auth/login') live.set(res.json().userId, res.json().token)
    if (res.statusCode === 204 && path === '/api/auth/logout') {
      // Logout ends the session of the token it was sent with.
      for (const [userId, token] of live) if (req.headers.authorization === `Bearer ${token}`) revoke(userId)
    }
    if (res.statusCode === 200 && req.method === 'PATCH' && res.json().token) {
      revoke(id)
      live.set(id, res.json().token)
    }
    if (res.statusCode === 204 && /^\/api\/(admin\/)?users?\/\d+$/.test(path)) {
      revoke(id)
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

  t.comment(`ill-formed strings (NUL, unpaired surrogates) in clean requests, per field: ${JSON.stringify(coverage)}`)
  // The fuzzer must keep generating them into every string field of every body route: a
  // property that cannot fail on these inputs is no property.
  for (const route of routes) {
    for (const field of route.bodyStringFields ?? []) {
      const entry = coverage[`${route.method} ${route.path} ${field}`]
      t.ok((entry?.sent ?? 0) >= MIN_ILL_FORMED_PER_FIELD, `${route.method} ${route.path} ${field}: ${entry?.sent ?? 0} ill-formed values sent (at least ${MIN_ILL_FORMED_PER_FIELD})`)
    }
  }
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
