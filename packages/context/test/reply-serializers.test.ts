/** The serializing reply decorators: json, jsonp, xml, and format (content negotiation). */
import t from 'tap'
import { Type } from 'typebox'
import { JsonpCallbackError, XmlNameError } from '@user-product-service/context'
import { replyApp } from './reply-app.js'

t.test('json: application/json unless a content type is given; the route response schema applies', async (t) => {
  const app = await replyApp(t, (app) => {
    app.get('/', async (_request, reply) => reply.json({ a: 1, b: ['x'], c: null }))
    app.get('/typed', async (_request, reply) => reply.json({ title: 'x' }, 'application/problem+json'))
    app.get('/undefined', async (_request, reply) => reply.json(undefined))
    app.get('/string', async (_request, reply) => reply.json('text'))
    app.get('/schema', {
      schema: { response: { 200: Type.Object({ id: Type.Integer(), name: Type.String() }) } }
    }, async (_request, reply) => reply.json({ id: 1, name: 'n', passwordHash: 'secret' }))
  })
  const plain = await app.inject('/')
  t.equal(plain.headers['content-type'], 'application/json', 'no charset parameter: RFC 8259 section 11 defines none for application/json')
  t.equal(plain.body, '{"a":1,"b":["x"],"c":null}')
  t.equal((await app.inject('/string')).headers['content-type'], 'application/json', 'a JSON string too')
  const typed = await app.inject('/typed')
  t.equal(typed.headers['content-type'], 'application/problem+json', 'a given content type is kept as given (no charset added)')
  t.same(typed.json(), { title: 'x' })
  t.equal((await app.inject('/undefined')).body, 'null')
  t.equal((await app.inject('/string')).body, '"text"')
  const schema = await app.inject('/schema')
  t.same(schema.json(), { id: 1, name: 'n' }, 'fields outside the response schema never leave')
})

t.test('jsonp: callback(json); as text/javascript with nosniff, default name callback', async (t) => {
  const app = await replyApp(t, (app) => {
    app.get('/', async (request, reply) => {
      const { cb } = request.query as { cb?: string }
      return reply.jsonp({ a: 1, s: 'line\u2028sep' }, cb)
    })
  })
  const plain = await app.inject('/')
  t.equal(plain.statusCode, 200)
  t.equal(plain.body, 'callback({"a":1,"s":"line\\u2028sep"});', 'U+2028 escaped for old JavaScript parsers')
  t.equal(plain.headers['content-type'], 'text/javascript; charset=utf-8')
  t.equal(plain.headers['x-content-type-options'], 'nosniff')

  const named = await app.inject({ url: '/', query: { cb: 'app.handlers.$done_1' } })
  t.equal(named.body, 'app.handlers.$done_1({"a":1,"s":"line\\u2028sep"});')

  for (const cb of ['alert(1)//', 'a b', '1abc', 'a..b', 'a.', '<script>', 'x;y', 'a'.repeat(129), 'café']) {
    const refused = await app.inject({ url: '/', query: { cb } })
    t.equal(refused.statusCode, 400, `refused: ${cb}`)
    t.equal(refused.json().code, new JsonpCallbackError().code)
    t.notOk(String(refused.headers['content-type']).includes('javascript'))
  }
})

t.test('xml: XMLBuilder output as application/xml, escaped, attributes with @_', async (t) => {
  const app = await replyApp(t, (app) => {
    app.get('/object', async (_request, reply) => reply.xml({ user: { '@_id': '7', name: 'Ann & <Bob>', tags: { tag: ['a', 'b'] } } }))
    app.get('/array', async (_request, reply) => reply.xml([1, 2]))
    app.get('/string', async (_request, reply) => reply.xml('text <x>'))
  })
  const object = await app.inject('/object')
  t.equal(object.headers['content-type'], 'application/xml; charset=utf-8')
  t.equal(object.body, '<user id="7"><name>Ann &amp; &lt;Bob&gt;</name><tags><tag>a</tag><tag>b</tag></tags></user>')
  t.equal((await app.inject('/array')).body, '<root><item>1</item><item>2</item></root>')
  t.equal((await app.inject('/string')).body, '<root>text &lt;x&gt;</root>')
})

