/** Response writing: Redirect, RedirectToRoute, RedirectBack (a redirect without a status is 302). */
import t from 'tap'
import routing from '@user-product-service/routing'
import { replyApp } from './reply-app.js'

t.test('redirect: native reply.redirect, 302 by default, Location set, status when given', async (t) => {
  const app = await replyApp(t, (app) => {
    app.post('/default', async (_request, reply) => reply.redirect('/target'))
    app.post('/see-other', async (_request, reply) => reply.redirect('/target', 303))
    app.post('/keep-method', async (_request, reply) => reply.redirect('/target', 307))
  })
  const found = await app.inject({ method: 'POST', url: '/default' })
  t.equal(found.statusCode, 302)
  t.equal(found.headers.location, '/target')
  t.equal(found.body, '')
  t.equal((await app.inject({ method: 'POST', url: '/see-other' })).statusCode, 303)
  t.equal((await app.inject({ method: 'POST', url: '/keep-method' })).statusCode, 307)
})

t.test('redirectToRoute: the named route URL, queries as a query string, 302 unless given', async (t) => {
  const app = await replyApp(t, async (app) => {
    await app.register(routing)
    app.get('/users/:id/files/*', { config: { name: 'user-file' } }, async () => 'file')
    app.get('/*', { config: { name: 'root-wildcard' } }, async (request) => (request.params as Record<string, string>)['*'])
    app.get('/search', { config: { name: 'search' } }, async () => 'search')
    app.get('/go', async (request, reply) => {
      const { to } = request.query as { to: string }
      switch (to) {
        case 'file': return reply.redirectToRoute('user-file', { id: 'a b', '*': 'docs/x y.txt' })
        case 'query': return reply.redirectToRoute('search', { queries: { q: 'a&b c', page: 2 } }, 301)
        case 'empty-query': return reply.redirectToRoute('search', { queries: {} })
        case 'plus': return reply.redirectToRoute('user-file', { id: '7', '+': 'a/b.txt' })
        case 'plus1': return reply.redirectToRoute('user-file', { id: '7', '+1': 'c.txt' })
        case 'star1': return reply.redirectToRoute('user-file', { id: '7', '*1': 'd.txt' })
        case 'evil': return reply.redirectToRoute('root-wildcard', { '*': (request.query as { v: string }).v })
        case 'unknown': return reply.redirectToRoute('nope', {})
        case 'missing': return reply.redirectToRoute('user-file', {})
        default: return reply.redirectToRoute('search', {}, 200)
      }
    })
  })
  const file = await app.inject({ url: '/go', query: { to: 'file' } })
  t.equal(file.statusCode, 302)
  t.equal(file.headers.location, '/users/a%20b/files/docs/x%20y.txt')
  const query = await app.inject({ url: '/go', query: { to: 'query' } })
  t.equal(query.statusCode, 301)
  t.equal(query.headers.location, '/search?q=a%26b+c&page=2')
  t.equal((await app.inject({ url: '/go', query: { to: 'empty-query' } })).headers.location, '/search')

  t.equal((await app.inject({ url: '/go', query: { to: 'plus' } })).headers.location, '/users/7/files/a/b.txt', '+ names the wildcard')
  t.equal((await app.inject({ url: '/go', query: { to: 'plus1' } })).headers.location, '/users/7/files/c.txt', '+1 too')
  t.equal((await app.inject({ url: '/go', query: { to: 'star1' } })).headers.location, '/users/7/files/d.txt', 'and *1')

  // A wildcard value must not turn the Location into a protocol-relative URL (another host).
  for (const [v, location] of [
    ['/evil.example', '/%2Fevil.example'],
    ['/evil.example/x', '/%2Fevil.example/x'],
    ['//evil.example', '/%2F/evil.example'],
    ['\\evil.example', '/%5Cevil.example'],
    ['ok/path', '/ok/path']
  ] as const) {
    const response = await app.inject({ url: '/go', query: { to: 'evil', v } })
    t.equal(response.statusCode, 302)
    t.equal(response.headers.location, location, `* = ${v}`)
    t.notOk(/^[/\\]{2}/.test(String(response.headers.location)), `* = ${v}: never // or /\\`)
    const followed = await app.inject(String(response.headers.location))
    t.equal(followed.body, v, `* = ${v}: the route reads the same value back`)
  }

  const unknown = await app.inject({ url: '/go', query: { to: 'unknown' } })
  t.equal(unknown.statusCode, 500)
  t.equal(unknown.json().code, 'FST_ROUTING_NAME_NOT_FOUND')
  const missing = await app.inject({ url: '/go', query: { to: 'missing' } })
  t.equal(missing.json().code, 'FST_ROUTING_PARAM_MISSING')
  const notRedirect = await app.inject({ url: '/go', query: { to: 'bad-status' } })
  t.equal(notRedirect.json().code, 'FST_CONTEXT_INVALID_ARGUMENT', '200 is not a redirect status')

  const bare = await replyApp(t, (app) => {
    app.get('/', async (_request, reply) => reply.redirectToRoute('any'))
  })
  t.equal((await bare.inject('/')).json().code, 'FST_CONTEXT_ROUTING_MISSING')
})

