/** Response writing: Status, SendStatus, Send, SendString, SendStream, Write, Writef, WriteString. */
import { Readable } from 'node:stream'
import t from 'tap'
import { ContextArgumentError, ReplyAlreadySentError } from '@user-product-service/context'
import { replyApp } from './reply-app.js'

t.test('status: native reply.code / reply.status, chainable', async (t) => {
  const app = await replyApp(t, (app) => {
    app.get('/code', async (_request, reply) => reply.code(201).send('made'))
    app.get('/status', async (_request, reply) => reply.status(202).header('x-a', '1').send('queued'))
  })
  const made = await app.inject('/code')
  t.equal(made.statusCode, 201)
  t.equal(made.body, 'made')
  const queued = await app.inject('/status')
  t.equal(queued.statusCode, 202)
  t.equal(queued.headers['x-a'], '1')
})

t.test('sendStatus: status text when the body is empty, the written body otherwise', async (t) => {
  const app = await replyApp(t, (app) => {
    app.get('/empty/:code', async (request, reply) => reply.sendStatus(Number((request.params as { code: string }).code)))
    app.get('/written', async (_request, reply) => {
      reply.writeString('custom body')
      return reply.sendStatus(404)
    })
  })
  const notFound = await app.inject('/empty/404')
  t.equal(notFound.statusCode, 404)
  t.equal(notFound.body, 'Not Found')
  t.equal(notFound.headers['content-type'], 'text/plain; charset=utf-8')

  const teapot = await app.inject('/empty/418')
  t.equal(teapot.statusCode, 418)
  t.equal(teapot.body, "I'm a Teapot")

  const unknown = await app.inject('/empty/299')
  t.equal(unknown.statusCode, 299)
  t.equal(unknown.body, '', 'a status without a standard text gives an empty body')

  const noContent = await app.inject('/empty/204')
  t.equal(noContent.statusCode, 204)
  t.equal(noContent.body, '', '204 never has a body')

  const written = await app.inject('/written')
  t.equal(written.statusCode, 404)
  t.equal(written.body, 'custom body', 'a body that was written is kept')
})

t.test('the context body: setBody sets, write appends, sendStatus keeps a body; sent once when the handler ends', async (t) => {
  const app = await replyApp(t, (app) => {
    app.get('/set-twice', async (_request, reply) => {
      reply.setBody('first')
      reply.setBody('second')
    })
    app.get('/status-after-body', async (_request, reply) => {
      reply.sendString('kept')
      reply.sendStatus(404)
    })
    app.get('/status-twice', async (_request, reply) => {
      reply.sendStatus(404)
      reply.sendStatus(410)
    })
    app.get('/status-then-write', async (_request, reply) => {
      reply.sendStatus(503)
      reply.writeString(': try later')
    })
    app.get('/body-then-write', async (_request, reply) => {
      reply.setBody(Buffer.from('ab'))
      reply.write('cd')
    })
    app.get('/write-then-set', async (_request, reply) => {
      reply.writeString('draft')
      reply.setBody('final')
    })
    app.get('/status-after-json', async (_request, reply) => {
      reply.json({ created: true })
      reply.code(201).header('location', '/x/1')
    })
    app.get('/body-after-json', async (_request, reply) => {
      reply.json({ a: 1 })
      reply.setBody('{"b":2}')
    })
    app.get('/bytes', async (_request, reply) => {
      reply.setBody(new Uint8Array([0, 1, 255]))
    })
    app.get('/typed-bytes', async (_request, reply) => {
      reply.type('image/png')
      reply.setBody(Buffer.from([0x89]))
    })
    app.get('/sync', (_request, reply) => {
      reply.sendStatus(202)
    })
    app.get('/sync-json', (_request, reply) => {
      reply.json({ sync: true })
    })
    app.get('/callback', (_request, reply) => {
      reply.writeString('a')
      setImmediate(() => {
        reply.writeString('b')
        reply.send()
      })
      return reply
    })
  })
  const get = async (url: string) => await app.inject(url)

  t.equal((await get('/set-twice')).body, 'second', 'a later Send is not lost')
  const statusAfterBody = await get('/status-after-body')
  t.equal(statusAfterBody.statusCode, 404, 'a later SendStatus sets the status')
  t.equal(statusAfterBody.body, 'kept', '...and keeps the body that was set')
  const twice = await get('/status-twice')
  t.same([twice.statusCode, twice.body], [410, 'Not Found'], 'the second SendStatus finds a body (the first status text)')
  const statusThenWrite = await get('/status-then-write')
  t.same([statusThenWrite.statusCode, statusThenWrite.body], [503, 'Service Unavailable: try later'], 'Write after SendStatus appends')
  const bodyThenWrite = await get('/body-then-write')
  t.equal(bodyThenWrite.body, 'abcd', 'Write after Send appends')
  t.equal(bodyThenWrite.headers['content-type'], 'application/octet-stream', 'bytes set first: octet-stream')
  const writeThenSet = await get('/write-then-set')
  t.equal(writeThenSet.body, 'final', 'Send after Write replaces')
  t.equal(writeThenSet.headers['content-type'], 'text/plain; charset=utf-8')
  const created = await get('/status-after-json')
  t.same([created.statusCode, created.headers.location, created.json()], [201, '/x/1', { created: true }], 'status and headers after JSON still count')
  t.equal((await get('/body-after-json')).body, '{"b":2}', 'JSON sets the body like Send: a later Send replaces it')
  const bytes = await get('/bytes')
  t.same([...bytes.rawPayload], [0, 1, 255])
  t.equal(bytes.headers['content-type'], 'application/octet-stream')
  t.equal(bytes.headers['content-length'], '3')
  t.equal((await get('/typed-bytes')).headers['content-type'], 'image/png', 'a type the handler set wins')
  const sync = await get('/sync')
  t.same([sync.statusCode, sync.body], [202, 'Accepted'], 'a sync handler: the body goes out when it returns')
  t.same((await get('/sync-json')).json(), { sync: true })
  t.equal((await get('/callback')).body, 'ab', 'callback style: reply.send() without a payload sends the context body')
})

