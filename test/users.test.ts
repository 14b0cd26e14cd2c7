import t from 'tap'
import { assertNoSecrets, assertProblem } from './helpers/assertions.js'
import { build, injectAs, newUser, registerAndLogin } from './helpers/build.js'
import { sqlClient } from './helpers/database.js'
import { CODES } from '../src/lib/problem.js'

t.test('registration (POST /api/user and POST /api/auth/register)', async (t) => {
  const app = await build(t)
  const db = await sqlClient(t, app.databaseUrl)

  for (const url of ['/api/user', '/api/auth/register']) {
    t.test(`${url}: 201 with the user, never the password or its hash`, async (t) => {
      const body = newUser()
      const res = await app.inject({ method: 'POST', url, payload: body })
      t.equal(res.statusCode, 201)
      const user = res.json()
      t.same(Object.keys(user).sort(), ['createdAt', 'email', 'emailVerifiedAt', 'id', 'names', 'pendingEmail', 'updatedAt', 'username'])
      t.equal(user.username, body.username)
      t.equal(user.email, body.email)
      assertNoSecrets(t, res, body.password)
      const { rows } = await db.query('SELECT password_hash FROM users WHERE id = $1', [user.id])
      t.match(rows[0].password_hash, /^\$2[ab]\$04\$/, 'stored as a bcrypt hash at the configured cost')
    })
  }

  t.test('duplicate username or e-mail is 409, without regard to case', async (t) => {
    const body = newUser()
    t.equal((await app.inject({ method: 'POST', url: '/api/user', payload: body })).statusCode, 201)
    const sameName = await app.inject({ method: 'POST', url: '/api/auth/register', payload: { ...newUser(), username: body.username.toUpperCase() } })
    t.match(assertProblem(t, sameName, 409, 'CONFLICT').detail, /username/)
    const sameEmail = await app.inject({ method: 'POST', url: '/api/user', payload: { ...newUser(), email: body.email.toUpperCase() } })
    t.match(assertProblem(t, sameEmail, 409, 'CONFLICT').detail, /email/)
  })

  t.test('two racing registrations of one username: exactly one 201 and one 409', async (t) => {
    for (let round = 0; round < 5; round++) {
      const a = newUser()
      const b = { ...newUser(), username: a.username }
      const results = await Promise.all([
        app.inject({ method: 'POST', url: '/api/user', payload: a }),
        app.inject({ method: 'POST', url: '/api/auth/register', payload: b })
      ])
      t.same(results.map((r) => r.statusCode).sort(), [201, 409], `round ${round}`)
      const { rows } = await db.query('SELECT count(*)::int AS n FROM users WHERE username = $1', [a.username])
      t.equal(rows[0].n, 1, 'one row')
    }
  })

  t.test('bad input is a 400 and writes nothing', async (t) => {
    const before = (await db.query('SELECT count(*)::int AS n FROM users')).rows[0].n
    const cases: [string, unknown][] = [
      ['missing password', { username: 'someone', email: 'someone@example.com' }],
      ['missing email', { username: 'someone', password: 'long enough pw' }],
      ['missing username', { email: 'someone@example.com', password: 'long enough pw' }],
      ['empty username', { ...newUser(), username: '' }],
      ['number for a string', { ...newUser(), username: 12345 }],
      ['boolean for a string', { ...newUser(), email: true }],
      ['null for a string', { ...newUser(), password: null }],
      ['array body', [newUser()]],
      ['unknown property id', { ...newUser(), id: 1 }],
      ['unknown property createdAt', { ...newUser(), createdAt: '2020-01-01T00:00:00Z' }],
      ['bad e-mail', { ...newUser(), email: 'not-an-email' }],
      ['username with @', { ...newUser(), username: 'a@b' }],
      ['username too short', { ...newUser(), username: 'ab' }],
      ['username too long', { ...newUser(), username: 'a'.repeat(33) }],
      ['password under 8 characters', { ...newUser(), password: 'short' }],
      ['password over 72 characters', { ...newUser(), password: 'p'.repeat(73) }],
      ['password over 72 bytes in UTF-8', { ...newUser(), password: 'é'.repeat(37) }]
    ]
    for (const [name, payload] of cases) {
      const res = await app.inject({ method: 'POST', url: '/api/user', payload: payload as object })
      const code = name.includes('bytes') ? 'BAD_REQUEST' : 'VALIDATION_FAILED'
      const problem = assertProblem(t, res, 400, code)
      if (code === 'VALIDATION_FAILED') t.ok(problem.errors.length > 0, `${name}: field errors`)
    }
    const after = (await db.query('SELECT count(*)::int AS n FROM users')).rows[0].n
    t.equal(after, before, 'no user was written')
  })

  t.test('a common password is refused, in any case: 400 PASSWORD_TOO_COMMON at the field, nothing written', async (t) => {
    const before = (await db.query('SELECT count(*)::int AS n FROM users')).rows[0].n
    for (const [url, password] of [['/api/user', 'password123'], ['/api/auth/register', 'PassWord123'], ['/api/user', 'QWERTYUIOP']]) {
      const problem = assertProblem(t, await app.inject({ method: 'POST', url, payload: newUser({ password }) }), 400, 'PASSWORD_TOO_COMMON')
      t.equal(problem.detail, CODES.PASSWORD_TOO_COMMON[2], `${url} ${password}: the detail says why, as the documented example does (the list's size included)`)
      t.same(problem.errors, [{ in: 'body', field: '/password', message: 'is one of the most common passwords' }], 'at the field')
    }
    const after = (await db.query('SELECT count(*)::int AS n FROM users')).rows[0].n
    t.equal(after, before, 'no user was written')
    t.equal((await app.inject({ method: 'POST', url: '/api/user', payload: newUser({ password: 'password123 but longer' }) })).statusCode, 201, 'a common password inside a longer one is not the common password')
  })

  t.test('a password past 72 bytes: 400 BAD_REQUEST at the field', async (t) => {
    const problem = assertProblem(t, await app.inject({ method: 'POST', url: '/api/user', payload: newUser({ password: 'é'.repeat(37) }) }), 400, 'BAD_REQUEST')
    t.same(problem.errors, [{ in: 'body', field: '/password', message: 'must not be longer than 72 bytes in UTF-8' }])
  })

  t.test('a 72-byte password is accepted (the bcrypt limit, not past it)', async (t) => {
    const body = newUser({ password: 'é'.repeat(36) })
    t.equal(Buffer.byteLength(body.password), 72)
    t.equal((await app.inject({ method: 'POST', url: '/api/user', payload: body })).statusCode, 201)
    const login = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: body.username, password: body.password } })
    t.equal(login.statusCode, 200)
  })
})

