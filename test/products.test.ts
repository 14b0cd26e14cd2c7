import t from 'tap'
import { assertProblem } from './helpers/assertions.js'
import { build, injectAs, registerAndLogin } from './helpers/build.js'
import { sqlClient } from './helpers/database.js'

const lamp = { title: 'Desk lamp', description: 'Warm light', amount: 2599 }

t.test('POST /api/product', async (t) => {
  const app = await build(t)
  const me = await registerAndLogin(app)

  t.test('creates with the creator recorded', async (t) => {
    const res = await injectAs(app, me, { method: 'POST', url: '/api/product', payload: lamp })
    t.equal(res.statusCode, 201)
    t.match(res.json(), { ...lamp, creatorId: me.id, id: Number })
    t.match(res.json().createdAt, /^\d{4}-\d\d-\d\dT/)
  })
  t.test('description is optional', async (t) => {
    const res = await injectAs(app, me, { method: 'POST', url: '/api/product', payload: { title: 'Pen', amount: 0 } })
    t.equal(res.statusCode, 201)
    t.equal(res.json().description, '')
  })
  t.test('without a token: 401 and nothing written', async (t) => {
    const db = await sqlClient(t, app.databaseUrl)
    const before = (await db.query('SELECT count(*)::int AS n FROM products')).rows[0].n
    assertProblem(t, await app.inject({ method: 'POST', url: '/api/product', payload: lamp }), 401, 'UNAUTHORIZED')
    t.equal((await db.query('SELECT count(*)::int AS n FROM products')).rows[0].n, before)
  })
  t.test('bad bodies: 400 and nothing written', async (t) => {
    const db = await sqlClient(t, app.databaseUrl)
    const before = (await db.query('SELECT count(*)::int AS n FROM products')).rows[0].n
    const bodies = [
      {}, { title: 'x' }, { amount: 1 }, { ...lamp, title: '' }, { ...lamp, title: 'x'.repeat(201) },
      { ...lamp, amount: '25' }, { ...lamp, amount: 2.5 }, { ...lamp, amount: -1 }, { ...lamp, amount: 2 ** 31 },
      { ...lamp, creatorId: 1 }, { ...lamp, id: 1 }, { ...lamp, ownerId: 2 }, { ...lamp, createdAt: 'now' }, { ...lamp, description: 7 }
    ]
    for (const payload of bodies) {
      assertProblem(t, await injectAs(app, me, { method: 'POST', url: '/api/product', payload }), 400, 'VALIDATION_FAILED')
    }
    t.equal((await db.query('SELECT count(*)::int AS n FROM products')).rows[0].n, before)
  })
})

t.test('GET /api/product and /api/product/:id', async (t) => {
  const app = await build(t)
  const me = await registerAndLogin(app)
  const ids: number[] = []
  for (let i = 0; i < 25; i++) {
    ids.push((await injectAs(app, me, { method: 'POST', url: '/api/product', payload: { ...lamp, title: `Lamp ${i}` } })).json().id)
  }

  t.test('public, paginated: default 20, then the rest by cursor', async (t) => {
    const first = await app.inject({ method: 'GET', url: '/api/product' })
    t.equal(first.statusCode, 200)
    t.equal(first.json().items.length, 20)
    t.same(first.json().items.map((p: { id: number }) => p.id), ids.slice(0, 20))
    const cursor = first.json().nextCursor
    t.equal(cursor, ids[19])
    const second = await app.inject({ method: 'GET', url: `/api/product?cursor=${cursor}` })
    t.same(second.json().items.map((p: { id: number }) => p.id), ids.slice(20))
    t.equal(second.json().nextCursor, null, 'last page')
  })
  t.test('limit between 1 and 100', async (t) => {
    t.equal((await app.inject({ method: 'GET', url: '/api/product?limit=5' })).json().items.length, 5)
    t.equal((await app.inject({ method: 'GET', url: '/api/product?limit=100' })).json().items.length, 25)
    for (const q of ['limit=0', 'limit=101', 'limit=abc', 'cursor=-1', 'cursor=x', 'limit=1.5', 'unknown=1']) {
      assertProblem(t, await app.inject({ method: 'GET', url: `/api/product?${q}` }), 400, 'VALIDATION_FAILED')
    }
  })
  t.test('one product, public', async (t) => {
    const res = await app.inject({ method: 'GET', url: `/api/product/${ids[3]}` })
    t.equal(res.statusCode, 200)
    t.match(res.json(), { id: ids[3], title: 'Lamp 3', creatorId: me.id })
  })
  t.test('unknown id 404, bad id 400', async (t) => {
    assertProblem(t, await app.inject({ method: 'GET', url: '/api/product/2147483647' }), 404, 'NOT_FOUND')
    for (const id of ['abc', '0', '-3', '2147483648', '1e3']) {
      assertProblem(t, await app.inject({ method: 'GET', url: `/api/product/${id}` }), 400, 'VALIDATION_FAILED')
    }
  })
})

