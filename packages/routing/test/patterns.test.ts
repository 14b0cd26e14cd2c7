/** Path patterns: the pattern table of the README, each form matching and not matching, through real requests. */
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import t from 'tap'
import routing, { compilePattern, matchCompiled, parsePattern, RouteParamDecodeError, RoutePatternError } from '@user-product-service/routing'

interface Case {
  pattern: string
  matches: Array<[string, Record<string, string>]>
  misses: string[]
}

/** One row per pattern form of the README's table, plus the compiled combinations. */
const TABLE: Case[] = [
  {
    pattern: '/literal',
    matches: [['/literal', {}]],
    misses: ['/literal/x', '/literalx', '/Literal']
  },
  {
    pattern: '/user/:name',
    matches: [['/user/ann', { name: 'ann' }], ['/user/a%20b', { name: 'a b' }]],
    misses: ['/user', '/user/', '/user/ann/more']
  },
  {
    pattern: '/opt/:name?',
    matches: [['/opt/ann', { name: 'ann' }], ['/opt', { name: '' }], ['/opt/', { name: '' }]],
    misses: ['/opt/a/b']
  },
  {
    pattern: '/files/*',
    matches: [['/files/a.txt', { '*': 'a.txt', '*1': 'a.txt' }], ['/files/a/b/c.txt', { '*': 'a/b/c.txt', '*1': 'a/b/c.txt' }], ['/files/', { '*': '', '*1': '' }], ['/files', { '*': '', '*1': '' }]],
    misses: ['/filesx/a', '/filesx']
  },
  {
    pattern: '/v1/*/shop/*',
    matches: [
      ['/v1/a/shop/b', { '*': 'a', '*1': 'a', '*2': 'b' }],
      ['/v1/a/b/shop/c/d', { '*': 'a/b', '*1': 'a/b', '*2': 'c/d' }],
      ['/v1//shop/', { '*': '', '*1': '', '*2': '' }]
    ],
    misses: ['/v1/a/b', '/v1/a/store/b', '/v2/a/shop/b']
  },
  {
    pattern: '/plus/+',
    matches: [['/plus/a', { '*': 'a', '*1': 'a' }], ['/plus/a/b', { '*': 'a/b', '*1': 'a/b' }]],
    misses: ['/plus/', '/plus']
  },
  {
    pattern: '/mix/+/:name/*.txt',
    matches: [['/mix/a/b/ann/x.txt', { '*': 'a/b', '*1': 'a/b', name: 'ann', '*2': 'x' }], ['/mix/a/ann/.txt', { '*': 'a', '*1': 'a', name: 'ann', '*2': '' }]],
    misses: ['/mix//ann/x.txt', '/mix/a/ann/x.json', '/mix/a/x.txt']
  },
  {
    pattern: '/mid/:a?/end',
    matches: [['/mid/x/end', { a: 'x' }], ['/mid/end', { a: '' }]],
    misses: ['/mid/x/y/end', '/mid/x']
  },
  // Cases of the reference (Fiber v2): optional parameters take a trailing slash; `*` before an
  // optional parameter leaves it the last segment; several parameters in one segment split
  // at the first separator; an escaped colon after a parameter.
  {
    pattern: '/days/:day/:month?/:year?',
    matches: [
      ['/days/1', { day: '1', month: '', year: '' }],
      ['/days/1/', { day: '1', month: '', year: '' }],
      ['/days/1//', { day: '1', month: '', year: '' }],
      ['/days/1/-/', { day: '1', month: '-', year: '' }],
      ['/days/1-', { day: '1-', month: '', year: '' }],
      ['/days/1/2', { day: '1', month: '2', year: '' }],
      ['/days/1/2/3', { day: '1', month: '2', year: '3' }]
    ],
    misses: ['/days/', '/days', '/days/1/2/3/4']
  },
  {
    pattern: '/dots/:day.:month?.:year?',
    matches: [['/dots/1..', { day: '1', month: '', year: '' }], ['/dots/1.2.', { day: '1', month: '2', year: '' }], ['/dots/1.2.3', { day: '1', month: '2', year: '3' }]],
    misses: ['/dots/1', '/dots/1.', '/dots/1.2', '/dots/']
  },
  {
    pattern: '/joker/*/:param?',
    matches: [
      ['/joker/', { '*': '', '*1': '', param: '' }],
      ['/joker/joker', { '*': 'joker', '*1': 'joker', param: '' }],
      ['/joker/joker/batman', { '*': 'joker', '*1': 'joker', param: 'batman' }],
      ['/joker/joker//batman', { '*': 'joker/', '*1': 'joker/', param: 'batman' }],
      ['/joker/joker/batman/robin/1', { '*': 'joker/batman/robin', '*1': 'joker/batman/robin', param: '1' }],
      ['/joker/joker/batman/robin/1/', { '*': 'joker/batman/robin/1', '*1': 'joker/batman/robin/1', param: '' }],
      ['/joker/joker-batman-robin-1', { '*': 'joker-batman-robin-1', '*1': 'joker-batman-robin-1', param: '' }]
    ],
    misses: ['/jokerx']
  },
  {
    pattern: '/star/*/:param',
    matches: [['/star/joker/batman/robin', { '*': 'joker/batman', '*1': 'joker/batman', param: 'robin' }]],
    misses: ['/star/joker-batman', '/star']
  },
  {
    pattern: '/pair/:param-:param2',
    matches: [['/pair/entity-entity2', { param: 'entity', param2: 'entity2' }], ['/pair/a-b-c', { param: 'a', param2: 'b-c' }]],
    misses: ['/pair/entity', '/pair/entity-', '/pair/-x', '/pair/a/b-c']
  },
  {
    pattern: '/file/:filename.:extension',
    matches: [['/file/test.pdf', { filename: 'test', extension: 'pdf' }], ['/file/a.tar.gz', { filename: 'a', extension: 'tar.gz' }]],
    misses: ['/file/test-pdf', '/file/test/pdf', '/file/test']
  },
  {
    pattern: '/ver/v:major.:minor',
    matches: [['/ver/v1.2', { major: '1', minor: '2' }], ['/ver/v10.20.3', { major: '10', minor: '20.3' }]],
    misses: ['/ver/1.2', '/ver/v1', '/ver/v.2']
  },
  {
    pattern: '/verb/:name\\:customVerb',
    matches: [['/verb/test:customVerb', { name: 'test' }]],
    misses: ['/verb/test:test', '/verb/test']
  },
  {
    pattern: '/verb2/:name::customVerb',
    matches: [['/verb2/test:customVerb', { name: 'test' }]],
    misses: ['/verb2/test:test']
  },
  {
    pattern: '/colon/\\::param?',
    matches: [['/colon/:hello', { param: 'hello' }], ['/colon/:', { param: '' }]],
    misses: ['/colon/', '/colon/hello']
  },
  {
    pattern: '/foo:param?bar',
    matches: [['/foofaselbar', { param: 'fasel' }], ['/foobar', { param: '' }]],
    misses: ['/fooba', '/fobar']
  },
  {
    pattern: '/enc/+',
    matches: [['/enc/%C3%A9t%C3%A9', { '*': 'été', '*1': 'été' }], ['/enc/a%2Fb', { '*': 'a/b', '*1': 'a/b' }]],
    misses: []
  }
]

