import t from 'tap'
import { assertNoSecrets, assertProblem } from './helpers/assertions.js'
import { build, newUser } from './helpers/build.js'

const payload0 = (token: string) => JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString())

t.test('POST /api/auth/login', async (t) => {
  const app = await build(t)
  const user = newUser()
  const created = await app.inject({ method: 'POST', url: '/api/auth/register', payload: user })
  t.equal(created.statusCode, 201)
  const id = created.json().id

  const login = async (payload: object) => await app.inject({ method: 'POST', url: '/api/auth/login', payload })

  t.test('with the username: a JWT for this user', async (t) => {
    const res = await login({ username: user.username, password: user.password })
    t.equal(res.statusCode, 200)
    const body = res.json()
    t.match(body, { mode: 'token', tokenType: 'Bearer', expiresIn: 900, userId: id, refreshToken: /^[A-Za-z0-9_-]{43}$/ })
    t.equal(Date.parse(body.expiresAt), payload0(body.token).exp * 1000, 'expiresAt is the token\'s exp')
    t.ok(Date.parse(body.refreshTokenExpiresAt) > Date.now() + 29 * 86_400_000, 'the refresh token lives 30 days by default')
    const [header, payload] = body.token.split('.').slice(0, 2).map((part: string) => JSON.parse(Buffer.from(part, 'base64url').toString()))
    t.equal(header.alg, 'HS256')
    t.equal(payload.sub, String(id))
    t.equal(payload.exp - payload.iat, 15 * 60, 'lifetime 15 min by default')
    t.match(payload.sid, /^[0-9a-f-]{36}$/, 'the session id')
    t.notMatch(res.body, user.password)
    const me = await app.inject({ method: 'GET', url: `/api/user/${id}`, headers: { authorization: `Bearer ${body.token}` } })
    t.equal(me.statusCode, 200)
    assertNoSecrets(t, me, user.password)
  })

  t.test('with the e-mail in `username`, in any case', async (t) => {
    t.equal((await login({ username: user.email.toUpperCase(), password: user.password })).statusCode, 200)
  })

  t.test('with `identity` (the other name of `username`), username or e-mail', async (t) => {
    t.equal((await login({ identity: user.username, password: user.password })).statusCode, 200)
    t.equal((await login({ identity: user.email, password: user.password })).statusCode, 200)
  })

  t.test('the username without regard to case', async (t) => {
    t.equal((await login({ username: user.username.toUpperCase(), password: user.password })).statusCode, 200)
  })

  t.test('wrong password and unknown user: the same 401', async (t) => {
    const wrong = assertProblem(t, await login({ username: user.username, password: 'not the password' }), 401, 'UNAUTHORIZED')
    const unknown = assertProblem(t, await login({ username: 'nobody_here', password: 'not the password' }), 401, 'UNAUTHORIZED')
    const unknownEmail = assertProblem(t, await login({ username: 'nobody@example.com', password: 'whatever1' }), 401, 'UNAUTHORIZED')
    t.equal(wrong.detail, unknown.detail, 'same detail')
    t.equal(wrong.detail, unknownEmail.detail, 'same detail for an unknown e-mail')
  })

  t.test('a password past 72 bytes never matches (bcrypt would truncate it)', async (t) => {
    assertProblem(t, await login({ username: user.username, password: user.password + 'x'.repeat(80) }), 401, 'UNAUTHORIZED')
  })

  t.test('bad bodies: 400', async (t) => {
    assertProblem(t, await login({ password: user.password }), 400, 'BAD_REQUEST')
    assertProblem(t, await login({ username: user.username, identity: user.username, password: user.password }), 400, 'BAD_REQUEST')
    for (const payload of [{ username: user.username }, { username: 5, password: 'x' }, { username: '', password: 'x' }, { username: 'a', password: '' }, { username: 'a', password: 'x', admin: true }]) {
      assertProblem(t, await login(payload), 400, 'VALIDATION_FAILED')
    }
  })
})

t.test('registration and login are rate-limited per client: 429 with Retry-After', async (t) => {
  const app = await build(t, { env: { RATE_LIMIT_AUTH_MAX: '3' } })
  const statuses: number[] = []
  let limited
  for (let i = 0; i < 5; i++) {
    const res = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: 'nobody_here', password: 'whatever1' } })
    statuses.push(res.statusCode)
    if (res.statusCode === 429) limited = res
  }
  t.same(statuses, [401, 401, 401, 429, 429])
  t.ok(limited)
  const problem = assertProblem(t, limited!, 429, 'RATE_LIMITED')
  t.match(problem.detail, /retry in \d+ s/)
  t.ok(Number(limited!.headers['retry-after']) > 0, 'Retry-After in seconds')

  for (const url of ['/api/user', '/api/auth/register']) {
    t.equal((await app.inject({ method: 'POST', url, payload: newUser() })).statusCode, 429, `${url}: the same budget, used up by the logins`)
  }

  const other = await app.inject({ method: 'POST', url: '/api/auth/login', remoteAddress: '10.0.0.9', payload: { username: 'nobody_here', password: 'whatever1' } })
  t.equal(other.statusCode, 401, 'another client is not limited')
  t.equal((await app.inject({ method: 'GET', url: '/api/product' })).statusCode, 200, 'other routes are not limited')
})

t.test('one auth budget per client: registration on both paths and login count together', async (t) => {
  const app = await build(t, { env: { RATE_LIMIT_AUTH_MAX: '3' } })
  const user = newUser()
  const client = { remoteAddress: '10.6.0.1' }
  t.equal((await app.inject({ method: 'POST', url: '/api/user', payload: user, ...client })).statusCode, 201, 'POST /api/user')
  t.equal((await app.inject({ method: 'POST', url: '/api/auth/register', payload: newUser(), ...client })).statusCode, 201, 'POST /api/auth/register')
  t.equal((await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: user.username, password: user.password }, ...client })).statusCode, 200, 'POST /api/auth/login')
  for (const [url, payload] of [['/api/user', newUser()], ['/api/auth/register', newUser()], ['/api/auth/login', { username: user.username, password: user.password }]] as const) {
    const res = await app.inject({ method: 'POST', url, payload, ...client })
    assertProblem(t, res, 429, 'RATE_LIMITED')
    t.ok(Number(res.headers['retry-after']) > 0, `${url}: 429 with Retry-After after 3 requests in all`)
  }
  const concurrent = await Promise.all(Array.from({ length: 9 }, (_, i) => app.inject({ method: 'POST', url: ['/api/user', '/api/auth/register', '/api/auth/login'][i % 3]!, payload: i % 3 === 2 ? { username: user.username, password: user.password } : newUser(), remoteAddress: '10.6.0.2' })))
  t.equal(concurrent.filter((res) => res.statusCode !== 429).length, 3, `nine at once from another client: three served, six 429 (${concurrent.map((res) => res.statusCode).join(',')})`)
})