t.test('GET /api/user/:id', async (t) => {
  const app = await build(t)
  const alice = await registerAndLogin(app)
  const bob = await registerAndLogin(app)

  t.test('own record: 200, no secrets', async (t) => {
    const res = await injectAs(app, alice, { method: 'GET', url: `/api/user/${alice.id}` })
    t.equal(res.statusCode, 200)
    t.match(res.json(), { id: alice.id, username: alice.username, email: alice.email })
    assertNoSecrets(t, res, alice.password)
  })
  t.test("another user's record: 403", async (t) => {
    assertProblem(t, await injectAs(app, alice, { method: 'GET', url: `/api/user/${bob.id}` }), 403, 'FORBIDDEN')
  })
  t.test('an id that does not exist: 403 (ids of others are never revealed)', async (t) => {
    assertProblem(t, await injectAs(app, alice, { method: 'GET', url: '/api/user/999999' }), 403, 'FORBIDDEN')
  })
  t.test('without a token: 401 with WWW-Authenticate', async (t) => {
    const res = await app.inject({ method: 'GET', url: `/api/user/${alice.id}` })
    assertProblem(t, res, 401, 'UNAUTHORIZED')
    t.match(res.headers['www-authenticate'], /^Bearer/)
  })
  t.test('non-numeric, zero, negative or out-of-range ids: 400', async (t) => {
    for (const id of ['abc', '0', '-1', '1.5', '2147483648', '99999999999999999999', '%00']) {
      assertProblem(t, await injectAs(app, alice, { method: 'GET', url: `/api/user/${id}` }), 400, 'VALIDATION_FAILED')
    }
  })
})

