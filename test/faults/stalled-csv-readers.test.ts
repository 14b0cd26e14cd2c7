/**
 * Clients that ask for the CSV catalogue and stop reading (docs/api.md, "CSV"): the real
 * server in a child process, a catalogue of long rows (the longest title and description
 * the API takes), 128 connections that read the answer's head and then nothing. The
 * service's memory (RSS of its process) stays bounded by a small amount per stalled reader
 * (it held a 500-row batch each: ~10 MB with such rows), and a client that reads slowly
 * gets the whole page, byte for byte the same as a fast one.
 */
import t from 'tap'
import { createTestDatabase, sqlClient } from '../helpers/database.js'
import { newUser } from '../helpers/build.js'
import { memoryPerStalledReader, seedLongProducts } from './helpers/csv-readers.js'
import { spawnServer, waitFor } from './helpers/server.js'

const ROWS = 1000
const READERS = 128
/** Readers in the first group (see below). */
const FIRST = 32
/** What a stalled reader may cost the service, at most: it holds one batch of about 64 KiB of CSV, and RSS also counts garbage not yet collected (0.1-0.7 MB each measured; a 500-row batch held ~9 MB). */
const PER_READER_MB = 3

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
  await seedLongProducts(sql, creatorId, ROWS)

  // The reference: the page read at full speed (twice: the code paths warm, the pools open).
  let expected = Buffer.alloc(0)
  for (let i = 0; i < 2; i++) {
    const res = await fetch(`${server.url}/api/product?limit=${ROWS}`, { headers: { accept: 'text/csv' } })
    t.equal(res.status, 200)
    expected = Buffer.from(await res.arrayBuffer())
  }
  const lines = expected.toString('utf8').split('\r\n').filter((line) => /^\d+,/.test(line))
  t.equal(lines.length, ROWS, `the page has its ${ROWS} rows (${(expected.length / 1e6).toFixed(1)} MB)`)

  const m = await memoryPerStalledReader(pid, port, `/api/product?limit=${ROWS}`, FIRST, READERS - FIRST)
  t.same([...new Set(m.statuses)], [200], `${READERS} stalled readers got their 200 and head`)
  t.equal(m.stillOpen, READERS, 'the stalled readers are still connected when measured')
  t.ok(m.each < PER_READER_MB, `RSS grew ${(m.after - m.before).toFixed(1)} MB for ${READERS - FIRST} more stalled readers than the first ${FIRST}: ${m.each.toFixed(2)} MB each, at most ${PER_READER_MB} (${m.before.toFixed(0)} -> ${m.after.toFixed(0)} MB)`)

  // While they hang: a client that reads slowly gets the whole page, the same bytes.
  const slow = await slowRead(port, 10)
  t.equal(slow.status, 200, 'the slow reader: 200')
  t.ok(slow.pauses > 20, `it read in ${slow.pauses} pieces`)
  t.ok(slow.body.equals(expected), `the same ${expected.length} bytes as a fast read`)

  for (const r of m.readers) r.socket.destroy()
  await waitFor('the service to answer after the readers left', async () => (await fetch(`${server.url}/health/live`)).status === 200, 10_000)
})