async function tableApp (t: { teardown: (fn: () => unknown) => void }, prefix = ''): Promise<FastifyInstance> {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(routing)
  await app.register(async (scope) => {
    for (const { pattern } of TABLE) {
      scope.get(pattern, async (request) => ({ pattern, params: request.params }))
    }
  }, { prefix })
  await app.ready()
  return app
}

t.test('pattern table: each form matches with its params and refuses what it should', async (t) => {
  const app = await tableApp(t)
  for (const { pattern, matches, misses } of TABLE) {
    for (const [url, params] of matches) {
      const response = await app.inject(url)
      t.equal(response.statusCode, 200, `${pattern} matches ${url}`)
      t.same(response.json(), { pattern, params }, `${pattern} params for ${url}`)
    }
    for (const url of misses) {
      const response = await app.inject(url)
      t.not(response.statusCode === 200 && response.json().pattern === pattern, true, `${pattern} does not match ${url}`)
    }
  }
})

t.test('pattern table under a prefix; HEAD works for compiled patterns', async (t) => {
  const app = await tableApp(t, '/api')
  const response = await app.inject('/api/v1/a/shop/b')
  t.same(response.json().params, { '*': 'a', '*1': 'a', '*2': 'b' })
  t.equal((await app.inject('/v1/a/shop/b')).statusCode, 404)
  const head = await app.inject({ method: 'HEAD', url: '/api/plus/x' })
  t.equal(head.statusCode, 200)
  t.equal((await app.inject({ method: 'HEAD', url: '/api/plus/' })).statusCode, 404)
})

