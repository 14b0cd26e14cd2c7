/** Parameters and query: param, allParams, paramsInt, queryValue, queries, queryBool/Int/Float. */
import t from 'tap'
import { contextApp } from './request-app.js'

t.test('param: named, optional, wildcard under * and *1, defaults', async (t) => {
  const app = await contextApp(t, (app) => {
    app.get('/users/:id', async (request) => ({ id: request.param('id'), missing: request.param('nope'), dflt: request.param('nope', 'd') }))
    app.get('/opt/:name?', async (request) => ({ name: request.param('name'), dflt: request.param('name', 'anonymous') }))
    app.get('/files/*', async (request) => ({ star: request.param('*'), star1: request.param('*1'), star2: request.param('*2') }))
    app.get('/enc/:v', async (request) => ({ v: request.param('v') }))
  })
  t.same((await app.inject('/users/42')).json(), { id: '42', missing: '', dflt: 'd' })
  t.same((await app.inject('/opt/bob')).json(), { name: 'bob', dflt: 'bob' })
  t.same((await app.inject('/opt/')).json(), { name: '', dflt: 'anonymous' }, 'an absent optional parameter is empty, or the default')
  t.same((await app.inject('/files/a/b/c.txt')).json(), { star: 'a/b/c.txt', star1: 'a/b/c.txt', star2: '' })
  t.same((await app.inject('/files/')).json(), { star: '', star1: '', star2: '' })
  t.same((await app.inject('/enc/a%20b')).json(), { v: 'a b' }, 'decoded')
})

t.test('allParams: every parameter, the wildcard as *1', async (t) => {
  const app = await contextApp(t, (app) => {
    app.get('/:org/repos/:repo/*', async (request) => request.allParams())
  })
  t.same((await app.inject('/acme/repos/web/src/index.ts')).json(), { org: 'acme', repo: 'web', '*1': 'src/index.ts' })
})

t.test('param lookups honour the router\'s case sensitivity (Fastify caseSensitive)', async (t) => {
  const { Type } = await import('typebox')
  const route = (app: import('fastify').FastifyInstance): void => {
    app.get('/users/:userId', async (request) => ({
      exact: request.param('userId'),
      other: request.param('USERID', 'none'),
      int: request.paramsInt('USERID'),
      bound: request.paramsParser(Type.Object({ USERID: Type.Optional(Type.Integer()) }))
    }))
  }
  const insensitive = await contextApp(t, route, {}, { caseSensitive: false })
  t.same((await insensitive.inject('/USERS/42')).json(), { exact: '42', other: '42', int: 42, bound: { USERID: 42 } }, 'caseSensitive: false')
  const sensitive = await contextApp(t, route)
  t.same((await sensitive.inject('/users/42')).json(), { exact: '42', other: 'none', int: 0, bound: {} }, 'caseSensitive (default): exact names only')
})

t.test('case-insensitive lookups follow the router: routerOptions.caseSensitive first, then the deprecated top-level option; several matches give the first in route order', async (t) => {
  const { Type } = await import('typebox')
  const route = (app: import('fastify').FastifyInstance): void => {
    app.get('/users/:userId', async (request) => ({ other: request.param('USERID', 'none'), int: request.paramsInt('USERID') }))
    app.get('/pair/:id/:ID', async (request) => ({
      lower: request.param('id'),
      upper: request.param('ID'),
      mixed: request.param('Id'),
      int: request.paramsInt('ID'),
      bound: request.paramsParser(Type.Object({ ID: Type.Optional(Type.Integer()), Id: Type.Optional(Type.Integer()) }))
    }))
  }
  const routerOptions = await contextApp(t, route, {}, { routerOptions: { caseSensitive: false } })
  t.same((await routerOptions.inject('/USERS/42')).json(), { other: '42', int: 42 }, 'Fastify 5 routerOptions: { caseSensitive: false }')
  // The reference walks the route's parameters in order and takes the first whose name
  // matches case-insensitively, the exact spelling included: :id before :ID.
  t.same((await routerOptions.inject('/pair/1/2')).json(), { lower: '1', upper: '1', mixed: '1', int: 1, bound: { ID: 1, Id: 1 } },
    'several case-insensitive matches: the first in route order, not the exact one')
  const topLevel = await contextApp(t, route, {}, { caseSensitive: false, routerOptions: { ignoreTrailingSlash: true } })
  t.same((await topLevel.inject('/USERS/42/')).json(), { other: '42', int: 42 }, 'routerOptions without caseSensitive: the top-level option, as Fastify reads it')
  const overridden = await contextApp(t, route, {}, { caseSensitive: false, routerOptions: { caseSensitive: true } })
  t.same((await overridden.inject('/users/42')).json(), { other: 'none', int: 0 }, 'routerOptions.caseSensitive wins over the top-level option, as in Fastify')
  t.equal((await overridden.inject('/USERS/42')).statusCode, 404, 'the router is case-sensitive there')
  t.same((await overridden.inject('/pair/1/2')).json(), { lower: '1', upper: '2', mixed: '', int: 2, bound: { ID: 2 } }, 'case-sensitive: exact names only')
})

