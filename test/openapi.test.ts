/**
 * The OpenAPI document (`/docs/json`): valid OpenAPI 3.1, errors as problem details from
 * the one `Problem` component, examples on the operations, no client-required field that
 * has a default, and for every route the statuses it documents are exactly the statuses
 * this file makes it answer: each (route, status) pair has a request below that produces
 * it, and every answer's status is documented. Each answer's code is one its operation
 * lists; the codes every operation lists (before routing, of a body, of a session) and
 * those no other test file produces have a request each here too, so that the whole
 * suite receives every listed code (scripts/problem-codes.ts).
 */
import { spawnSync } from 'node:child_process'
import http from 'node:http'
import net, { type AddressInfo } from 'node:net'
import { Validator } from '@seriousme/openapi-schema-validator'
import type { LightMyRequestResponse } from 'fastify'
import t from 'tap'
import { Value } from 'typebox/value'
import { createAjv } from '../src/lib/validation.js'
import { CODES, Problem, type ProblemCode } from '../src/lib/problem.js'
import { INVALID_KEY_MESSAGE, MISSING_OR_MALFORMED_MESSAGE } from '@user-product-service/key-auth'
import { generateSync } from 'otplib'
import { build, newUser, TEST_ENV, verifiedUser, type Session } from './helpers/build.js'
import { sqlClient } from './helpers/database.js'
import { redisServer } from './helpers/redis.js'
import { SoftAuthenticator } from './helpers/soft-authenticator.js'

type Media = { schema?: { $ref?: string, type?: string, anyOf?: Array<{ required?: string[], properties?: Record<string, { enum?: string[], format?: string }> }>, properties?: Record<string, { type?: string, format?: string }> }, example?: unknown, examples?: Record<string, { value: { status?: number, code?: string, detail?: string } }> }
type Operation = { operationId?: string, security?: Array<Record<string, string[]>>, responses: Record<string, { headers?: Record<string, unknown>, content?: Record<string, Media> }>, requestBody?: { required?: boolean, content: Record<string, Media> }, parameters?: { name: string, required?: boolean, schema: { default?: unknown } }[] }
type Document = { openapi: string, paths: Record<string, Record<string, Operation>>, components: { schemas: Record<string, unknown>, securitySchemes: Record<string, { description?: string }> } }

const ADMIN = { authorization: `Bearer ${TEST_ENV.ADMIN_API_KEYS!.split(',')[0]}` }
const PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(100, 1)])
const WRONG_ADMIN = { authorization: 'Bearer cQXHu+OADM8lmuQm07Z89qTn09F5X/SLMMaTFhU+hQX=' }

const app = await build(t)
const doc = (await app.inject('/docs/json')).json() as Document

t.test('the document is valid OpenAPI 3.1', async (t) => {
  t.equal(doc.openapi, '3.1.0')
  const validator = new Validator()
  const result = await validator.validate(structuredClone(doc))
  t.same(result.errors ?? [], [], 'no validation errors')
  t.ok(result.valid)
  // The validator can fail: a response without its required description is refused.
  const broken = structuredClone(doc) as unknown as { paths: Record<string, Record<string, { responses: Record<string, Record<string, unknown>> }>> }
  delete broken.paths['/api/product']!.get!.responses['200']!.description
  t.notOk((await new Validator().validate(broken)).valid, 'a broken copy is invalid')
})

t.test('errors are application/problem+json from the one Problem component; examples on every operation', async (t) => {
  t.ok(doc.components.schemas.Problem, 'the Problem component')
  for (const [path, operations] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(operations)) {
      const name = `${method.toUpperCase()} ${path}`
      for (const [status, response] of Object.entries(operation.responses)) {
        if (Number(status) < 400) {
          for (const media of Object.values(response.content ?? {})) t.ok(media.example ?? media.examples, `${name} ${status}: an example`)
          continue
        }
        t.same(Object.keys(response.content ?? {}), ['application/problem+json'], `${name} ${status}: problem+json only`)
        t.equal(response.content?.['application/problem+json']?.schema?.$ref, '#/components/schemas/Problem', `${name} ${status}: the Problem component`)
      }
      for (const media of Object.values(operation.requestBody?.content ?? {})) t.ok(media.example ?? media.examples, `${name}: a request example`)
      for (const parameter of operation.parameters ?? []) {
        if (parameter.schema.default !== undefined) t.notOk(parameter.required, `${name}: ${parameter.name} has a default, so it is not required`)
      }
    }
  }
  t.notMatch(JSON.stringify(doc), /"required":\["title","description"/, 'a product description (default "") is not required')
})

t.test('every operation has a stable, unique camelCase operationId', async (t) => {
  const ids = Object.fromEntries(Object.entries(doc.paths).flatMap(([path, operations]) =>
    Object.entries(operations).map(([method, operation]) => [`${method.toUpperCase()} ${path}`, operation.operationId])))
  // Pinned: a generated client's method names; renaming one breaks its users.
  t.same(ids, {
    'GET /health/live': 'healthLive',
    'GET /health/ready': 'healthReady',
    'POST /api/auth/register': 'register',
    'POST /api/auth/login': 'login',
    'POST /api/auth/refresh-token': 'refreshSession',
    'POST /api/auth/logout': 'logout',
    'POST /api/auth/password-reset': 'requestPasswordReset',
    'POST /api/auth/password-reset/confirm': 'confirmPasswordReset',
    'POST /api/auth/verify-email': 'verifyEmail',
    'POST /api/auth/verify-email/resend': 'resendVerificationEmail',
    'POST /api/user': 'createUser',
    'GET /api/user/{id}': 'getUser',
    'PATCH /api/user/{id}': 'updateUser',
    'DELETE /api/user/{id}': 'deleteUser',
    'GET /api/product': 'listProducts',
    'POST /api/product': 'createProduct',
    'GET /api/product/{id}': 'getProduct',
    'DELETE /api/product/{id}': 'deleteProduct',
    'POST /api/product/{id}/image': 'uploadProductImage',
    'GET /api/product/{id}/image': 'getProductImage',
    'DELETE /api/product/{id}/image': 'deleteProductImage',
    'GET /api/admin/users': 'adminListUsers',
    'DELETE /api/admin/users/{id}': 'adminDeleteUser',
    'DELETE /api/admin/users/{id}/factors': 'adminResetFactors',
    'POST /api/auth/mfa/totp': 'completeLoginWithCode',
    'POST /api/auth/mfa/passkey/options': 'secondStepPasskeyOptions',
    'POST /api/auth/mfa/passkey': 'completeLoginWithPasskey',
    'POST /api/auth/passkey/options': 'passkeySignInOptions',
    'POST /api/auth/passkey/login': 'passkeySignIn',
    'GET /api/security': 'getSecurity',
    'POST /api/security/totp': 'startTotp',
    'POST /api/security/totp/confirm': 'confirmTotp',
    'POST /api/security/totp/disable': 'disableTotp',
    'POST /api/security/recovery-codes': 'regenerateRecoveryCodes',
    'POST /api/security/passkey/options': 'passkeyRegistrationOptions',
    'POST /api/security/passkey-options': 'passkeyRegistrationOptionsDeprecated',
    'POST /api/security/passkeys': 'registerPasskey',
    'PATCH /api/security/passkeys/{id}': 'renamePasskey',
    'DELETE /api/security/passkeys/{id}': 'deletePasskey',
    'GET /api/security/activity': 'listSecurityActivity',
    'GET /api/security/sessions': 'listSessions',
    'DELETE /api/security/sessions/{id}': 'endSession',
    'DELETE /api/security/sessions': 'endOtherSessions',
    'DELETE /api/admin/products/{id}': 'adminDeleteProduct'
  })
  const values = Object.values(ids)
  for (const id of values) t.match(id, /^[a-z][a-zA-Z0-9]*$/, `${id} is camelCase`)
  t.equal(new Set(values).size, values.length, 'unique')
})

t.test('each operation lists its own codes, an example each, with the status and detail of CODES', async (t) => {
  for (const [path, operations] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(operations)) {
      for (const [status, response] of Object.entries(operation.responses)) {
        if (Number(status) < 400) continue
        const name = `${method.toUpperCase()} ${path} ${status}`
        const examples = Object.values(response.content?.['application/problem+json']?.examples ?? {}).map((e) => e.value)
        t.ok(examples.length > 0, `${name}: an example per code`)
        for (const example of examples) {
          const entry = CODES[example.code as ProblemCode]
          t.same([example.status, example.detail], [Number(status), entry?.[2]], `${name}: ${example.code}, of CODES`)
          t.ok(Value.Check(Problem, example), `${name}: ${example.code}'s example has the Problem shape`)
        }
      }
    }
  }
  const codes = (path: string, method: string, status: number) => Object.keys(doc.paths[path]![method]!.responses[status]?.content?.['application/problem+json']?.examples ?? {})
  t.same(codes('/api/auth/login', 'post', 400), ['MALFORMED_JSON', 'VALIDATION_FAILED', 'BAD_REQUEST', 'INSECURE_COOKIE_CONTEXT'], 'login\'s 400: its own codes, no upload\'s or reset\'s')
  t.same(codes('/api/security', 'get', 401), ['UNAUTHORIZED'], 'a signed-in read\'s 401: no second step\'s codes')
  for (const path of Object.keys(doc.paths).filter((path) => path.startsWith('/api/admin/'))) {
    for (const method of Object.keys(doc.paths[path]!)) t.same(codes(path, method, 401), ['API_KEY_MISSING', 'API_KEY_INVALID'], `${method.toUpperCase()} ${path}: the admin key's two refusals`)
  }
  t.same([CODES.API_KEY_MISSING[2], CODES.API_KEY_INVALID[2]], [MISSING_OR_MALFORMED_MESSAGE, INVALID_KEY_MESSAGE], 'the admin key\'s examples are key-auth\'s texts')
  const problem = doc.components.schemas.Problem as { description: string }
  for (const [code, entry] of Object.entries(CODES)) {
    if (entry[3] === 'anywhere') t.match(problem.description, `${entry[0]} \`${code}\``, `the Problem component names ${code}, answered outside the operations`)
  }
})

