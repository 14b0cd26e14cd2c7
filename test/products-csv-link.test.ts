/**
 * `GET /api/product?format=csv`: the CSV catalogue by a plain link or `<a download>`, whose
 * navigation sends a browser's Accept (which negotiation answers with JSON).
 */
import t from 'tap'
import { assertProblem } from './helpers/assertions.js'
import { build, registerAndLogin } from './helpers/build.js'

const NAVIGATION = 'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7'

t.test('format=csv answers the CSV download whatever Accept says; without it, Accept decides as before', async (t) => {
  const app = await build(t)
  const me = await registerAndLogin(app)
  for (const title of ['lamp', 'chair', 'desk']) await app.inject({ method: 'POST', url: '/api/product', headers: me.auth, payload: { title, amount: 1 } })

  const csv = await app.inject({ url: '/api/product?format=csv&limit=2', headers: { accept: NAVIGATION } })
  t.equal(csv.statusCode, 200)
  t.match(csv.headers['content-type'], /^text\/csv/)
  t.equal(csv.headers['content-disposition'], 'attachment; filename="products.csv"')
  t.match(csv.body.split('\r\n')[0], /title/, 'a header row')
  t.match(csv.headers.link, /format=csv/, 'the next page keeps the format')
  t.equal((await app.inject({ url: '/api/product?format=csv' })).headers['content-disposition'], 'attachment; filename="products.csv"', 'no Accept at all')
  t.match((await app.inject({ url: '/api/product?format=csv', headers: { accept: 'application/json' } })).headers['content-type'], /^text\/csv/, 'format wins over Accept')

  const json = await app.inject({ url: '/api/product?format=json', headers: { accept: 'text/csv' } })
  t.match(json.headers['content-type'], /^application\/json/, 'format=json wins too')
  t.match((await app.inject({ url: '/api/product', headers: { accept: NAVIGATION } })).headers['content-type'], /^application\/json/, 'no format: a navigation still gets JSON')
  t.match((await app.inject({ url: '/api/product', headers: { accept: 'text/csv' } })).headers['content-type'], /^text\/csv/, 'no format: Accept: text/csv still gets CSV')
  assertProblem(t, await app.inject({ url: '/api/product?format=xlsx' }), 400, 'VALIDATION_FAILED')
})
