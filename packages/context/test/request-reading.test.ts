/** Request reading (TLS and the cancellation signal: request-tls / request-signal tests). */
import t from 'tap'
import { RangeMalformedError, RangeNotSatisfiableError } from '@user-product-service/context'
import { contextApp } from './request-app.js'

t.test('get: case-insensitive header, default or empty when absent', async (t) => {
  const app = await contextApp(t, (app) => {
    app.get('/', async (request) => ({
      agent: request.get('X-Custom'),
      lower: request.get('x-custom'),
      missing: request.get('X-Missing'),
      fallback: request.get('X-Missing', 'dflt'),
      presentEmpty: request.get('X-Empty', 'dflt')
    }))
  })
  const response = await app.inject({ url: '/', headers: { 'x-custom': 'abc', 'x-empty': '' } })
  t.same(response.json(), { agent: 'abc', lower: 'abc', missing: '', fallback: 'dflt', presentEmpty: '' })
})

t.test('getReqHeaders: repeated headers give several values', async (t) => {
  const app = await contextApp(t, (app) => {
    app.get('/', async (request) => request.getReqHeaders())
  })
  // A raw header list keeps repeats (inject joins arrays otherwise).
  const response = await app.inject({ url: '/', headers: { 'x-multi': ['a', 'b, c'], 'x-one': 'v' } })
  const headers = response.json()
  t.same(headers['x-multi'], ['a', 'b, c'], 'one value per header line; commas inside a line are kept')
  t.same(headers['x-one'], ['v'])
  t.ok(Array.isArray(headers.host))
})

t.test('requestMethod and path: read, and override for restart routing', async (t) => {
  const app = await contextApp(t, (app) => {
    app.all('/from/*', async (request) => {
      const before = { method: request.requestMethod(), path: request.path() }
      const method = request.requestMethod('patch')
      const path = request.path('/to/x')
      return { before, method, path, url: request.url, nativeMethod: request.method, originalUrl: request.originalUrl }
    })
  })
  const response = await app.inject({ method: 'POST', url: '/from/a%20b?q=1' })
  t.same(response.json(), {
    before: { method: 'POST', path: '/from/a%20b' },
    method: 'PATCH',
    path: '/to/x',
    url: '/to/x?q=1',
    nativeMethod: 'PATCH',
    originalUrl: '/from/a%20b?q=1'
  })
  const bad = await app.inject({ method: 'GET', url: '/from/x' })
  t.equal(bad.statusCode, 200)
})

t.test('originalUrl, baseURL, hostname/host, protocol, secure (plain HTTP; TLS in request-tls)', async (t) => {
  const app = await contextApp(t, (app) => {
    app.get('/p', async (request) => ({
      originalUrl: request.originalUrl,
      baseURL: request.baseURL(),
      hostname: request.hostname,
      host: request.host,
      protocol: request.protocol,
      secure: request.secure()
    }))
  })
  const response = await app.inject({ url: '/p?a=1&b=%20', headers: { host: 'example.com:8080' } })
  t.same(response.json(), {
    originalUrl: '/p?a=1&b=%20',
    baseURL: 'http://example.com:8080',
    hostname: 'example.com',
    host: 'example.com:8080',
    protocol: 'http',
    secure: false
  })
})