t.test('PATCH /api/user/:id', async (t) => {
  const app = await build(t)

  t.test('changes the username at once and the e-mail once confirmed (test/email-verification.test.ts)', async (t) => {
    const me = await registerAndLogin(app)
    const next = newUser()
    const res = await injectAs(app, me, { method: 'PATCH', url: `/api/user/${me.id}`, payload: { username: next.username, email: next.email, currentPassword: me.password } })
    t.equal(res.statusCode, 200)
    t.match(res.json().user, { id: me.id, username: next.username, email: me.email, pendingEmail: next.email })
    t.notOk(res.json().token, 'no new token without a password change')
    assertNoSecrets(t, res)
    // The old token still works (no password change).
    t.equal((await injectAs(app, me, { method: 'GET', url: `/api/user/${me.id}` })).json().username, next.username)
  })

  t.test('a password change re-hashes, revokes earlier tokens and returns a new one', async (t) => {
    const me = await registerAndLogin(app)
    const db = await sqlClient(t, app.databaseUrl)
    const oldHash = (await db.query('SELECT password_hash FROM users WHERE id = $1', [me.id])).rows[0].password_hash
    const res = await injectAs(app, me, { method: 'PATCH', url: `/api/user/${me.id}`, payload: { password: 'a brand new secret', currentPassword: me.password } })
    t.equal(res.statusCode, 200)
    assertNoSecrets(t, res, 'a brand new secret')
    const newHash = (await db.query('SELECT password_hash FROM users WHERE id = $1', [me.id])).rows[0].password_hash
    t.not(newHash, oldHash, 'the hash changed')
    assertProblem(t, await injectAs(app, me, { method: 'GET', url: `/api/user/${me.id}` }), 401, 'UNAUTHORIZED')
    const fresh = res.json().token
    t.equal((await app.inject({ method: 'GET', url: `/api/user/${me.id}`, headers: { authorization: `Bearer ${fresh}` } })).statusCode, 200, 'the returned token works')
    const oldLogin = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: me.username, password: me.password } })
    assertProblem(t, oldLogin, 401, 'UNAUTHORIZED')
    const newLogin = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: me.username, password: 'a brand new secret' } })
    t.equal(newLogin.statusCode, 200)
  })

  t.test('taking a name another user has: 409, and nothing changes', async (t) => {
    const me = await registerAndLogin(app)
    const other = await registerAndLogin(app)
    const res = await injectAs(app, me, { method: 'PATCH', url: `/api/user/${me.id}`, payload: { username: other.username.toUpperCase(), email: newUser().email, currentPassword: me.password } })
    assertProblem(t, res, 409, 'CONFLICT')
    t.equal((await injectAs(app, me, { method: 'GET', url: `/api/user/${me.id}` })).json().email, me.email, 'e-mail unchanged too')
  })

  t.test("another user's record: 403, nothing changes", async (t) => {
    const me = await registerAndLogin(app)
    const other = await registerAndLogin(app)
    assertProblem(t, await injectAs(app, me, { method: 'PATCH', url: `/api/user/${other.id}`, payload: { username: newUser().username } }), 403, 'FORBIDDEN')
    t.equal((await injectAs(app, other, { method: 'GET', url: `/api/user/${other.id}` })).json().username, other.username)
  })

  t.test('bad bodies: 400', async (t) => {
    const me = await registerAndLogin(app)
    for (const payload of [{}, { id: 5 }, { tokenVersion: 0 }, { username: 42 }, { email: 'nope' }, { password: 'short' }, { username: '' }]) {
      assertProblem(t, await injectAs(app, me, { method: 'PATCH', url: `/api/user/${me.id}`, payload }), 400, 'VALIDATION_FAILED')
    }
    assertProblem(t, await injectAs(app, me, { method: 'PATCH', url: `/api/user/${me.id}`, payload: { password: 'ü'.repeat(40), currentPassword: me.password } }), 400, 'BAD_REQUEST')
  })

  t.test('a common new password: 400 PASSWORD_TOO_COMMON at the field, before the current password is checked; the password stays', async (t) => {
    const me = await registerAndLogin(app)
    for (const currentPassword of [me.password, 'not my password']) {
      const problem = assertProblem(t, await injectAs(app, me, { method: 'PATCH', url: `/api/user/${me.id}`, payload: { password: 'Iloveyou1', currentPassword } }), 400, 'PASSWORD_TOO_COMMON')
      t.same(problem.errors, [{ in: 'body', field: '/password', message: 'is one of the most common passwords' }])
    }
    t.equal((await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: me.username, password: me.password } })).statusCode, 200, 'the old password still logs in')
    t.equal((await injectAs(app, me, { method: 'GET', url: `/api/user/${me.id}` })).statusCode, 200, 'the session goes on')
  })

  t.test('without a token: 401', async (t) => {
    assertProblem(t, await app.inject({ method: 'PATCH', url: '/api/user/1', payload: { username: 'whoever' } }), 401, 'UNAUTHORIZED')
  })
})

