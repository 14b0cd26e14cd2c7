/**
 * PgBlobStorage (src/storage/blob-storage.ts) on a real database, with small chunks so that
 * a few kilobytes cross several: what `put` stores `stream` gives back, whole or any range;
 * a body that fails, at once or after chunks were written, leaves no row; a reader never
 * sees a file half written; a file removed while it is read fails the read rather than
 * giving another file's bytes.
 */
import { randomBytes } from 'node:crypto'
import { Readable } from 'node:stream'
import { buffer } from 'node:stream/consumers'
import t from 'tap'
import { sql } from '../../src/db/sql.js'
import { InvalidStorageKeyError, PgBlobStorage } from '../../src/storage/blob-storage.js'
import { build } from '../helpers/build.js'
import { sqlClient } from '../helpers/database.js'

const CHUNK = 1000
const app = await build(t)
const storage = new PgBlobStorage(sql(app.prisma), CHUNK)
const db = await sqlClient(t, app.databaseUrl)
const count = async (table: 'blobs' | 'blob_chunks'): Promise<number> => Number((await db.query(`SELECT count(*) AS n FROM ${table}`)).rows[0].n)

/** A body of `data` in pieces of `piece` bytes, that fails after `failAfter` bytes when given. */
function body (data: Buffer, piece = 333, failAfter?: number): Readable {
  let at = 0
  return new Readable({
    read () {
      if (failAfter !== undefined && at >= failAfter) { this.destroy(new Error('cut off')); return }
      if (at >= data.length) { this.push(null); return }
      this.push(data.subarray(at, at + piece))
      at += piece
    }
  })
}

t.test('what put stores, stream gives back: whole, and every kind of range', async (t) => {
  for (const size of [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK, 3 * CHUNK + 17]) {
    const data = randomBytes(size)
    const key = `t/sizes/${size}`
    t.same(await storage.put(key, body(data)), { size }, `${size} bytes: the size`)
    t.ok((await buffer((await storage.stream(key))!)).equals(data), `${size} bytes: the same bytes back`)
    t.equal(Number((await db.query('SELECT count(*) AS n FROM blob_chunks c JOIN blobs b ON b.id = c.blob_id WHERE b.key = $1', [key])).rows[0].n), Math.ceil(size / CHUNK), `${size} bytes: ${Math.ceil(size / CHUNK)} chunks`)
  }
  const data = randomBytes(3 * CHUNK + 17)
  await storage.put('t/ranges', body(data, 4096))
  for (const [start, end] of [[0, 0], [0, CHUNK - 1], [CHUNK - 1, CHUNK], [CHUNK, 2 * CHUNK - 1], [5, 3 * CHUNK + 16], [2 * CHUNK + 3, 3 * CHUNK + 16], [3 * CHUNK + 16, 3 * CHUNK + 16], [1500, 1600]] as const) {
    t.ok((await buffer((await storage.stream('t/ranges', { start, end }))!)).equals(data.subarray(start, end + 1)), `bytes ${start}-${end}`)
  }
  t.equal(await storage.stream('t/none'), undefined, 'a key never stored: undefined')
})

t.test('a range reads only the chunks it needs', async (t) => {
  const data = randomBytes(10 * CHUNK)
  await storage.put('t/io', body(data, 4096))
  // Chunks 4 and 5 stay; a read of any other chunk would fail.
  await db.query("DELETE FROM blob_chunks WHERE blob_id = (SELECT id FROM blobs WHERE key = 't/io') AND seq NOT IN (4, 5)")
  t.ok((await buffer((await storage.stream('t/io', { start: 4 * CHUNK + 10, end: 5 * CHUNK + 10 }))!)).equals(data.subarray(4 * CHUNK + 10, 5 * CHUNK + 11)), 'bytes of chunks 4 and 5 only')
  await t.rejects(buffer((await storage.stream('t/io'))!), /removed while it was read/, 'the whole file needed the others')
})

t.test('bodies that fail at once, or after chunks were written, leave no row', async (t) => {
  const blobs = await count('blobs')
  const chunks = await count('blob_chunks')
  const results = await Promise.allSettled(Array.from({ length: 50 }, async (_, i) => {
    const early = new Readable({ read () { setImmediate(() => { this.destroy(new Error(`refused ${i}`)) }) } })
    return await storage.put(`t/early/${i}`, early)
  }))
  t.ok(results.every((result) => result.status === 'rejected'), 'every put rejects with its body\'s error')
  // 5 chunks written in the transaction, then the body fails.
  await t.rejects(storage.put('t/mid', body(randomBytes(10 * CHUNK), 500, 5 * CHUNK + 200)), /cut off/)
  t.equal(await count('blobs'), blobs, 'no file row')
  t.equal(await count('blob_chunks'), chunks, 'no chunk row')
  t.equal(await storage.stream('t/mid'), undefined)
})

t.test('a reader never sees a file half written', async (t) => {
  const data = randomBytes(5 * CHUNK)
  let release: () => void = () => {}
  const gate = new Promise<void>((resolve) => { release = resolve })
  let sent = 0
  let held = false
  const slow = new Readable({
    read () {
      if (held) return
      if (sent === 3 * CHUNK) {
        held = true
        gate.then(() => { this.push(data.subarray(sent)); this.push(null) }, () => {})
        return
      }
      this.push(data.subarray(sent, sent + CHUNK))
      sent += CHUNK
    }
  })
  const put = storage.put('t/half', slow)
  // Three chunks are in the open transaction: its row lock is visible, its rows are not.
  for (let i = 0; i < 100 && Number((await db.query("SELECT count(*) AS n FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'blob_chunks' AND l.mode = 'RowExclusiveLock'")).rows[0].n) === 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  t.equal(await storage.stream('t/half'), undefined, 'not there while it is written')
  release()
  t.same(await put, { size: data.length })
  t.ok((await buffer((await storage.stream('t/half'))!)).equals(data), 'then whole')
})

t.test('a put onto a key replaces it; a read of a removed file fails, never mixes files', async (t) => {
  const first = randomBytes(4 * CHUNK)
  const second = randomBytes(4 * CHUNK)
  await storage.put('t/swap', body(first))
  const reading = (await storage.stream('t/swap'))!
  const start = await new Promise<Buffer>((resolve) => reading.once('data', resolve))
  reading.pause()
  t.ok(start.equals(first.subarray(0, CHUNK)), 'the first chunk of the first file')
  await storage.put('t/swap', body(second))
  reading.resume()
  await t.rejects(buffer(reading), /removed while it was read/, 'the rest of the first file is gone: the read fails')
  t.ok((await buffer((await storage.stream('t/swap'))!)).equals(second), 'a new read gets the second file')
  await storage.remove('t/swap')
  await storage.remove('t/swap')
  t.equal(await storage.stream('t/swap'), undefined, 'removed (twice: no error)')
})

t.test('keys the service never makes are refused', async (t) => {
  for (const key of ['', '/abs', 'a/../b', 'a//b', 'a/./b', 'a b', '../x']) {
    await t.rejects(storage.put(key, body(Buffer.from('x'))), InvalidStorageKeyError, JSON.stringify(key))
    await t.rejects(storage.stream(key), InvalidStorageKeyError)
  }
})