t.test('ipAddress: socket address; proxyHeader only from a trusted proxy (Fastify trustProxy)', async (t) => {
  const route = (app: import('fastify').FastifyInstance): void => {
    app.get('/ip', async (request) => ({ ip: request.ipAddress() }))
  }
  const plain = await contextApp(t, route)
  t.equal((await plain.inject({ url: '/ip', remoteAddress: '10.1.2.3', headers: { 'x-real-ip': '9.9.9.9' } })).json().ip, '10.1.2.3',
    'without the setting a header is not trusted')
  const untrusted = await contextApp(t, route, { proxyHeader: 'X-Real-IP' })
  t.equal((await untrusted.inject({ url: '/ip', remoteAddress: '10.1.2.3', headers: { 'x-real-ip': '9.9.9.9' } })).json().ip, '10.1.2.3',
    'proxyHeader set but no trustProxy: any client could send the header, so it is ignored')
  const proxied = await contextApp(t, route, { proxyHeader: 'X-Real-IP' }, { trustProxy: '10.0.0.0/8' })
  t.equal((await proxied.inject({ url: '/ip', remoteAddress: '10.1.2.3', headers: { 'x-real-ip': '9.9.9.9' } })).json().ip, '9.9.9.9',
    'from a trusted proxy')
  t.equal((await proxied.inject({ url: '/ip', remoteAddress: '203.0.113.7', headers: { 'x-real-ip': '9.9.9.9' } })).json().ip, '203.0.113.7',
    'from an address trustProxy does not list: the socket address')
  t.equal((await proxied.inject({ url: '/ip', remoteAddress: '10.1.2.3', headers: { 'x-real-ip': ' 8.8.8.8 , 7.7.7.7' } })).json().ip, '7.7.7.7',
    'a list from one trusted proxy: the entry that proxy wrote (the last)')
  t.equal((await proxied.inject({ url: '/ip', remoteAddress: '10.1.2.3', headers: { 'x-real-ip': '<script>' } })).json().ip, '10.1.2.3',
    'a value that is no IP address is not an address')
  t.equal((await proxied.inject({ url: '/ip', remoteAddress: '10.1.2.3' })).json().ip, '10.1.2.3', 'header absent: the socket address')
  const all = await contextApp(t, route, { proxyHeader: 'X-Forwarded-For' }, { trustProxy: true })
  t.equal((await all.inject({ url: '/ip', remoteAddress: '10.1.2.3', headers: { 'x-forwarded-for': '8.8.8.8, 7.7.7.7' } })).json().ip, '8.8.8.8',
    'trustProxy: true trusts the whole chain: the first entry')
})

t.test('ipAddress without a proxy header is the remote address, even under trustProxy (X-Forwarded-For is not read)', async (t) => {
  const route = (app: import('fastify').FastifyInstance): void => {
    app.get('/ip', async (request) => ({ ip: request.ipAddress(), fastify: request.ip }))
  }
  const headers = { 'x-forwarded-for': '8.8.8.8, 7.7.7.7' }
  const trusting = await contextApp(t, route, {}, { trustProxy: true })
  t.same((await trusting.inject({ url: '/ip', remoteAddress: '10.1.2.3', headers })).json(), { ip: '10.1.2.3', fastify: '8.8.8.8' },
    'no proxyHeader: the socket\'s peer, where Fastify\'s request.ip reads X-Forwarded-For')
  const otherHeader = await contextApp(t, route, { proxyHeader: 'X-Real-IP' }, { trustProxy: '10.0.0.0/8' })
  t.same((await otherHeader.inject({ url: '/ip', remoteAddress: '10.1.2.3', headers })).json(), { ip: '10.1.2.3', fastify: '7.7.7.7' },
    'proxyHeader X-Real-IP absent: the remote address, not X-Forwarded-For')
})

t.test('ipAddress over a real socket from an untrusted address ignores proxyHeader', async (t) => {
  const route = (app: import('fastify').FastifyInstance): void => {
    app.get('/ip', async (request) => ({ ip: request.ipAddress() }))
  }
  for (const [trustProxy, expected] of [['10.0.0.0/8', '127.0.0.1'], ['loopback', '9.9.9.9']] as const) {
    const app = await contextApp(t, route, { proxyHeader: 'x-real-ip' }, { trustProxy })
    await app.listen({ port: 0, host: '127.0.0.1' })
    const { port } = app.server.address() as { port: number }
    const response = await fetch(`http://127.0.0.1:${port}/ip`, { headers: { 'x-real-ip': '9.9.9.9' } })
    t.same(await response.json(), { ip: expected }, `trustProxy ${trustProxy}`)
  }
})

