/**
 * Sessions in token mode: refresh-token rotation, reuse detection (the whole family is
 * revoked), logout, password change and account deletion, expiry, hostile refresh tokens,
 * and two refreshes racing with one token over real HTTP.
 */
import t, { type Test } from 'tap'
import type { LightMyRequestResponse } from 'fastify'
import { assertProblem } from './helpers/assertions.js'
import { build, injectAs, registerAndLogin, type Session, type TestApp } from './helpers/build.js'
import { sqlClient } from './helpers/database.js'

const refresh = async (app: TestApp, refreshToken: unknown) =>
  await app.inject({ method: 'POST', url: '/api/auth/refresh-token', payload: { refreshToken } })

const getMe = async (app: TestApp, me: { id: number }, token: string) =>
  await app.inject({ method: 'GET', url: `/api/user/${me.id}`, headers: { authorization: `Bearer ${token}` } })

const claims = (token: string) => JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString())

function assertSession (t: Test, res: LightMyRequestResponse, me: Session): { token: string, refreshToken: string } {
  t.equal(res.statusCode, 200, `a new session (${res.body.slice(0, 200)})`)
  const body = res.json()
  t.match(body, { mode: 'token', tokenType: 'Bearer', expiresIn: 900, userId: me.id, token: String, refreshToken: /^[A-Za-z0-9_-]{43}$/ })
  t.notOk(res.headers['set-cookie'], 'token mode sets no cookie')
  return body
}

