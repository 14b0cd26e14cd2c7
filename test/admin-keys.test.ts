/** The service's admin routes: key-auth with ADMIN_API_KEYS, on the real database. */
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { Writable } from 'node:stream'
import t from 'tap'
import { ConfigError, loadConfig } from '../src/config.js'
import { PROJECT_ROOT } from '../src/db/prisma-cli.js'
import { apiKeyWeakness, estimatedKeyBits } from '../src/lib/api-keys.js'
import { SERVER_ENV } from './faults/helpers/server.js'
import { build, injectAs, registerAndLogin, TEST_ENV } from './helpers/build.js'

const [CURRENT, PREVIOUS] = TEST_ENV.ADMIN_API_KEYS!.split(',') as [string, string]
const admin = (key: string) => ({ authorization: `Bearer ${key}` })

t.test('admin routes', async (t) => {
  const app = await build(t)

  await t.test('refusals are 401 problem details with the key-auth texts', async (t) => {
    const cases: [string, Record<string, string>, string, string][] = [
      ['no key', {}, 'API_KEY_MISSING', 'missing or malformed API Key'],
      ['no scheme', { authorization: CURRENT }, 'API_KEY_MISSING', 'missing or malformed API Key'],
      ['another header', { 'x-api-key': CURRENT }, 'API_KEY_MISSING', 'missing or malformed API Key'],
      ['wrong key', admin('admin-key-wrong-0123456789'), 'API_KEY_INVALID', 'Invalid or expired API Key'],
      ['a key one character short', admin(CURRENT.slice(0, -1)), 'API_KEY_INVALID', 'Invalid or expired API Key']
    ]
    // Each case from its own client address: ten wrong keys from one would be a 429.
    let client = 0
    for (const [name, headers, code, detail] of cases) {
      for (const [method, url] of [['GET', '/api/admin/users'], ['DELETE', '/api/admin/users/1'], ['DELETE', '/api/admin/users/1/factors'], ['DELETE', '/api/admin/products/1'], ['GET', '/metrics']] as const) {
        const res = await app.inject({ method, url, headers, remoteAddress: `10.30.0.${++client}` })
        t.equal(res.statusCode, 401, `${name}: ${method} ${url}`)
        t.match(res.json(), { status: 401, code, detail, instance: url.split('?')[0] }, name)
        t.equal(res.headers['content-type'], 'application/problem+json; charset=utf-8')
        t.equal(res.headers['www-authenticate'], 'Bearer realm="admin"')
      }
    }
    // The key is checked before anything else: a bad id without a key is still a 401.
    t.equal((await app.inject({ method: 'DELETE', url: '/api/admin/users/abc' })).statusCode, 401)
    t.equal((await app.inject({ method: 'DELETE', url: '/api/admin/users/abc', headers: admin(CURRENT) })).statusCode, 400)
  })

  await t.test('a JWT is not an admin key, and admin keys are not JWTs', async (t) => {
    const user = await registerAndLogin(app)
    const res = await injectAs(app, user, { url: '/api/admin/users' })
    t.equal(res.statusCode, 401)
    t.equal(res.json().code, 'API_KEY_INVALID')
    // JWT routes are unaffected by the admin guard.
    t.equal((await injectAs(app, user, { url: `/api/user/${user.id}` })).statusCode, 200)
    t.equal((await app.inject({ url: `/api/user/${user.id}`, headers: admin(CURRENT) })).statusCode, 401)
    t.equal((await app.inject({ url: '/api/product' })).statusCode, 200, 'public routes stay public')
  })

  await t.test('both keys of the rotation are valid', async (t) => {
    for (const key of [CURRENT, PREVIOUS]) {
      const res = await app.inject({ url: '/api/admin/users', headers: admin(key) })
      t.equal(res.statusCode, 200, key)
    }
    t.equal((await app.inject({ url: '/api/admin/users', headers: { authorization: `bearer   ${PREVIOUS}` } })).statusCode, 200, 'scheme case and spacing')
  })

  await t.test('listing pages through every user, never with a password or its hash', async (t) => {
    const created = []
    for (let i = 0; i < 5; i++) created.push(await registerAndLogin(app))

    const seen: number[] = []
    let cursor: number | null = null
    let pages = 0
    do {
      const url: string = `/api/admin/users?limit=2${cursor === null ? '' : `&cursor=${cursor}`}`
      const res = await app.inject({ url, headers: admin(CURRENT) })
      t.equal(res.statusCode, 200)
      t.notMatch(res.body, /password|\$2[aby]\$/i, 'no password, no hash')
      const page = res.json() as { items: Record<string, unknown>[], nextCursor: number | null }
      t.ok(page.items.length <= 2)
      for (const item of page.items) t.same(Object.keys(item).sort(), ['createdAt', 'email', 'emailVerifiedAt', 'id', 'names', 'pendingEmail', 'updatedAt', 'username'])
      seen.push(...page.items.map((item) => item.id as number))
      if (page.nextCursor !== null) t.equal(page.nextCursor, seen[seen.length - 1], 'the cursor is the last id of the page')
      cursor = page.nextCursor
      pages++
    } while (cursor !== null && pages < 20)

    t.same(seen, [...seen].sort((a, b) => a - b), 'in id order')
    t.equal(new Set(seen).size, seen.length, 'no user twice')
    for (const user of created) t.ok(seen.includes(user.id), `user ${user.id} listed`)

    const all = await app.inject({ url: '/api/admin/users', headers: admin(CURRENT) })
    t.equal(all.json().items.length, seen.length, 'default limit 20 holds them all in one page')
    t.equal(all.json().nextCursor, null)
  })

  await t.test('listing validates its query', async (t) => {
    for (const query of ['limit=0', 'limit=101', 'limit=abc', 'cursor=-1', 'extra=1']) {
      const res = await app.inject({ url: `/api/admin/users?${query}`, headers: admin(CURRENT) })
      t.equal(res.statusCode, 400, query)
      t.equal(res.json().code, 'VALIDATION_FAILED')
    }
    t.equal((await app.inject({ url: '/api/admin/users?limit=100', headers: admin(CURRENT) })).statusCode, 200)
  })

  await t.test('deleting a user (and their products)', async (t) => {
    const user = await registerAndLogin(app)
    const product = await injectAs(app, user, { method: 'POST', url: '/api/product', payload: { title: 'doomed', amount: 1 } })
    t.equal(product.statusCode, 201)

    const res = await app.inject({ method: 'DELETE', url: `/api/admin/users/${user.id}`, headers: admin(PREVIOUS) })
    t.equal(res.statusCode, 204)
    t.equal(res.body, '')
    t.equal((await injectAs(app, user, { url: `/api/user/${user.id}` })).statusCode, 401, 'their token stops working')
    t.equal((await app.inject({ url: `/api/product/${product.json().id}` })).statusCode, 404, 'their products are gone')

    const again = await app.inject({ method: 'DELETE', url: `/api/admin/users/${user.id}`, headers: admin(CURRENT) })
    t.equal(again.statusCode, 404)
    t.match(again.json(), { code: 'NOT_FOUND', detail: `User ${user.id} does not exist` })
  })

  await t.test('deleting any product', async (t) => {
    const owner = await registerAndLogin(app)
    const product = (await injectAs(app, owner, { method: 'POST', url: '/api/product', payload: { title: 'listed', amount: 5 } })).json()
    const res = await app.inject({ method: 'DELETE', url: `/api/admin/products/${product.id}`, headers: admin(CURRENT) })
    t.equal(res.statusCode, 204)
    t.equal((await app.inject({ url: `/api/product/${product.id}` })).statusCode, 404)
    t.equal((await injectAs(app, owner, { url: `/api/user/${owner.id}` })).statusCode, 200, 'the owner is untouched')

    const again = await app.inject({ method: 'DELETE', url: `/api/admin/products/${product.id}`, headers: admin(CURRENT) })
    t.equal(again.statusCode, 404)
    t.match(again.json(), { code: 'NOT_FOUND', detail: `Product ${product.id} does not exist` })
  })

  await t.test('the OpenAPI document declares the admin key', async (t) => {
    const spec = (await app.inject({ url: '/docs/json' })).json()
    t.match(spec.components.securitySchemes.adminApiKey, { type: 'http', scheme: 'bearer' })
    for (const [path, method] of [['/api/admin/users', 'get'], ['/api/admin/users/{id}', 'delete'], ['/api/admin/users/{id}/factors', 'delete'], ['/api/admin/products/{id}', 'delete']]) {
      const operation = spec.paths[path!]?.[method!]
      t.same(operation?.tags, ['admin'], `${method} ${path}`)
      t.same(operation?.security, [{ adminApiKey: [] }])
      const examples = Object.values(operation?.responses?.['401']?.content?.['application/problem+json']?.examples ?? {}) as { value: { code: string, detail: string } }[]
      t.same(examples.map((e) => [e.value.code, e.value.detail]), [['API_KEY_MISSING', 'missing or malformed API Key'], ['API_KEY_INVALID', 'Invalid or expired API Key']], 'its 401 shows the two refusals, as answered above')
    }
  })
})