t.test('X-Forwarded-Proto / -Host with several entries: the client-facing entry of a trusted chain', async (t) => {
  const route = (app: import('fastify').FastifyInstance): void => {
    app.get('/p', async (request) => ({
      protocol: request.clientProtocol(),
      host: request.clientHost(),
      hostname: request.clientHostname(),
      secure: request.secure(),
      baseURL: request.baseURL(),
      subdomains: request.subdomains()
    }))
  }
  const headers = { host: 'internal:8080', 'x-forwarded-proto': 'https, http', 'x-forwarded-host': 'shop.example.com, lb.internal:8080' }
  const all = await contextApp(t, route, {}, { trustProxy: true })
  t.same((await all.inject({ url: '/p', remoteAddress: '10.0.0.2', headers })).json(), {
    protocol: 'https', host: 'shop.example.com', hostname: 'shop.example.com', secure: true, baseURL: 'https://shop.example.com', subdomains: ['shop']
  }, 'trustProxy: true: the first entries')
  const twoHops = await contextApp(t, route, {}, { trustProxy: ['10.0.0.0/8'] })
  t.same((await twoHops.inject({ url: '/p', remoteAddress: '10.0.0.2', headers: { ...headers, 'x-forwarded-for': '203.0.113.9, 10.0.0.1' } })).json().protocol,
    'https', 'two trusted proxies (socket and 10.0.0.1): the outer one\'s entry')
  t.same((await twoHops.inject({ url: '/p', remoteAddress: '10.0.0.2', headers: { ...headers, 'x-forwarded-proto': 'http, https, http', 'x-forwarded-for': '198.51.100.1, 203.0.113.9, 10.0.0.1' } })).json().protocol,
    'https', 'an entry an untrusted hop wrote is never taken')
  t.same((await twoHops.inject({ url: '/p', remoteAddress: '203.0.113.1', headers })).json(), {
    protocol: 'http', host: 'internal:8080', hostname: 'internal', secure: false, baseURL: 'http://internal:8080', subdomains: []
  }, 'an untrusted peer: the headers do not count')
  const none = await contextApp(t, route)
  t.same((await none.inject({ url: '/p', remoteAddress: '10.0.0.2', headers })).json().secure, false, 'without trustProxy: no forwarded header counts')
  t.same((await all.inject({ url: '/p', remoteAddress: '10.0.0.2', headers: { host: 'a.b', 'x-forwarded-proto': 'javascript' } })).json().protocol,
    'http', 'a protocol other than http/https is ignored')
})

t.test('forwardedIps: X-Forwarded-For as listed, malformed lists tolerated', async (t) => {
  const app = await contextApp(t, (app) => {
    app.get('/ips', async (request) => request.forwardedIps())
  })
  const ips = async (value?: string): Promise<string[]> =>
    (await app.inject({ url: '/ips', headers: value === undefined ? {} : { 'x-forwarded-for': value } })).json()
  t.same(await ips('203.0.113.1, 198.51.100.2, 10.0.0.1'), ['203.0.113.1', '198.51.100.2', '10.0.0.1'])
  t.same(await ips(' ,203.0.113.1,, ,2001:db8::1 ,'), ['203.0.113.1', '2001:db8::1'])
  t.same(await ips(''), [])
  t.same(await ips(), [])
})

t.test('isFromLocal: IPv4 and IPv6 loopback only', async (t) => {
  const app = await contextApp(t, (app) => {
    app.get('/local', async (request) => ({ local: request.isFromLocal() }))
  })
  for (const [address, local] of [['127.0.0.1', true], ['127.10.0.5', true], ['::1', true], ['::ffff:127.0.0.1', true],
    ['10.0.0.1', false], ['::ffff:10.0.0.1', false], ['2001:db8::1', false], ['128.0.0.1', false]] as const) {
    const response = await app.inject({ url: '/local', remoteAddress: address, headers: { 'x-forwarded-for': '127.0.0.1' } })
    t.equal(response.json().local, local, address)
  }
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as { port: number }
  t.same(await (await fetch(`http://127.0.0.1:${port}/local`)).json(), { local: true }, 'a real loopback connection')
})

