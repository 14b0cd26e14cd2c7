/**
 * Quotas on writes (docs/api.md, "Quotas"), as hostile as the finding that asked for them:
 * one token firing concurrent creations and uploads over real HTTP at two replicas of the
 * service on one PostgreSQL, logins in a loop, and a refresh token rotated hundreds of times
 * in a burst. The counts are read from the database behind the API's back.
 */
import t, { type Test } from 'tap'
import { sessionsRepository } from '../src/modules/identity/repository.js'
import { hashRefreshToken, newRefreshToken } from '../src/modules/identity/tokens.js'
import { assertProblem, type Answer } from './helpers/assertions.js'
import { build, registerAndLogin, type Session, type TestApp } from './helpers/build.js'
import { createTestDatabase, sqlClient } from './helpers/database.js'

// A real PNG header (the type is judged by it), padded to exactly `size` bytes.
const PNG_HEAD = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64')
const png = (size: number) => Buffer.concat([PNG_HEAD, Buffer.alloc(size - PNG_HEAD.length, 7)])

/** fetch, answered in the shape assertProblem reads. */
async function send (url: string, init: RequestInit): Promise<Answer> {
  const res = await fetch(url, init)
  const body = await res.text()
  return { statusCode: res.status, headers: Object.fromEntries(res.headers), body, json: () => JSON.parse(body) } as Answer
}

/** Two replicas of the service on one database (and one upload folder), listening on loopback. */
async function replicas (t: Test, env: Record<string, string>): Promise<{ apps: TestApp[], urls: string[] }> {
  const databaseUrl = await createTestDatabase(t)
  const apps = [await build(t, { databaseUrl, env }), await build(t, { databaseUrl, env })]
  const urls = await Promise.all(apps.map(async (app) => await app.listen({ port: 0, host: '127.0.0.1' })))
  return { apps, urls }
}

t.test('products per user: 40 concurrent creations from one token at two replicas make exactly the quota; deleting frees it', async (t) => {
  const { apps, urls } = await replicas(t, { PRODUCTS_MAX_PER_USER: '5' })
  const db = await sqlClient(t, apps[0]!.databaseUrl)
  const me = await registerAndLogin(apps[0]!)
  const other = await registerAndLogin(apps[0]!)
  const create = async (session: Session, i: number) => await send(`${urls[i % 2]}/api/product`, {
    method: 'POST',
    headers: { ...session.auth, 'content-type': 'application/json' },
    body: JSON.stringify({ title: `p${i}`, amount: i })
  })

  const answers = await Promise.all(Array.from({ length: 40 }, async (_, i) => await create(me, i)))
  const created = answers.filter((a) => a.statusCode === 201)
  t.equal(created.length, 5, 'exactly the quota is created')
  const refused = answers.filter((a) => a.statusCode !== 201)
  t.equal(refused.length, 35)
  for (const answer of refused.slice(0, 3)) {
    const body = assertProblem(t, answer, 409, 'PRODUCT_QUOTA_EXCEEDED')
    t.match(body.detail, /5 products/, 'the detail names the quota')
  }
  t.ok(refused.every((a) => a.statusCode === 409 && a.json().code === 'PRODUCT_QUOTA_EXCEEDED'), 'every other answer is the quota problem')
  t.equal(Number((await db.query('SELECT count(*) FROM products WHERE creator_id = $1', [me.id])).rows[0].count), 5, 'the database holds exactly 5')

  t.equal((await create(other, 0)).statusCode, 201, 'another user has a quota of their own')

  const first = created[0]!.json().id as number
  t.equal((await send(`${urls[1]}/api/product/${first}`, { method: 'DELETE', headers: me.auth })).statusCode, 204)
  t.equal((await create(me, 1)).statusCode, 201, 'deleting a product frees its place')
  assertProblem(t, await create(me, 0), 409, 'PRODUCT_QUOTA_EXCEEDED')
})