t.test('the context body: plain reply.send and returned values keep Fastify\'s meaning; errors win; HEAD', async (t) => {
  const app = await replyApp(t, (app) => {
    app.get('/send-payload', async (_request, reply) => {
      reply.setBody('context')
      return reply.send('plain send wins')
    })
    app.get('/returned', async (_request, reply) => {
      reply.setBody('context')
      return { returned: true }
    })
    app.get('/thrown', async (_request, reply) => {
      reply.setBody('must not leak')
      reply.code(200)
      throw Object.assign(new Error('nope'), { statusCode: 409 })
    })
    app.get('/head', async (_request, reply) => {
      reply.sendString('twelve bytes')
    })
    app.get('/untouched', async () => undefined)
  })
  t.equal((await app.inject('/send-payload')).body, 'plain send wins')
  t.same((await app.inject('/returned')).json(), { returned: true })
  const thrown = await app.inject('/thrown')
  t.equal(thrown.statusCode, 409)
  t.notOk(thrown.body.includes('must not leak'))
  const head = await app.inject({ method: 'HEAD', url: '/head' })
  t.equal(head.statusCode, 200)
  t.equal(head.body, '')
  t.equal(head.headers['content-length'], '12')
  const untouched = await app.inject('/untouched')
  t.same([untouched.statusCode, untouched.body], [200, ''], 'no context body: Fastify\'s empty reply')
})

t.test('the context body on routes registered before the plugin: async handlers, and reply.send() in sync ones', async (t) => {
  const Fastify = (await import('fastify')).default
  const context = (await import('@user-product-service/context')).default
  const app = Fastify()
  t.teardown(() => app.close())
  await app.register(async (child) => {
    child.get('/early-async', async (_request, reply) => {
      reply.sendStatus(404)
    })
    child.get('/early-sync', (_request, reply) => {
      reply.writeString('sync')
      reply.send()
    })
  })
  await app.register(context)
  await app.ready()
  const early = await app.inject('/early-async')
  t.same([early.statusCode, early.body], [404, 'Not Found'])
  t.equal((await app.inject('/early-sync')).body, 'sync')
})

t.test('Fastify\'s own reply.send of bytes or text is unchanged', async (t) => {
  const app = await replyApp(t, (app) => {
    app.get('/bytes', async (_request, reply) => reply.send(Buffer.from([0, 1, 2, 255])))
    app.get('/text', async (_request, reply) => reply.send('héllo'))
  })
  const bytes = await app.inject('/bytes')
  t.same([...bytes.rawPayload], [0, 1, 2, 255])
  t.equal(bytes.headers['content-type'], 'application/octet-stream')
  const text = await app.inject('/text')
  t.equal(text.body, 'héllo')
  t.equal(text.headers['content-type'], 'text/plain; charset=utf-8')
})