t.test('subdomains: nearest-to-root first, offset default 2 or from the setting', async (t) => {
  const route = (app: import('fastify').FastifyInstance): void => {
    app.get('/s', async (request) => ({
      dflt: request.subdomains(),
      zero: request.subdomains(0),
      three: request.subdomains(3)
    }))
  }
  const app = await contextApp(t, route)
  const get = async (host: string): Promise<unknown> => (await app.inject({ url: '/s', headers: { host } })).json()
  t.same(await get('tobi.ferrets.example.com'), { dflt: ['ferrets', 'tobi'], zero: ['com', 'example', 'ferrets', 'tobi'], three: ['tobi'] })
  t.same(await get('tobi.ferrets.example.com:3000'), { dflt: ['ferrets', 'tobi'], zero: ['com', 'example', 'ferrets', 'tobi'], three: ['tobi'] }, 'port ignored')
  t.same(await get('example.com'), { dflt: [], zero: ['com', 'example'], three: [] })
  t.same(await get('192.168.0.1'), { dflt: [], zero: [], three: [] }, 'an IP address has no subdomains')
  t.same(await get('[::1]:3000'), { dflt: [], zero: [], three: [] })
  const offset3 = await contextApp(t, route, { subdomainOffset: 3 })
  t.same((await offset3.inject({ url: '/s', headers: { host: 'a.b.example.co.uk' } })).json().dflt, ['b', 'a'])
  const bad = await contextApp(t, (app) => { app.get('/', async (request) => request.subdomains(-1)) })
  t.match((await bad.inject('/')).json(), { statusCode: 500, code: 'FST_CONTEXT_INVALID_ARGUMENT' })
})

t.test('one error scheme: request-time misuse and bad options are FST_CONTEXT_* constants, never bare TypeErrors', async (t) => {
  const app = await contextApp(t, (app) => {
    app.get('/method', async (request) => request.requestMethod('bad method'))
    app.get('/path', async (request) => request.path('no-slash'))
    app.get('/user-context', async (request) => { request.setUserContext(null as unknown as object) })
  })
  for (const url of ['/method', '/path', '/user-context']) {
    t.match((await app.inject(url)).json(), { statusCode: 500, code: 'FST_CONTEXT_INVALID_ARGUMENT' }, url)
  }
  for (const options of [{ subdomainOffset: -1 }, { proxyHeader: ' ' }, { formFiles: { memoryThreshold: -1 } }, { formFiles: { tmpDir: '' } }]) {
    await t.rejects(contextApp(t, () => {}, options), { code: 'FST_CONTEXT_INVALID_OPTION' }, JSON.stringify(options))
  }
  t.match((await app.inject('/nowhere')).statusCode, 404)
})

t.test('xhr', async (t) => {
  const app = await contextApp(t, (app) => { app.get('/', async (request) => ({ xhr: request.xhr() })) })
  t.equal((await app.inject({ url: '/', headers: { 'x-requested-with': 'XMLHttpRequest' } })).json().xhr, true)
  t.equal((await app.inject({ url: '/', headers: { 'x-requested-with': 'xmlhttprequest' } })).json().xhr, true)
  t.equal((await app.inject({ url: '/', headers: { 'x-requested-with': 'fetch' } })).json().xhr, false)
  t.equal((await app.inject({ url: '/' })).json().xhr, false)
})

