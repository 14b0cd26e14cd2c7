/** Binders: paramsParser, queryParser, reqHeaderParser, cookieParser, bodyParser, SetParserDecoder. */
import fastifyCookie from '@fastify/cookie'
import fastifyFormbody from '@fastify/formbody'
import fastifyMultipart from '@fastify/multipart'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import t from 'tap'
import { Type, type TSchema } from 'typebox'
import type { ParserDecoderConfig } from '@user-product-service/context'
import { contextApp } from './request-app.js'

const failure = (response: LightMyRequestResponse): { status: number, code: string, message: string } => {
  const body = response.json()
  return { status: response.statusCode, code: body.code, message: body.message }
}

t.test('paramsParser: typed, coerced, validated; alias keyword `params`', async (t) => {
  const Params = Type.Object({ id: Type.Integer({ minimum: 1 }), slug: Type.String(), userId: Type.Integer({ params: 'user_id' }) })
  const app = await contextApp(t, (app) => {
    app.get('/u/:user_id/posts/:id/:slug', async (request) => {
      const params = request.paramsParser(Params)
      const id: number = params.id // typed by the schema
      return { ...params, double: id * 2 }
    })
  })
  t.same((await app.inject('/u/7/posts/21/hello')).json(), { id: 21, slug: 'hello', userId: 7, double: 42 })
  const bad = await app.inject('/u/7/posts/abc/hello')
  t.match(failure(bad), { status: 400, code: 'FST_CONTEXT_BIND_FAILED', message: /path parameters: \/id must be an integer/ })
  t.match(failure(await app.inject('/u/7/posts/0/hello')), { status: 400, message: /\/id must be >= 1/ })
  t.match(failure(await app.inject('/u/7/posts/1e3/hello')), { status: 400, message: /\/id must be an integer/ }, 'no 1e3 for an integer')
})

t.test('queryParser: repeated keys, lists, defaults, booleans; EnableSplittingOnParsers off and on', async (t) => {
  const Query = Type.Object({
    page: Type.Integer({ default: 1 }),
    tags: Type.Optional(Type.Array(Type.String())),
    ids: Type.Optional(Type.Array(Type.Integer())),
    active: Type.Optional(Type.Boolean()),
    name: Type.Optional(Type.String())
  })
  const route = (app: FastifyInstance): void => { app.get('/q', async (request) => request.queryParser(Query)) }
  const off = await contextApp(t, route)
  t.same((await off.inject('/q')).json(), { page: 1 }, 'defaults applied')
  t.same((await off.inject('/q?page=3&tags=a,b&tags=c&active=t&name=x&name=y')).json(),
    { page: 3, tags: ['a,b', 'c'], active: true, name: 'y' }, 'off: a,b stays one element; a scalar takes the last value')
  t.same((await off.inject('/q?ids=1&ids=2&active=0')).json(), { page: 1, ids: [1, 2], active: false })
  t.same((await off.inject('/q?tags=solo')).json(), { page: 1, tags: ['solo'] }, 'one value is a one-element list')
  t.match(failure(await off.inject('/q?ids=1,2')), { status: 400, message: /\/ids\/0 must be an integer/ }, 'off: "1,2" is one (bad) integer')
  t.match(failure(await off.inject('/q?active=yes')), { status: 400, message: /\/active must be a boolean/ })
  const on = await contextApp(t, route, { enableSplittingOnParsers: true })
  t.same((await on.inject('/q?tags=a,b&tags=c&ids=1,2')).json(), { page: 1, tags: ['a', 'b', 'c'], ids: [1, 2] }, 'on: split')
  t.same((await on.inject('/q?name=a,b')).json(), { page: 1, name: 'a,b' }, 'on: scalars are not split')
})