t.test('request bodies, answers per mode, security and response headers', async (t) => {
  const op = (path: string, method: string) => doc.paths[path]![method]!
  t.same(Object.keys(op('/api/auth/login', 'post').requestBody!.content).sort(), ['application/json', 'application/x-www-form-urlencoded'], 'login reads JSON and forms')
  t.equal(op('/api/auth/refresh-token', 'post').requestBody!.required, false, 'refresh takes no body at all too')
  t.equal(op('/api/user/{id}', 'patch').requestBody!.required, true, 'other bodies are required')
  const upload = op('/api/product/{id}/image', 'post').requestBody!.content['multipart/form-data']!.schema!
  t.equal(upload.type, 'object', 'the upload is an object of parts')
  t.equal(upload.properties?.image?.format, 'binary', 'whose file is binary: a file picker on the page')

  for (const [path, method] of [['/api/auth/login', 'post'], ['/api/auth/refresh-token', 'post']] as const) {
    const variants = op(path, method).responses['200']!.content!['application/json']!.schema!.anyOf!
    const token = variants.find((v) => v.properties?.mode?.enum?.[0] === 'token')
    const cookie = variants.find((v) => v.properties?.mode?.enum?.[0] === 'cookie')
    t.ok(token?.required?.includes('token') && token.required.includes('refreshToken'), `${path}: a token-mode session has its tokens`)
    t.notOk(cookie?.properties?.token ?? cookie?.properties?.refreshToken, `${path}: a cookie-mode session has none`)
  }
  const list = op('/api/product', 'get').responses['200']!.content!
  t.same(Object.keys(list), ['application/json', 'text/csv'], 'the page as JSON or CSV, each its own media type')
  const limit = op('/api/product', 'get').parameters!.find((p) => p.name === 'limit')!.schema as { maximum: number, anyOf?: Array<{ title?: string, maximum?: number }> }
  t.same(limit.anyOf?.map((branch) => [branch.title, branch.maximum]), [['JSON page', 100], ['CSV page', limit.maximum]], 'limit names the maximum of each representation')
  const csv = { accept: 'text/csv' }
  t.same([
    (await app.inject('/api/product?limit=100')).statusCode,
    (await app.inject('/api/product?limit=101')).statusCode,
    (await app.inject({ url: `/api/product?limit=${limit.maximum}`, headers: csv })).statusCode,
    (await app.inject({ url: `/api/product?limit=${limit.maximum + 1}`, headers: csv })).statusCode
  ], [200, 400, 200, 400], 'and the route holds to them')

  for (const [path, method] of [['/api/product/{id}/image', 'post'], ['/api/product/{id}/image', 'delete'], ['/api/product', 'post'], ['/api/user/{id}', 'patch']] as const) {
    t.same(op(path, method).security, [{ bearerAuth: [] }, { cookieAuth: [] }], `${method.toUpperCase()} ${path}: a JWT or the session cookie`)
  }
  t.match(doc.components.securitySchemes.cookieAuth?.description, /cannot/, 'the cookie scheme says this page cannot send it')

  const headers = (path: string, method: string, status: string) => Object.keys(op(path, method).responses[status]?.headers ?? {})
  for (const [path, operations] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(operations)) {
      for (const status of Object.keys(operation.responses)) t.ok(headers(path, method, status).includes('X-Request-Id'), `${method.toUpperCase()} ${path} ${status}: X-Request-Id`)
      if (operation.responses['401'] !== undefined) t.ok(headers(path, method, '401').includes('WWW-Authenticate'), `${method.toUpperCase()} ${path} 401: WWW-Authenticate`)
      for (const status of ['429', '503']) if (operation.responses[status] !== undefined) t.ok(headers(path, method, status).includes('Retry-After'), `${method.toUpperCase()} ${path} ${status}: Retry-After`)
    }
  }
  t.ok(headers('/api/auth/login', 'post', '200').includes('Set-Cookie'))
  t.ok(headers('/api/auth/logout', 'post', '204').includes('Set-Cookie'))
  t.ok(headers('/api/product/{id}/image', 'post', '201').includes('Location'))
  t.ok(headers('/api/product/{id}/image', 'get', '200').includes('ETag'))
  t.ok(headers('/api/product/{id}/image', 'get', '206').includes('Content-Range'))
  t.ok(headers('/api/product/{id}/image', 'get', '416').includes('Content-Range'))
  t.ok(headers('/api/product', 'get', '200').includes('Link') && headers('/api/product', 'get', '200').includes('Content-Disposition'))
})

t.test('every request body example is one the route accepts', async (t) => {
  const ajv = createAjv({ coerceTypes: false })
  let checked = 0
  for (const [path, operations] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(operations)) {
      const media = operation.requestBody?.content['application/json']
      if (media === undefined) continue
      const validate = ajv.compile(media.schema as object)
      const examples = media.examples === undefined ? [media.example] : Object.values(media.examples).map((e) => e.value)
      for (const example of examples) {
        checked++
        t.ok(validate(example), `${method.toUpperCase()} ${path}: ${JSON.stringify(example).slice(0, 60)} ${ajv.errorsText(validate.errors)}`)
      }
    }
  }
  t.ok(checked >= 25, `${checked} examples`)
})

t.test('deprecated names: marked in the document, answered as their successors with Deprecation, Sunset and Link', async (t) => {
  const deprecated = Object.entries(doc.paths).flatMap(([path, operations]) => Object.entries(operations)
    .filter(([, operation]) => (operation as { deprecated?: boolean }).deprecated === true).map(([method]) => `${method.toUpperCase()} ${path}`))
  t.same(deprecated, ['POST /api/security/passkey-options'], 'the one deprecated path')
  const alias = doc.paths['/api/security/passkey-options']!.post! as Operation & { description?: string }
  const successor = doc.paths['/api/security/passkey/options']!.post!
  t.match(alias.description, /^Deprecated: use POST \/api\/security\/passkey\/options instead; removed on 2027-06-01\./)
  t.same(Object.keys(alias.responses), Object.keys(successor.responses), 'the same statuses')
  t.same(alias.requestBody, successor.requestBody, 'the same body')
  t.same(Object.keys(alias.responses['200']!.headers ?? {}).sort(), ['Deprecation', 'Link', 'Sunset', 'X-Request-Id'])
  const disable = doc.paths['/api/security/totp/disable']!.post!.requestBody!.content['application/json']!.schema as { properties: Record<string, { deprecated?: boolean }> }
  t.equal(disable.properties.password?.deprecated, true, 'the field `password` of disableTotp')
  t.notOk(disable.properties.currentPassword?.deprecated)
  const methods = JSON.stringify(doc.paths['/api/security']!.get!.responses['200']!.content!['application/json']!.schema)
  t.match(methods, /"const":"recovery-code","deprecated":true|"deprecated":true[^}]*"recovery-code"|"recovery-code"[^}]*"deprecated":true/, 'the method `recovery-code`')

  const user = await verifiedUser(app)
  const headers = { deprecation: '@1795824000', sunset: 'Tue, 01 Jun 2027 00:00:00 GMT', link: '</api/security/passkey/options>; rel="successor-version"' }
  const [now, old] = await Promise.all(['/api/security/passkey/options', '/api/security/passkey-options'].map(async (url) =>
    await app.inject({ method: 'POST', url, headers: user.auth, payload: { currentPassword: user.password } })))
  t.equal(now!.statusCode, 200)
  t.equal(old!.statusCode, 200)
  t.same(Object.keys(old!.json()).sort(), Object.keys(now!.json()).sort(), 'the same answer')
  t.match(old!.headers, headers, 'the old URL says so')
  t.notOk(now!.headers.deprecation ?? now!.headers.sunset, 'the new one does not')
  const refused = await app.inject({ method: 'POST', url: '/api/security/passkey-options', payload: { currentPassword: user.password } })
  t.equal(refused.statusCode, 401)
  t.match(refused.headers, headers, 'errors too')
})

t.test('every operation that needs a session refuses one without it, by its subtree\'s one hook', async (t) => {
  let secured = 0
  for (const [path, operations] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(operations)) {
      if (!(operation.security ?? []).some((scheme) => 'bearerAuth' in scheme)) continue
      secured++
      const res = await app.inject({ method: method.toUpperCase() as 'GET', url: path.replace(/\{[^}]+\}/g, '1'), payload: method === 'get' || method === 'delete' ? undefined : {} })
      t.match([res.statusCode, res.json().code], [401, 'UNAUTHORIZED'], `${method.toUpperCase()} ${path}: 401 without a session`)
    }
  }
  t.ok(secured > 15, `${secured} operations need a session`)
  // `app.authenticate` is an `onRequest` hook of a plugin (a signed-in subtree), never a route's option.
  const found = spawnSync('git', ['grep', '-n', '-E', 'onRequest: .*authenticate', '--', 'src'], { encoding: 'utf8' })
  t.same([found.status, found.stdout], [1, ''], 'no route names app.authenticate itself')
})