t.test('refresh-token rotation', async (t) => {
  const app = await build(t)
  const db = await sqlClient(t, app.databaseUrl)

  t.test('rotates: new tokens in the same session, the old refresh token used up', async (t) => {
    const me = await registerAndLogin(app)
    const next = assertSession(t, await refresh(app, me.refreshToken), me)
    t.not(next.refreshToken, me.refreshToken, 'a new refresh token')
    t.equal(claims(next.token).sid, me.sid, 'the same session')
    t.equal((await getMe(app, me, next.token)).statusCode, 200, 'the new access token works')
    t.equal((await getMe(app, me, me.token)).statusCode, 200, 'the earlier access token of the session still works until it expires')
    const stored = await db.query('SELECT hash, used_at FROM refresh_tokens t JOIN sessions s ON s.id = t.session_id WHERE s.user_id = $1 ORDER BY t.created_at', [me.id])
    t.equal(stored.rows.length, 2)
    t.ok(stored.rows[0].used_at, 'the first is marked used')
    t.equal(stored.rows[1].used_at, null)
    for (const row of stored.rows) {
      t.equal(row.hash.length, 32, 'stored as a SHA-256 digest')
      t.not(row.hash.toString('base64url'), me.refreshToken, 'never the token itself')
    }
    // A chain of rotations keeps working.
    let current = next.refreshToken
    for (let i = 0; i < 3; i++) current = assertSession(t, await refresh(app, current), me).refreshToken
  })

  t.test('reuse of a used refresh token revokes the whole family', async (t) => {
    const me = await registerAndLogin(app)
    const other = await registerAndLogin(app)
    const stolen = me.refreshToken
    const legit = assertSession(t, await refresh(app, stolen), me)
    // The thief (or the victim) presents the used token again.
    const reuse = await refresh(app, stolen)
    assertProblem(t, reuse, 401, 'REFRESH_TOKEN_REUSED')
    t.match(reuse.headers['www-authenticate'], /^Bearer/)
    // Every token of the family is dead: the newest refresh token and both access tokens.
    assertProblem(t, await refresh(app, legit.refreshToken), 401, 'INVALID_REFRESH_TOKEN')
    assertProblem(t, await getMe(app, me, legit.token), 401, 'UNAUTHORIZED')
    assertProblem(t, await getMe(app, me, me.token), 401, 'UNAUTHORIZED')
    const revoked = await db.query('SELECT revoked_at FROM sessions WHERE id = $1', [me.sid])
    t.ok(revoked.rows[0].revoked_at, 'the session row is revoked')
    // Another session of the same user, and other users, are untouched.
    const second = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: me.username, password: me.password } })
    t.equal((await getMe(app, me, second.json().token)).statusCode, 200, 'a new login works')
    t.equal((await getMe(app, other, other.token)).statusCode, 200, 'another user is untouched')
    t.equal((await db.query('SELECT id FROM sessions WHERE id = $1', [me.sid])).rows.length, 0, 'the next login deleted the revoked session')
  })

  t.test('a password change ends every session (refresh and access tokens)', async (t) => {
    const me = await registerAndLogin(app)
    const second = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: me.username, password: me.password } })
    const changed = await injectAs(app, me, { method: 'PATCH', url: `/api/user/${me.id}`, payload: { password: 'a brand new secret', currentPassword: me.password } })
    t.equal(changed.statusCode, 200)
    const fresh = changed.json()
    t.match(fresh, { user: { id: me.id }, mode: 'token', token: String, refreshToken: /^[A-Za-z0-9_-]{43}$/ })
    t.not(claims(fresh.token).sid, me.sid, 'a new session')
    assertProblem(t, await refresh(app, me.refreshToken), 401, 'INVALID_REFRESH_TOKEN')
    assertProblem(t, await refresh(app, second.json().refreshToken), 401, 'INVALID_REFRESH_TOKEN')
    assertProblem(t, await getMe(app, me, second.json().token), 401, 'UNAUTHORIZED')
    // The new session works, and rotates.
    t.equal((await getMe(app, me, fresh.token)).statusCode, 200)
    t.equal((await refresh(app, fresh.refreshToken)).statusCode, 200)
  })

  t.test('account deletion ends every session (the rows go with the user)', async (t) => {
    const me = await registerAndLogin(app)
    t.equal((await injectAs(app, me, { method: 'DELETE', url: `/api/user/${me.id}`, payload: { password: me.password } })).statusCode, 204)
    assertProblem(t, await refresh(app, me.refreshToken), 401, 'INVALID_REFRESH_TOKEN')
    const rows = await db.query('SELECT count(*)::int AS n FROM sessions WHERE user_id = $1', [me.id])
    t.equal(rows.rows[0].n, 0, 'no session rows left')
  })

  t.test('an expired refresh token: 401, and no reuse alarm when it is sent again', async (t) => {
    const me = await registerAndLogin(app)
    await db.query("UPDATE refresh_tokens SET expires_at = now() - interval '1 second' WHERE session_id = $1", [me.sid])
    const res = await refresh(app, me.refreshToken)
    const body = assertProblem(t, res, 401, 'INVALID_REFRESH_TOKEN')
    t.match(body.detail, /expired/)
    assertProblem(t, await refresh(app, me.refreshToken), 401, 'INVALID_REFRESH_TOKEN')
    t.equal((await getMe(app, me, me.token)).statusCode, 200, 'the session was not revoked')
  })

  t.test('malformed, oversized and hostile refresh tokens: 400 or 401 problems, never 500', async (t) => {
    const me = await registerAndLogin(app)
    const unauthorized: unknown[] = ['x', 'A'.repeat(43), me.refreshToken.slice(0, 42), me.refreshToken + 'A', me.refreshToken.replace(/^./, (c) => c === 'A' ? 'B' : 'A'),
      ' '.repeat(43), "' OR 1=1 --" + 'x'.repeat(32), '%00'.repeat(15), me.token, '../'.repeat(100), '\u00e9'.repeat(43), '🔑'.repeat(20)]
    for (const token of unauthorized) {
      assertProblem(t, await refresh(app, token), 401, 'INVALID_REFRESH_TOKEN')
    }
    const invalid: unknown[] = ['', 'A'.repeat(513), 'a\u0000b', '\ud800'.repeat(43), 42, null, true, ['x'], { token: 'x' }]
    for (const token of invalid) {
      assertProblem(t, await refresh(app, token), 400, 'VALIDATION_FAILED')
    }
    assertProblem(t, await app.inject({ method: 'POST', url: '/api/auth/refresh-token', payload: { refreshToken: me.refreshToken, extra: 1 } }), 400, 'VALIDATION_FAILED')
    assertProblem(t, await app.inject({ method: 'POST', url: '/api/auth/refresh-token' }), 400, 'BAD_REQUEST')
    assertProblem(t, await app.inject({ method: 'POST', url: '/api/auth/refresh-token', payload: {} }), 400, 'BAD_REQUEST')
    assertProblem(t, await app.inject({ method: 'POST', url: '/api/auth/refresh-token', headers: { 'content-type': 'application/json' }, payload: '{"refreshToken":' }), 400, 'MALFORMED_JSON')
    assertProblem(t, await app.inject({ method: 'POST', url: '/api/auth/refresh-token', headers: { 'content-type': 'text/plain' }, payload: me.refreshToken }), 415, 'UNSUPPORTED_MEDIA_TYPE')
    t.equal((await refresh(app, me.refreshToken)).statusCode, 200, 'none of that used up or revoked the real token')
  })
})