t.test('reqHeaderParser: case-insensitive names, comma-separated values give list elements', async (t) => {
  const Headers = Type.Object({
    'x-request-id': Type.String(),
    accept: Type.Array(Type.String()),
    traceLevel: Type.Integer({ reqHeader: 'X-Trace-Level' }),
    'x-flags': Type.Optional(Type.Array(Type.Boolean()))
  })
  const app = await contextApp(t, (app) => { app.get('/h', async (request) => request.reqHeaderParser(Headers)) })
  const response = await app.inject({ url: '/h', headers: { 'X-Request-ID': 'r-1', accept: 'text/html, application/json;q=0.9', 'x-trace-level': '3', 'x-flags': '1,false, t' } })
  t.same(response.json(), { 'x-request-id': 'r-1', accept: ['text/html', 'application/json;q=0.9'], traceLevel: 3, 'x-flags': [true, false, true] })
  t.match(failure(await app.inject({ url: '/h', headers: { accept: '*/*', 'x-trace-level': '3' } })),
    { status: 400, code: 'FST_CONTEXT_BIND_FAILED', message: /headers: \/x-request-id is required|must have required property 'x-request-id'/ })
})

t.test('cookieParser: @fastify/cookie registered by the app first, or by the context plugin', async (t) => {
  const Cookies = Type.Object({ session: Type.String({ minLength: 3 }), visits: Type.Integer({ default: 0 }), theme: Type.Optional(Type.String({ cookie: 'ui-theme' })) })
  for (const withPlugin of [true, false]) {
    const app = await contextApp(t, async (app) => {
      app.get('/c', async (request) => request.cookieParser(Cookies))
    }, {}, {}, async (app) => { if (withPlugin) await app.register(fastifyCookie) })
    const label = withPlugin ? 'app-registered @fastify/cookie' : 'context-registered'
    t.same((await app.inject({ url: '/c', headers: { cookie: 'session=abc123; visits=4; ui-theme=dark' } })).json(), { session: 'abc123', visits: 4, theme: 'dark' }, label)
    t.same((await app.inject({ url: '/c', headers: { cookie: 'session=abc123' } })).json(), { session: 'abc123', visits: 0 }, `${label}: default`)
    t.match(failure(await app.inject({ url: '/c', headers: { cookie: 'session=ab' } })), { status: 400, message: /cookies: \/session/ }, label)
  }
})

t.test('bodyParser: JSON (strict types), XML, urlencoded and multipart values; 415 otherwise', async (t) => {
  const User = Type.Object({ name: Type.String(), age: Type.Integer(), tags: Type.Optional(Type.Array(Type.String())), nick: Type.Optional(Type.String({ json: 'nick_name', xml: 'Nick', form: 'nick-name' })) })
  const app = await contextApp(t, async (app) => {
    await app.register(fastifyFormbody)
    await app.register(fastifyMultipart, { attachFieldsToBody: true })
    app.post('/b', async (request) => request.bodyParser(User))
  }, { xml: true })
  const post = async (contentType: string, payload: string | Buffer): Promise<LightMyRequestResponse> =>
    await app.inject({ method: 'POST', url: '/b', headers: { 'content-type': contentType }, payload })
  t.same((await post('application/json', JSON.stringify({ name: 'ann', age: 30, nick_name: 'a' }))).json(), { name: 'ann', age: 30, nick: 'a' })
  t.match(failure(await post('application/json', JSON.stringify({ name: 'ann', age: '30' }))), { status: 400, message: /request body: \/age must be integer/ }, 'JSON is not coerced')
  const xml = '<?xml version="1.0"?><user><name>bob</name><age>41</age><tags>a</tags><tags>b</tags><Nick>b0b</Nick></user>'
  t.same((await post('application/xml', xml)).json(), { name: 'bob', age: 41, tags: ['a', 'b'], nick: 'b0b' }, 'application/xml')
  t.same((await post('text/xml; charset=utf-8', '<user><name>cy</name><age>5</age><tags>solo</tags></user>')).json(), { name: 'cy', age: 5, tags: ['solo'] }, 'text/xml; one element is a one-item list')
  t.match(failure(await post('application/xml', '<user><name>x</name>')), { status: 400, code: 'FST_CONTEXT_MALFORMED_XML' })
  t.same((await post('application/x-www-form-urlencoded', 'name=dee&age=7&tags=x&tags=y&nick-name=d')).json(), { name: 'dee', age: 7, tags: ['x', 'y'], nick: 'd' }, 'urlencoded')
  const boundary = '----ctx'
  const multipart = [
    `--${boundary}\r\nContent-Disposition: form-data; name="name"\r\n\r\neve\r\n`,
    `--${boundary}\r\nContent-Disposition: form-data; name="age"\r\n\r\n22\r\n`,
    `--${boundary}\r\nContent-Disposition: form-data; name="avatar"; filename="a.png"\r\nContent-Type: image/png\r\n\r\nPNG\r\n`,
    `--${boundary}--\r\n`
  ].join('')
  t.same((await post(`multipart/form-data; boundary=${boundary}`, multipart)).json(), { name: 'eve', age: 22 }, 'multipart: form values only, files skipped')
  t.match(failure(await post('text/plain', 'hi')), { status: 415 }, 'no parser: Fastify refuses first')
  const route = await contextApp(t, (app) => {
    app.addContentTypeParser('text/plain', { parseAs: 'string' }, (_request, body, done) => { done(null, body) })
    app.post('/b', async (request) => request.bodyParser(User))
  })
  const unsupported = await route.inject({ method: 'POST', url: '/b', headers: { 'content-type': 'text/plain' }, payload: 'hi' })
  t.match(failure(unsupported), { status: 415, code: 'FST_CONTEXT_UNSUPPORTED_BODY_TYPE', message: /text\/plain/ })
})