t.test('is: Content-Type against an extension, leading dot optional, false without a body', async (t) => {
  const app = await contextApp(t, (app) => {
    app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => { done(null, body) })
    app.route({
      method: ['GET', 'POST'],
      url: '/is',
      handler: async (request) => {
        const probes = (request.headers['x-probe'] as string).split('|')
        return probes.map((probe) => request.is(probe))
      }
    })
  })
  const is = async (contentType: string | undefined, probes: string[], payload: string | null = '{}', method: 'POST' | 'GET' = 'POST'): Promise<boolean[]> => {
    const headers: Record<string, string> = { 'x-probe': probes.join('|') }
    if (contentType !== undefined) headers['content-type'] = contentType
    return (await app.inject({ method, url: '/is', headers, ...(payload === null ? {} : { payload }) })).json()
  }
  t.same(await is('text/html; charset=utf-8', ['html', '.html', 'text/html', 'json', 'text/*']), [true, true, true, false, true])
  t.same(await is('application/json', ['json', '.json', 'JSON', 'xml', 'unknownext']), [true, true, true, false, false])
  t.same(await is('Application/JSON', ['json']), [true], 'type compared case-insensitively')
  t.same(await is('application/json', ['json'], null, 'GET'), [false], 'no body: false even with a Content-Type')
  t.same(await is(undefined, ['json']), [false], 'no Content-Type')
})

t.test('fresh / stale: ETag, If-None-Match, Last-Modified, no-cache, method and status', async (t) => {
  const app = await contextApp(t, (app) => {
    app.route({
      method: ['GET', 'HEAD', 'POST'],
      url: '/r',
      handler: async (request, reply) => {
        const etag = request.headers['x-etag'] as string | undefined
        const modified = request.headers['x-last-modified'] as string | undefined
        const status = Number(request.headers['x-status'] ?? 200)
        if (etag !== undefined) reply.header('etag', etag)
        if (modified !== undefined) reply.header('last-modified', modified)
        reply.code(status)
        const result = { fresh: request.fresh(), stale: request.stale() }
        reply.header('x-fresh', String(result.fresh))
        return result
      }
    })
  })
  const fresh = async (headers: Record<string, string>, method: 'GET' | 'HEAD' | 'POST' = 'GET'): Promise<boolean> => {
    const response = await app.inject({ method, url: '/r', headers })
    const fresh = response.headers['x-fresh'] === 'true'
    if (response.body !== '') t.equal(response.json().stale, !fresh, 'stale is the inverse')
    return fresh
  }
  t.equal(await fresh({ 'x-etag': '"abc"', 'if-none-match': '"abc"' }), true)
  t.equal(await fresh({ 'x-etag': '"abc"', 'if-none-match': '"xyz"' }), false)
  t.equal(await fresh({ 'x-etag': 'W/"abc"', 'if-none-match': '"abc"' }), true, 'weak comparison')
  t.equal(await fresh({ 'x-etag': '"abc"', 'if-none-match': 'W/"abc"' }), true)
  t.equal(await fresh({ 'x-etag': '"b"', 'if-none-match': '"a", "b", "c"' }), true, 'a list')
  t.equal(await fresh({ 'x-etag': '"b"', 'if-none-match': '*' }), true)
  t.equal(await fresh({ 'x-etag': '"abc"' }), false, 'no conditional header')
  const lastModified = 'Wed, 21 Oct 2015 07:28:00 GMT'
  t.equal(await fresh({ 'x-last-modified': lastModified, 'if-modified-since': lastModified }), true)
  t.equal(await fresh({ 'x-last-modified': lastModified, 'if-modified-since': 'Wed, 21 Oct 2015 07:27:59 GMT' }), false, 'modified after the client copy')
  t.equal(await fresh({ 'x-last-modified': lastModified, 'if-modified-since': 'Thu, 22 Oct 2015 00:00:00 GMT' }), true)
  t.equal(await fresh({ 'x-etag': '"abc"', 'if-none-match': '"abc"', 'cache-control': 'no-cache' }), false, 'Cache-Control: no-cache')
  t.equal(await fresh({ 'x-etag': '"abc"', 'if-none-match': '"abc"' }, 'HEAD'), true, 'HEAD counts')
  t.equal(await fresh({ 'x-etag': '"abc"', 'if-none-match': '"abc"' }, 'POST'), false, 'only GET and HEAD')
  t.equal(await fresh({ 'x-etag': '"abc"', 'if-none-match': '"abc"', 'x-status': '304' }), true, '304 counts')
  t.equal(await fresh({ 'x-etag': '"abc"', 'if-none-match': '"abc"', 'x-status': '404' }), false, 'only 2xx and 304')
})