t.test('logout', async (t) => {
  const app = await build(t)

  t.test('revokes the session: the access token stops working at once, the refresh token too', async (t) => {
    const me = await registerAndLogin(app)
    const other = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: me.username, password: me.password } })
    const res = await injectAs(app, me, { method: 'POST', url: '/api/auth/logout' })
    t.equal(res.statusCode, 204)
    t.equal(res.body, '')
    assertProblem(t, await getMe(app, me, me.token), 401, 'UNAUTHORIZED')
    assertProblem(t, await refresh(app, me.refreshToken), 401, 'INVALID_REFRESH_TOKEN')
    assertProblem(t, await injectAs(app, me, { method: 'POST', url: '/api/auth/logout' }), 401, 'UNAUTHORIZED')
    t.equal((await getMe(app, me, other.json().token)).statusCode, 200, 'the user\'s other session lives on')
  })

  t.test('needs a valid access token', async (t) => {
    assertProblem(t, await app.inject({ method: 'POST', url: '/api/auth/logout' }), 401, 'UNAUTHORIZED')
    assertProblem(t, await app.inject({ method: 'POST', url: '/api/auth/logout', headers: { authorization: 'Bearer nope' } }), 401, 'UNAUTHORIZED')
  })

  t.test('access tokens of this service with a wrong session claim: 401', async (t) => {
    const me = await registerAndLogin(app)
    const other = await registerAndLogin(app)
    const sign = async (sid: unknown) => await app.jwt.sign({ sub: String(me.id), ver: 0, sid } as never)
    for (const sid of [undefined, '', 'not-a-uuid', 42, other.sid, '00000000-0000-4000-8000-000000000000', me.sid.toUpperCase()]) {
      assertProblem(t, await getMe(app, me, await sign(sid)), 401, 'UNAUTHORIZED')
    }
    t.equal((await getMe(app, me, await sign(me.sid))).statusCode, 200, 'the control: its own sid')
  })
})

t.test('two refreshes racing with one token over real HTTP: exactly one wins, the other is reuse', async (t) => {
  const app = await build(t)
  await app.listen({ port: 0, host: '127.0.0.1' })
  const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`
  const post = async (refreshToken: string) => {
    const res = await fetch(`${base}/api/auth/refresh-token`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ refreshToken }) })
    return { status: res.status, body: await res.json() as Record<string, any> }
  }
  for (const racers of [2, 2, 2, 5]) {
    const me = await registerAndLogin(app)
    const results = await Promise.all(Array.from({ length: racers }, async () => await post(me.refreshToken)))
    const winners = results.filter((r) => r.status === 200)
    t.equal(winners.length, 1, `${racers} racers: exactly one 200 (${results.map((r) => r.status).join(', ')})`)
    t.same(results.filter((r) => r.status !== 200).map((r) => r.body.code), Array(racers - 1).fill('REFRESH_TOKEN_REUSED'), 'the others are reuse')
    // Reuse revoked the family: the winner's tokens are dead too.
    t.equal((await post(winners[0]!.body.refreshToken)).status, 401, 'the winner\'s refresh token is revoked with the family')
    const me2 = await fetch(`${base}/api/user/${me.id}`, { headers: { authorization: `Bearer ${winners[0]!.body.token}` } })
    t.equal(me2.status, 401, 'and its access token')
  }
})