t.test('redirectBack: same-origin Referer followed (path and query only), anything else to the fallback', async (t) => {
  const app = await replyApp(t, (app) => {
    app.post('/back', async (request, reply) => {
      const { status, allow } = request.query as { status?: string, allow?: string }
      return reply.redirectBack('/home', status === undefined ? undefined : Number(status), allow === undefined ? undefined : { allowedOrigins: [allow] })
    })
  }, { redirectBackOrigins: ['https://trusted.example'] })
  const back = async (referer: string | undefined, query: Record<string, string> = {}, host = 'shop.example'): Promise<{ status: number, location: string }> => {
    const headers: Record<string, string> = { host }
    if (referer !== undefined) headers.referer = referer
    const response = await app.inject({ method: 'POST', url: '/back', query, headers })
    return { status: response.statusCode, location: response.headers.location as string }
  }
  const cases: Array<[string | undefined, string, string]> = [
    ['http://shop.example/cart?step=2#top', '/cart?step=2', 'same origin: path and query'],
    ['http://SHOP.example:80/cart', '/cart', 'origin compared normalized'],
    [undefined, '/home', 'no Referer'],
    ['', '/home', 'empty Referer'],
    ['not a url', '/home', 'unparsable Referer'],
    ['/relative/path?x=1', '/relative/path?x=1', 'path-only Referer is same-origin'],
    ['/back', '/back', 'path-only Referer'],
    ['/a/../b', '/b', 'path-only Referer, dot segments resolved'],
    ['//evil.example/x', '/home', 'protocol-relative Referer: another origin'],
    ['/\\evil.example/x', '/home', '/\\ reads as // : another origin'],
    ['\\\\evil.example', '/home', 'backslashes only: not path-absolute'],
    ['/\t/evil.example', '/home', 'a tab (which URL parsing drops) refuses the Referer'],
    ['relative/path', '/home', 'path-relative Referer is not followed'],
    ['?q=1', '/home', 'query-only Referer is not followed'],
    ['http://evil.example/phish', '/home', 'other origin'],
    ['https://shop.example/cart', '/home', 'other scheme is another origin'],
    ['http://shop.example:8080/cart', '/home', 'other port is another origin'],
    ['http://shop.example//evil.example/x', '/evil.example/x', 'leading slashes collapsed: never protocol-relative'],
    ['http://shop.example/\\evil.example', '/evil.example', 'backslash (read as /) collapsed too'],
    ['javascript:alert(1)', '/home', 'not http'],
    ['data:text/html,x', '/home', 'data: scheme'],
    ['HTTP://shop.example/ok', '/ok', 'scheme case-insensitive'],
    ['https://trusted.example/page?x=1', 'https://trusted.example/page?x=1', 'origin listed in redirectBackOrigins'],
    ['http://shop.example/ünï', '/%C3%BCn%C3%AF', 'encoded']
  ]
  for (const [referer, location, label] of cases) {
    const result = await back(referer)
    t.same(result, { status: 302, location }, label)
  }
  t.same(await back('http://partner.example/p', { allow: 'http://partner.example' }), { status: 302, location: 'http://partner.example/p' }, 'origin allowed for this call')
  t.same(await back('http://partner.example/p'), { status: 302, location: '/home' }, '...and only for that call')
  t.same(await back(undefined, { status: '303' }), { status: 303, location: '/home' }, 'status when given')
  const refused = await app.inject({ method: 'POST', url: '/back', query: { allow: 'javascript:alert(1)' } })
  t.equal(refused.statusCode, 500, 'an allowed origin must be http(s)')
})

t.test('redirectBackOrigins must be origins', async (t) => {
  await t.rejects(replyApp(t, () => {}, { redirectBackOrigins: ['https://x.example/path'] }), { code: 'FST_CONTEXT_INVALID_OPTION' })
  await t.rejects(replyApp(t, () => {}, { redirectBackOrigins: ['ftp://x.example'] }), { code: 'FST_CONTEXT_INVALID_OPTION' })
})