t.test('image bytes per user: concurrent uploads at two replicas stop at the quota; nothing refused is kept; replacements count the difference', async (t) => {
  // 5 images of 1000 bytes fit, not a sixth.
  const { apps, urls } = await replicas(t, { IMAGE_MAX_BYTES: '2048', IMAGE_BYTES_MAX_PER_USER: '5000' })
  const db = await sqlClient(t, apps[0]!.databaseUrl)
  const me = await registerAndLogin(apps[0]!)
  const ids: number[] = []
  for (let i = 0; i < 12; i++) {
    ids.push((await apps[0]!.inject({ method: 'POST', url: '/api/product', headers: me.auth, payload: { title: `p${i}`, amount: 1 } })).json().id)
  }
  const upload = async (id: number, image: Buffer, i = 0) => {
    const form = new FormData()
    form.append('image', new Blob([image], { type: 'image/png' }), 'a.png')
    return await send(`${urls[i % 2]}/api/product/${id}/image`, { method: 'POST', headers: me.auth, body: form })
  }
  const used = async () => Number((await db.query('SELECT COALESCE(sum(image_size), 0) AS used FROM products WHERE creator_id = $1', [me.id])).rows[0].used)
  const stored = async () => (await db.query<{ key: string }>('SELECT key FROM blobs')).rows.map((row) => row.key)

  const answers = await Promise.all(ids.map(async (id, i) => await upload(id, png(1000), i)))
  t.equal(answers.filter((a) => a.statusCode === 201).length, 5, 'exactly five 1000-byte images fit in 5000 bytes')
  const refused = answers.filter((a) => a.statusCode !== 201)
  t.equal(refused.length, 7)
  assertProblem(t, refused[0]!, 409, 'IMAGE_QUOTA_EXCEEDED')
  t.ok(refused.every((a) => a.statusCode === 409 && a.json().code === 'IMAGE_QUOTA_EXCEEDED'), 'every other upload is the quota problem')
  t.equal(await used(), 5000, 'the rows hold 5000 bytes')
  const files = await stored()
  t.equal(files.length, 5, `one file per stored image, no file of a refused upload (${files.join(', ')})`)

  const pictured = answers.map((a, i) => a.statusCode === 201 ? ids[i]! : undefined).filter((id) => id !== undefined)
  const bare = ids.filter((id) => !pictured.includes(id))
  // Full: an upload to a product without an image is refused before its body is stored.
  assertProblem(t, await upload(bare[0]!, png(100)), 409, 'IMAGE_QUOTA_EXCEEDED')
  // A replacement counts its size minus the old one's: 1000 -> 1000 fits, 1000 -> 2000 does not.
  t.equal((await upload(pictured[0]!, png(1000))).statusCode, 200, 'a replacement of the same size fits')
  const bigger = assertProblem(t, await upload(pictured[0]!, png(2000)), 409, 'IMAGE_QUOTA_EXCEEDED')
  t.match(bigger.detail, /5000 bytes/, 'the detail names the quota')
  t.equal(await used(), 5000)
  t.equal((await stored()).length, 5, 'the refused replacement left no file, and the replaced one is gone')

  // Removing an image, or deleting a product with one, frees its bytes.
  t.equal((await send(`${urls[0]}/api/product/${pictured[1]}/image`, { method: 'DELETE', headers: me.auth })).statusCode, 204)
  t.equal((await upload(bare[0]!, png(1000))).statusCode, 201, 'a removed image frees its bytes')
  t.equal((await send(`${urls[1]}/api/product/${pictured[2]}`, { method: 'DELETE', headers: me.auth })).statusCode, 204)
  t.equal((await upload(bare[1]!, png(1000))).statusCode, 201, 'a deleted product frees its image bytes')
  assertProblem(t, await upload(bare[2]!, png(1000)), 409, 'IMAGE_QUOTA_EXCEEDED')
  t.equal(await used(), 5000)
  t.equal((await stored()).length, 5)
})

t.test('sessions per user: a login past the cap ends the least recently used session; concurrent logins never pass it', async (t) => {
  // Password guesses are reserved before the bcrypt work: room for 30 at once.
  const app = await build(t, { env: { SESSIONS_MAX_PER_USER: '3', LOGIN_FAILURES_MAX: '100' } })
  const db = await sqlClient(t, app.databaseUrl)
  const login = async (me: Session) => {
    const res = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: me.username, password: me.password } })
    t.equal(res.statusCode, 200, 'a login past the cap is not refused')
    return res.json() as { token: string, refreshToken: string }
  }
  const works = async (me: Session, token: string) => (await app.inject({ url: `/api/user/${me.id}`, headers: { authorization: `Bearer ${token}` } })).statusCode === 200
  const sessionRows = async (me: Session) => Number((await db.query('SELECT count(*) FROM sessions WHERE user_id = $1', [me.id])).rows[0].count)

  const me = await registerAndLogin(app)
  const b = await login(me)
  const c = await login(me)
  // The first session is used (refreshed) after b and c were made: b is now the least recently used.
  const a = (await app.inject({ method: 'POST', url: '/api/auth/refresh-token', payload: { refreshToken: me.refreshToken } })).json() as { token: string, refreshToken: string }
  const d = await login(me)
  t.equal(await sessionRows(me), 3, 'three session rows')
  t.notOk(await works(me, b.token), 'the least recently used session ended: its access token is refused')
  assertProblem(t, await app.inject({ method: 'POST', url: '/api/auth/refresh-token', payload: { refreshToken: b.refreshToken } }), 401, 'INVALID_REFRESH_TOKEN')
  for (const [name, session] of Object.entries({ a, c, d })) t.ok(await works(me, session.token), `session ${name} still works`)

  // Ended sessions (logout) are deleted by the next login rather than kept.
  t.equal((await app.inject({ method: 'POST', url: '/api/auth/logout', headers: { authorization: `Bearer ${a.token}` } })).statusCode, 204)
  await login(me)
  t.equal(await sessionRows(me), 3)

  // 30 concurrent logins of one user: the cap holds, and the newest sessions are the live ones.
  const burst = await Promise.all(Array.from({ length: 30 }, async () => await login(me)))
  t.equal(await sessionRows(me), 3, 'still three session rows after 30 concurrent logins')
  t.equal(Number((await db.query('SELECT count(*) FROM refresh_tokens r JOIN sessions s ON s.id = r.session_id WHERE s.user_id = $1', [me.id])).rows[0].count), 3, 'and three refresh tokens')
  let live = 0
  for (const session of burst) if (await works(me, session.token)) live += 1
  t.equal(live, 3, 'three of the burst\'s sessions work')
})

