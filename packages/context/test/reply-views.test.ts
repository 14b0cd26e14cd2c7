/** Response writing: render and bind, with Eta templates in reply-fixtures/views. */
import path from 'node:path'
import t from 'tap'
import { ViewsNotConfiguredError } from '@user-product-service/context'
import { FIXTURES, replyApp } from './reply-app.js'

const VIEWS = { root: path.join(FIXTURES, 'views') }

t.test('render: template with data, text/html, HTML-escaped values', async (t) => {
  const app = await replyApp(t, (app) => {
    app.get('/', async (_request, reply) => reply.render('hello', { title: 'Hi <there>', greeting: 'Hello', name: 'Ann & Bob' }))
  }, { views: VIEWS })
  const response = await app.inject('/')
  t.equal(response.statusCode, 200)
  t.equal(response.headers['content-type'], 'text/html; charset=utf-8')
  t.equal(response.body.trim(), '<h1>Hi &lt;there&gt;</h1><p>Hello, Ann &amp; Bob</p>')
})

t.test('bind: default variables that render data overrides; per reply', async (t) => {
  const app = await replyApp(t, (app) => {
    app.addHook('preHandler', async (_request, reply) => {
      reply.bind({ title: 'Site', greeting: 'Welcome', name: 'guest' })
    })
    app.get('/defaults', async (_request, reply) => reply.render('hello'))
    app.get('/override', async (_request, reply) => reply.bind({ greeting: 'Hey' }).render('hello', { name: 'Ann' }))
  }, { views: VIEWS })
  t.equal((await app.inject('/defaults')).body.trim(), '<h1>Site</h1><p>Welcome, guest</p>')
  t.equal((await app.inject('/override')).body.trim(), '<h1>Site</h1><p>Hey, Ann</p>', 'bind merges; render data wins')
  t.equal((await app.inject('/defaults')).body.trim(), '<h1>Site</h1><p>Welcome, guest</p>', 'nothing leaks between requests')
})

t.test('render with layouts: each wraps the previous result as `body`, innermost first', async (t) => {
  const app = await replyApp(t, (app) => {
    app.get('/one', async (_request, reply) => reply.render('hello', { title: 'T', greeting: 'G', name: 'N', theme: 'dark' }, 'layout'))
    app.get('/two', async (_request, reply) => reply.render('hello', { title: 'T', greeting: 'G', name: 'N', theme: 'dark' }, 'layout', 'outer'))
  }, { views: VIEWS })
  t.equal((await app.inject('/one')).body.trim(), '<main class="dark"><h1>T</h1><p>G, N</p>\n</main>')
  t.equal((await app.inject('/two')).body.trim(),
    '<html><title>T</title><body><main class="dark"><h1>T</h1><p>G, N</p>\n</main>\n</body></html>')
})

t.test('render: a missing template is a 500 through the error handler; no views configured', async (t) => {
  const app = await replyApp(t, (app) => {
    app.get('/', async (_request, reply) => reply.render('no-such-template'))
  }, { views: VIEWS })
  const missing = await app.inject('/')
  t.equal(missing.statusCode, 500)
  t.notOk(String(missing.headers['content-type']).startsWith('text/html'))

  const bare = await replyApp(t, (app) => {
    app.get('/', async (_request, reply) => reply.render('hello'))
  })
  const response = await bare.inject('/')
  t.equal(response.statusCode, 500)
  t.equal(response.json().code, new ViewsNotConfiguredError().code)
})
