/**
 * Product images in PostgreSQL (src/storage/blob-storage.ts) over real HTTP, on a cluster
 * this test may stop: two replicas of the service on one database read each other's
 * uploads, whole and by range; an upload cut off by its client after chunks were written
 * leaves no row; the database stopped mid-upload gives the client a 503, and once it is
 * back there is no partial image and uploads work again.
 */
import net from 'node:net'
import pg from 'pg'
import t from 'tap'
import { build, registerAndLogin, type Session, type TestApp } from '../helpers/build.js'
import { applyMigrations } from '../helpers/migrations.js'
import { startCluster } from './helpers/cluster.js'

const SIZE = 1536 * 1024 // six chunks of 256 KiB
const PNG_HEAD = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64')
const image = (fill: number): Buffer => Buffer.concat([PNG_HEAD, Buffer.alloc(SIZE - PNG_HEAD.length, fill)])
const sleep = async (ms: number) => await new Promise((resolve) => setTimeout(resolve, ms))

const cluster = await startCluster(t)
await applyMigrations(cluster.url)
const env = { IMAGE_MAX_BYTES: String(4 * 1024 * 1024), IMAGE_BYTES_MAX_PER_USER: String(100 * 1024 * 1024) }
const apps: TestApp[] = [await build(t, { databaseUrl: cluster.url, env }), await build(t, { databaseUrl: cluster.url, env })]
const urls = await Promise.all(apps.map(async (app) => await app.listen({ host: '127.0.0.1', port: 0 })))
const me = await registerAndLogin(apps[0]!)

async function query<Row extends pg.QueryResultRow> (text: string, values: unknown[] = []): Promise<Row[]> {
  const client = new pg.Client({ connectionString: cluster.url })
  await client.connect()
  try { return (await client.query<Row>(text, values)).rows } finally { await client.end() }
}
const chunkRows = async (): Promise<number> => Number((await query<{ n: string }>('SELECT count(*) AS n FROM blob_chunks'))[0]!.n)
/** Whether some transaction is inserting into blob_chunks (its rows are invisible until it commits). */
const writing = async (): Promise<boolean> => Number((await query<{ n: string }>("SELECT count(*) AS n FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'blob_chunks' AND l.mode = 'RowExclusiveLock' AND l.pid <> pg_backend_pid()"))[0]!.n) > 0

async function newProduct (session: Session): Promise<number> {
  const res = await apps[0]!.inject({ method: 'POST', url: '/api/product', headers: session.auth, payload: { title: 'pictured', amount: 1 } })
  return res.json().id as number
}

function form (data: Buffer): { body: Buffer, type: string } {
  const boundary = '----dbimages9x'
  return {
    body: Buffer.concat([Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="image"; filename="a.png"\r\nContent-Type: image/png\r\n\r\n`), data, Buffer.from(`\r\n--${boundary}--\r\n`)]),
    type: `multipart/form-data; boundary=${boundary}`
  }
}

/** An upload over a raw socket: the head and the first `first` bytes of the body are sent at once, the rest when `rest()` is called. */
function rawUpload (base: string, id: number, data: Buffer, first: number) {
  const { body, type } = form(data)
  const socket = net.connect(Number(new URL(base).port), '127.0.0.1')
  let answer = ''
  socket.on('data', (chunk: Buffer) => { answer += chunk.toString('latin1') })
  socket.on('error', () => {})
  const closed = new Promise<void>((resolve) => socket.once('close', () => { resolve() }))
  socket.write(`POST /api/product/${id}/image HTTP/1.1\r\nHost: localhost\r\nAuthorization: ${me.auth.authorization}\r\nContent-Type: ${type}\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`)
  socket.write(body.subarray(0, first))
  return {
    socket,
    rest: () => { socket.write(body.subarray(first)) },
    answer: async () => { await closed; return answer }
  }
}

async function upload (base: string, id: number, data: Buffer): Promise<Response> {
  const { body, type } = form(data)
  return await fetch(`${base}/api/product/${id}/image`, { method: 'POST', headers: { ...me.auth, 'content-type': type }, body })
}

t.test('two replicas on one database read each other\'s uploads, whole and by range', async (t) => {
  for (const [from, to] of [[0, 1], [1, 0]] as const) {
    const id = await newProduct(me)
    const data = image(from + 1)
    t.equal((await upload(urls[from]!, id, data)).status, 201, `uploaded at replica ${from}`)
    const whole = await fetch(`${urls[to]}/api/product/${id}/image`)
    t.equal(whole.status, 200)
    t.ok(Buffer.from(await whole.arrayBuffer()).equals(data), `replica ${to} serves the same bytes`)
    // A range across a chunk boundary (256 KiB).
    const start = 256 * 1024 - 10
    const part = await fetch(`${urls[to]}/api/product/${id}/image`, { headers: { range: `bytes=${start}-${start + 99}` } })
    t.equal(part.status, 206)
    t.equal(part.headers.get('content-range'), `bytes ${start}-${start + 99}/${SIZE}`)
    t.ok(Buffer.from(await part.arrayBuffer()).equals(data.subarray(start, start + 100)), 'the range\'s bytes')
  }
})

t.test('an upload cut off after chunks were written leaves no chunk row', async (t) => {
  const id = await newProduct(me)
  const before = await chunkRows()
  const cut = rawUpload(urls[0]!, id, image(9), 1024 * 1024)
  for (let i = 0; i < 200 && !await writing(); i++) await sleep(50)
  t.ok(await writing(), 'chunks were being written in the open transaction')
  cut.socket.destroy()
  for (let i = 0; i < 200 && await writing(); i++) await sleep(50)
  t.notOk(await writing(), 'the transaction has ended')
  t.equal(await chunkRows(), before, 'no chunk row was kept')
  t.same(await query('SELECT key FROM blobs WHERE key LIKE $1', [`products/${id}/%`]), [], 'no file row')
  t.equal((await apps[1]!.inject({ method: 'GET', url: `/api/product/${id}` })).json().imageUrl, null)
})

t.test('the database stopped mid-upload: a 503, no partial image once it is back', async (t) => {
  const id = await newProduct(me)
  const before = await chunkRows()
  const cut = rawUpload(urls[0]!, id, image(7), 1024 * 1024)
  for (let i = 0; i < 200 && !await writing(); i++) await sleep(50)
  t.ok(await writing(), 'chunks were being written in the open transaction')
  await cluster.stop()
  cut.rest()
  const answer = await cut.answer()
  t.match(answer, /^HTTP\/1\.1 503 /, `a 503 (${answer.split('\r\n')[0]})`)
  t.match(answer, /\r\nretry-after: \d+/i, 'with Retry-After')
  t.match(answer, /application\/problem\+json/)
  await cluster.start()
  t.equal(await chunkRows(), before, 'no chunk row was kept')
  t.same(await query('SELECT key FROM blobs WHERE key LIKE $1', [`products/${id}/%`]), [], 'no file row')
  // The pool reconnects: uploads work again.
  let status = 0
  for (let i = 0; i < 50 && status !== 201; i++) {
    status = (await upload(urls[0]!, id, image(8))).status
    if (status !== 201) await sleep(200)
  }
  t.equal(status, 201, 'an upload after the restart is stored')
  const back = await fetch(`${urls[1]}/api/product/${id}/image`)
  t.ok(Buffer.from(await back.arrayBuffer()).equals(image(8)), 'and served whole by the other replica')
})
