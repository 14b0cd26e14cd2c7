/** Response writing: Set, Append, Vary, Type, Links, Location, GetRespHeader, GetRespHeaders, Attachment. */
import t from 'tap'
import { replyApp } from './reply-app.js'

t.test('set: native reply.header replaces a response header', async (t) => {
  const app = await replyApp(t, (app) => {
    app.get('/', async (_request, reply) => reply.header('X-Thing', 'one').header('x-thing', 'two').send('ok'))
  })
  t.equal((await app.inject('/')).headers['x-thing'], 'two')
})

t.test('append: adds values without duplicates, creating the header when unset', async (t) => {
  const app = await replyApp(t, (app) => {
    app.get('/', async (_request, reply) => {
      reply.append('X-List', 'a')
      reply.append('x-list', 'b', 'a', 'c')
      reply.append('X-List', 'b')
      reply.header('x-preset', 'one, two')
      reply.append('X-Preset', 'two', 'three')
      reply.append('X-Unchanged')
      return reply.send('ok')
    })
  })
  const response = await app.inject('/')
  t.equal(response.headers['x-list'], 'a, b, c')
  t.equal(response.headers['x-preset'], 'one, two, three')
  t.equal(response.headers['x-unchanged'], undefined, 'no values: nothing is created')
})

t.test('vary: fields added case-insensitively without duplicates, existing order kept, * wins', async (t) => {
  const app = await replyApp(t, (app) => {
    app.get('/', async (_request, reply) => {
      reply.header('vary', 'Origin')
      reply.vary('Accept-Encoding', 'origin')
      reply.vary('Accept', 'accept-encoding, User-Agent')
      return reply.send('ok')
    })
    app.get('/star', async (_request, reply) => reply.vary('Accept').vary('*').vary('Origin').send('ok'))
  })
  t.equal((await app.inject('/')).headers.vary, 'Origin, Accept-Encoding, Accept, User-Agent')
  t.equal((await app.inject('/star')).headers.vary, '*')
})

t.test('typeFromExtension: Content-Type from an extension, with charset when given', async (t) => {
  const app = await replyApp(t, (app) => {
    app.get('/:ext', async (request, reply) => {
      const { ext } = request.params as { ext: string }
      const { charset } = request.query as { charset?: string }
      return reply.typeFromExtension(ext, charset).send('x')
    })
  })
  const cases: Array<[string, string]> = [
    ['/html', 'text/html'],
    // Fastify adds the charset to JSON types it sends
    ['/.json', 'application/json; charset=utf-8'],
    ['/png', 'image/png'],
    ['/html?charset=utf-8', 'text/html; charset=utf-8'],
    ['/txt?charset=iso-8859-1', 'text/plain; charset=iso-8859-1'],
    ['/nosuchext', 'application/octet-stream']
  ]
  for (const [url, type] of cases) {
    t.equal((await app.inject(url)).headers['content-type'], type, url)
  }
})

t.test('links: exact `<url>; rel="..."` pairs joined by ", "', async (t) => {
  const app = await replyApp(t, (app) => {
    app.get('/', async (_request, reply) => reply.links(
      'http://api.example.com/users?page=2', 'next',
      'http://api.example.com/users?page=5', 'last'
    ).send('ok'))
    app.get('/odd', async (_request, reply) => reply.links('http://x.example', 'next', 'http://y.example').send('ok'))
    app.get('/inject', async (_request, reply) => reply.links('http://x.example>; rel="evil"', 'next').send('ok'))
  })
  t.equal((await app.inject('/')).headers.link,
    '<http://api.example.com/users?page=2>; rel="next", <http://api.example.com/users?page=5>; rel="last"')
  t.equal((await app.inject('/odd')).statusCode, 500, 'a url without its rel is a programming error')
  t.equal((await app.inject('/inject')).statusCode, 500, 'a url that would close the <...> is refused')
})

t.test('location: sets Location, percent-encoding what a URL may not hold', async (t) => {
  const app = await replyApp(t, (app) => {
    app.get('/', async (request, reply) => reply.code(201).location((request.query as { to: string }).to).send())
  })
  const cases: Array<[string, string]> = [
    ['/users/7', '/users/7'],
    ['https://example.com/a?b=c#d', 'https://example.com/a?b=c#d'],
    ['/ünï cödé', '/%C3%BCn%C3%AF%20c%C3%B6d%C3%A9'],
    ['/already%20encoded', '/already%20encoded'],
    ['/100%', '/100%25']
  ]
  for (const [to, location] of cases) {
    const response = await app.inject({ url: '/', query: { to } })
    t.equal(response.statusCode, 201)
    t.equal(response.headers.location, location, to)
  }
})

t.test('getRespHeader and getRespHeaders: what was set so far, case-insensitive', async (t) => {
  const app = await replyApp(t, (app) => {
    app.get('/', async (_request, reply) => {
      reply.header('X-One', 'a').header('content-length-ish', 12)
      reply.setCookieRecord({ name: 'a', value: '1' }).setCookieRecord({ name: 'b', value: '2' })
      return {
        one: reply.getRespHeader('x-one'),
        oneUpper: reply.getRespHeader('X-ONE'),
        number: reply.getRespHeader('Content-Length-Ish'),
        missing: reply.getRespHeader('x-missing'),
        fallback: reply.getRespHeader('x-missing', 'dflt'),
        cookies: reply.getRespHeader('set-cookie'),
        all: reply.getRespHeaders()
      }
    })
  })
  const body = (await app.inject('/')).json()
  t.equal(body.one, 'a')
  t.equal(body.oneUpper, 'a')
  t.equal(body.number, '12')
  t.equal(body.missing, '')
  t.equal(body.fallback, 'dflt')
  t.equal(body.cookies, 'a=1; Path=/; SameSite=Lax, b=2; Path=/; SameSite=Lax')
  t.same(body.all, {
    'x-one': ['a'],
    'content-length-ish': ['12'],
    'set-cookie': ['a=1; Path=/; SameSite=Lax', 'b=2; Path=/; SameSite=Lax']
  })
})

t.test('attachment: Content-Disposition (RFC 6266 / 5987) and Content-Type from the name', async (t) => {
  const app = await replyApp(t, (app) => {
    app.get('/', async (request, reply) => {
      const { name } = request.query as { name?: string }
      return reply.attachment(name).send('data')
    })
  })
  const bare = await app.inject('/')
  t.equal(bare.headers['content-disposition'], 'attachment')
  t.equal(bare.headers['content-type'], 'text/plain; charset=utf-8', 'no name: the type is not touched')

  const cases: Array<[string, string, string]> = [
    // a token-safe name is not quoted (RFC 6266 allows both; the content-disposition package)
    ['report.pdf', 'attachment; filename=report.pdf', 'application/pdf'],
    ['./some/dir/notes.txt', 'attachment; filename=notes.txt', 'text/plain; charset=utf-8'],
    ['naïve résumé.pdf', 'attachment; filename="na?ve r?sum?.pdf"; filename*=UTF-8\'\'na%C3%AFve%20r%C3%A9sum%C3%A9.pdf', 'application/pdf'],
    ['say "hi".json', 'attachment; filename="say \\"hi\\".json"', 'application/json; charset=utf-8'],
    ['my archive.unknownext', 'attachment; filename="my archive.unknownext"', 'text/plain; charset=utf-8']
  ]
  for (const [name, disposition, type] of cases) {
    const response = await app.inject({ url: '/', query: { name } })
    t.equal(response.headers['content-disposition'], disposition, name)
    t.equal(response.headers['content-type'], type, `${name} type`)
  }
})