t.test('sendStream: streams the body, Content-Length only when the size is given', async (t) => {
  const app = await replyApp(t, (app) => {
    app.get('/sized', async (_request, reply) => reply.sendStream(Readable.from([Buffer.from('abc'), Buffer.from('def')]), 6))
    app.get('/unsized', async (_request, reply) => reply.sendStream(Readable.from([Buffer.from('abc'), Buffer.from('def')])))
    app.get('/bad-size', async (_request, reply) => reply.sendStream(Readable.from(['x']), -1))
    app.get('/not-stream', async (_request, reply) => reply.sendStream('text' as unknown as Readable))
  })
  const sized = await app.inject('/sized')
  t.equal(sized.body, 'abcdef')
  t.equal(sized.headers['content-length'], '6')
  t.equal(sized.headers['content-type'], 'application/octet-stream')
  const unsized = await app.inject('/unsized')
  t.equal(unsized.body, 'abcdef')
  t.equal(unsized.headers['content-length'], undefined)
  t.equal(unsized.headers['transfer-encoding'], 'chunked')
  const bad = await app.inject('/bad-size')
  t.equal(bad.statusCode, 500)
  t.equal(bad.json().code, new ContextArgumentError('x').code)
  t.equal((await app.inject('/not-stream')).statusCode, 500)
})

t.test('write, writef, writeString: append to the body, return byte counts, sent when the handler returns', async (t) => {
  const counts: number[] = []
  const app = await replyApp(t, (app) => {
    app.get('/', async (_request, reply) => {
      counts.push(reply.write(Buffer.from('ab')))
      counts.push(reply.write(new Uint8Array([0x63])))
      counts.push(reply.writeString('é'))
      counts.push(reply.writef(' %s=%d %j %v %% %i', 'n', 42, { a: [1] }, 'v', 3.9))
      counts.push(reply.write('!'))
      // returning nothing: Fastify sends the reply, the written body goes out
    })
  })
  const response = await app.inject('/')
  t.equal(response.statusCode, 200)
  t.equal(response.body, 'abcé n=42 {"a":[1]} v % 3!')
  t.same(counts, [2, 1, 2, 21, 1], 'UTF-8 byte counts (é is two bytes)')
  t.equal(response.headers['content-type'], 'text/plain; charset=utf-8')
  t.equal(response.headers['content-length'], String(Buffer.byteLength('abcé n=42 {"a":[1]} v % 3!')))
})

t.test('write: the handler type and status win; send(payload) replaces the written body', async (t) => {
  const app = await replyApp(t, (app) => {
    app.get('/typed', async (_request, reply) => {
      reply.code(201).type('text/csv')
      reply.writeString('a,b\n')
      reply.writeString('1,2\n')
    })
    app.get('/replaced', async (_request, reply) => {
      reply.writeString('draft')
      return reply.send('final')
    })
    app.get('/sync', (_request, reply) => {
      reply.writeString('from a sync handler')
      reply.send()
    })
  })
  const typed = await app.inject('/typed')
  t.equal(typed.statusCode, 201)
  t.equal(typed.headers['content-type'], 'text/csv')
  t.equal(typed.body, 'a,b\n1,2\n')
  t.equal((await app.inject('/replaced')).body, 'final')
  t.equal((await app.inject('/sync')).body, 'from a sync handler')
})

t.test('write after the reply was sent throws ReplyAlreadySentError; bad arguments throw', async (t) => {
  let late: unknown
  const app = await replyApp(t, (app) => {
    app.get('/late', async (_request, reply) => {
      await reply.send('done')
      try { reply.writeString('late') } catch (error) { late = error }
    })
    app.get('/bad', async (_request, reply) => {
      reply.write(42 as unknown as string)
    })
  })
  const response = await app.inject('/late')
  t.equal(response.body, 'done')
  t.ok(late instanceof ReplyAlreadySentError)
  const bad = await app.inject('/bad')
  t.equal(bad.statusCode, 500)
  t.equal(bad.json().code, 'FST_CONTEXT_INVALID_ARGUMENT')
})