t.test('DELETE /api/user/:id', async (t) => {
  const app = await build(t)

  t.test('deletes for real: tokens stop working, products go, the names can register again', async (t) => {
    const me = await registerAndLogin(app)
    const created = await injectAs(app, me, { method: 'POST', url: '/api/product', payload: { title: 'lamp', description: 'a lamp', amount: 1999 } })
    t.equal(created.statusCode, 201)
    const res = await injectAs(app, me, { method: 'DELETE', url: `/api/user/${me.id}`, payload: { password: me.password } })
    t.equal(res.statusCode, 204)
    t.equal(res.body, '')
    assertProblem(t, await injectAs(app, me, { method: 'GET', url: `/api/user/${me.id}` }), 401, 'UNAUTHORIZED')
    assertProblem(t, await app.inject({ method: 'GET', url: `/api/product/${created.json().id}` }), 404, 'NOT_FOUND')
    const again = await app.inject({ method: 'POST', url: '/api/user', payload: { username: me.username, email: me.email, password: me.password } })
    t.equal(again.statusCode, 201, 'same username and e-mail register again')
    t.not(again.json().id, me.id, 'as a new user')
  })

  t.test("another user's record: 403 and it stays", async (t) => {
    const me = await registerAndLogin(app)
    const other = await registerAndLogin(app)
    assertProblem(t, await injectAs(app, me, { method: 'DELETE', url: `/api/user/${other.id}`, payload: { password: me.password } }), 403, 'FORBIDDEN')
    t.equal((await injectAs(app, other, { method: 'GET', url: `/api/user/${other.id}` })).statusCode, 200)
  })

  t.test('without a token: 401; a bad id: 400', async (t) => {
    assertProblem(t, await app.inject({ method: 'DELETE', url: '/api/user/1', payload: { password: 'whatever' } }), 401, 'UNAUTHORIZED')
    const me = await registerAndLogin(app)
    assertProblem(t, await injectAs(app, me, { method: 'DELETE', url: '/api/user/x', payload: { password: me.password } }), 400, 'VALIDATION_FAILED')
  })
})

t.test('PATCH /api/user/:id: a password change needs the current password', async (t) => {
  const app = await build(t)
  const me = await registerAndLogin(app)
  const patch = async (payload: object) => await injectAs(app, me, { method: 'PATCH', url: `/api/user/${me.id}`, payload })
  const missing = assertProblem(t, await patch({ password: 'a brand new secret' }), 400, 'BAD_REQUEST')
  t.match(missing.detail, /currentPassword/, 'the detail names the missing field')
  const wrong = assertProblem(t, await patch({ password: 'a brand new secret', currentPassword: 'not my password' }), 403, 'WRONG_PASSWORD')
  t.match(wrong.detail, /current password is wrong/)
  t.equal((await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: me.username, password: me.password } })).statusCode, 200, 'the password did not change')
  t.equal((await injectAs(app, me, { method: 'GET', url: `/api/user/${me.id}` })).statusCode, 200, 'a wrong current password does not revoke the token')
  assertProblem(t, await patch({ username: newUser().username, currentPassword: 'not my password' }), 403, 'WRONG_PASSWORD')
  t.equal((await patch({ password: 'a brand new secret', currentPassword: me.password })).statusCode, 200, 'the right one: changed')
})

t.test('DELETE /api/user/:id needs the password', async (t) => {
  const app = await build(t)
  const me = await registerAndLogin(app)
  const del = async (options: object) => await injectAs(app, me, { method: 'DELETE', url: `/api/user/${me.id}`, ...options })
  assertProblem(t, await del({}), 400, 'VALIDATION_FAILED')
  assertProblem(t, await del({ payload: {} }), 400, 'VALIDATION_FAILED')
  assertProblem(t, await del({ payload: { password: 'not my password' } }), 403, 'WRONG_PASSWORD')
  t.equal((await injectAs(app, me, { method: 'GET', url: `/api/user/${me.id}` })).statusCode, 200, 'still there')
  t.equal((await del({ payload: { password: me.password } })).statusCode, 204, 'the right password deletes')
})