t.test('ADMIN_API_KEYS empty: the admin routes refuse every key', async (t) => {
  const logs: string[] = []
  const logStream = new Writable({ write (chunk, _encoding, done) { logs.push(String(chunk)); done() } })
  const app = await build(t, { env: { ADMIN_API_KEYS: ' , ', LOG_LEVEL: 'warn' }, logStream })
  t.equal(logs.join('').match(/ADMIN_API_KEYS is empty: the admin routes and \/metrics refuse every request/g)?.length, 1, 'one warning at start')
  for (const url of ['/api/admin/users', '/metrics']) {
    const res = await app.inject({ url, headers: admin(CURRENT) })
    t.equal(res.statusCode, 401, url)
    t.equal(res.json().code, 'API_KEY_INVALID')
  }
})

t.test('weak ADMIN_API_KEYS stop the configuration load (ConfigError), naming the key by position', async (t) => {
  const weak: [string, RegExp][] = [
    ['short-key', /key #2 is 9 characters, shorter than 32/],
    ['a'.repeat(16), /key #2 is 16 characters, shorter than 32/],
    ['a'.repeat(64), /key #2 is too predictable \(about 0 bits/],
    ['abababababababababababababababab', /key #2 is too predictable \(about 30 bits/],
    ['password'.repeat(4), /key #2 is too predictable/],
    [randomBytes(16).toString('hex'), /key #2 is too predictable/], // 128 random bits in hex: ~112 by the estimate
    // Sequences: as many distinct characters as a random key, one step repeated.
    ['0123456789abcdef0123456789abcdef', /key #2 is too predictable \(about 16 bits by the frequencies of its characters and of the steps/],
    ['0123456789abcdef'.repeat(4), /key #2 is too predictable/],
    ['abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/', /key #2 is too predictable/],
    ['zyxwvutsrqponmlkjihgfedcba987654', /key #2 is too predictable/],
    ['a1b2c3d4e5f6g7h8i9j0k1l2m3n4o5p6', /key #2 is too predictable/],
    ['qwertyuiopasdfghjklzxcvbnm123456', /key #2 is too predictable/],
    ['ABCDEFGHIJKLMNOPQRSTUVWXYZ234567'.split('').reverse().join('').repeat(2), /key #2 is too predictable/]
  ]
  for (const [key, message] of weak) {
    const error = (() => { try { loadConfig({ ...TEST_ENV, ADMIN_API_KEYS: `${CURRENT}, ${key}` }, false) } catch (error) { return error as Error } })()
    t.ok(error instanceof ConfigError, `${key.slice(0, 20)}...: ConfigError`)
    t.match(error?.message, message)
    t.match(error?.message, /openssl rand -base64 32/, 'says how to make a good one')
    t.notMatch(error?.message, key, 'never prints the key')
  }
  // Near misses that are real keys: generated ones pass, however their steps fall.
  let lowest = Infinity
  for (let i = 0; i < 2000; i++) {
    for (const key of [randomBytes(32).toString('base64'), randomBytes(32).toString('hex'), randomBytes(32).toString('base64url')]) {
      const weakness = apiKeyWeakness(key)
      if (weakness !== undefined) t.fail(`a generated key refused: ${weakness}`)
      lowest = Math.min(lowest, estimatedKeyBits(key))
    }
  }
  t.ok(lowest > 160, `6,000 generated keys pass, the lowest at ${Math.floor(lowest)} bits (128 needed)`)
  t.equal(apiKeyWeakness(TEST_ENV.ADMIN_API_KEYS!.split(',')[1]!), undefined, 'the keys of the tests\' own configuration')
  t.equal(apiKeyWeakness('Tr0ub4dor&3-correct-horse-battery-staple'), undefined, 'a long passphrase with varied steps passes (the estimate\'s limit: generate keys)')
  t.ok(estimatedKeyBits(randomBytes(32).toString('base64')) > 180, 'openssl rand -base64 32: well above 128 bits')
})

t.test('a weak ADMIN_API_KEYS stops the server with the configuration exit (78) and one line, no stack trace', { timeout: 60_000 }, async (t) => {
  const { code, output } = await new Promise<{ code: number | null, output: string }>((resolve) => {
    const child = spawn(process.execPath, ['--import', import.meta.resolve('tsx'), 'src/server.ts'], {
      cwd: PROJECT_ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...SERVER_ENV, ADMIN_API_KEYS: `${randomBytes(32).toString('base64')},0123456789abcdef0123456789abcdef` },
      stdio: ['ignore', 'pipe', 'pipe']
    })
    let output = ''
    child.stdout.on('data', (chunk) => { output += chunk })
    child.stderr.on('data', (chunk) => { output += chunk })
    child.on('close', (code) => resolve({ code, output }))
    // A server that starts anyway is the failure: stopped, not left running.
    const stop = setTimeout(() => child.kill('SIGKILL'), 40_000)
    child.on('close', () => clearTimeout(stop))
  })
  t.equal(code, 78, output)
  t.match(output, /ADMIN_API_KEYS key #2 is too predictable .*generate one with `openssl rand -base64 32`/, 'a predictable key, named by its position in the list')
  t.notMatch(output, /0123456789abcdef/, 'never printed')
  t.notMatch(output, /\n\s+at /, 'no stack trace')
})

t.test('wrong keys are limited per client: 429 with Retry-After after the limit of wrong keys, however concurrent', async (t) => {
  const app = await build(t, { tuning: { keyFailures: { max: 5, timeWindow: 60_000 } } })
  const wrong = (i: number) => admin(randomBytes(32).toString('base64') + i)
  const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => app.inject({ url: '/api/admin/users', headers: wrong(i), remoteAddress: '10.20.0.1' })))
  const statuses = answers.map((res) => res.statusCode)
  t.equal(statuses.filter((s) => s === 401).length, 5, '40 wrong keys at once: exactly 5 checked (401)')
  t.equal(statuses.filter((s) => s === 429).length, 35, 'the other 35: 429')
  const limited = answers.find((res) => res.statusCode === 429)!
  t.match(limited.json(), { status: 429, code: 'RATE_LIMITED', detail: /wrong API keys/ })
  const retry = Number(limited.headers['retry-after'])
  t.ok(retry >= 55 && retry <= 60, `Retry-After ${retry} s`)
  t.equal((await app.inject({ url: '/api/admin/users', headers: admin(CURRENT), remoteAddress: '10.20.0.1' })).statusCode, 429, 'the right key from the locked client: 429 too (a 200 would confirm a guess)')
  t.equal((await app.inject({ url: '/api/admin/users', headers: admin(CURRENT), remoteAddress: '10.20.0.2' })).statusCode, 200, 'other clients are not affected')
  t.equal((await app.inject({ url: '/api/admin/users', headers: wrong(99), remoteAddress: '10.20.0.3' })).statusCode, 401, 'another client still gets its own 401s')
})

t.test('right keys are never limited or slowed: they do not use the budget, even many at once', async (t) => {
  const app = await build(t, { tuning: { keyFailures: { max: 3, timeWindow: 60_000 } } })
  const client = { remoteAddress: '10.21.0.1' }
  const right = await Promise.all(Array.from({ length: 50 }, (_, i) => app.inject({ url: '/api/admin/users?limit=1', headers: admin(i % 2 === 0 ? CURRENT : PREVIOUS), ...client })))
  t.same([...new Set(right.map((res) => res.statusCode))], [200], '50 right keys at once: all 200')
  for (let i = 0; i < 2; i++) t.equal((await app.inject({ url: '/api/admin/users', headers: admin('wrong key of no importance'), ...client })).statusCode, 401)
  t.equal((await app.inject({ url: '/api/admin/users', headers: {}, ...client })).statusCode, 401, 'a missing key is not a guess')
  t.equal((await app.inject({ url: '/api/admin/users', headers: admin(CURRENT), ...client })).statusCode, 200, 'two failures of three: the right key still works')
  t.equal((await app.inject({ url: '/api/admin/users', headers: admin('wrong key of no importance'), ...client })).statusCode, 401, 'the third failure')
  t.equal((await app.inject({ url: '/api/admin/users', headers: admin(CURRENT), ...client })).statusCode, 429, 'then the client is locked')
})

t.test('ADMIN_API_KEYS: blanks around keys are ignored, a single key works', async (t) => {
  const app = await build(t, { env: { ADMIN_API_KEYS: `  ${PREVIOUS}  ` } })
  t.equal((await app.inject({ url: '/api/admin/users', headers: admin(PREVIOUS) })).statusCode, 200)
  t.equal((await app.inject({ url: '/api/admin/users', headers: admin(CURRENT) })).statusCode, 401, 'a key removed from the list stops working')
})