t.test('setParserDecoder: ignoreUnknownKeys, zeroEmpty, custom types with converters, alias tag', async (t) => {
  const DateType = Type.Unsafe<Date>({ type: 'string', pattern: '^\\d{4}-\\d{2}-\\d{2}$', parserType: 'date' })
  const Query = Type.Object({
    count: Type.Optional(Type.Integer()),
    on: Type.Optional(DateType),
    days: Type.Optional(Type.Array(DateType)),
    label: Type.Optional(Type.String({ query: 'lbl', alias: 'title' }))
  })
  const converters: ParserDecoderConfig['parserType'] = [{
    customType: 'date',
    converter: (value) => {
      const date = new Date(`${value}T00:00:00Z`)
      if (Number.isNaN(date.getTime()) || date.toISOString().slice(0, 10) !== value) throw new Error('not a calendar date')
      return date
    }
  }]
  const app = await contextApp(t, (app) => {
    app.get('/q', async (request) => {
      const query = request.queryParser(Query)
      return {
        ...query,
        onIsDate: query.on instanceof Date,
        on: query.on?.toISOString(),
        days: query.days?.map((day) => day.toISOString().slice(0, 10))
      }
    })
    app.post('/config', async (request) => {
      request.server.setParserDecoder(request.body as ParserDecoderConfig & { parserType?: undefined })
      if ((request.body as { withConverters?: boolean }).withConverters) request.server.setParserDecoder({ ...(request.body as object), parserType: converters })
      return 'ok'
    })
  }, { parserDecoder: { parserType: converters } })
  const get = async (query: string): Promise<LightMyRequestResponse> => await app.inject(`/q${query}`)

  t.same((await get('?on=2024-02-29&days=2024-01-01&days=2024-12-31&lbl=x&extra=1')).json(),
    { onIsDate: true, on: '2024-02-29T00:00:00.000Z', days: ['2024-01-01', '2024-12-31'], label: 'x' },
    'defaults: custom type converted, alias keyword `query`, unknown keys ignored')
  t.match(failure(await get('?on=2024-02-30')), { status: 400, message: /\/on cannot be converted: not a calendar date/ }, 'a converter that throws is a 400')
  t.match(failure(await get('?on=tomorrow')), { status: 400, message: /\/on must match pattern/ }, 'the schema checks the string first')
  t.same((await get('?count=')).json(), { count: 0, onIsDate: false }, 'zeroEmpty (default true): empty is the zero value')

  await app.inject({ method: 'POST', url: '/config', payload: { zeroEmpty: false, ignoreUnknownKeys: false, setAliasTag: 'alias', withConverters: true } })
  t.same((await get('?count=')).json(), { onIsDate: false }, 'zeroEmpty false: empty counts as absent')
  t.match(failure(await get('?count=1&extra=1')), { status: 400, message: /\/extra is not a known key/ }, 'ignoreUnknownKeys false')
  t.same((await get('?title=t')).json(), { label: 't', onIsDate: false }, 'setAliasTag: the `alias` keyword names the key now')
  t.match(failure(await get('?lbl=t')), { status: 400, message: /\/lbl is not a known key/ }, '... and `query` no longer does')

  const invalid = await app.inject({ method: 'POST', url: '/config', payload: { zeroEmpty: 'yes' } })
  t.match(failure(invalid), { status: 500, code: 'FST_CONTEXT_PARSER_DECODER_CONFIG' })
  t.throws(() => { app.setParserDecoder({ parserType: [{ customType: '', converter: String }] }) }, { code: 'FST_CONTEXT_PARSER_DECODER_CONFIG' })
})

