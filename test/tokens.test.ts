/**
 * Token edge cases on a protected route: every bad token is a 401 with
 * `WWW-Authenticate: Bearer`, in the problem-details shape. Tokens are made here with
 * node:crypto, independently of the service's own signer.
 */
import { createHmac, generateKeyPairSync, sign } from 'node:crypto'
import t, { type Test } from 'tap'
import { assertProblem } from './helpers/assertions.js'
import { build, injectAs, registerAndLogin, TEST_SECRET } from './helpers/build.js'

const b64 = (value: object | string) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url')

function hs256 (payload: object, secret = TEST_SECRET, header: object = { alg: 'HS256', typ: 'JWT' }): string {
  const input = `${b64(header)}.${b64(payload)}`
  return `${input}.${createHmac('sha256', secret).update(input).digest('base64url')}`
}

const now = () => Math.floor(Date.now() / 1000)

t.test('tokens on GET /api/user/:id', async (t) => {
  const app = await build(t)
  const me = await registerAndLogin(app)
  const url = `/api/user/${me.id}`
  const claims = { sub: String(me.id), ver: 0, sid: me.sid, iat: now(), exp: now() + 3600 }
  const get = async (authorization?: string) => await app.inject({ method: 'GET', url, headers: authorization === undefined ? {} : { authorization } })

  const refused = async (t: Test, authorization: string | undefined, name: string) => {
    const res = await get(authorization)
    assertProblem(t, res, 401, 'UNAUTHORIZED')
    t.match(res.headers['www-authenticate'], /^Bearer/, `${name}: WWW-Authenticate`)
  }

  t.test('a token made here with the right secret and claims works (the control)', async (t) => {
    t.equal((await get(`Bearer ${hs256(claims)}`)).statusCode, 200)
  })
  t.test('the scheme word is case-insensitive', async (t) => {
    t.equal((await get(`bearer ${me.token}`)).statusCode, 200)
  })

  t.test('missing or malformed header', async (t) => {
    await refused(t, undefined, 'no header')
    await refused(t, '', 'empty header')
    await refused(t, 'Bearer', 'scheme only')
    await refused(t, `Basic ${me.token}`, 'other scheme')
    await refused(t, me.token, 'no scheme')
    await refused(t, 'Bearer garbage', 'garbage')
    await refused(t, 'Bearer a.b.c', 'three garbage parts')
    await refused(t, `Bearer ${me.token}x`, 'trailing byte')
  })

  t.test('wrong secret or tampered payload', async (t) => {
    await refused(t, `Bearer ${hs256(claims, 'another-secret-that-is-also-long-enough-000')}`, 'wrong secret')
    const [h, , s] = me.token.split('.')
    await refused(t, `Bearer ${h}.${b64({ ...claims, sub: '1' })}.${s}`, 'tampered payload')
  })

  t.test('algorithm is pinned to HS256', async (t) => {
    await refused(t, `Bearer ${b64({ alg: 'none', typ: 'JWT' })}.${b64(claims)}.`, 'alg none')
    await refused(t, `Bearer ${hs256(claims, TEST_SECRET, { alg: 'HS512', typ: 'JWT' })}`, 'HS512 header on an HS256 signature')
    const input512 = `${b64({ alg: 'HS512', typ: 'JWT' })}.${b64(claims)}`
    await refused(t, `Bearer ${input512}.${createHmac('sha512', TEST_SECRET).update(input512).digest('base64url')}`, 'HS512 with the right secret')
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
    const inputRs = `${b64({ alg: 'RS256', typ: 'JWT' })}.${b64(claims)}`
    await refused(t, `Bearer ${inputRs}.${sign('sha256', Buffer.from(inputRs), privateKey).toString('base64url')}`, 'RS256')
  })

  t.test('time claims', async (t) => {
    await refused(t, `Bearer ${hs256({ ...claims, iat: now() - 7200, exp: now() - 3600 })}`, 'expired')
    const expired = await get(`Bearer ${hs256({ ...claims, exp: now() - 10 })}`)
    t.match(expired.json().detail, /expired/)
    await refused(t, `Bearer ${hs256({ ...claims, nbf: now() + 3600 })}`, 'not yet valid')
  })

  t.test('claims this service never issues', async (t) => {
    const { sub: _sub, ...noSub } = claims
    await refused(t, `Bearer ${hs256(noSub)}`, 'missing sub')
    await refused(t, `Bearer ${hs256({ ...claims, sub: 'admin' })}`, 'non-numeric sub')
    await refused(t, `Bearer ${hs256({ ...claims, sub: me.id })}`, 'numeric (not string) sub')
    await refused(t, `Bearer ${hs256({ ...claims, sub: '99999999' })}`, 'sub of no user')
    // Ids are PostgreSQL integers: a sub past 2^31-1 must not reach the query, where it would be a 500.
    for (const sub of ['2147483648', '9999999999', '4294967296', '-1', '0', '1.5', '01', '+1', ' 1', '1e3', '0x10', '9'.repeat(400), '', `${me.id}\u0000`]) {
      await refused(t, `Bearer ${hs256({ ...claims, sub })}`, `sub ${JSON.stringify(sub.slice(0, 20))}`)
    }
    await refused(t, `Bearer ${hs256({ ...claims, sub: '2147483647' })}`, 'sub at the top of the range (no such user)')
    const { ver: _ver, ...noVer } = claims
    await refused(t, `Bearer ${hs256(noVer)}`, 'missing ver')
    await refused(t, `Bearer ${hs256({ ...claims, ver: 1 })}`, 'a future token version')
  })

  t.test('issued before a password change', async (t) => {
    const other = await registerAndLogin(app)
    const before = other.token
    const res = await injectAs(app, other, { method: 'PATCH', url: `/api/user/${other.id}`, payload: { password: 'changed password 1', currentPassword: other.password } })
    t.equal(res.statusCode, 200)
    const r = await app.inject({ method: 'GET', url: `/api/user/${other.id}`, headers: { authorization: `Bearer ${before}` } })
    assertProblem(t, r, 401, 'UNAUTHORIZED')
    t.match(r.json().detail, /revoked/)
  })

  t.test('of a deleted user', async (t) => {
    const gone = await registerAndLogin(app)
    t.equal((await injectAs(app, gone, { method: 'DELETE', url: `/api/user/${gone.id}`, payload: { password: gone.password } })).statusCode, 204)
    for (const [method, path] of [['GET', `/api/user/${gone.id}`], ['POST', '/api/product'], ['DELETE', `/api/user/${gone.id}`]] as const) {
      const res = await injectAs(app, gone, { method, url: path, payload: method === 'POST' ? { title: 'x', amount: 1 } : method === 'DELETE' ? { password: gone.password } : undefined })
      assertProblem(t, res, 401, 'UNAUTHORIZED')
    }
  })
})

t.test('ACCESS_TOKEN_TTL sets the lifetime; so does JWT_EXPIRES_IN, its alias', async (t) => {
  for (const [name, value, seconds] of [['ACCESS_TOKEN_TTL', '2h', 7200], ['JWT_EXPIRES_IN', '5m', 300]] as const) {
    const app = await build(t, { env: { [name]: value } })
    const me = await registerAndLogin(app)
    const payload = JSON.parse(Buffer.from(me.token.split('.')[1]!, 'base64url').toString())
    t.equal(payload.exp - payload.iat, seconds, `${name}=${value}`)
    const login = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: me.username, password: me.password } })
    t.equal(login.json().expiresIn, seconds, 'login reports it, in seconds')
  }
})
