/**
 * No cache keeps an answer with personal data: every route of the API outside the public
 * catalogue answers `Cache-Control: no-store`, whatever the status, unless it sets its own.
 * The routes are taken from the route table as the OpenAPI document lists it, so a route added
 * later is checked without anyone adding it here; the answers that carry a user's record,
 * sessions or tokens are checked on success too.
 */
import t from 'tap'
import { build, registerAndLogin } from './helpers/build.js'

const PUBLIC = /^\/api\/product(\/|$)/

t.test('every API answer outside the catalogue is no-store, for any status', async (t) => {
  const app = await build(t)
  const user = await registerAndLogin(app)
  const document = (await app.inject({ url: '/docs/json' })).json() as { paths: Record<string, Record<string, unknown>> }
  const routes = Object.entries(document.paths).flatMap(([path, operations]) => Object.keys(operations).map((method) => ({ method: method.toUpperCase(), path })))
  const checked = routes.filter((route) => route.path.startsWith('/api/') && !PUBLIC.test(route.path))
  t.ok(checked.length >= 20, `${checked.length} routes from the route table`)
  // The logout last: it ends the session the others use.
  checked.sort((a, b) => Number(a.path.endsWith('/logout')) - Number(b.path.endsWith('/logout')))
  for (const { method, path } of checked) {
    const url = path.replace('{id}', String(user.id)).replace(/\{[^}]+\}/g, 'x')
    const res = await app.inject({ method: method as 'GET', url, headers: user.auth, ...(method === 'GET' || method === 'HEAD' ? {} : { payload: {} }) })
    t.match(res.headers['cache-control'], /\bno-store\b/, `${method} ${path}: ${res.statusCode}, no-store`)
  }
})

t.test('the answers with a user\'s record, sessions and tokens, on success', async (t) => {
  const app = await build(t)
  const user = await registerAndLogin(app)
  const answers = {
    'GET /api/user/:id': await app.inject({ url: `/api/user/${user.id}`, headers: user.auth }),
    'PATCH /api/user/:id': await app.inject({ method: 'PATCH', url: `/api/user/${user.id}`, headers: user.auth, payload: { names: 'Ada' } }),
    'GET /api/security': await app.inject({ url: '/api/security', headers: user.auth }),
    'POST /api/auth/login': await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: user.username, password: user.password } }),
    'POST /api/auth/register': await app.inject({ method: 'POST', url: '/api/auth/register', payload: { username: `${user.username}x`, email: `x${user.email}`, password: user.password } })
  }
  for (const [route, res] of Object.entries(answers)) {
    t.ok(res.statusCode < 300, `${route}: ${res.statusCode}`)
    t.equal(res.headers['cache-control'], 'no-store', `${route}: no-store`)
  }
  t.match((answers['GET /api/user/:id'].json() as { email: string }).email, user.email, 'the record with the e-mail')
  const product = await app.inject({ method: 'GET', url: '/api/product' })
  t.equal(product.statusCode, 200)
  t.notOk(product.headers['cache-control']?.includes('no-store'), 'the public catalogue keeps its own caching')
})