t.test('paramsInt: integer, 0 when absent, 400-ready error when not a number', async (t) => {
  const app = await contextApp(t, (app) => {
    app.get('/n/:n?', async (request) => ({ n: request.paramsInt('n'), other: request.paramsInt('other') }))
  })
  t.same((await app.inject('/n/42')).json(), { n: 42, other: 0 })
  t.same((await app.inject('/n/-7')).json(), { n: -7, other: 0 })
  t.same((await app.inject('/n/')).json(), { n: 0, other: 0 }, 'absent')
  for (const bad of ['abc', '1.5', '1e3', '0x10', '99999999999999999999']) {
    const response = await app.inject(`/n/${bad}`)
    t.equal(response.statusCode, 400, bad)
    t.equal(response.json().code, 'FST_CONTEXT_PARAM_NOT_INTEGER')
  }
})

t.test('queryValue: last value of a repeated key, default or empty only when absent', async (t) => {
  const app = await contextApp(t, (app) => {
    app.get('/q', async (request) => ({
      a: request.queryValue('a'),
      missing: request.queryValue('missing'),
      dflt: request.queryValue('missing', 'd'),
      empty: request.queryValue('empty', 'd'),
      space: request.queryValue('space'),
      comma: request.queryValue('comma')
    }))
  })
  t.same((await app.inject('/q?a=1&a=2&empty=&space=a+b%20c&comma=x,y')).json(), { a: '2', missing: '', dflt: 'd', empty: '', space: 'a b c', comma: 'x,y' })
})

t.test('queries: last value wins, literal keys, commas kept', async (t) => {
  const app = await contextApp(t, (app) => {
    app.get('/q', async (request) => request.queries())
  })
  const response = await app.inject('/q?id=1&id=2&list[]=a&list[]=b&a.b.c=dot&a[b][c]=bracket&tags=x,y,z&empty=&enc=%C3%A9t%C3%A9&__proto__=p')
  t.same(response.json(), {
    id: '2',
    'list[]': 'b',
    'a.b.c': 'dot',
    'a[b][c]': 'bracket',
    tags: 'x,y,z',
    empty: '',
    enc: 'été',
    ['__proto__']: 'p'
  })
  t.same((await app.inject('/q')).json(), {})
})

t.test('queryBool: false when absent (even with a default); non-boolean or empty gives the default, else false', async (t) => {
  const app = await contextApp(t, (app) => {
    app.get('/b', async (request) => ({ plain: request.queryBool('v'), withTrue: request.queryBool('v', true) }))
  })
  const get = async (query: string): Promise<unknown> => (await app.inject(`/b${query}`)).json()
  t.same(await get(''), { plain: false, withTrue: false }, 'absent')
  for (const v of ['true', 'True', 'TRUE', 't', 'T', '1']) t.same(await get(`?v=${v}`), { plain: true, withTrue: true }, v)
  for (const v of ['false', 'False', 'FALSE', 'f', 'F', '0']) t.same(await get(`?v=${v}`), { plain: false, withTrue: false }, v)
  t.same(await get('?v=yes'), { plain: false, withTrue: true }, 'non-boolean')
  t.same(await get('?v='), { plain: false, withTrue: true }, 'empty')
  t.same(await get('?v=true&v=no'), { plain: false, withTrue: true }, 'last value')
})

t.test('queryInt: default (else 0) when absent, empty or not an integer', async (t) => {
  const app = await contextApp(t, (app) => {
    app.get('/i', async (request) => ({ plain: request.queryInt('v'), dflt: request.queryInt('v', 7) }))
  })
  const get = async (query: string): Promise<unknown> => (await app.inject(`/i${query}`)).json()
  t.same(await get(''), { plain: 0, dflt: 7 }, 'absent')
  t.same(await get('?v=42'), { plain: 42, dflt: 42 })
  t.same(await get('?v=-3'), { plain: -3, dflt: -3 })
  t.same(await get('?v=%2B3'), { plain: 3, dflt: 3 })
  t.same(await get('?v=+3'), { plain: 0, dflt: 7 }, 'a + in a query is a space')
  t.same(await get('?v='), { plain: 0, dflt: 7 }, 'empty')
  for (const v of ['abc', '1.5', '1e3', '0x10', '%2012', '99999999999999999999']) t.same(await get(`?v=${v}`), { plain: 0, dflt: 7 }, v)
})

t.test('queryFloat: default (else 0) when absent, empty or not a number', async (t) => {
  const app = await contextApp(t, (app) => {
    app.get('/f', async (request) => ({ plain: request.queryFloat('v'), dflt: request.queryFloat('v', 2.5) }))
  })
  const get = async (query: string): Promise<unknown> => (await app.inject(`/f${query}`)).json()
  t.same(await get(''), { plain: 0, dflt: 2.5 }, 'absent')
  t.same(await get('?v=1.25'), { plain: 1.25, dflt: 1.25 })
  t.same(await get('?v=-.5'), { plain: -0.5, dflt: -0.5 })
  t.same(await get('?v=2e3'), { plain: 2000, dflt: 2000 })
  t.same(await get('?v=7'), { plain: 7, dflt: 7 })
  t.same(await get('?v='), { plain: 0, dflt: 2.5 }, 'empty')
  for (const v of ['abc', 'NaN', 'Infinity', '1.2.3', '0x10']) t.same(await get(`?v=${v}`), { plain: 0, dflt: 2.5 }, v)
})