t.test('compiled patterns sit beside native routes: static beats param beats wildcard, no match is 404', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(routing)
  app.get('/shop/special', async () => 'static')
  app.get('/shop/:id', async () => 'param')
  app.get('/shop/+/items', async () => 'compiled items')
  app.get('/shop/+/orders', async () => 'compiled orders')
  app.get('/shop/*', async () => 'wildcard fallback')
  app.get('/other/+/x', async () => 'other')
  await app.ready()
  t.equal((await app.inject('/shop/special')).body, 'static')
  t.equal((await app.inject('/shop/7')).body, 'param')
  t.equal((await app.inject('/shop/7/items')).body, 'compiled items')
  t.equal((await app.inject('/shop/7/orders')).body, 'compiled orders')
  t.equal((await app.inject('/shop/7/8/items')).body, 'compiled items')
  t.equal((await app.inject('/shop/7/reviews')).body, 'wildcard fallback', 'no pattern matches: the plain wildcard route')
  t.equal((await app.inject('/other/a/y')).statusCode, 404, 'no pattern and no fallback: 404')
})

t.test('router options reach compiled patterns as they reach native ones', async (t) => {
  const app = Fastify({ routerOptions: { caseSensitive: false, ignoreTrailingSlash: true, ignoreDuplicateSlashes: true } })
  t.teardown(() => app.close())
  await app.register(routing)
  app.get('/Shop/+/Items', async (request) => request.params)
  app.get('/Native/:id', async (request) => request.params)
  app.get('/days/:day/:month?/:year?', async (request) => request.params)
  await app.ready()
  const cases: Array<[string, Record<string, string>]> = [
    ['/native/AbC/', { id: 'AbC' }], // find-my-way itself
    ['/shop/AbC/items', { '*1': 'AbC', '*': 'AbC' }], // caseSensitive: false, values keep their case
    ['/SHOP/a/b/ITEMS/', { '*1': 'a/b', '*': 'a/b' }], // ignoreTrailingSlash
    ['//shop//a/items', { '*1': 'a', '*': 'a' }], // ignoreDuplicateSlashes
    ['/days/1/2/', { day: '1', month: '2', year: '' }]
  ]
  for (const [url, params] of cases) {
    const response = await app.inject(url)
    t.equal(response.statusCode, 200, url)
    t.same(response.json(), params, `params of ${url}`)
  }
  t.equal((await app.inject({ method: 'POST', url: '/shop/a/items/' })).headers.allow, 'GET, HEAD, OPTIONS', '405 check normalizes the same way')
})

t.test('a parameter that is not valid percent-encoding is a 400', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(routing)
  app.get('/bad/+', async (request) => request.params)
  await app.ready()
  const response = await app.inject('/bad/%E0%A4%A')
  t.equal(response.statusCode, 400, "find-my-way refuses it before the pattern's own decoding")
  // The pattern's decoding refuses it too, for a path that reached it another way.
  const compiled = compilePattern(parsePattern('/bad/+'))
  t.throws(() => matchCompiled(compiled, '/bad/%E0%A4%A'), RouteParamDecodeError)
  t.same(matchCompiled(compiled, '/bad/%C3%A9'), { '*1': 'é', '*': 'é' })
  t.equal(matchCompiled(compiled, '/bad/'), undefined)
})

t.test('required parameters do not match an empty segment', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(routing)
  app.get('/u/:name/x', async (request) => request.params)
  await app.ready()
  t.equal((await app.inject('/u//x')).statusCode, 404)
  t.same((await app.inject('/u/a/x')).json(), { name: 'a' })
})

t.test('routes registered before the plugin are left alone; the plugin sees later ones', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  app.get('/early/:name?', async (request) => request.params)
  await app.register(routing)
  app.get('/late/:name?', async (request) => request.params)
  await app.ready()
  t.same((await app.inject('/early')).json(), {}, 'plain Fastify: absent optional is missing')
  t.same((await app.inject('/late')).json(), { name: '' })
})

