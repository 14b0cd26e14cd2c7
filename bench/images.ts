/**
 * Product image storage, A/B in one run: PostgreSQL (src/storage/blob-storage.ts,
 * PgBlobStorage, the service's) against files in a folder (bench/lib/file-blob-storage.ts,
 * the former storage): upload and download throughput with p50/p99 per operation, a 64 KiB
 * range, and the database's bytes per image (pg_total_relation_size of blobs and
 * blob_chunks, TOAST and indexes included) against the bytes stored.
 *
 * The two are run in alternation, size by size, so that both see the same machine load.
 * Writes results to bench/README.md ("Image storage"). `npx tsx bench/images.ts`
 * (IMAGES_ROUNDS=n, default 20 operations per size and storage; BENCH_WRITE=0 prints only).
 */
import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { Readable, Writable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { fileURLToPath } from 'node:url'
import { closePrismaClient, createPrismaClient } from '../src/db/client.js'
import { sql } from '../src/db/sql.js'
import { PgBlobStorage, type BlobStorage } from '../src/storage/blob-storage.js'
import { benchDatabase } from './lib/database.js'
import { FileBlobStorage } from './lib/file-blob-storage.js'
import { describeMachine, formatLoad, machine } from './lib/machine.js'
import { markdownTable, percent, writeSection } from './lib/report.js'

const ROUNDS = Number(process.env.IMAGES_ROUNDS ?? 20)
const WRITE = process.env.BENCH_WRITE !== '0'
const SIZES = [100 * 1024, 1024 * 1024, 10 * 1024 * 1024]
const README = path.join(path.dirname(fileURLToPath(import.meta.url)), 'README.md')

/** A body in 64 KiB pieces, as busboy hands an upload on. */
function body (data: Buffer): Readable {
  let at = 0
  return new Readable({ read () { if (at >= data.length) this.push(null); else { this.push(data.subarray(at, at + 65536)); at += 65536 } } })
}

async function drain (stream: Readable): Promise<number> {
  let bytes = 0
  await pipeline(stream, new Writable({ write (chunk: Buffer, _e, done) { bytes += chunk.length; done() } }))
  return bytes
}

function quantile (values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!
}

const ms = (v: number): string => v.toFixed(v < 10 ? 2 : 1)
const throughput = (bytes: number, times: number[]): number => bytes * times.length / 1048576 / (times.reduce((a, b) => a + b, 0) / 1000)
const mibs = (bytes: number, times: number[]): string => throughput(bytes, times).toFixed(0)

const startedAt = new Date()
const before = machine()
const database = await benchDatabase()
const prisma = createPrismaClient({ url: database.url, poolSize: 4 })
const folder = await mkdtemp(path.join(os.tmpdir(), 'bench-images-'))
const files = new FileBlobStorage(folder)
await files.init()
const storages: Record<'PostgreSQL' | 'files', BlobStorage> = { PostgreSQL: new PgBlobStorage(sql(prisma)), files }
const rows: string[][] = []
const sizeRows: string[][] = []
const ratioRows: string[][] = []
const pool = (await import('../src/db/client.js')).sqlPool(prisma)
try {
  for (const size of SIZES) {
    const data = randomBytes(size) // incompressible, as PNG and JPEG are
    const times: Record<string, { put: number[], get: number[], range: number[] }> = { PostgreSQL: { put: [], get: [], range: [] }, files: { put: [], get: [], range: [] } }
    for (let i = 0; i < ROUNDS; i++) {
      for (const [name, storage] of Object.entries(storages)) {
        const key = `bench/${size}/${i}`
        let t0 = performance.now()
        await storage.put(key, body(data))
        times[name]!.put.push(performance.now() - t0)
        t0 = performance.now()
        if (await drain((await storage.stream(key))!) !== size) throw new Error('short read')
        times[name]!.get.push(performance.now() - t0)
        t0 = performance.now()
        const start = Math.floor(size / 2)
        await drain((await storage.stream(key, { start, end: start + 65535 }))!)
        times[name]!.range.push(performance.now() - t0)
      }
    }
    for (const name of Object.keys(storages)) {
      const { put, get, range } = times[name]!
      rows.push([`${size / 1024} KiB`, name, mibs(size, put), ms(quantile(put, 0.5)), ms(quantile(put, 0.99)), mibs(size, get), ms(quantile(get, 0.5)), ms(quantile(get, 0.99)), ms(quantile(range, 0.5))])
    }
    const pg = times.PostgreSQL!
    const fs = times.files!
    ratioRows.push([`${size / 1024} KiB`, percent(throughput(size, pg.put) / throughput(size, fs.put)), percent(throughput(size, pg.get) / throughput(size, fs.get)), percent(quantile(pg.range, 0.5) / quantile(fs.range, 0.5))])
    const { rows: [row] } = await pool.query<{ total: string, blobs: string }>(
      "SELECT (pg_total_relation_size('blobs') + pg_total_relation_size('blob_chunks'))::text AS total, (SELECT count(*) FROM blobs)::text AS blobs")
    const total = Number(row!.total)
    const images = Number(row!.blobs)
    sizeRows.push([`${size / 1024} KiB`, String(images), `${(total / 1048576).toFixed(2)} MiB`, `${(total / images / 1024).toFixed(1)} KiB`, `${(total / (size * images) * 100 - 100).toFixed(1)}%`])
    // Each size measured alone: the next starts from empty tables (DELETE: products' foreign key refuses TRUNCATE; the chunks cascade).
    await pool.query('DELETE FROM blobs')
    await pool.query('VACUUM FULL blobs, blob_chunks')
  }
} finally {
  await closePrismaClient(prisma)
  await rm(folder, { recursive: true, force: true })
  await database.drop()
}
const after = machine()
const report = [
  `Measured ${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC on ${describeMachine(before)}; load average at the start ${formatLoad(before.load)}, at the end ${formatLoad(after.load)}.`,
  `Command: \`IMAGES_ROUNDS=${ROUNDS} npx tsx bench/images.ts\` (${ROUNDS} operations per size and storage, the two in alternation). Database: ${database.description}; pool of 4. Files: ${os.tmpdir()} (no fsync either).`,
  '',
  markdownTable(['image', 'storage', 'upload MiB/s', 'upload p50 ms', 'upload p99 ms', 'download MiB/s', 'download p50 ms', 'download p99 ms', '64 KiB range p50 ms'], rows),
  '',
  markdownTable(['image', 'upload MiB/s, PostgreSQL / files', 'download MiB/s, PostgreSQL / files', '64 KiB range p50 time, PostgreSQL / files'], ratioRows),
  '',
  markdownTable(['image size', 'images', 'blobs + blob_chunks (TOAST, indexes)', 'per image', 'beyond the images\' bytes'], sizeRows),
  ''
].join('\n')
if (WRITE) writeSection(README, 'images', report)
console.log(report)
