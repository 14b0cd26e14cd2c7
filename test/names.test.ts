import t from 'tap'
import { assertProblem } from './helpers/assertions.js'
import { build, injectAs, newUser, registerAndLogin } from './helpers/build.js'
import { sqlClient } from './helpers/database.js'

t.test('names (the display name): optional, returned, changed by PATCH, validated', async (t) => {
  const app = await build(t)
  const db = await sqlClient(t, app.databaseUrl)

  t.test('optional on registration: null when not given, kept when given', async (t) => {
    const plain = await app.inject({ method: 'POST', url: '/api/user', payload: newUser() })
    t.equal(plain.json().names, null)
    const named = await app.inject({ method: 'POST', url: '/api/auth/register', payload: { ...newUser(), names: 'Ada Lovelace' } })
    t.equal(named.statusCode, 201)
    t.equal(named.json().names, 'Ada Lovelace')
    const unicode = await app.inject({ method: 'POST', url: '/api/user', payload: { ...newUser(), names: 'Zoë Ødegård 李小龍 👩‍💻' } })
    t.equal(unicode.json().names, 'Zoë Ødegård 李小龍 👩‍💻', 'any script, emoji sequences')
  })

  t.test('returned in the user record and the admin list; changed and removed by PATCH', async (t) => {
    const me = await registerAndLogin(app)
    const get = async () => (await injectAs(app, me, { method: 'GET', url: `/api/user/${me.id}` })).json()
    t.equal((await get()).names, null)
    const set = await injectAs(app, me, { method: 'PATCH', url: `/api/user/${me.id}`, payload: { names: 'Grace Hopper' } })
    t.equal(set.statusCode, 200)
    t.equal(set.json().user.names, 'Grace Hopper')
    t.notOk(set.json().token, 'no new session for a names change')
    t.equal((await get()).names, 'Grace Hopper', 'the token check reads it too')
    const admin = await app.inject({ method: 'GET', url: '/api/admin/users?limit=100', headers: { authorization: `Bearer ${app.config.auth.adminApiKeys.split(',')[0]!}` } })
    t.equal(admin.json().items.find((u: { id: number }) => u.id === me.id)?.names, 'Grace Hopper', 'the admin list')
    const cleared = await injectAs(app, me, { method: 'PATCH', url: `/api/user/${me.id}`, payload: { names: null } })
    t.equal(cleared.json().user.names, null, 'null removes it')
    t.equal((await db.query('SELECT names FROM users WHERE id = $1', [me.id])).rows[0].names, null)
  })

  t.test('validated like every other string: 400 and nothing written', async (t) => {
    const me = await registerAndLogin(app)
    const bad: unknown[] = ['', '   ', 'a'.repeat(101), 'tab\there', 'new\nline', 'bell\u0007', 'del\u007f', 'c1\u0085', 'nul\u0000', 'lone \ud800 surrogate', 42, true, ['x'], { first: 'x' }]
    for (const names of bad) {
      assertProblem(t, await app.inject({ method: 'POST', url: '/api/user', payload: { ...newUser(), names } }), 400, 'VALIDATION_FAILED')
      assertProblem(t, await injectAs(app, me, { method: 'PATCH', url: `/api/user/${me.id}`, payload: { names } }), 400, 'VALIDATION_FAILED')
    }
    t.equal((await db.query('SELECT names FROM users WHERE id = $1', [me.id])).rows[0].names, null, 'nothing changed')
    const longest = await injectAs(app, me, { method: 'PATCH', url: `/api/user/${me.id}`, payload: { names: 'é'.repeat(100) } })
    t.equal(longest.statusCode, 200, '100 characters are fine')
  })
})