t.test('range: single, multiple, suffix, open-ended, clamped, unsatisfiable, malformed', async (t) => {
  const app = await contextApp(t, (app) => {
    app.get('/range', async (request) => {
      try {
        return request.range(Number(request.headers['x-size'] ?? 1000))
      } catch (error) {
        return { error: (error as { code: string }).code, status: (error as { statusCode: number }).statusCode }
      }
    })
  })
  const range = async (header: string | undefined, size = 1000): Promise<unknown> =>
    (await app.inject({ url: '/range', headers: { 'x-size': String(size), ...(header === undefined ? {} : { range: header }) } })).json()
  t.same(await range('bytes=0-499'), { type: 'bytes', ranges: [{ start: 0, end: 499 }] })
  t.same(await range('bytes=0-9, 20-29,5-6'), { type: 'bytes', ranges: [{ start: 0, end: 9 }, { start: 20, end: 29 }, { start: 5, end: 6 }] }, 'several, in request order, not combined')
  t.same(await range('bytes=-500'), { type: 'bytes', ranges: [{ start: 500, end: 999 }] }, 'suffix')
  t.same(await range('bytes=-5000'), { type: 'bytes', ranges: [{ start: 0, end: 999 }] }, 'suffix longer than the resource: all of it (RFC 9110)')
  t.same(await range('bytes=0-1, -5000'), { type: 'bytes', ranges: [{ start: 0, end: 1 }, { start: 0, end: 999 }] })
  t.same(await range('bytes=-0'), { error: 'FST_CONTEXT_RANGE_NOT_SATISFIABLE', status: 416 }, 'an empty suffix')
  t.same(await range('bytes=500-'), { type: 'bytes', ranges: [{ start: 500, end: 999 }] }, 'open-ended')
  t.same(await range('bytes=900-5000'), { type: 'bytes', ranges: [{ start: 900, end: 999 }] }, 'end clamped to size - 1')
  t.same(await range('items=0-5', 10), { type: 'items', ranges: [{ start: 0, end: 5 }] }, 'the unit is reported')
  const unsatisfiable = { error: new RangeNotSatisfiableError().code, status: 416 }
  t.same(await range('bytes=1000-1100'), unsatisfiable, 'starts past the end')
  t.same(await range('bytes=0-10', 0), unsatisfiable, 'empty resource')
  t.same(await range('bytes=50-10'), unsatisfiable, 'start after end')
  const malformed = { error: new RangeMalformedError('').code, status: 400 }
  t.same(await range('bytes=abc'), malformed)
  t.same(await range('0-499'), malformed, 'no unit')
  t.same(await range('bytes=1-2-3'), malformed)
  t.same(await range(undefined), malformed, 'no Range header')
  t.same(await range('bytes=0-1', -1), { error: 'FST_CONTEXT_RANGE_SIZE', status: 500 }, 'a bad size is the handler\'s bug')
})

t.test('route, app, raw request and response', async (t) => {
  const app = await contextApp(t, (app) => {
    app.decorate('marker', 'the-app')
    app.get('/users/:id', { config: { name: 'user' } }, async function handler (request, reply) {
      const route = request.route()
      return {
        method: route.method,
        path: route.path,
        params: route.params,
        handlerName: route.handler.name,
        name: (route.config as { name?: string }).name,
        app: (request.app() as unknown as { marker: string }).marker,
        sameApp: request.app() === request.server,
        options: request.app().contextOptions,
        rawUrl: request.raw.url,
        rawResponse: typeof reply.raw.setHeader
      }
    })
  }, { subdomainOffset: 3 })
  t.match((await app.inject('/users/42')).json(), {
    method: 'GET',
    path: '/users/:id',
    params: { id: '42' },
    handlerName: /handler$/,
    name: 'user',
    app: 'the-app',
    sameApp: true,
    options: { immutable: false, enableSplittingOnParsers: false, subdomainOffset: 3, rawBody: true, xml: false },
    rawUrl: '/users/42',
    rawResponse: 'function'
  })
})