t.test('parsePattern: native or compiled, and the patterns it refuses', async (t) => {
  t.equal(parsePattern('/a/:b').native, true)
  t.equal(parsePattern('/a/:b?').native, true)
  t.equal(parsePattern('/a/*').native, true)
  t.equal(parsePattern('/a/:id(^\\d+)').native, true)
  t.equal(parsePattern('/a::b').native, true, 'escaped colon')
  t.equal(parsePattern('/a/+').native, false)
  t.equal(parsePattern('/a/*/b').native, false)
  t.equal(parsePattern('/a/:b?/c').native, false)
  t.throws(() => parsePattern('/a/:/b'), RoutePatternError)
  t.throws(() => parsePattern('/a/:x/:x'), RoutePatternError)
  t.throws(() => parsePattern('/a/:id(^\\d+)/+'), RoutePatternError, 'regex params are not compiled')
  t.throws(() => parsePattern('/a/:id(\\d+'), RoutePatternError)

  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(routing)
  t.throws(() => app.get('/x/:a/:a', async () => 'x'), RoutePatternError, 'refused at registration')
})

t.test('patterns that could never match are refused at registration, with the reason', async (t) => {
  const refused: Array<[string, RegExp]> = [
    ['/a/:first:second', /"first" is followed by another parameter without a separator/],
    ['/a/:first:second?', /"first" is followed by another parameter without a separator/],
    ['/a/:name*', /"name" is followed by another parameter without a separator/],
    ['/a/:name+', /"name" is followed by another parameter without a separator/],
    ['/a/:id<int>', /constraints \(":id<\.\.\.>"\) are not supported/],
    ['/a/:id<int>?', /constraints/],
    ['/a/:id<min(5)>/b', /constraints/]
  ]
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(routing)
  for (const [pattern, reason] of refused) {
    t.throws(() => app.get(pattern, async () => 'x'), { code: 'FST_ROUTING_INVALID_PATTERN', message: reason }, pattern)
  }
  // A regular expression delimits its parameter, so find-my-way's `:a(regex):b` stays allowed.
  app.get('/re/:hour(^\\d{2})h:minute(^\\d{2})m', async (request) => request.params)
  app.get('/re2/:a(^\\d+):b', async (request) => request.params)
  await app.ready()
  t.same((await app.inject('/re/12h30m')).json(), { hour: '12', minute: '30' })
  t.same((await app.inject('/re2/12x')).json(), { a: '12', b: 'x' })
})

t.test('a route / under a prefix is exact by default: the prefix alone, not also the prefix with a slash', async (t) => {
  async function prefixApp (t: { teardown: (fn: () => unknown) => void }, fastify: FastifyServerOptions = {}): Promise<FastifyInstance> {
    const app = Fastify(fastify)
    t.teardown(() => app.close())
    await app.register(routing)
    await app.register(async (scope) => {
      scope.get('/', async () => 'root')
      scope.post('/', async () => 'created')
      scope.get('/*', async (request) => ({ wildcard: request.params }))
    }, { prefix: '/foo' })
    await app.register(async (scope) => {
      scope.get('/', async (request) => request.params)
    }, { prefix: '/users/:id' })
    await app.register(async (scope) => {
      scope.get('/', async () => 'slashed prefix')
    }, { prefix: '/bar/' })
    await app.register(async (scope) => {
      scope.get('/', { prefixTrailingSlash: 'both' }, async () => 'both')
      scope.get('/x/', async () => 'x') // not a root: its own path, exact
    }, { prefix: '/opt-in' })
    await app.register(async (scope) => {
      scope.get('/', { prefixTrailingSlash: 'slash' }, async () => 'slash only')
    }, { prefix: '/slash' })
    await app.ready()
    return app
  }
  const app = await prefixApp(t)
  const answer = async (method: 'GET' | 'HEAD' | 'POST' | 'PUT', url: string): Promise<string> => {
    const response = await app.inject({ method, url })
    return `${response.statusCode} ${response.body}`
  }
  t.equal(await answer('GET', '/foo'), '200 root')
  t.equal(await answer('GET', '/foo/'), '200 {"wildcard":{"*":"","*1":""}}', '/foo/ is not the root route: the prefix\'s wildcard takes it, with an empty rest')
  t.equal(await answer('HEAD', '/foo'), '200 ')
  t.equal(await answer('POST', '/foo'), '200 created')
  t.equal((await app.inject({ method: 'POST', url: '/foo/' })).statusCode, 405, 'POST /foo/: only the wildcard (GET, HEAD) has that path')
  t.equal((await app.inject({ method: 'POST', url: '/foo/' })).headers.allow, 'GET, HEAD, OPTIONS')
  t.equal(await answer('GET', '/users/7'), '200 {"id":"7"}', 'a parameter in the prefix')
  t.equal((await app.inject('/users/7/')).statusCode, 404)
  t.equal(await answer('GET', '/bar/'), '200 slashed prefix', 'a prefix written with its slash is that path')
  t.equal((await app.inject('/bar//')).statusCode, 404)
  t.equal((await app.inject('/bar')).statusCode, 404)
  t.equal(await answer('GET', '/opt-in'), '200 both', 'prefixTrailingSlash: both, asked for, gives both')
  t.equal(await answer('GET', '/opt-in/'), '200 both')
  t.equal((await app.inject('/opt-in/x')).statusCode, 404, 'a non-root route keeps its own exact path')
  t.equal(await answer('GET', '/slash/'), '200 slash only', 'prefixTrailingSlash: slash')
  t.equal((await app.inject('/slash')).statusCode, 404)
  t.equal(await answer('HEAD', '/slash/'), '200 ')

  const lenient = await prefixApp(t, { routerOptions: { ignoreTrailingSlash: true } })
  t.equal((await lenient.inject('/foo/')).body, 'root', 'ignoreTrailingSlash: true (the service\'s setting) keeps both, as for every route')
  t.equal((await lenient.inject('/users/7/')).statusCode, 200)
})