t.test('xml: keys that are not XML names are refused (400), never written as markup', async (t) => {
  const app = await replyApp(t, async (app) => {
    app.post('/', async (request, reply) => reply.xml(request.body))
  })
  const post = async (body: unknown) => await app.inject({ method: 'POST', url: '/', payload: body as Record<string, unknown> })
  const refused: Array<[unknown, string]> = [
    [{ 'script xmlns="http://www.w3.org/1999/xhtml"': 'alert(1)' }, 'element name with a space and a namespace'],
    [{ 'svg onload="alert(1)"': 'x' }, 'attribute smuggled in an element name'],
    [{ a: { '@_onload="x" b': '1' } }, 'attribute name with markup'],
    [{ a: { '@_xmlns': 'http://www.w3.org/1999/xhtml' } }, 'namespace declaration'],
    [{ a: { '@_xmlns:h': 'http://www.w3.org/1999/xhtml' } }, 'prefixed namespace declaration'],
    [{ '?xml-stylesheet': 'href="evil.xsl"' }, 'processing instruction'],
    [{ a: { 'b>c': 1 } }, 'nested key with >'],
    [{ '1a': 'x' }, 'name starting with a digit'],
    [{ '': 'x' }, 'empty name'],
    [{ a: [{ '<b': 1 }] }, 'key inside an array'],
    [{ a: { '@_x': { y: 1 } } }, 'attribute with an object value']
  ]
  for (const [body, label] of refused) {
    const response = await post(body)
    t.equal(response.statusCode, 400, label)
    t.equal(response.json().code, new XmlNameError('x').code, label)
    t.notOk(String(response.headers['content-type']).includes('xml'), `${label}: no XML sent`)
  }
  const ok = await post({ 'ns:élément_1.x-y': { '@_data-id': 'a"<&>\'', '#text': 'v' } })
  t.equal(ok.statusCode, 200)
  t.equal(ok.body, '<ns:élément_1.x-y data-id="a&quot;&lt;&amp;&gt;&apos;">v</ns:élément_1.x-y>', 'valid names kept, values escaped')
  const controls = await post({ a: 'x\u0000y\u001bz\ud800' })
  t.equal(controls.body, '<a>x\ufffdy\ufffdz\ufffd</a>', 'characters XML cannot hold become U+FFFD')
})

t.test('xml: data nested too deep (or circular) is refused, not a stack overflow', async (t) => {
  const app = await replyApp(t, (app) => {
    app.get('/', async (_request, reply) => {
      const circular: Record<string, unknown> = { a: 1 }
      circular.self = circular
      return reply.xml({ root: circular })
    })
  })
  const response = await app.inject('/')
  t.equal(response.statusCode, 500)
  t.equal(response.json().code, 'FST_CONTEXT_INVALID_ARGUMENT')
})

t.test('format: negotiates plain text, <p>html</p> (escaped) or a JSON string on Accept', async (t) => {
  const app = await replyApp(t, (app) => {
    app.get('/', async (request, reply) => reply.format((request.query as { v?: string }).v ?? 'Hello <World> & "you"'))
    app.get('/object', async (_request, reply) => reply.format({ a: 1 }))
  })
  const cases: Array<[string | undefined, string, string]> = [
    [undefined, 'text/plain; charset=utf-8', 'Hello <World> & "you"'],
    ['text/html', 'text/html; charset=utf-8', '<p>Hello &lt;World&gt; &amp; &quot;you&quot;</p>'],
    ['application/json', 'application/json', '"Hello <World> & \\"you\\""'],
    ['text/plain', 'text/plain; charset=utf-8', 'Hello <World> & "you"'],
    ['image/png', 'text/plain; charset=utf-8', 'Hello <World> & "you"'],
    ['*/*', 'text/plain; charset=utf-8', 'Hello <World> & "you"'],
    ['text/*', 'text/plain; charset=utf-8', 'Hello <World> & "you"'],
    ['text/html;q=0.5, application/json;q=0.9', 'application/json', '"Hello <World> & \\"you\\""'],
    ['application/json;q=0, text/html', 'text/html; charset=utf-8', '<p>Hello &lt;World&gt; &amp; &quot;you&quot;</p>'],
    ['text/html, */*;q=0.1', 'text/html; charset=utf-8', '<p>Hello &lt;World&gt; &amp; &quot;you&quot;</p>']
  ]
  for (const [accept, type, body] of cases) {
    const response = await app.inject({ url: '/', headers: accept === undefined ? {} : { accept } })
    t.equal(response.statusCode, 200)
    t.equal(response.headers['content-type'], type, `Accept: ${accept}`)
    t.equal(response.body, body, `Accept: ${accept}`)
    t.equal(response.headers.vary, 'Accept')
  }
  const json = await app.inject({ url: '/object', headers: { accept: 'application/json' } })
  t.same(json.json(), { a: 1 })
  const html = await app.inject({ url: '/object', headers: { accept: 'text/html' } })
  t.equal(html.body, '<p>{&quot;a&quot;:1}</p>')
})