/** An app whose /q, /f, /c and /h bind the query, an urlencoded form, cookies and headers to `schema`. */
async function bindingApp (t: Parameters<typeof contextApp>[0], schema: TSchema) {
  return await contextApp(t, async (app) => {
    await app.register(fastifyFormbody)
    app.get('/q', async (request) => request.queryParser(schema))
    app.post('/f', async (request) => request.bodyParser(schema))
    app.get('/c', async (request) => request.cookieParser(schema))
    app.get('/h', async (request) => request.reqHeaderParser(schema))
  })
}

t.test('nested and list syntax: query, form, cookies and headers bind a.b, a[b], a[0][b] and list[]', async (t) => {
  const Item = Type.Object({ n: Type.String(), qty: Type.Optional(Type.Integer()) })
  const Schema = Type.Object({
    data: Type.Optional(Type.Array(Type.String())),
    a: Type.Optional(Type.Object({ b: Type.Integer(), c: Type.Optional(Type.Object({ d: Type.Boolean() })) })),
    items: Type.Optional(Type.Array(Item)),
    name: Type.Optional(Type.String())
  })
  const app = await bindingApp(t, Schema)
  const query = async (q: string): Promise<LightMyRequestResponse> => await app.inject(`/q?${q}`)
  t.same((await query('data[]=a&data[]=b')).json(), { data: ['a', 'b'] }, 'data[]=a&data[]=b gives two items')
  t.same((await query('a.b=1&a.c.d=t')).json(), { a: { b: 1, c: { d: true } } }, 'dots fill nested objects, values converted by the nested schema')
  t.same((await query('a[b]=2&a[c][d]=0')).json(), { a: { b: 2, c: { d: false } } }, 'brackets too')
  t.same((await query('items[0][n]=x&items[0][qty]=3&items[1][n]=y')).json(), { items: [{ n: 'x', qty: 3 }, { n: 'y' }] }, 'a list of objects')
  t.same((await query('items[0].n=x')).json(), { items: [{ n: 'x' }] }, 'mixed: a[0].b')
  t.match(failure(await query('items[0][qty]=many&items[0][n]=x')), { status: 400, code: 'FST_CONTEXT_BIND_FAILED', message: /\/items\/0\/qty must be an integer/ }, 'nested paths in the error')
  t.match(failure(await query('a[b=1')), { status: 400, code: 'FST_CONTEXT_BIND_FAILED', message: /\/a\[b has unmatched brackets/ }, 'unmatched brackets are a 400, not dropped')
  t.match(failure(await query('name]=1')), { status: 400, message: /unmatched brackets/ })
  t.match(failure(await query('data[999999]=x')), { status: 400, code: 'FST_CONTEXT_BIND_FAILED', message: /Array limit exceeded/ }, 'a huge index is refused, no huge array')
  t.match(failure(await query('a[b][c][d][e][f][g][h][i][j][k][l]=1')), { status: 400, message: /depth/ }, 'nesting deeper than 10 is refused')
  t.same((await query('data[2]=c&data[0]=a')).json(), { data: ['a', 'c'] }, 'indexes give order, gaps are closed')

  const form = await app.inject({ method: 'POST', url: '/f', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'data[]=a&data[]=b&items[0][n]=x&items[1][n]=y&a.b=5' })
  t.same(form.json(), { data: ['a', 'b'], items: [{ n: 'x' }, { n: 'y' }], a: { b: 5 } }, 'urlencoded form')
  const badForm = await app.inject({ method: 'POST', url: '/f', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'a[b=1' })
  t.match(failure(badForm), { status: 400, message: /request body: \/a\[b has unmatched brackets/ })
  t.same((await app.inject({ url: '/c', headers: { cookie: 'a.b=7; data[0]=x; data[1]=y' } })).json(), { a: { b: 7 }, data: ['x', 'y'] }, 'cookies (a name appears once: indexes make the list)')
  t.same((await app.inject({ url: '/h', headers: { 'a.b': '8', data: 'p, q' } })).json(), { a: { b: 8 }, data: ['p', 'q'] }, 'headers')
})

t.test('binding keys match names and aliases case-insensitively (query, header, cookie, form)', async (t) => {
  const Schema = Type.Object({
    body: Type.Optional(Type.String()),
    pageNo: Type.Optional(Type.Integer({ query: 'page_no', form: 'page_no', cookie: 'page_no', reqHeader: 'page_no' })),
    nested: Type.Optional(Type.Object({ innerKey: Type.String() }))
  })
  const app = await bindingApp(t, Schema)
  t.same((await app.inject('/q?Body=x&PAGE_NO=2&Nested.INNERKEY=i')).json(), { body: 'x', pageNo: 2, nested: { innerKey: 'i' } }, 'query: ?Body=x binds alias body')
  t.same((await app.inject('/q?body=exact&Body=other')).json(), { body: 'exact' }, 'an exact match wins over a case-insensitive one')
  const form = await app.inject({ method: 'POST', url: '/f', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'BODY=y&Page_No=3' })
  t.same(form.json(), { body: 'y', pageNo: 3 }, 'form')
  t.same((await app.inject({ url: '/c', headers: { cookie: 'Body=z; PAGE_NO=4' } })).json(), { body: 'z', pageNo: 4 }, 'cookie')
  t.same((await app.inject({ url: '/h', headers: { BODY: 'w', Page_No: '5' } })).json(), { body: 'w', pageNo: 5 }, 'header')
})

t.test('ajv option: the binders validate with the Ajv instances the app\'s factory makes', async (t) => {
  const { Ajv } = await import('ajv')
  const made: unknown[] = []
  // An app's own factory: a format of its own the default Ajv does not know.
  const ajv = (options: ConstructorParameters<typeof Ajv>[0]): InstanceType<typeof Ajv> => {
    made.push(options)
    const instance = new Ajv(options)
    instance.addFormat('sku', /^[A-Z]{3}-\d{4}$/)
    return instance
  }
  const Query = Type.Object({ sku: Type.String({ format: 'sku' }), n: Type.Optional(Type.Integer()) })
  const Body = Type.Object({ sku: Type.String({ format: 'sku' }) })
  const app = await contextApp(t, (app) => {
    app.get('/q', async (request) => request.queryParser(Query))
    app.post('/b', async (request) => request.bodyParser(Body))
  }, { ajv })
  t.same(made.map((options) => (options as { coerceTypes: unknown }).coerceTypes).sort(), ['array', false], 'one coercing and one strict instance')
  t.same((await app.inject('/q?sku=ABC-1234&n=5')).json(), { sku: 'ABC-1234', n: 5 })
  t.match(failure(await app.inject('/q?sku=abc')), { status: 400, code: 'FST_CONTEXT_BIND_FAILED', message: /\/sku must match format "sku"/ })
  t.match(failure(await app.inject({ method: 'POST', url: '/b', payload: { sku: 'x' } })), { status: 400, message: /\/sku must match format "sku"/ })
  t.match(failure(await app.inject('/q?sku=ABC-1234&n=0x10')), { status: 400, message: /\/n must be an integer/ }, 'the binders\' own decimal rule still applies')

  // Without the option the format is unknown to Ajv (strict: false ignores it): the default factory is plain Ajv.
  const plain = await contextApp(t, (app) => { app.get('/q', async (request) => request.queryParser(Query)) })
  t.equal((await plain.inject('/q?sku=abc')).statusCode, 200)
  t.rejects(contextApp(t, () => {}, { ajv: 'yes' as never }), { code: 'FST_CONTEXT_INVALID_OPTION', message: /ajv must be a function/ })
})

t.test('unknown keys inside a nested object are ignored as at the top: the object is not created, defaults and optionality still apply', async (t) => {
  // The reference's linked-list case: `next.value` names no property of `next`.
  const Node = Type.Object({
    val: Type.Integer(),
    next: Type.Optional(Type.Object({ val: Type.Integer() })),
    withDefault: Type.Object({ val: Type.Integer() }, { default: { val: 0 } })
  })
  const app = await bindingApp(t, Node)
  t.same((await app.inject('/q?val=3&next.value=2&withDefault.value=2')).json(), { val: 3, withDefault: { val: 0 } },
    'query: next left out (it is optional), withDefault takes its default')
  t.same((await app.inject('/q?val=3&next.val=4&next.value=2')).json(), { val: 3, next: { val: 4 }, withDefault: { val: 0 } },
    'a known key beside the unknown one still builds the object')
  t.match(failure(await app.inject('/q?val=3&next.val=x')), { status: 400, message: /\/next\/val must be an integer/ },
    'a bad value of a known key is still a 400')
  const form = await app.inject({ method: 'POST', url: '/f', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'val=3&next[value]=2&withDefault[other]=1' })
  t.same(form.json(), { val: 3, withDefault: { val: 0 } }, 'urlencoded form')
  t.same((await app.inject({ url: '/c', headers: { cookie: 'val=3; next.value=2' } })).json(), { val: 3, withDefault: { val: 0 } }, 'cookies')
})

t.test('a negative or malformed list index is a 400 naming it, never values silently dropped', async (t) => {
  const Schema = Type.Object({
    items: Type.Optional(Type.Array(Type.Object({ value: Type.Optional(Type.String()) }))),
    data: Type.Optional(Type.Array(Type.String()))
  })
  const app = await bindingApp(t, Schema)
  for (const query of ['items[-1].value=x', 'items.-1.value=x', 'items[-1][value]=x', 'items[0][value]=a&items[-1][value]=b']) {
    t.match(failure(await app.inject(`/q?${query}`)), { status: 400, code: 'FST_CONTEXT_BIND_FAILED', message: /query string: \/items\/-1 is not a list index/ }, query)
  }
  t.match(failure(await app.inject('/q?data[-1]=x')), { status: 400, message: /\/data\/-1 is not a list index/ }, 'a list of strings')
  t.match(failure(await app.inject('/q?data[01]=x')), { status: 400, message: /\/data\/01 is not a list index/ }, 'a padded index')
  t.match(failure(await app.inject('/q?data[0]=a&data[x]=b')), { status: 400, message: /\/data\/x is not a list index/ }, 'a name among indexes')
  const form = await app.inject({ method: 'POST', url: '/f', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'items[-1][value]=x' })
  t.match(failure(form), { status: 400, message: /request body: \/items\/-1 is not a list index/ }, 'urlencoded form')
  t.same((await app.inject('/q?items[1][value]=b&items[0][value]=a&data[0]=x')).json(), { items: [{ value: 'a' }, { value: 'b' }], data: ['x'] }, 'valid indexes still bind')
  t.same((await app.inject('/q?items.value=x')).json(), { items: [{ value: 'x' }] }, 'one item written with names only (no index) is one item, as before')
})