t.test('/prefix/* also matches the bare /prefix (the rest is empty), beside the routes an app names there itself', async (t) => {
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(routing)
  app.get('/files/*', { config: { name: 'files' } }, async (request) => ({ files: request.params }))
  app.get('/users/:id/*', async (request) => ({ user: request.params }))
  app.route({ method: ['GET', 'POST'], url: '/both/*', handler: async (request) => `${request.method} ${(request.params as Record<string, string>)['*']}` })
  app.get('/docs', async () => 'docs before') // a route of its own at the bare path, before the wildcard...
  app.get('/docs/*', async () => 'docs wildcard')
  app.get('/pages/*', async () => 'pages wildcard')
  app.get('/pages', async () => 'pages after') // ...and after it
  await app.register(async (scope) => {
    scope.get('/*', async (request) => ({ scoped: request.params }))
  }, { prefix: '/scoped' })
  await app.ready()
  const body = async (url: string, method: 'GET' | 'HEAD' | 'POST' = 'GET'): Promise<string> => {
    const response = await app.inject({ method, url })
    return `${response.statusCode} ${response.body}`
  }
  t.equal(await body('/files'), '200 {"files":{"*":"","*1":""}}', '/files: the wildcard with an empty rest')
  t.equal(await body('/files?x=1'), '200 {"files":{"*":"","*1":""}}')
  t.equal(await body('/files/'), '200 {"files":{"*":"","*1":""}}')
  t.equal(await body('/files/a/b'), '200 {"files":{"*":"a/b","*1":"a/b"}}')
  t.equal(await body('/files', 'HEAD'), '200 ', 'HEAD too')
  t.equal((await app.inject({ method: 'DELETE', url: '/files' })).headers.allow, 'GET, HEAD, OPTIONS', '405 knows the bare path')
  t.equal(await body('/filesx'), '404 {"message":"Route GET:/filesx not found","error":"Not Found","statusCode":404}')
  t.equal(await body('/users/7'), '200 {"user":{"id":"7","*":"","*1":""}}', 'parameters before the wildcard')
  t.equal(await body('/both', 'POST'), '200 POST ', 'every method of the route')
  t.equal(await body('/docs'), '200 docs before', 'an app route at the bare path wins, registered before the wildcard...')
  t.equal(await body('/pages'), '200 pages after', '... or after it')
  t.equal(await body('/pages/'), '200 pages wildcard')
  t.equal(await body('/scoped'), '200 {"scoped":{"*":"","*1":""}}', 'under a prefix')
  t.equal(app.getRouteURL('files', { '*': 'a' }), '/files/a', 'the route name stays the wildcard route\'s')
})