t.test('GET /api/product: newest first, search by title, one user\'s products, each paged by cursor', async (t) => {
  const app = await build(t)
  const [ann, bob] = [await registerAndLogin(app), await registerAndLogin(app)]
  const titles = ['Desk lamp', 'Floor LAMP', 'Chair', '100% wool rug', 'Lamp_shade', 'Table lamp', 'Back\\slash lamp']
  const made: Array<{ id: number, title: string, creatorId: number }> = []
  for (const [i, title] of titles.entries()) {
    made.push((await injectAs(app, i % 2 === 0 ? ann : bob, { method: 'POST', url: '/api/product', payload: { title, amount: 100 + i } })).json())
  }
  const list = async (query: string): Promise<{ ids: number[], nextCursor: number | null }> => {
    const res = await app.inject(`/api/product?${query}`)
    t.equal(res.statusCode, 200, query)
    return { ids: res.json().items.map((p: { id: number }) => p.id), nextCursor: res.json().nextCursor }
  }
  const ids = (keep: (p: typeof made[number]) => boolean): number[] => made.filter(keep).map((p) => p.id)
  /** Every page of `query`, following nextCursor. */
  const all = async (query: string): Promise<number[]> => {
    const seen: number[] = []
    let cursor: number | null = null
    do {
      const page = await list(`${query}&limit=2${cursor === null ? '' : `&cursor=${cursor}`}`)
      seen.push(...page.ids)
      cursor = page.nextCursor
    } while (cursor !== null)
    return seen
  }

  t.same((await list('sort=newest')).ids, ids(() => true).reverse(), 'newest first')
  t.same(await all('sort=newest'), ids(() => true).reverse(), 'and page after page, by cursor')
  t.same(await all('sort=oldest'), ids(() => true), 'oldest first, the default order')
  t.same(await all('q=lamp&sort=newest'), ids((p) => /lamp/i.test(p.title)).reverse(), 'title contains "lamp", any case')
  t.same((await list('q=%25')).ids, ids((p) => p.title.includes('%')), '% is a plain character')
  t.same((await list('q=_')).ids, ids((p) => p.title.includes('_')), '_ is a plain character')
  t.same((await list('q=%5C')).ids, ids((p) => p.title.includes('\\')), 'and so is a backslash')
  t.same((await list('q=nothing-like-it')).ids, [], 'no match: an empty page')
  t.same(await all(`creatorId=${bob.id}`), ids((p) => p.creatorId === bob.id), 'one user\'s products')
  t.same(await all(`creatorId=${ann.id}&q=LAMP&sort=newest`), ids((p) => p.creatorId === ann.id && /lamp/i.test(p.title)).reverse(), 'filters combine')

  for (const query of ['sort=random', 'q=', `q=${'x'.repeat(101)}`, 'creatorId=0', 'creatorId=x']) {
    assertProblem(t, await app.inject(`/api/product?${query}`), 400, 'VALIDATION_FAILED')
  }
  for (const query of ['q=lamp', `creatorId=${ann.id}`, 'sort=newest']) {
    const res = await app.inject({ url: `/api/product?${query}`, headers: { accept: 'text/csv' } })
    assertProblem(t, res, 400, 'VALIDATION_FAILED')
    t.match(res.json().detail, /JSON list only/, `CSV with ${query}: the filter is named`)
  }
  t.equal((await app.inject({ url: '/api/product?sort=oldest', headers: { accept: 'text/csv' } })).statusCode, 200, 'the CSV order itself is fine')

  t.test('the search is served by the title\'s trigram index', async (t) => {
    const db = await sqlClient(t, app.databaseUrl)
    await db.query('SET enable_seqscan = off')
    const plan = (await db.query("EXPLAIN SELECT id FROM products WHERE title ILIKE '%lamp%'")).rows.map((row) => row['QUERY PLAN']).join('\n')
    t.match(plan, /products_title_trgm/, plan)
  })
})

t.test('DELETE /api/product/:id', async (t) => {
  const app = await build(t)
  const owner = await registerAndLogin(app)
  const other = await registerAndLogin(app)
  const create = async () => (await injectAs(app, owner, { method: 'POST', url: '/api/product', payload: lamp })).json().id as number

  t.test('by the creator: 204, then gone', async (t) => {
    const id = await create()
    const res = await injectAs(app, owner, { method: 'DELETE', url: `/api/product/${id}` })
    t.equal(res.statusCode, 204)
    assertProblem(t, await app.inject({ method: 'GET', url: `/api/product/${id}` }), 404, 'NOT_FOUND')
    assertProblem(t, await injectAs(app, owner, { method: 'DELETE', url: `/api/product/${id}` }), 404, 'NOT_FOUND')
  })
  t.test('by another user: 403, and it stays', async (t) => {
    const id = await create()
    assertProblem(t, await injectAs(app, other, { method: 'DELETE', url: `/api/product/${id}` }), 403, 'FORBIDDEN')
    t.equal((await app.inject({ method: 'GET', url: `/api/product/${id}` })).statusCode, 200)
  })
  t.test('without a token: 401; bad id: 400', async (t) => {
    const id = await create()
    assertProblem(t, await app.inject({ method: 'DELETE', url: `/api/product/${id}` }), 401, 'UNAUTHORIZED')
    assertProblem(t, await injectAs(app, owner, { method: 'DELETE', url: '/api/product/nope' }), 400, 'VALIDATION_FAILED')
  })
})