t.test('refresh rows: 800 rotations in a burst keep a bounded trail; reuse of a recent rotated token still revokes the session', async (t) => {
  const app = await build(t, { env: { REFRESH_MIN_INTERVAL_MS: '0' }, tuning: { refreshTokensKept: 20 } })
  const db = await sqlClient(t, app.databaseUrl)
  const me = await registerAndLogin(app)
  const refresh = async (refreshToken: string) => await app.inject({ method: 'POST', url: '/api/auth/refresh-token', payload: { refreshToken } })

  const used: string[] = []
  let current = me.refreshToken
  for (let i = 0; i < 800; i++) {
    const res = await refresh(current)
    if (res.statusCode !== 200) { t.fail(`rotation ${i}: ${res.statusCode} ${res.body}`); return }
    used.push(current)
    current = res.json().refreshToken
  }
  const rows = Number((await db.query('SELECT count(*) FROM refresh_tokens WHERE session_id = $1', [me.sid])).rows[0].count)
  t.equal(rows, 21, 'the current token and the 20 most recently rotated ones')

  // A token rotated long ago is forgotten: unknown, and the session lives on.
  assertProblem(t, await refresh(used[0]!), 401, 'INVALID_REFRESH_TOKEN')
  t.equal((await refresh(current)).statusCode, 200, 'the session still rotates')
  // The tenth most recent rotated token (the thief's copy, say) is still recognised.
  assertProblem(t, await refresh(used.at(-10)!), 401, 'REFRESH_TOKEN_REUSED')
  assertProblem(t, await app.inject({ url: `/api/user/${me.id}`, headers: me.auth }), 401, 'UNAUTHORIZED')
})

t.test('REFRESH_MIN_INTERVAL_MS=0: back-to-back rotations are never refused (timestamps are stored to the millisecond, rounded)', async (t) => {
  const app = await build(t, { env: { REFRESH_MIN_INTERVAL_MS: '0' }, tuning: { refreshTokensKept: 5 } })
  const me = await registerAndLogin(app)
  const expiresAt = new Date(Date.now() + 86_400_000)
  let current = hashRefreshToken(me.refreshToken)
  const refused: unknown[] = []
  // The repository straight on the pool: nothing between two statements but a round trip.
  const sessions = sessionsRepository(app.prisma, { ...app.config.auth, refreshTokensKept: 5 })
  for (let i = 0; i < 500; i++) {
    const next = newRefreshToken().hash
    const result = await sessions.rotate(current, next, expiresAt)
    if (typeof result !== 'object' || !('sessionId' in result)) refused.push(result)
    current = next
    if (refused.length > 0) break
  }
  t.same(refused, [], 'every rotation went through')
})

t.test('refresh rate: a session rotates at most once per REFRESH_MIN_INTERVAL_MS; a burst is 429 with Retry-After and the token stays valid', async (t) => {
  const app = await build(t, { env: { REFRESH_MIN_INTERVAL_MS: '60000' } })
  const db = await sqlClient(t, app.databaseUrl)
  const me = await registerAndLogin(app)
  const refresh = async (refreshToken: string) => await app.inject({ method: 'POST', url: '/api/auth/refresh-token', payload: { refreshToken } })
  const rows = async () => Number((await db.query('SELECT count(*) FROM refresh_tokens WHERE session_id = $1', [me.sid])).rows[0].count)

  const first = await refresh(me.refreshToken)
  t.equal(first.statusCode, 200, 'the first refresh after login is not limited')
  const token = first.json().refreshToken as string

  const burst = await Promise.all(Array.from({ length: 50 }, async () => await refresh(token)))
  const body = assertProblem(t, burst[0]!, 429, 'RATE_LIMITED')
  t.match(body.detail, /still valid/)
  const retryAfter = Number(burst[0]!.headers['retry-after'])
  t.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After within the interval (${retryAfter})`)
  t.ok(burst.every((res) => res.statusCode === 429), 'every refresh of the burst is refused')
  t.equal(await rows(), 2, 'no row added')
  t.equal((await app.inject({ url: `/api/user/${me.id}`, headers: me.auth })).statusCode, 200, 'the session is not revoked')

  // Once the interval has passed (the token made a minute ago), the same token rotates.
  await db.query("UPDATE refresh_tokens SET created_at = now() - interval '61 seconds' WHERE session_id = $1", [me.sid])
  const next = await refresh(token)
  t.equal(next.statusCode, 200, 'it rotates after the interval')
  assertProblem(t, await refresh(next.json().refreshToken), 429, 'RATE_LIMITED')
  // Reuse is still reuse, however soon: an earlier token again revokes the session.
  assertProblem(t, await refresh(token), 401, 'REFRESH_TOKEN_REUSED')
})