t.test('each route answers every status it documents, and documents every status it answers', async (t) => {
  // The same database, other limits: one bcrypt-costing request, one wrong password per account, one account change and one wrong admin key per window;
  // one product and 1 KiB of images per user, one refresh a minute per session.
  const limited = await build(t, {
    databaseUrl: app.databaseUrl,
    env: { RATE_LIMIT_AUTH_MAX: '1', RATE_LIMIT_SECOND_STEP_MAX: '1', LOGIN_FAILURES_MAX: '1', PRODUCTS_MAX_PER_USER: '1', IMAGE_MAX_BYTES: '1024', IMAGE_BYTES_MAX_PER_USER: '1024', REFRESH_MIN_INTERVAL_MS: '60000' },
    tuning: { accountChanges: { max: 1 }, keyFailures: { max: 1 } }
  })
  // A database that does not exist on the same server: every query fails as with a database that is down.
  const missing = new URL(app.databaseUrl)
  missing.pathname = '/openapi_no_such_database'
  const down = await build(t, { databaseUrl: missing.toString() })

  const me = await verifiedUser(app)
  const other = await verifiedUser(app)
  const product = async (session: Session) => (await app.inject({ method: 'POST', url: '/api/product', headers: session.auth, payload: { title: 'p', amount: 1 } })).json().id as number
  const mine = await product(me)
  const theirs = await product(other)
  /** A multipart body with one file part. */
  const multipart = (data: Buffer, type = 'image/png', closing = '\r\n--b0undary--\r\n') => ({
    headers: { 'content-type': 'multipart/form-data; boundary=b0undary' },
    payload: Buffer.concat([Buffer.from(`--b0undary\r\nContent-Disposition: form-data; name="image"; filename="a.png"\r\nContent-Type: ${type}\r\n\r\n`), data, Buffer.from(closing)])
  })
  const upload = async (id: number, session: Session | undefined, data: Buffer, type?: string, closing?: string) => {
    const body = multipart(data, type, closing)
    return await app.inject({ method: 'POST', url: `/api/product/${id}/image`, headers: { ...body.headers, ...session?.auth }, payload: body.payload })
  }
  const pictured = await product(me)
  await upload(pictured, me, PNG)
  const huge = { title: 'x'.repeat(Number(app.config.server.bodyLimit) + 1), amount: 1 }
  const text = { headers: { 'content-type': 'text/plain' }, payload: 'hello' }

  /** Makes `fn` throw an unexpected error while `run` runs: the route's 500. */
  async function failing<T extends object> (target: T, method: keyof T, run: () => Promise<LightMyRequestResponse>) {
    const original = target[method]
    target[method] = (async () => { throw new TypeError('an unexpected failure') }) as T[keyof T]
    try { return await run() } finally { target[method] = original }
  }
  /** The pg pool's queries fail unexpectedly: the token check (and login's account read) answer 500. */
  async function failingQueries (run: () => Promise<LightMyRequestResponse>) {
    const { sqlPool } = await import('../src/db/client.js')
    return await failing(sqlPool(app.prisma) as unknown as { query: unknown }, 'query', run)
  }
  /** The user is deleted between the token check and `method` (a concurrent delete, made deterministic). */
  async function deletedMidway (session: Session, method: 'update' | 'deleteOwn', run: () => Promise<LightMyRequestResponse>) {
    const original = app.users[method]
    app.users[method] = (async (...args: unknown[]) => {
      await app.users.delete(session.id)
      return await (original as (...a: unknown[]) => Promise<unknown>)(...args)
    }) as never
    try { return await run() } finally { app.users[method] = original as never }
  }
  /** Spends the limited app's budgets first (a login, a change, a wrong key), then asks. */
  let spent = false
  async function overBudget (run: () => Promise<LightMyRequestResponse>) {
    if (!spent) {
      spent = true
      await limited.inject({ method: 'POST', url: '/api/auth/login', payload: { username: 'nobody-at-all', password: 'x' } })
      await limited.inject({ method: 'PATCH', url: `/api/user/${budgetUser.id}`, headers: budgetUser.auth, payload: { email: newUser().email, currentPassword: budgetUser.password } })
      await limited.inject({ method: 'GET', url: '/api/admin/users', headers: WRONG_ADMIN })
      await limited.inject({ method: 'POST', url: '/api/auth/mfa/totp', payload: { mfaToken: UNKNOWN_TICKET, code: '123456' } })
    }
    return await run()
  }
  // Passkey options spend no rate budget: each client address holds a bounded number of live
  // challenges. Here one: the second ask is the 429.
  const fewChallenges = await build(t, { databaseUrl: app.databaseUrl, tuning: { challenges: { perOwner: 1 } } })
  async function secondChallenge (ask: () => Promise<LightMyRequestResponse>) {
    await ask()
    return await ask()
  }
  const budgetUser = await verifiedUser(app)

  // Second factors: a Redis that is gone (the budgets and the challenge store fail closed:
  // 503), a user with TOTP on, a passkey on a software authenticator.
  const redis = await redisServer(t)
  const noRedis = await build(t, { databaseUrl: app.databaseUrl, env: { REDIS_URL: redis.url }, tuning: { redis: { connectTimeoutMs: 300, commandTimeoutMs: 300 } } })
  await redis.stop()
  const origin = app.config.auth.webauthnOrigins[0]!
  const soft = new SoftAuthenticator()
  const evil = (session: Session) => ({ cookie: `__Secure-access_token=${session.token}`, origin: 'https://evil.example' })
  async function withTotp (): Promise<Session & { recoveryCodes: string[] }> {
    const session = await verifiedUser(app)
    const { secret } = (await app.inject({ method: 'POST', url: '/api/security/totp', headers: session.auth, payload: { currentPassword: session.password } })).json()
    const confirmed = await app.inject({ method: 'POST', url: '/api/security/totp/confirm', headers: session.auth, payload: { code: generateSync({ secret, epoch: Math.floor(Date.now() / 1000) }), currentPassword: session.password } })
    return { ...session, recoveryCodes: confirmed.json().recoveryCodes }
  }
  /** A new passkey of `session`'s user: its id in the API and its credential id. */
  async function addPasskey (session: Session, authenticator = soft): Promise<{ id: string, credentialId: string }> {
    const options = (await app.inject({ method: 'POST', url: '/api/security/passkey/options', headers: session.auth, payload: { currentPassword: session.password } })).json()
    const response = authenticator.register(options, origin)
    return { id: (await app.inject({ method: 'POST', url: '/api/security/passkeys', headers: session.auth, payload: { response, currentPassword: session.password } })).json().id, credentialId: response.id }
  }
  const mfaUser = await withTotp()
  const { id: keyId, credentialId } = await addPasskey(mfaUser)
  const ticket = async () => (await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: mfaUser.username, password: mfaUser.password } })).json().mfaToken as string
  const UNKNOWN_TICKET = 'A'.repeat(43)
  const assertion = async () => soft.authenticate((await app.inject({ method: 'POST', url: '/api/auth/passkey/options' })).json(), origin, { credentialId })
  const stepAssertion = async (mfaToken: string) => soft.authenticate((await app.inject({ method: 'POST', url: '/api/auth/mfa/passkey/options', payload: { mfaToken } })).json(), origin)
  const strayRegistration = new SoftAuthenticator().register({ challenge: 'c3RyYXk', rp: { name: 'x', id: app.config.auth.webauthnRpId }, user: { id: 'dXNlcg', name: 'u', displayName: 'u' }, pubKeyCredParams: [{ alg: -7, type: 'public-key' }] }, origin)
  const stray = soft.authenticate({ challenge: 'c3RyYXk', rpId: app.config.auth.webauthnRpId, allowCredentials: [] }, origin, { credentialId })

  const register = (url: string): Record<number, () => Promise<LightMyRequestResponse>> => ({
    201: () => app.inject({ method: 'POST', url, payload: newUser() }),
    400: () => app.inject({ method: 'POST', url, payload: { username: 'x' } }),
    409: () => app.inject({ method: 'POST', url, payload: newUser({ username: me.username }) }),
    413: () => app.inject({ method: 'POST', url, payload: { ...newUser(), password: 'x'.repeat(2_000_000) } }),
    415: () => app.inject({ method: 'POST', url, ...text }),
    429: () => overBudget(() => limited.inject({ method: 'POST', url, payload: newUser() })),
    500: () => failing(app.users, 'register', () => app.inject({ method: 'POST', url, payload: newUser() })),
    503: () => down.inject({ method: 'POST', url, payload: newUser() })
  })

  /** A user holding `count` passkeys, made once: each registration costs a challenge of this client's 50. */
  async function withPasskeys (count: number): Promise<Session> {
    const session = await verifiedUser(app)
    for (let i = 0; i < count; i++) await addPasskey(session, new SoftAuthenticator())
    return session
  }
  let fullOfPasskeys: Promise<Session> | undefined
  /** The statuses of the registration options, at the URL and at its deprecated name. */
  const registrationOptions = (url: string): Record<number, () => Promise<LightMyRequestResponse>> => ({
    200: () => app.inject({ method: 'POST', url, headers: me.auth, payload: { currentPassword: me.password } }),
    400: () => app.inject({ method: 'POST', url, headers: me.auth, payload: {} }),
    413: () => app.inject({ method: 'POST', url, headers: me.auth, payload: { currentPassword: 'x'.repeat(2_000_000) } }),
    415: () => app.inject({ method: 'POST', url, headers: { ...me.auth, ...text.headers }, payload: text.payload }),
    429: () => overBudget(() => limited.inject({ method: 'POST', url, headers: budgetUser.auth, payload: { currentPassword: budgetUser.password } })),
    401: () => app.inject({ method: 'POST', url }),
    403: () => app.inject({ method: 'POST', url, headers: evil(me) }),
    409: async () => {
      const session = await (fullOfPasskeys ??= withPasskeys(20))
      return await app.inject({ method: 'POST', url, headers: session.auth, payload: { currentPassword: session.password } })
    },
    500: () => failing(app.identity.factors, 'registrationOptions', () => app.inject({ method: 'POST', url, headers: me.auth, payload: { currentPassword: me.password } })),
    503: () => down.inject({ method: 'POST', url, headers: me.auth, payload: { currentPassword: me.password } })
  })

  const cases: Record<string, Record<number, () => Promise<LightMyRequestResponse>>> = {
    'GET /health/live': { 200: () => app.inject('/health/live') },
    'GET /health/ready': { 200: () => app.inject('/health/ready'), 503: () => down.inject('/health/ready') },
    'POST /api/user': register('/api/user'),
    'POST /api/auth/register': register('/api/auth/register'),
    'POST /api/auth/login': {
      200: () => app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: me.username, password: me.password } }),
      303: () => app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: me.username, password: me.password, mode: 'cookie', redirect: '/docs' } }),
      400: () => app.inject({ method: 'POST', url: '/api/auth/login', payload: { password: 'x' } }),
      401: () => app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: me.username, password: 'wrong password' } }),
      413: () => app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: me.username, password: 'x'.repeat(2_000_000) } }),
      415: () => app.inject({ method: 'POST', url: '/api/auth/login', ...text }),
      429: () => overBudget(() => limited.inject({ method: 'POST', url: '/api/auth/login', payload: { username: me.username, password: me.password } })),
      500: () => failingQueries(() => app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: me.username, password: me.password } })),
      503: () => down.inject({ method: 'POST', url: '/api/auth/login', payload: { username: me.username, password: me.password } }),
      403: () => app.inject({ method: 'POST', url: '/api/auth/login', headers: { origin: 'https://evil.example' }, payload: { username: me.username, password: me.password } }),
      202: () => app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: mfaUser.username, password: mfaUser.password } })
    },
    'POST /api/auth/mfa/totp': {
      200: async () => app.inject({ method: 'POST', url: '/api/auth/mfa/totp', payload: { mfaToken: await ticket(), recoveryCode: mfaUser.recoveryCodes.pop()! } }),
      400: () => app.inject({ method: 'POST', url: '/api/auth/mfa/totp', payload: { mfaToken: 'short', code: '123456' } }),
      401: () => app.inject({ method: 'POST', url: '/api/auth/mfa/totp', payload: { mfaToken: UNKNOWN_TICKET, code: '123456' } }),
      403: () => app.inject({ method: 'POST', url: '/api/auth/mfa/totp', headers: { origin: 'https://evil.example' }, payload: { mfaToken: UNKNOWN_TICKET, code: '123456' } }),
      413: () => app.inject({ method: 'POST', url: '/api/auth/mfa/totp', payload: { mfaToken: UNKNOWN_TICKET, recoveryCode: 'x'.repeat(2_000_000) } }),
      415: () => app.inject({ method: 'POST', url: '/api/auth/mfa/totp', ...text }),
      429: () => overBudget(() => limited.inject({ method: 'POST', url: '/api/auth/mfa/totp', payload: { mfaToken: UNKNOWN_TICKET, code: '123456' } })),
      500: () => failing(app.identity.factors, 'completeWithCode', () => app.inject({ method: 'POST', url: '/api/auth/mfa/totp', payload: { mfaToken: UNKNOWN_TICKET, code: '123456' } })),
      503: () => noRedis.inject({ method: 'POST', url: '/api/auth/mfa/totp', payload: { mfaToken: UNKNOWN_TICKET, code: '123456' } })
    },
    'POST /api/auth/mfa/passkey/options': {
      200: async () => app.inject({ method: 'POST', url: '/api/auth/mfa/passkey/options', payload: { mfaToken: await ticket() } }),
      400: () => app.inject({ method: 'POST', url: '/api/auth/mfa/passkey/options', payload: {} }),
      401: () => app.inject({ method: 'POST', url: '/api/auth/mfa/passkey/options', payload: { mfaToken: UNKNOWN_TICKET } }),
      413: () => app.inject({ method: 'POST', url: '/api/auth/mfa/passkey/options', payload: { mfaToken: 'x'.repeat(2_000_000) } }),
      415: () => app.inject({ method: 'POST', url: '/api/auth/mfa/passkey/options', ...text }),
      429: async () => {
        const mfaToken = (await fewChallenges.inject({ method: 'POST', url: '/api/auth/login', payload: { username: mfaUser.username, password: mfaUser.password } })).json().mfaToken as string
        return await secondChallenge(() => fewChallenges.inject({ method: 'POST', url: '/api/auth/mfa/passkey/options', payload: { mfaToken } }))
      },
      500: () => failing(app.identity.factors, 'secondStepPasskeyOptions', () => app.inject({ method: 'POST', url: '/api/auth/mfa/passkey/options', payload: { mfaToken: UNKNOWN_TICKET } })),
      503: () => noRedis.inject({ method: 'POST', url: '/api/auth/mfa/passkey/options', payload: { mfaToken: UNKNOWN_TICKET } })
    },
    'POST /api/auth/mfa/passkey': {
      200: async () => { const mfaToken = await ticket(); return await app.inject({ method: 'POST', url: '/api/auth/mfa/passkey', payload: { mfaToken, response: await stepAssertion(mfaToken) } }) },
      400: () => app.inject({ method: 'POST', url: '/api/auth/mfa/passkey', payload: { mfaToken: UNKNOWN_TICKET, response: {} } }),
      401: () => app.inject({ method: 'POST', url: '/api/auth/mfa/passkey', payload: { mfaToken: UNKNOWN_TICKET, response: stray } }),
      403: () => app.inject({ method: 'POST', url: '/api/auth/mfa/passkey', headers: { origin: 'https://evil.example' }, payload: { mfaToken: UNKNOWN_TICKET, response: stray } }),
      413: () => app.inject({ method: 'POST', url: '/api/auth/mfa/passkey', payload: { mfaToken: UNKNOWN_TICKET, response: { ...stray, id: 'x'.repeat(2_000_000) } } }),
      415: () => app.inject({ method: 'POST', url: '/api/auth/mfa/passkey', ...text }),
      429: () => overBudget(() => limited.inject({ method: 'POST', url: '/api/auth/mfa/passkey', payload: { mfaToken: UNKNOWN_TICKET, response: stray } })),
      500: () => failing(app.identity.factors, 'completeWithPasskey', () => app.inject({ method: 'POST', url: '/api/auth/mfa/passkey', payload: { mfaToken: UNKNOWN_TICKET, response: stray } })),
      503: () => noRedis.inject({ method: 'POST', url: '/api/auth/mfa/passkey', payload: { mfaToken: UNKNOWN_TICKET, response: stray } })
    },
    'POST /api/auth/passkey/options': {
      200: () => app.inject({ method: 'POST', url: '/api/auth/passkey/options' }),
      400: () => app.inject({ method: 'POST', url: '/api/auth/passkey/options', headers: { 'content-type': 'application/json' }, payload: '{' }),
      413: () => app.inject({ method: 'POST', url: '/api/auth/passkey/options', payload: { x: 'x'.repeat(2_000_000) } }),
      415: () => app.inject({ method: 'POST', url: '/api/auth/passkey/options', ...text }),
      429: () => secondChallenge(() => fewChallenges.inject({ method: 'POST', url: '/api/auth/passkey/options' })),
      500: () => failing(app.identity.factors, 'signInOptions', () => app.inject({ method: 'POST', url: '/api/auth/passkey/options' })),
      503: () => noRedis.inject({ method: 'POST', url: '/api/auth/passkey/options' })
    },
    'POST /api/auth/passkey/login': {
      200: async () => app.inject({ method: 'POST', url: '/api/auth/passkey/login', payload: { response: await assertion() } }),
      400: () => app.inject({ method: 'POST', url: '/api/auth/passkey/login', payload: { response: { ...stray, type: 'password' } } }),
      401: () => app.inject({ method: 'POST', url: '/api/auth/passkey/login', payload: { response: stray } }),
      403: () => app.inject({ method: 'POST', url: '/api/auth/passkey/login', headers: { origin: 'https://evil.example' }, payload: { response: stray } }),
      413: () => app.inject({ method: 'POST', url: '/api/auth/passkey/login', payload: { response: { ...stray, id: 'x'.repeat(2_000_000) } } }),
      415: () => app.inject({ method: 'POST', url: '/api/auth/passkey/login', ...text }),
      429: () => overBudget(() => limited.inject({ method: 'POST', url: '/api/auth/passkey/login', payload: { response: stray } })),
      500: () => failing(app.identity.factors, 'signIn', () => app.inject({ method: 'POST', url: '/api/auth/passkey/login', payload: { response: stray } })),
      503: () => noRedis.inject({ method: 'POST', url: '/api/auth/passkey/login', payload: { response: stray } })
    },
    'GET /api/security': {
      200: () => app.inject({ url: '/api/security', headers: mfaUser.auth }),
      401: () => app.inject({ url: '/api/security' }),
      500: () => failing(app.identity.factors, 'overview', () => app.inject({ url: '/api/security', headers: me.auth })),
      503: () => down.inject({ url: '/api/security', headers: me.auth })
    },
    'POST /api/security/totp': {
      200: async () => { const session = await verifiedUser(app); return await app.inject({ method: 'POST', url: '/api/security/totp', headers: session.auth, payload: { currentPassword: session.password } }) },
      400: () => app.inject({ method: 'POST', url: '/api/security/totp', headers: me.auth, payload: {} }),
      413: () => app.inject({ method: 'POST', url: '/api/security/totp', headers: me.auth, payload: { currentPassword: 'x'.repeat(2_000_000) } }),
      415: () => app.inject({ method: 'POST', url: '/api/security/totp', headers: { ...me.auth, ...text.headers }, payload: text.payload }),
      429: () => overBudget(() => limited.inject({ method: 'POST', url: '/api/security/totp', headers: budgetUser.auth, payload: { currentPassword: budgetUser.password } })),
      401: () => app.inject({ method: 'POST', url: '/api/security/totp' }),
      403: () => app.inject({ method: 'POST', url: '/api/security/totp', headers: evil(me) }),
      409: () => app.inject({ method: 'POST', url: '/api/security/totp', headers: mfaUser.auth, payload: { currentPassword: mfaUser.password } }),
      500: () => failing(app.identity.factors, 'startTotp', () => app.inject({ method: 'POST', url: '/api/security/totp', headers: me.auth, payload: { currentPassword: me.password } })),
      503: () => down.inject({ method: 'POST', url: '/api/security/totp', headers: me.auth, payload: { currentPassword: me.password } })
    },
    'POST /api/security/totp/confirm': {
      200: async () => {
        const session = await verifiedUser(app)
        const { secret } = (await app.inject({ method: 'POST', url: '/api/security/totp', headers: session.auth, payload: { currentPassword: session.password } })).json()
        return await app.inject({ method: 'POST', url: '/api/security/totp/confirm', headers: session.auth, payload: { code: generateSync({ secret, epoch: Math.floor(Date.now() / 1000) }), currentPassword: session.password } })
      },
      400: () => app.inject({ method: 'POST', url: '/api/security/totp/confirm', headers: me.auth, payload: { currentPassword: me.password, code: 'abc' } }),
      401: () => app.inject({ method: 'POST', url: '/api/security/totp/confirm', payload: { code: '123456' } }),
      403: () => app.inject({ method: 'POST', url: '/api/security/totp/confirm', headers: evil(me), payload: { code: '123456' } }),
      409: () => app.inject({ method: 'POST', url: '/api/security/totp/confirm', headers: other.auth, payload: { currentPassword: other.password, code: '123456' } }),
      413: () => app.inject({ method: 'POST', url: '/api/security/totp/confirm', headers: me.auth, payload: { code: 'x'.repeat(2_000_000) } }),
      429: () => overBudget(() => limited.inject({ method: 'POST', url: '/api/security/totp/confirm', headers: budgetUser.auth, payload: { code: '123456', currentPassword: budgetUser.password } })),
      415: () => app.inject({ method: 'POST', url: '/api/security/totp/confirm', headers: { ...me.auth, ...text.headers }, payload: text.payload }),
      500: () => failing(app.identity.factors, 'confirmTotp', () => app.inject({ method: 'POST', url: '/api/security/totp/confirm', headers: me.auth, payload: { currentPassword: me.password, code: '123456' } })),
      503: () => down.inject({ method: 'POST', url: '/api/security/totp/confirm', headers: me.auth, payload: { currentPassword: me.password, code: '123456' } })
    },
    'POST /api/security/totp/disable': {
      204: async () => { const session = await withTotp(); return await app.inject({ method: 'POST', url: '/api/security/totp/disable', headers: session.auth, payload: { currentPassword: session.password } }) },
      400: () => app.inject({ method: 'POST', url: '/api/security/totp/disable', headers: me.auth, payload: {} }),
      401: () => app.inject({ method: 'POST', url: '/api/security/totp/disable', payload: { code: '123456' } }),
      403: () => app.inject({ method: 'POST', url: '/api/security/totp/disable', headers: me.auth, payload: { currentPassword: 'not the password' } }),
      409: () => app.inject({ method: 'POST', url: '/api/security/totp/disable', headers: me.auth, payload: { code: '123456' } }),
      413: () => app.inject({ method: 'POST', url: '/api/security/totp/disable', headers: me.auth, payload: { currentPassword: 'x'.repeat(2_000_000) } }),
      415: () => app.inject({ method: 'POST', url: '/api/security/totp/disable', headers: { ...me.auth, ...text.headers }, payload: text.payload }),
      500: () => failing(app.identity.factors, 'disableTotp', () => app.inject({ method: 'POST', url: '/api/security/totp/disable', headers: me.auth, payload: { code: '123456' } })),
      503: () => down.inject({ method: 'POST', url: '/api/security/totp/disable', headers: me.auth, payload: { code: '123456' } })
    },
    'POST /api/security/recovery-codes': {
      200: () => app.inject({ method: 'POST', url: '/api/security/recovery-codes', headers: mfaUser.auth, payload: { currentPassword: mfaUser.password } }),
      401: () => app.inject({ method: 'POST', url: '/api/security/recovery-codes' }),
      403: () => app.inject({ method: 'POST', url: '/api/security/recovery-codes', headers: evil(me) }),
      409: () => app.inject({ method: 'POST', url: '/api/security/recovery-codes', headers: me.auth, payload: { currentPassword: me.password } }),
      400: () => app.inject({ method: 'POST', url: '/api/security/recovery-codes', headers: me.auth, payload: {} }),
      413: () => app.inject({ method: 'POST', url: '/api/security/recovery-codes', headers: me.auth, payload: { currentPassword: 'x'.repeat(2_000_000) } }),
      415: () => app.inject({ method: 'POST', url: '/api/security/recovery-codes', headers: { ...me.auth, ...text.headers }, payload: text.payload }),
      429: () => overBudget(() => limited.inject({ method: 'POST', url: '/api/security/recovery-codes', headers: budgetUser.auth, payload: { currentPassword: budgetUser.password } })),
      500: () => failing(app.identity.factors, 'regenerateRecoveryCodes', () => app.inject({ method: 'POST', url: '/api/security/recovery-codes', headers: me.auth, payload: { currentPassword: me.password } })),
      503: () => down.inject({ method: 'POST', url: '/api/security/recovery-codes', headers: me.auth, payload: { currentPassword: me.password } })
    },
    'POST /api/security/passkey/options': registrationOptions('/api/security/passkey/options'),
    'POST /api/security/passkey-options': registrationOptions('/api/security/passkey-options'),
    'POST /api/security/passkeys': {
      201: async () => { const options = (await app.inject({ method: 'POST', url: '/api/security/passkey/options', headers: me.auth, payload: { currentPassword: me.password } })).json(); return await app.inject({ method: 'POST', url: '/api/security/passkeys', headers: me.auth, payload: { response: soft.register(options, origin), name: 'Laptop', currentPassword: me.password } }) },
      400: async () => { const options = (await app.inject({ method: 'POST', url: '/api/security/passkey/options', headers: me.auth, payload: { currentPassword: me.password } })).json(); return await app.inject({ method: 'POST', url: '/api/security/passkeys', headers: me.auth, payload: { response: new SoftAuthenticator().register(options, 'https://evil.example'), currentPassword: me.password } }) },
      401: () => app.inject({ method: 'POST', url: '/api/security/passkeys', payload: {} }),
      403: () => app.inject({ method: 'POST', url: '/api/security/passkeys', headers: evil(me), payload: {} }),
      409: async () => { const options = (await app.inject({ method: 'POST', url: '/api/security/passkey/options', headers: other.auth, payload: { currentPassword: other.password } })).json(); return await app.inject({ method: 'POST', url: '/api/security/passkeys', headers: other.auth, payload: { response: new SoftAuthenticator().register(options, origin, { credentialId }), currentPassword: other.password } }) },
      413: () => app.inject({ method: 'POST', url: '/api/security/passkeys', headers: me.auth, payload: { name: 'x'.repeat(2_000_000) } }),
      429: () => overBudget(() => limited.inject({ method: 'POST', url: '/api/security/passkeys', headers: budgetUser.auth, payload: { response: strayRegistration, currentPassword: budgetUser.password } })),
      415: () => app.inject({ method: 'POST', url: '/api/security/passkeys', headers: { ...me.auth, ...text.headers }, payload: text.payload }),
      500: () => failing(app.identity.factors, 'register', () => app.inject({ method: 'POST', url: '/api/security/passkeys', headers: me.auth, payload: { currentPassword: me.password, response: strayRegistration } })),
      503: () => down.inject({ method: 'POST', url: '/api/security/passkeys', headers: me.auth, payload: { currentPassword: me.password, response: strayRegistration } })
    },
    'PATCH /api/security/passkeys/{id}': {
      200: () => app.inject({ method: 'PATCH', url: `/api/security/passkeys/${keyId}`, headers: mfaUser.auth, payload: { name: 'Renamed' } }),
      400: () => app.inject({ method: 'PATCH', url: `/api/security/passkeys/${keyId}`, headers: mfaUser.auth, payload: {} }),
      401: () => app.inject({ method: 'PATCH', url: `/api/security/passkeys/${keyId}`, payload: { name: 'x' } }),
      403: () => app.inject({ method: 'PATCH', url: `/api/security/passkeys/${keyId}`, headers: evil(mfaUser), payload: { name: 'x' } }),
      404: () => app.inject({ method: 'PATCH', url: `/api/security/passkeys/${keyId}`, headers: me.auth, payload: { name: 'Not mine' } }),
      413: () => app.inject({ method: 'PATCH', url: `/api/security/passkeys/${keyId}`, headers: me.auth, payload: { name: 'x'.repeat(2_000_000) } }),
      415: () => app.inject({ method: 'PATCH', url: `/api/security/passkeys/${keyId}`, headers: { ...me.auth, ...text.headers }, payload: text.payload }),
      500: () => failing(app.identity.factors, 'renamePasskey', () => app.inject({ method: 'PATCH', url: `/api/security/passkeys/${keyId}`, headers: me.auth, payload: { name: 'x' } })),
      503: () => down.inject({ method: 'PATCH', url: `/api/security/passkeys/${keyId}`, headers: me.auth, payload: { name: 'x' } })
    },
    'DELETE /api/security/passkeys/{id}': {
      204: async () => { const session = await verifiedUser(app); return await app.inject({ method: 'DELETE', url: `/api/security/passkeys/${(await addPasskey(session)).id}`, headers: session.auth }) },
      400: () => app.inject({ method: 'DELETE', url: '/api/security/passkeys/not+base64url', headers: me.auth }),
      401: () => app.inject({ method: 'DELETE', url: `/api/security/passkeys/${keyId}` }),
      403: () => app.inject({ method: 'DELETE', url: `/api/security/passkeys/${keyId}`, headers: evil(mfaUser) }),
      404: () => app.inject({ method: 'DELETE', url: `/api/security/passkeys/${keyId}`, headers: me.auth }),
      413: () => app.inject({ method: 'DELETE', url: `/api/security/passkeys/${keyId}`, headers: me.auth, payload: huge }),
      415: () => app.inject({ method: 'DELETE', url: `/api/security/passkeys/${keyId}`, headers: { ...me.auth, ...text.headers }, payload: text.payload }),
      500: () => failing(app.identity.factors, 'deletePasskey', () => app.inject({ method: 'DELETE', url: `/api/security/passkeys/${keyId}`, headers: me.auth })),
      503: () => down.inject({ method: 'DELETE', url: `/api/security/passkeys/${keyId}`, headers: me.auth })
    },
    'GET /api/security/activity': {
      200: () => app.inject({ url: '/api/security/activity', headers: me.auth }),
      401: () => app.inject({ url: '/api/security/activity' }),
      500: () => failing(app.identity.activity, 'list', () => app.inject({ url: '/api/security/activity', headers: me.auth })),
      503: () => down.inject({ url: '/api/security/activity', headers: me.auth })
    },
    'GET /api/security/sessions': {
      200: () => app.inject({ url: '/api/security/sessions', headers: me.auth }),
      401: () => app.inject({ url: '/api/security/sessions' }),
      500: () => failing(app.identity.sessions, 'list', () => app.inject({ url: '/api/security/sessions', headers: me.auth })),
      503: () => down.inject({ url: '/api/security/sessions', headers: me.auth })
    },
    'DELETE /api/security/sessions/{id}': {
      204: async () => { const s = await verifiedUser(app); return await app.inject({ method: 'DELETE', url: `/api/security/sessions/${s.sid}`, headers: s.auth }) },
      400: () => app.inject({ method: 'DELETE', url: '/api/security/sessions/not-a-uuid', headers: me.auth }),
      413: () => app.inject({ method: 'DELETE', url: `/api/security/sessions/${other.sid}`, headers: me.auth, payload: { x: 'x'.repeat(2_000_000) } }),
      415: () => app.inject({ method: 'DELETE', url: `/api/security/sessions/${other.sid}`, headers: { ...me.auth, ...text.headers }, payload: text.payload }),
      401: () => app.inject({ method: 'DELETE', url: `/api/security/sessions/${me.sid}` }),
      403: () => app.inject({ method: 'DELETE', url: `/api/security/sessions/${me.sid}`, headers: evil(me) }),
      404: () => app.inject({ method: 'DELETE', url: `/api/security/sessions/${other.sid}`, headers: me.auth }),
      500: () => failing(app.identity.sessions, 'endOwn', () => app.inject({ method: 'DELETE', url: `/api/security/sessions/${other.sid}`, headers: me.auth })),
      503: () => down.inject({ method: 'DELETE', url: `/api/security/sessions/${me.sid}`, headers: me.auth })
    },
    'DELETE /api/security/sessions': {
      200: async () => { const s = await verifiedUser(app); return await app.inject({ method: 'DELETE', url: '/api/security/sessions', headers: s.auth }) },
      400: () => app.inject({ method: 'DELETE', url: '/api/security/sessions', headers: { ...me.auth, 'content-type': 'application/json' }, payload: '{' }),
      413: () => app.inject({ method: 'DELETE', url: '/api/security/sessions', headers: me.auth, payload: { x: 'x'.repeat(2_000_000) } }),
      415: () => app.inject({ method: 'DELETE', url: '/api/security/sessions', headers: { ...me.auth, ...text.headers }, payload: text.payload }),
      401: () => app.inject({ method: 'DELETE', url: '/api/security/sessions' }),
      403: () => app.inject({ method: 'DELETE', url: '/api/security/sessions', headers: evil(me) }),
      500: () => failing(app.identity.sessions, 'endOthers', () => app.inject({ method: 'DELETE', url: '/api/security/sessions', headers: me.auth })),
      503: () => down.inject({ method: 'DELETE', url: '/api/security/sessions', headers: me.auth })
    },
    'POST /api/auth/refresh-token': {
      200: async () => { const s = await verifiedUser(app); return await app.inject({ method: 'POST', url: '/api/auth/refresh-token', payload: { refreshToken: s.refreshToken } }) },
      400: () => app.inject({ method: 'POST', url: '/api/auth/refresh-token', payload: { refreshToken: 42 } }),
      401: () => app.inject({ method: 'POST', url: '/api/auth/refresh-token', payload: { refreshToken: 'A'.repeat(43) } }),
      403: () => app.inject({ method: 'POST', url: '/api/auth/refresh-token', headers: { cookie: `__Secure-refresh_token=${me.refreshToken}` } }),
      413: () => app.inject({ method: 'POST', url: '/api/auth/refresh-token', payload: { refreshToken: 'x'.repeat(2_000_000) } }),
      415: () => app.inject({ method: 'POST', url: '/api/auth/refresh-token', ...text }),
      429: async () => {
        // A session's first refresh is not limited; its second, within a minute, is.
        const first = await app.inject({ method: 'POST', url: '/api/auth/refresh-token', payload: { refreshToken: (await verifiedUser(app)).refreshToken } })
        return await limited.inject({ method: 'POST', url: '/api/auth/refresh-token', payload: { refreshToken: first.json().refreshToken } })
      },
      500: () => failingQueries(() => app.inject({ method: 'POST', url: '/api/auth/refresh-token', payload: { refreshToken: me.refreshToken } })),
      503: () => down.inject({ method: 'POST', url: '/api/auth/refresh-token', payload: { refreshToken: me.refreshToken } })
    },
    'POST /api/auth/logout': {
      204: async () => { const s = await verifiedUser(app); return await app.inject({ method: 'POST', url: '/api/auth/logout', headers: s.auth }) },
      400: () => app.inject({ method: 'POST', url: '/api/auth/logout', headers: me.auth, payload: { everywhere: true } }),
      401: () => app.inject({ method: 'POST', url: '/api/auth/logout' }),
      403: () => app.inject({ method: 'POST', url: '/api/auth/logout', headers: { cookie: `__Secure-access_token=${me.token}`, origin: 'https://evil.example' } }),
      413: () => app.inject({ method: 'POST', url: '/api/auth/logout', headers: me.auth, payload: { everywhere: 'x'.repeat(2_000_000) } }),
      415: () => app.inject({ method: 'POST', url: '/api/auth/logout', ...text, headers: { ...text.headers, ...me.auth } }),
      500: () => failingQueries(() => app.inject({ method: 'POST', url: '/api/auth/logout', headers: me.auth })),
      503: () => down.inject({ method: 'POST', url: '/api/auth/logout', headers: me.auth })
    },
    'POST /api/auth/password-reset': {
      202: () => app.inject({ method: 'POST', url: '/api/auth/password-reset', payload: { email: me.email } }),
      400: () => app.inject({ method: 'POST', url: '/api/auth/password-reset', payload: { email: 'not an address' } }),
      413: () => app.inject({ method: 'POST', url: '/api/auth/password-reset', payload: { email: 'x'.repeat(2_000_000) } }),
      415: () => app.inject({ method: 'POST', url: '/api/auth/password-reset', ...text }),
      429: () => overBudget(() => limited.inject({ method: 'POST', url: '/api/auth/password-reset', payload: { email: me.email } })),
      500: () => failing(app.passwordReset, 'request', () => app.inject({ method: 'POST', url: '/api/auth/password-reset', payload: { email: me.email } })),
      503: () => down.inject({ method: 'POST', url: '/api/auth/password-reset', payload: { email: me.email } })
    },
    'POST /api/auth/password-reset/confirm': {
      204: async () => {
        const { createHash, randomBytes } = await import('node:crypto')
        const token = randomBytes(32).toString('base64url')
        const who = await verifiedUser(app)
        const db = await sqlClient(t, app.databaseUrl)
        await db.query('INSERT INTO password_reset_tokens (hash, user_id, expires_at) VALUES ($1, $2, now() + interval \'1 minute\')', [createHash('sha256').update(token).digest(), who.id])
        return await app.inject({ method: 'POST', url: '/api/auth/password-reset/confirm', payload: { token, password: 'a new password' } })
      },
      400: () => app.inject({ method: 'POST', url: '/api/auth/password-reset/confirm', payload: { token: 'forged', password: 'a new password' } }),
      413: () => app.inject({ method: 'POST', url: '/api/auth/password-reset/confirm', payload: { token: 'x'.repeat(2_000_000), password: 'a new password' } }),
      415: () => app.inject({ method: 'POST', url: '/api/auth/password-reset/confirm', ...text }),
      429: () => overBudget(() => limited.inject({ method: 'POST', url: '/api/auth/password-reset/confirm', payload: { token: 'forged', password: 'a new password' } })),
      500: () => failing(app.passwordReset, 'confirm', () => app.inject({ method: 'POST', url: '/api/auth/password-reset/confirm', payload: { token: 'forged', password: 'a new password' } })),
      503: () => down.inject({ method: 'POST', url: '/api/auth/password-reset/confirm', payload: { token: 'forged', password: 'a new password' } })
    },
    'POST /api/auth/verify-email': {
      204: async () => {
        const { createHash, randomBytes } = await import('node:crypto')
        const token = randomBytes(32).toString('base64url')
        const db = await sqlClient(t, app.databaseUrl)
        await db.query('INSERT INTO email_verification_tokens (hash, user_id, email, expires_at) VALUES ($1, $2, $3, now() + interval \'1 minute\')', [createHash('sha256').update(token).digest(), other.id, other.email])
        return await app.inject({ method: 'POST', url: '/api/auth/verify-email', payload: { token } })
      },
      400: () => app.inject({ method: 'POST', url: '/api/auth/verify-email', payload: { token: 'forged' } }),
      409: async () => {
        // A change to an address another account has by the time its link is followed.
        const { createHash, randomBytes } = await import('node:crypto')
        const token = randomBytes(32).toString('base64url')
        const who = await verifiedUser(app)
        const db = await sqlClient(t, app.databaseUrl)
        await db.query('UPDATE users SET pending_email = $2 WHERE id = $1', [who.id, other.email])
        await db.query('INSERT INTO email_verification_tokens (hash, user_id, email, expires_at) VALUES ($1, $2, $3, now() + interval \'1 minute\')', [createHash('sha256').update(token).digest(), who.id, other.email])
        return await app.inject({ method: 'POST', url: '/api/auth/verify-email', payload: { token } })
      },
      413: () => app.inject({ method: 'POST', url: '/api/auth/verify-email', payload: { token: 'x'.repeat(2_000_000) } }),
      415: () => app.inject({ method: 'POST', url: '/api/auth/verify-email', ...text }),
      429: () => overBudget(() => limited.inject({ method: 'POST', url: '/api/auth/verify-email', payload: { token: 'forged' } })),
      500: () => failing(app.emailVerification, 'verify', () => app.inject({ method: 'POST', url: '/api/auth/verify-email', payload: { token: 'forged' } })),
      503: () => down.inject({ method: 'POST', url: '/api/auth/verify-email', payload: { token: 'forged' } })
    },
    'POST /api/auth/verify-email/resend': {
      202: () => app.inject({ method: 'POST', url: '/api/auth/verify-email/resend', headers: me.auth }),
      400: () => app.inject({ method: 'POST', url: '/api/auth/verify-email/resend', headers: { ...me.auth, 'content-type': 'application/json' }, payload: '{' }),
      413: () => app.inject({ method: 'POST', url: '/api/auth/verify-email/resend', headers: me.auth, payload: { x: 'x'.repeat(2_000_000) } }),
      415: () => app.inject({ method: 'POST', url: '/api/auth/verify-email/resend', headers: { ...me.auth, ...text.headers }, payload: text.payload }),
      401: () => app.inject({ method: 'POST', url: '/api/auth/verify-email/resend' }),
      403: () => app.inject({ method: 'POST', url: '/api/auth/verify-email/resend', headers: { cookie: `__Secure-access_token=${me.token}`, origin: 'https://evil.example' } }),
      500: () => failing(app.emailVerification, 'resend', () => app.inject({ method: 'POST', url: '/api/auth/verify-email/resend', headers: me.auth })),
      503: () => down.inject({ method: 'POST', url: '/api/auth/verify-email/resend', headers: me.auth })
    },
    'GET /api/user/{id}': {
      200: () => app.inject({ url: `/api/user/${me.id}`, headers: me.auth }),
      400: () => app.inject({ url: '/api/user/abc', headers: me.auth }),
      401: () => app.inject({ url: `/api/user/${me.id}` }),
      403: () => app.inject({ url: `/api/user/${other.id}`, headers: me.auth }),
      500: () => failingQueries(() => app.inject({ url: `/api/user/${me.id}`, headers: me.auth })),
      503: () => down.inject({ url: `/api/user/${me.id}`, headers: me.auth })
    },
    'PATCH /api/user/{id}': {
      200: () => app.inject({ method: 'PATCH', url: `/api/user/${me.id}`, headers: me.auth, payload: { email: newUser().email, currentPassword: me.password } }),
      400: () => app.inject({ method: 'PATCH', url: `/api/user/${me.id}`, headers: me.auth, payload: {} }),
      401: () => app.inject({ method: 'PATCH', url: `/api/user/${me.id}`, payload: { email: newUser().email } }),
      403: () => app.inject({ method: 'PATCH', url: `/api/user/${me.id}`, headers: me.auth, payload: { email: newUser().email, currentPassword: 'wrong password' } }),
      404: async () => { const gone = await verifiedUser(app); return await deletedMidway(gone, 'update', () => app.inject({ method: 'PATCH', url: `/api/user/${gone.id}`, headers: gone.auth, payload: { email: newUser().email, currentPassword: gone.password } })) },
      409: () => app.inject({ method: 'PATCH', url: `/api/user/${me.id}`, headers: me.auth, payload: { username: other.username } }),
      413: () => app.inject({ method: 'PATCH', url: `/api/user/${me.id}`, headers: me.auth, payload: { username: 'x'.repeat(2_000_000) } }),
      415: () => app.inject({ method: 'PATCH', url: `/api/user/${me.id}`, headers: { ...me.auth, ...text.headers }, payload: text.payload }),
      429: () => overBudget(() => limited.inject({ method: 'PATCH', url: `/api/user/${budgetUser.id}`, headers: budgetUser.auth, payload: { email: newUser().email, currentPassword: budgetUser.password } })),
      500: () => failingQueries(() => app.inject({ method: 'PATCH', url: `/api/user/${me.id}`, headers: me.auth, payload: { email: newUser().email, currentPassword: me.password } })),
      503: () => down.inject({ method: 'PATCH', url: `/api/user/${me.id}`, headers: me.auth, payload: { email: newUser().email, currentPassword: me.password } })
    },
    'DELETE /api/user/{id}': {
      204: async () => { const gone = await verifiedUser(app); return await app.inject({ method: 'DELETE', url: `/api/user/${gone.id}`, headers: gone.auth, payload: { password: gone.password } }) },
      400: () => app.inject({ method: 'DELETE', url: `/api/user/${me.id}`, headers: me.auth, payload: {} }),
      401: () => app.inject({ method: 'DELETE', url: `/api/user/${me.id}`, payload: { password: me.password } }),
      403: () => app.inject({ method: 'DELETE', url: `/api/user/${other.id}`, headers: me.auth, payload: { password: me.password } }),
      404: async () => { const gone = await verifiedUser(app); return await deletedMidway(gone, 'deleteOwn', () => app.inject({ method: 'DELETE', url: `/api/user/${gone.id}`, headers: gone.auth, payload: { password: gone.password } })) },
      413: () => app.inject({ method: 'DELETE', url: `/api/user/${me.id}`, headers: me.auth, payload: { password: 'x'.repeat(2_000_000) } }),
      415: () => app.inject({ method: 'DELETE', url: `/api/user/${me.id}`, headers: { ...me.auth, ...text.headers }, payload: text.payload }),
      429: () => overBudget(() => limited.inject({ method: 'DELETE', url: `/api/user/${budgetUser.id}`, headers: budgetUser.auth, payload: { password: budgetUser.password } })),
      500: () => failingQueries(() => app.inject({ method: 'DELETE', url: `/api/user/${me.id}`, headers: me.auth, payload: { password: me.password } })),
      503: () => down.inject({ method: 'DELETE', url: `/api/user/${me.id}`, headers: me.auth, payload: { password: me.password } })
    },
    'GET /api/product': {
      200: () => app.inject('/api/product?cursor=0'),
      400: () => app.inject('/api/product?limit=1000'),
      406: () => app.inject({ url: '/api/product', headers: { accept: 'application/xml' } }),
      500: () => failing(app.products, 'page', () => app.inject('/api/product')),
      503: () => down.inject('/api/product')
    },
    'POST /api/product': {
      201: () => app.inject({ method: 'POST', url: '/api/product', headers: me.auth, payload: { title: 'lamp', amount: 5 } }),
      400: () => app.inject({ method: 'POST', url: '/api/product', headers: me.auth, payload: { title: 'lamp' } }),
      401: () => app.inject({ method: 'POST', url: '/api/product', payload: { title: 'lamp', amount: 5 } }),
      403: () => app.inject({ method: 'POST', url: '/api/product', headers: { cookie: `__Secure-access_token=${me.token}`, origin: 'https://evil.example' }, payload: { title: 'lamp', amount: 5 } }),
      409: () => limited.inject({ method: 'POST', url: '/api/product', headers: me.auth, payload: { title: 'lamp', amount: 5 } }),
      413: () => app.inject({ method: 'POST', url: '/api/product', headers: me.auth, payload: huge }),
      415: () => app.inject({ method: 'POST', url: '/api/product', headers: { ...me.auth, ...text.headers }, payload: text.payload }),
      500: () => failing(app.products, 'create', () => app.inject({ method: 'POST', url: '/api/product', headers: me.auth, payload: { title: 'lamp', amount: 5 } })),
      503: () => down.inject({ method: 'POST', url: '/api/product', headers: me.auth, payload: { title: 'lamp', amount: 5 } })
    },
    'GET /api/product/{id}': {
      200: () => app.inject(`/api/product/${mine}`),
      400: () => app.inject('/api/product/0'),
      404: () => app.inject('/api/product/2147483647'),
      500: () => failing(app.products, 'get', () => app.inject(`/api/product/${mine}`)),
      503: () => down.inject(`/api/product/${mine}`)
    },
    'DELETE /api/product/{id}': {
      204: async () => app.inject({ method: 'DELETE', url: `/api/product/${await product(me)}`, headers: me.auth }),
      400: () => app.inject({ method: 'DELETE', url: '/api/product/x', headers: me.auth }),
      401: () => app.inject({ method: 'DELETE', url: `/api/product/${mine}` }),
      403: () => app.inject({ method: 'DELETE', url: `/api/product/${theirs}`, headers: me.auth }),
      404: () => app.inject({ method: 'DELETE', url: '/api/product/2147483647', headers: me.auth }),
      413: () => app.inject({ method: 'DELETE', url: `/api/product/${mine}`, headers: me.auth, payload: huge }),
      415: () => app.inject({ method: 'DELETE', url: `/api/product/${mine}`, headers: { ...me.auth, ...text.headers }, payload: text.payload }),
      500: () => failing(app.products, 'deleteOwned', () => app.inject({ method: 'DELETE', url: `/api/product/${mine}`, headers: me.auth })),
      503: () => down.inject({ method: 'DELETE', url: `/api/product/${mine}`, headers: me.auth })
    },
    'POST /api/product/{id}/image': {
      201: async () => await upload(await product(me), me, PNG),
      200: async () => { const id = await product(me); await upload(id, me, PNG); return await upload(id, me, PNG) },
      400: () => upload(mine, me, PNG, 'image/png', 'x'),
      401: () => upload(mine, undefined, PNG),
      403: () => upload(theirs, me, PNG),
      404: () => upload(2147483647, me, PNG),
      409: async () => {
        // 1000 bytes (under the limited app's IMAGE_MAX_BYTES) on top of `pictured`'s image pass its 1 KiB per user.
        const body = multipart(Buffer.concat([PNG, Buffer.alloc(1000 - PNG.length)]))
        return await limited.inject({ method: 'POST', url: `/api/product/${mine}/image`, headers: { ...body.headers, ...me.auth }, payload: body.payload })
      },
      413: () => upload(mine, me, Buffer.concat([PNG, Buffer.alloc(Number(app.config.products.imageMaxBytes))])),
      415: () => upload(mine, me, Buffer.from('plain text, not an image')),
      500: () => failing(app.productImages, 'upload', () => upload(mine, me, PNG)),
      503: () => down.inject({ method: 'POST', url: `/api/product/${mine}/image`, payload: multipart(PNG).payload, headers: { ...multipart(PNG).headers, ...me.auth } })
    },
    'GET /api/product/{id}/image': {
      200: () => app.inject(`/api/product/${pictured}/image`),
      206: () => app.inject({ url: `/api/product/${pictured}/image`, headers: { range: 'bytes=0-3' } }),
      304: async () => app.inject({ url: `/api/product/${pictured}/image`, headers: { 'if-none-match': String((await app.inject(`/api/product/${pictured}/image`)).headers.etag) } }),
      400: () => app.inject('/api/product/0/image'),
      404: () => app.inject(`/api/product/${theirs}/image`),
      // Its image has a PNG's header and nothing an image decoder could read.
      415: () => app.inject(`/api/product/${pictured}/image?w=256`),
      416: () => app.inject({ url: `/api/product/${pictured}/image`, headers: { range: 'bytes=100000-' } }),
      500: () => failing(app.productImages, 'send', () => app.inject(`/api/product/${pictured}/image`)),
      503: () => down.inject(`/api/product/${pictured}/image`)
    },
    'DELETE /api/product/{id}/image': {
      204: async () => { const id = await product(me); await upload(id, me, PNG); return await app.inject({ method: 'DELETE', url: `/api/product/${id}/image`, headers: me.auth }) },
      400: () => app.inject({ method: 'DELETE', url: '/api/product/x/image', headers: me.auth }),
      401: () => app.inject({ method: 'DELETE', url: `/api/product/${pictured}/image` }),
      403: () => app.inject({ method: 'DELETE', url: `/api/product/${pictured}/image`, headers: other.auth }),
      404: () => app.inject({ method: 'DELETE', url: `/api/product/${theirs}/image`, headers: other.auth }),
      413: () => app.inject({ method: 'DELETE', url: `/api/product/${pictured}/image`, headers: me.auth, payload: huge }),
      415: () => app.inject({ method: 'DELETE', url: `/api/product/${pictured}/image`, headers: { ...me.auth, ...text.headers }, payload: text.payload }),
      500: () => failing(app.productImages, 'remove', () => app.inject({ method: 'DELETE', url: `/api/product/${pictured}/image`, headers: me.auth })),
      503: () => down.inject({ method: 'DELETE', url: `/api/product/${pictured}/image`, headers: me.auth })
    },
    'GET /api/admin/users': {
      200: () => app.inject({ url: '/api/admin/users?limit=2', headers: ADMIN }),
      400: () => app.inject({ url: '/api/admin/users?limit=0', headers: ADMIN }),
      401: () => app.inject({ url: '/api/admin/users' }),
      429: () => overBudget(() => limited.inject({ url: '/api/admin/users', headers: WRONG_ADMIN })),
      500: () => failing(app.users, 'page', () => app.inject({ url: '/api/admin/users', headers: ADMIN })),
      503: () => down.inject({ url: '/api/admin/users', headers: ADMIN })
    },
    'DELETE /api/admin/users/{id}': {
      204: async () => app.inject({ method: 'DELETE', url: `/api/admin/users/${(await verifiedUser(app)).id}`, headers: ADMIN }),
      400: () => app.inject({ method: 'DELETE', url: '/api/admin/users/-1', headers: ADMIN }),
      401: () => app.inject({ method: 'DELETE', url: '/api/admin/users/1' }),
      404: () => app.inject({ method: 'DELETE', url: '/api/admin/users/2147483647', headers: ADMIN }),
      413: () => app.inject({ method: 'DELETE', url: '/api/admin/users/1', headers: ADMIN, payload: huge }),
      415: () => app.inject({ method: 'DELETE', url: '/api/admin/users/1', headers: { ...ADMIN, ...text.headers }, payload: text.payload }),
      429: () => overBudget(() => limited.inject({ method: 'DELETE', url: '/api/admin/users/1', headers: WRONG_ADMIN })),
      500: () => failing(app.users, 'delete', () => app.inject({ method: 'DELETE', url: '/api/admin/users/1', headers: ADMIN })),
      503: () => down.inject({ method: 'DELETE', url: '/api/admin/users/1', headers: ADMIN })
    },
    'DELETE /api/admin/users/{id}/factors': {
      204: async () => app.inject({ method: 'DELETE', url: `/api/admin/users/${(await withTotp()).id}/factors`, headers: ADMIN }),
      400: () => app.inject({ method: 'DELETE', url: '/api/admin/users/-1/factors', headers: ADMIN }),
      401: () => app.inject({ method: 'DELETE', url: '/api/admin/users/1/factors' }),
      404: () => app.inject({ method: 'DELETE', url: '/api/admin/users/2147483647/factors', headers: ADMIN }),
      413: () => app.inject({ method: 'DELETE', url: '/api/admin/users/1/factors', headers: ADMIN, payload: huge }),
      415: () => app.inject({ method: 'DELETE', url: '/api/admin/users/1/factors', headers: { ...ADMIN, ...text.headers }, payload: text.payload }),
      429: () => overBudget(() => limited.inject({ method: 'DELETE', url: '/api/admin/users/1/factors', headers: WRONG_ADMIN })),
      500: () => failing(app.identity.factors, 'reset', () => app.inject({ method: 'DELETE', url: `/api/admin/users/${me.id}/factors`, headers: ADMIN })),
      503: () => down.inject({ method: 'DELETE', url: '/api/admin/users/1/factors', headers: ADMIN })
    },
    'DELETE /api/admin/products/{id}': {
      204: async () => app.inject({ method: 'DELETE', url: `/api/admin/products/${await product(me)}`, headers: ADMIN }),
      400: () => app.inject({ method: 'DELETE', url: '/api/admin/products/1.5', headers: ADMIN }),
      401: () => app.inject({ method: 'DELETE', url: '/api/admin/products/1' }),
      404: () => app.inject({ method: 'DELETE', url: '/api/admin/products/2147483647', headers: ADMIN }),
      413: () => app.inject({ method: 'DELETE', url: '/api/admin/products/1', headers: ADMIN, payload: huge }),
      415: () => app.inject({ method: 'DELETE', url: '/api/admin/products/1', headers: { ...ADMIN, ...text.headers }, payload: text.payload }),
      429: () => overBudget(() => limited.inject({ method: 'DELETE', url: '/api/admin/products/1', headers: WRONG_ADMIN })),
      500: () => failing(app.products, 'delete', () => app.inject({ method: 'DELETE', url: '/api/admin/products/1', headers: ADMIN })),
      503: () => down.inject({ method: 'DELETE', url: '/api/admin/products/1', headers: ADMIN })
    }
  }

  const documented = Object.entries(doc.paths).flatMap(([path, operations]) =>
    Object.entries(operations).map(([method, operation]) => [`${method.toUpperCase()} ${path}`, Object.keys(operation.responses).map(Number).sort()] as const))
  t.same(Object.keys(cases).sort(), documented.map(([route]) => route).sort(), 'a row of requests for every documented route')

  // Two answers come only over a real socket (app.inject skips admission, src/plugins/admission.ts):
  // 429 on every route from a client that already holds its share of requests in progress (one,
  // a body that never comes), and 408 on every route that reads a body, from a body too slow.
  const crowded = await build(t, { databaseUrl: app.databaseUrl, env: { LOAD_SHED_MAX_IN_FLIGHT_PER_CLIENT: '1', SLOW_CLIENT_WINDOW_MS: '0' } })
  const slowApp = await build(t, { databaseUrl: app.databaseUrl, env: { SLOW_CLIENT_WINDOW_MS: '200' } })
  const crowdedPort = await crowded.listen({ host: '127.0.0.1', port: 0 }).then(() => (crowded.server.address() as AddressInfo).port)
  const slowPort = await slowApp.listen({ host: '127.0.0.1', port: 0 }).then(() => (slowApp.server.address() as AddressInfo).port)
  const hold = net.connect(crowdedPort, '127.0.0.1')
  hold.on('error', () => {})
  t.teardown(() => { hold.destroy() })
  hold.write('POST /api/user HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{')
  await new Promise((resolve) => setTimeout(resolve, 300))
  /** One request over a socket, answered as `inject` answers; `body` is sent but never ended when `partial`. */
  async function overSocket (port: number, method: string, url: string, headers: Record<string, string> = {}, partial?: string): Promise<LightMyRequestResponse> {
    return await new Promise((resolve, reject) => {
      const request = http.request({ host: '127.0.0.1', port, method, path: url, headers: partial === undefined ? headers : { 'content-type': 'application/json', ...headers, 'content-length': '100' }, agent: false }, (response) => {
        const chunks: Buffer[] = []
        response.on('data', (chunk: Buffer) => chunks.push(chunk))
        response.on('end', () => {
          const body = Buffer.concat(chunks).toString('utf8')
          resolve({ statusCode: response.statusCode ?? 0, headers: response.headers, body, json: () => JSON.parse(body) } as unknown as LightMyRequestResponse)
        })
      })
      request.on('error', reject)
      if (partial === undefined) request.end()
      else request.write(partial)
    })
  }
  const slowBodies: Record<string, [url: string, headers?: Record<string, string>]> = {
    'POST /api/user': ['/api/user'],
    'POST /api/auth/register': ['/api/auth/register'],
    'POST /api/auth/login': ['/api/auth/login'],
    'POST /api/auth/refresh-token': ['/api/auth/refresh-token'],
    'POST /api/auth/logout': ['/api/auth/logout', me.auth],
    'POST /api/auth/password-reset': ['/api/auth/password-reset'],
    'POST /api/auth/password-reset/confirm': ['/api/auth/password-reset/confirm'],
    'POST /api/auth/verify-email': ['/api/auth/verify-email'],
    'PATCH /api/user/{id}': [`/api/user/${me.id}`, me.auth],
    'DELETE /api/user/{id}': [`/api/user/${me.id}`, me.auth],
    'POST /api/product': ['/api/product', me.auth],
    'POST /api/product/{id}/image': [`/api/product/${mine}/image`, { ...me.auth, 'content-type': 'multipart/form-data; boundary=b0undary' }],
    'DELETE /api/product/{id}': [`/api/product/${mine}`, me.auth],
    'DELETE /api/product/{id}/image': [`/api/product/${pictured}/image`, me.auth],
    'DELETE /api/admin/users/{id}': ['/api/admin/users/1', ADMIN],
    'DELETE /api/admin/products/{id}': ['/api/admin/products/1', ADMIN],
    'POST /api/auth/mfa/totp': ['/api/auth/mfa/totp'],
    'POST /api/auth/mfa/passkey/options': ['/api/auth/mfa/passkey/options'],
    'POST /api/auth/mfa/passkey': ['/api/auth/mfa/passkey'],
    'POST /api/auth/passkey/login': ['/api/auth/passkey/login'],
    'POST /api/security/totp': ['/api/security/totp', me.auth],
    'POST /api/security/totp/confirm': ['/api/security/totp/confirm', me.auth],
    'POST /api/security/recovery-codes': ['/api/security/recovery-codes', me.auth],
    'POST /api/security/passkey/options': ['/api/security/passkey/options', me.auth],
    'POST /api/security/passkey-options': ['/api/security/passkey-options', me.auth],
    'POST /api/security/totp/disable': ['/api/security/totp/disable', me.auth],
    'POST /api/security/passkeys': ['/api/security/passkeys', me.auth],
    'PATCH /api/security/passkeys/{id}': [`/api/security/passkeys/${keyId}`, me.auth],
    'DELETE /api/security/passkeys/{id}': [`/api/security/passkeys/${keyId}`, me.auth],
    'DELETE /api/admin/users/{id}/factors': ['/api/admin/users/1/factors', ADMIN],
    'POST /api/auth/passkey/options': ['/api/auth/passkey/options'],
    'POST /api/auth/verify-email/resend': ['/api/auth/verify-email/resend', me.auth],
    // Another account's session: whatever gets through ends nothing of `me`'s.
    'DELETE /api/security/sessions/{id}': [`/api/security/sessions/${other.sid}`, me.auth],
    'DELETE /api/security/sessions': ['/api/security/sessions', me.auth]
  }
  for (const [route, statuses] of documented) {
    const [method = '', path = ''] = route.split(' ')
    const requests = (cases[route] ??= {})
    if (statuses.includes(429) && requests[429] === undefined) requests[429] = () => overSocket(crowdedPort, method, path.replace(/\{[^}]+\}/g, '1'))
    // A compressed body is refused before anything else reads the request, a GET's too.
    if (statuses.includes(415) && requests[415] === undefined) requests[415] = () => app.inject({ method: method as 'GET', url: path.replace(/\{[^}]+\}/g, '1'), headers: { 'content-encoding': 'gzip', 'content-type': 'application/json' }, payload: 'x' })
    const slow = slowBodies[route]
    if (statuses.includes(408) && slow !== undefined) requests[408] = () => overSocket(slowPort, method, slow[0], slow[1], '-')
  }

  // Headers documented for an answer that it carries only sometimes: cookies in cookie mode,
  // the CSV's file name and next page, a password change's no-store.
  const sometimes = new Set(['Set-Cookie', 'GET /api/product 200 Link', 'GET /api/product 200 Content-Disposition', 'PATCH /api/user/{id} 200 Cache-Control'])
  for (const [route, statuses] of documented) {
    const requests = cases[route] ?? {}
    t.same(Object.keys(requests).map(Number).sort(), statuses, `${route}: a request for each documented status (${statuses.join(', ')})`)
    const [method = '', path = ''] = route.split(' ')
    for (const [status, request] of Object.entries(requests)) {
      const response = await request()
      t.equal(response.statusCode, Number(status), `${route} answers ${status} (${response.body.slice(0, 160)})`)
      for (const name of Object.keys(doc.paths[path]?.[method.toLowerCase()]?.responses[status]?.headers ?? {})) {
        if (sometimes.has(name) || sometimes.has(`${route} ${status} ${name}`)) continue
        t.ok(response.headers[name.toLowerCase()], `${route} ${status}: the documented ${name} header`)
      }
      if (Number(status) >= 400) {
        t.match(response.headers['content-type'], /^application\/problem\+json/, `${route} ${status}: problem+json`)
        t.ok(Value.Check(Problem, response.json()), `${route} ${status}: the Problem shape`)
        const examples = doc.paths[path]?.[method.toLowerCase()]?.responses[status]?.content?.['application/problem+json']?.examples ?? {}
        const code = response.json().code as string
        t.ok(Object.values(examples).some((e) => e.value.code === code), `${route} ${status}: ${code} is one of the documented codes`)
      }
    }
  }
  // Beyond one code per status: the codes every operation lists, each produced against each
  // operation that lists it. Before routing, a client over its share of requests in progress
  // (`crowded`) and a service shedding load (`full`: one request in progress is its cap);
  // and a body that is not JSON, on every operation that reads one.
  const full = await build(t, { databaseUrl: app.databaseUrl, env: { LOAD_SHED_MAX_IN_FLIGHT: '1', LOAD_SHED_MAX_IN_FLIGHT_PER_CLIENT: '0', SLOW_CLIENT_WINDOW_MS: '0' } })
  const fullPort = await full.listen({ host: '127.0.0.1', port: 0 }).then(() => (full.server.address() as AddressInfo).port)
  const fill = net.connect(fullPort, '127.0.0.1')
  fill.on('error', () => {})
  t.teardown(() => { fill.destroy() })
  fill.write('POST /api/user HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{')
  await new Promise((resolve) => setTimeout(resolve, 300))
  // Changes that need a recent sign-in with the second factor, from mfaUser's session (signed in before TOTP was on):
  // each with a valid body, and a wrong password where one is asked, so that nothing changes.
  const strict = await build(t, { databaseUrl: app.databaseUrl, env: { RECENT_SIGN_IN_MAX_AGE: '15m' } })
  const wrong = { currentPassword: 'not the password' }
  const recent: Record<string, [url: string, payload?: Record<string, unknown>]> = {
    'POST /api/security/totp': ['/api/security/totp', wrong],
    'POST /api/security/totp/confirm': ['/api/security/totp/confirm', { ...wrong, code: '123456' }],
    'POST /api/security/totp/disable': ['/api/security/totp/disable', { password: 'not the password' }],
    'POST /api/security/recovery-codes': ['/api/security/recovery-codes', wrong],
    'POST /api/security/passkey-options': ['/api/security/passkey-options', wrong],
    'POST /api/security/passkey/options': ['/api/security/passkey/options', wrong],
    'POST /api/security/passkeys': ['/api/security/passkeys', { ...wrong, response: strayRegistration }],
    'PATCH /api/security/passkeys/{id}': [`/api/security/passkeys/${keyId}`, { name: 'x' }],
    'DELETE /api/security/passkeys/{id}': [`/api/security/passkeys/${keyId}`],
    'PATCH /api/user/{id}': [`/api/user/${mfaUser.id}`, { email: newUser().email, ...wrong }],
    'DELETE /api/user/{id}': [`/api/user/${mfaUser.id}`, { password: 'not the password' }]
  }
  const parts = Array.from({ length: 11 }, (_, i) => `--b0undary\r\nContent-Disposition: form-data; name="field${i}"\r\n\r\nx\r\n`).join('')
  const notWebAuthn = { ...stray, response: { ...stray.response, clientDataJSON: Buffer.from('{}').toString('base64url') } }
  const plainHttp = { host: 'api.example.com', origin: 'http://api.example.com' }
  // Other codes not produced above, one request each.
  const others: Record<string, Record<string, () => Promise<LightMyRequestResponse>>> = {
    'POST /api/user': {
      '400 BAD_REQUEST': () => app.inject({ method: 'POST', url: '/api/user', payload: newUser({ password: 'ü'.repeat(50) }) }),
      '400 PASSWORD_TOO_COMMON': () => app.inject({ method: 'POST', url: '/api/user', payload: newUser({ password: 'password123' }) })
    },
    'POST /api/auth/register': {
      '400 BAD_REQUEST': () => app.inject({ method: 'POST', url: '/api/auth/register', payload: newUser({ password: 'ü'.repeat(50) }) }),
      '400 PASSWORD_TOO_COMMON': () => app.inject({ method: 'POST', url: '/api/auth/register', payload: newUser({ password: 'password123' }) })
    },
    'PATCH /api/user/{id}': { '400 PASSWORD_TOO_COMMON': () => app.inject({ method: 'PATCH', url: `/api/user/${me.id}`, headers: me.auth, payload: { password: 'password123', currentPassword: me.password } }) },
    'POST /api/auth/password-reset/confirm': { '400 PASSWORD_TOO_COMMON': () => app.inject({ method: 'POST', url: '/api/auth/password-reset/confirm', payload: { token: 'x', password: 'password123' } }) },
    'POST /api/auth/login': { '400 INSECURE_COOKIE_CONTEXT': () => app.inject({ method: 'POST', url: '/api/auth/login', headers: plainHttp, payload: { username: me.username, password: me.password, mode: 'cookie' } }) },
    'POST /api/auth/passkey/login': { '400 INSECURE_COOKIE_CONTEXT': () => app.inject({ method: 'POST', url: '/api/auth/passkey/login', headers: plainHttp, payload: { response: stray, mode: 'cookie' } }) },
    'POST /api/auth/mfa/passkey': { '400 BAD_REQUEST': async () => app.inject({ method: 'POST', url: '/api/auth/mfa/passkey', payload: { mfaToken: await ticket(), response: notWebAuthn } }) },
    'POST /api/security/totp': { '403 WRONG_PASSWORD': async () => app.inject({ method: 'POST', url: '/api/security/totp', headers: (await verifiedUser(app)).auth, payload: wrong }) },
    'POST /api/security/passkeys': { '403 WRONG_PASSWORD': async () => app.inject({ method: 'POST', url: '/api/security/passkeys', headers: (await verifiedUser(app)).auth, payload: { ...wrong, response: strayRegistration } }) },
    'POST /api/security/passkey-options': { '403 WRONG_PASSWORD': async () => app.inject({ method: 'POST', url: '/api/security/passkey-options', headers: (await verifiedUser(app)).auth, payload: wrong }) },
    'POST /api/product/{id}/image': { '400 TOO_MANY_PARTS': () => app.inject({ method: 'POST', url: `/api/product/${mine}/image`, headers: { ...me.auth, 'content-type': 'multipart/form-data; boundary=b0undary' }, payload: `${parts}--b0undary--\r\n` }) },
    'POST /api/security/totp/disable': {
      '429 RATE_LIMITED': async () => {
        const session = await withTotp()
        const guess = () => limited.inject({ method: 'POST', url: '/api/security/totp/disable', headers: session.auth, payload: { password: 'not the password' } })
        await guess()
        return await guess()
      }
    }
  }
  const operationOf = (route: string) => doc.paths[route.split(' ')[1]!]![route.split(' ')[0]!.toLowerCase()]!
  for (const [route] of documented) {
    const [method = '', path = ''] = route.split(' ')
    const listed = new Set(Object.entries(operationOf(route).responses).flatMap(([status, response]) =>
      Object.keys(response.content?.['application/problem+json']?.examples ?? {}).map((code) => `${status} ${code}`)))
    const answers: Array<[string, () => Promise<LightMyRequestResponse>]> = []
    if (listed.has('429 TOO_MANY_IN_PROGRESS')) answers.push(['429 TOO_MANY_IN_PROGRESS', () => overSocket(crowdedPort, method, path.replace(/\{[^}]+\}/g, '1'))])
    if (listed.has('503 OVERLOADED')) answers.push(['503 OVERLOADED', () => overSocket(fullPort, method, path.replace(/\{[^}]+\}/g, '1'))])
    const body = slowBodies[route]
    if (listed.has('403 CSRF_REJECTED') && operationOf(route).security !== undefined) {
      t.ok(body, `${route}: a URL to send it from another origin`)
      if (body !== undefined) answers.push(['403 CSRF_REJECTED', () => app.inject({ method: method as 'POST', url: body[0], headers: evil(me) })])
    }
    const change = recent[route]
    if (listed.has('403 RECENT_SIGN_IN_REQUIRED')) {
      t.ok(change, `${route}: a change that needs a recent sign-in`)
      if (change !== undefined) answers.push(['403 RECENT_SIGN_IN_REQUIRED', () => strict.inject({ method: method as 'POST', url: change[0], headers: mfaUser.auth, ...(change[1] === undefined ? {} : { payload: change[1] }) })])
    }
    for (const [expected, request] of Object.entries(others[route] ?? {})) answers.push([expected, request])
    if (listed.has('400 MALFORMED_JSON')) {
      t.ok(body, `${route}: a URL and headers to send it a body`)
      if (body !== undefined) answers.push(['400 MALFORMED_JSON', () => app.inject({ method: method as 'POST', url: body[0], headers: { ...body[1], 'content-type': 'application/json' }, payload: '{' })])
    }
    for (const [expected, request] of answers) {
      const response = await request()
      t.equal(`${response.statusCode} ${response.json().code}`, expected, `${route} answers ${expected}`)
    }
  }
})
