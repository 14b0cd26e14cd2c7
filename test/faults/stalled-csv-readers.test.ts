/**
 * Clients that ask for the CSV catalogue and stop reading (docs/api.md, "CSV"): the real
 * server in a child process, a catalogue of long rows (the longest title and description
 * the API takes), 128 connections that read the answer's head and then nothing. The
 * service's memory (RSS of its process) stays bounded by a small amount per stalled reader
 * (it held a 500-row batch each: ~10 MB with such rows), and a client that reads slowly
 * gets the whole page, byte for byte the same as a fast one.
 */
import { readFileSync } from 'node:fs'
import net from 'node:net'
import t from 'tap'
import { createTestDatabase, sqlClient } from '../helpers/database.js'
import { newUser } from '../helpers/build.js'
import { spawnServer, waitFor } from './helpers/server.js'

const ROWS = 1000
const READERS = 128
/** Readers in the first group (see below). */
const FIRST = 32
/** What a stalled reader may cost the service, at most (it holds one batch of about 64 KiB of CSV). */
const PER_READER_MB = 1

/** VmRSS of a process, in MB. */
function rss (pid: number): number {
  const line = /^VmRSS:\s*(\d+)\s*kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return Number(line?.[1]) / 1024
}

/** RSS once it moved less than 2 MB over 2 s (or after 30 s). */
async function settledRss (pid: number): Promise<number> {
  const samples: Array<{ at: number, mb: number }> = []
  const started = Date.now()
  for (;;) {
    const now = Date.now()
    samples.push({ at: now, mb: rss(pid) })
    const recent = samples.filter((s) => s.at >= now - 2000).map((s) => s.mb)
    if ((now - samples[0]!.at >= 2000 && Math.max(...recent) - Math.min(...recent) < 2) || now - started > 30_000) return samples.at(-1)!.mb
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
}

interface Stalled { socket: net.Socket, status: Promise<number>, closed: () => boolean }

/**
 * GET the page as CSV, read up to the end of the answer's head, then stop reading. Each from
 * its own loopback address, so that no per-client share of the service's limits applies.
 */
function stalledReader (port: number, index: number): Stalled {
  const socket = net.connect({ host: '127.0.0.1', port, localAddress: `127.0.${1 + Math.floor(index / 250)}.${1 + (index % 250)}` })
  let closed = false
  socket.on('error', () => {})
  socket.once('close', () => { closed = true })
  const status = new Promise<number>((resolve) => {
    let head = ''
    const onData = (chunk: Buffer): void => {
      head += chunk.toString('latin1')
      if (!head.includes('\r\n\r\n')) return
      socket.off('data', onData)
      socket.pause()
      resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0))
    }
    socket.on('data', onData)
    socket.once('close', () => resolve(0))
  })
  socket.write(`GET /api/product?limit=${ROWS} HTTP/1.1\r\nHost: test\r\nAccept: text/csv\r\n\r\n`)
  return { socket, status, closed: () => closed }
}

/** The whole answer body of a GET read a little at a time, pausing between reads. */
async function slowRead (port: number, pauseMs: number): Promise<{ status: number, body: Buffer, pauses: number }> {
  const res = await new Promise<import('node:http').IncomingMessage>((resolve, reject) => {
    import('node:http').then(({ default: http }) => {
      http.get({ host: '127.0.0.1', port, path: `/api/product?limit=${ROWS}`, headers: { accept: 'text/csv' } }, resolve).on('error', reject)
    }, reject)
  })
  const chunks: Buffer[] = []
  let pauses = 0
  for await (const chunk of res) {
    chunks.push(chunk as Buffer)
    pauses += 1
    await new Promise((resolve) => setTimeout(resolve, pauseMs))
  }
  return { status: res.statusCode ?? 0, body: Buffer.concat(chunks), pauses }
}

t.test(`${READERS} stalled CSV readers of long rows keep the service's memory bounded; a slow reader gets the whole page`, async (t) => {
  const databaseUrl = await createTestDatabase(t)
  // No minimum read rate: it would cut the stalled readers after a window (test/abuse/slow-clients.test.ts),
  // while a reader just above it stays as long as it likes; this measures what such a reader holds.
  const server = await spawnServer(t, { DATABASE_URL: databaseUrl, CSV_MAX_ROWS: String(ROWS), MIGRATE_ON_START: 'false', SLOW_CLIENT_WINDOW_MS: '0' })
  const pid = server.child.pid!
  const port = Number(new URL(server.url).port)

  const user = newUser()
  const created = await fetch(`${server.url}/api/user`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(user) })
  t.equal(created.status, 201, 'a creator')
  const creatorId = (await created.json() as { id: number }).id
  const sql = await sqlClient(t, databaseUrl)
  // The longest rows the API takes: a 200-character title, a 5,000-character description,
  // of 2- and 3-byte UTF-8 characters and quotes (~10 KB of CSV a row).
  await sql.query(`
    INSERT INTO products (title, description, amount, creator_id, created_at, updated_at)
    SELECT left(i || ' ' || repeat('Título «largo» ', 20), 200),
           left(i || ' ' || repeat('Descripción «muy» larga, 日本語の説明, "quoted" ', 200), 5000),
           i, $1, now(), now()
      FROM generate_series(1, $2::int) AS i`, [creatorId, ROWS])

  // The reference: the page read at full speed (twice: the code paths warm, the pools open).
  let expected = Buffer.alloc(0)
  for (let i = 0; i < 2; i++) {
    const res = await fetch(`${server.url}/api/product?limit=${ROWS}`, { headers: { accept: 'text/csv' } })
    t.equal(res.status, 200)
    expected = Buffer.from(await res.arrayBuffer())
  }
  const lines = expected.toString('utf8').split('\r\n').filter((line) => /^\d+,/.test(line))
  t.equal(lines.length, ROWS, `the page has its ${ROWS} rows (${(expected.length / 1e6).toFixed(1)} MB)`)

  // Two groups: the first pays what any burst of requests costs once (V8's heap grows to
  // its working size and stays), the second shows what each stalled reader holds.
  const first = Array.from({ length: FIRST }, (_, i) => stalledReader(port, i))
  t.same([...new Set(await Promise.all(first.map(async (r) => await r.status)))], [200], `${FIRST} stalled readers got their 200 and head`)
  const before = await settledRss(pid)
  const second = Array.from({ length: READERS - FIRST }, (_, i) => stalledReader(port, FIRST + i))
  t.same([...new Set(await Promise.all(second.map(async (r) => await r.status)))], [200], `${READERS - FIRST} more got theirs`)
  const stalled = await settledRss(pid)
  const readers = [...first, ...second]
  t.same(readers.filter((r) => r.closed()).length, 0, 'the stalled readers are still connected when measured')
  const each = (stalled - before) / (READERS - FIRST)
  t.ok(each < PER_READER_MB, `RSS grew ${(stalled - before).toFixed(1)} MB for ${READERS - FIRST} more stalled readers: ${each.toFixed(2)} MB each, at most ${PER_READER_MB} (${before.toFixed(0)} -> ${stalled.toFixed(0)} MB)`)

  // While they hang: a client that reads slowly gets the whole page, the same bytes.
  const slow = await slowRead(port, 10)
  t.equal(slow.status, 200, 'the slow reader: 200')
  t.ok(slow.pauses > 20, `it read in ${slow.pauses} pieces`)
  t.ok(slow.body.equals(expected), `the same ${expected.length} bytes as a fast read`)

  for (const r of readers) r.socket.destroy()
  await waitFor('the service to answer after the readers left', async () => (await fetch(`${server.url}/health/live`)).status === 200, 10_000)
})
