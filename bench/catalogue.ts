/**
 * Product images and the CSV catalogue, on the service as shipped
 * (src/server.ts, production settings, images in a temp UPLOAD_DIR):
 *
 * 1. the CSV export of the whole catalogue: CATALOGUE_ROWS products (10,000) seeded with one
 *    SQL insert, then `GET /api/product?limit=<rows>` with `Accept: text/csv` (one request:
 *    CSV_MAX_ROWS, 10,000 by default, is the largest CSV page), several times; for each, the
 *    wall time to the first and the last byte and the service's peak RSS (VmHWM of its
 *    process, reset before the export through /proc/<pid>/clear_refs; sampled VmRSS where
 *    that cannot be written) against its RSS just before. The baseline of the same run: the
 *    same rows exported as JSON, page after page of 100 (JSON_MAX_LIMIT) by `nextCursor`;
 * 2. `GET /api/product/:id/image` (a real PNG, IMAGE_KB of random pixels) with autocannon:
 *    200 (the bytes streamed from storage) and 304 (`If-None-Match` with its ETag), next to
 *    `GET /api/product/:id` (JSON, the same row read) in the same pass.
 *
 *   npx tsx bench/catalogue.ts             3 passes of 10 s per image case, 5 exports of each
 *                                          kind; rewrites "Product images and the CSV
 *                                          catalogue" in bench/README.md (~3 min)
 *   npx tsx bench/catalogue.ts --quick     1 pass of 3 s, 2 exports, prints only (~40 s)
 *   CATALOGUE_SECONDS, CATALOGUE_PASSES, CATALOGUE_EXPORTS, CATALOGUE_ROWS=10000,
 *   CATALOGUE_IMAGE_KB=100, CATALOGUE_WRITE=0 (print only)
 *   DATABASE_URL=postgresql://...          a fresh database on that server
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { performance } from 'node:perf_hooks'
import type autocannon from 'autocannon'
import pg from 'pg'
import { benchDatabase } from './lib/database.js'
import { load, settle, type LoadFigures } from './lib/load.js'
import { describeMachine, formatLoad, machine } from './lib/machine.js'
import { noisePng } from './lib/png.js'
import { ROOT, startServer } from './lib/processes.js'
import { formatMs, formatRps, markdownTable, median, medianFigures, percent, writeSection } from './lib/report.js'
import { serviceEnv, userPool } from './lib/service.js'

const quick = process.argv.includes('--quick')
const SECONDS = Number(process.env.CATALOGUE_SECONDS ?? (quick ? 3 : 10))
const PASSES = Number(process.env.CATALOGUE_PASSES ?? (quick ? 1 : 3))
const EXPORTS = Number(process.env.CATALOGUE_EXPORTS ?? (quick ? 2 : 5))
const ROWS = Number(process.env.CATALOGUE_ROWS ?? 10_000)
const IMAGE_KB = Number(process.env.CATALOGUE_IMAGE_KB ?? 100)
const WRITE = process.env.CATALOGUE_WRITE !== undefined ? process.env.CATALOGUE_WRITE !== '0' : !quick
const CONNECTIONS = 50
const WARMUP_SECONDS = Math.min(2, SECONDS)
/** JSON_MAX_LIMIT (src/modules/products/schemas.ts): the largest JSON page. */
const JSON_PAGE = 100

for (const [name, value] of Object.entries({ SECONDS, PASSES, EXPORTS, ROWS, IMAGE_KB })) {
  if (!Number.isInteger(value) || value < 1) {
    console.error(`CATALOGUE_${name} must be a positive integer`)
    process.exit(2)
  }
}

/** Products for the export, one statement: ids 1..rows after whatever the table holds. */
async function seed (databaseUrl: string, creatorId: number, rows: number): Promise<number> {
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    const started = performance.now()
    // Text with a quote and a comma in every row (CSV quoting), a formula-like title in every tenth (CSV injection escaping).
    await client.query(`
      INSERT INTO products (title, description, amount, creator_id, created_at, updated_at)
      SELECT CASE WHEN i % 10 = 0 THEN '=Product ' || i ELSE 'Product ' || i END,
             'The "catalogue" item number ' || i || ', with a description of ordinary length for a product list',
             100 + (i * 37) % 100000, $1, now(), now()
        FROM generate_series(1, $2::int) AS i`, [creatorId, rows])
    return performance.now() - started
  } finally { await client.end() }
}

function kib (line: string | undefined): number {
  return Number(/(\d+)\s*kB/.exec(line ?? '')?.[1] ?? Number.NaN) / 1024
}

/** VmRSS and VmHWM of a process, in MB. */
function memory (pid: number): { rss: number, hwm: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  return { rss: kib(/^VmRSS:.*$/m.exec(status)?.[0]), hwm: kib(/^VmHWM:.*$/m.exec(status)?.[0]) }
}

/** Resets the peak RSS (VmHWM) of a process to its current RSS; false where the kernel or the user does not allow it. */
function resetPeak (pid: number): boolean {
  try { writeFileSync(`/proc/${pid}/clear_refs`, '5'); return true } catch { return false }
}

interface Export { kind: 'csv' | 'json', rows: number, requests: number, bytes: number, firstByteMs: number, totalMs: number, rssBefore: number, peak: number, peakFrom: 'VmHWM' | 'sampled VmRSS' }

/** Runs one export while watching the service's memory: the peak against the RSS before. */
async function watched (pid: number, run: () => Promise<Omit<Export, 'rssBefore' | 'peak' | 'peakFrom' | 'kind'>>): Promise<Omit<Export, 'kind'>> {
  const rssBefore = memory(pid).rss
  const cleared = resetPeak(pid)
  let sampled = rssBefore
  const sampler = setInterval(() => { sampled = Math.max(sampled, memory(pid).rss) }, 10)
  try {
    const result = await run()
    sampled = Math.max(sampled, memory(pid).rss)
    return { ...result, rssBefore, peak: cleared ? memory(pid).hwm : sampled, peakFrom: cleared ? 'VmHWM' : 'sampled VmRSS' }
  } finally { clearInterval(sampler) }
}

/** The whole catalogue as CSV in one request; checks the row count and that no next page is announced. */
async function csvExport (url: string, rows: number): Promise<Omit<Export, 'rssBefore' | 'peak' | 'peakFrom' | 'kind'>> {
  const started = performance.now()
  const response = await fetch(`${url}/api/product?limit=${rows}`, { headers: { accept: 'text/csv' } })
  if (response.status !== 200 || !/^text\/csv/.test(response.headers.get('content-type') ?? '')) throw new Error(`CSV export: ${response.status} ${response.headers.get('content-type')} ${await response.text()}`)
  if (response.headers.get('link') !== null) throw new Error(`CSV export: a next page is announced (${response.headers.get('link')}): the catalogue is larger than ${rows} rows`)
  let firstByteMs = 0
  let bytes = 0
  let lines = 0
  for await (const chunk of response.body!) {
    if (bytes === 0) firstByteMs = performance.now() - started
    const buffer = chunk as Uint8Array
    bytes += buffer.length
    for (const byte of buffer) if (byte === 0x0a) lines += 1
  }
  const totalMs = performance.now() - started
  if (lines !== rows + 1) throw new Error(`CSV export: ${lines} lines, expected a header and ${rows} rows`)
  return { rows, requests: 1, bytes, firstByteMs, totalMs }
}

/** The same rows as JSON, JSON_PAGE at a time, following nextCursor. */
async function jsonExport (url: string, rows: number): Promise<Omit<Export, 'rssBefore' | 'peak' | 'peakFrom' | 'kind'>> {
  const started = performance.now()
  let firstByteMs = 0
  let bytes = 0
  let count = 0
  let requests = 0
  let cursor: number | null = null
  do {
    const response = await fetch(`${url}/api/product?limit=${JSON_PAGE}${cursor === null ? '' : `&cursor=${cursor}`}`)
    const text = await response.text()
    if (requests === 0) firstByteMs = performance.now() - started
    if (response.status !== 200) throw new Error(`JSON export: ${response.status} ${text}`)
    const page = JSON.parse(text) as { items: unknown[], nextCursor: number | null }
    requests += 1
    bytes += Buffer.byteLength(text)
    count += page.items.length
    cursor = page.nextCursor
  } while (cursor !== null)
  if (count !== rows) throw new Error(`JSON export: ${count} rows, expected ${rows}`)
  return { rows, requests, bytes, firstByteMs, totalMs: performance.now() - started }
}

interface Case { id: 'product' | 'image-200' | 'image-304', label: string }
const CASES: Case[] = [
  { id: 'product', label: 'GET /api/product/:id (JSON, the same row: baseline)' },
  { id: 'image-200', label: 'GET /api/product/:id/image, 200' },
  { id: 'image-304', label: 'GET /api/product/:id/image, If-None-Match: 304' }
]

/** One autocannon run that also counts the answers by status code. */
async function measure (url: string, request: autocannon.Request, seconds: number): Promise<LoadFigures & { statuses: Record<number, number> }> {
  const statuses: Record<number, number> = {}
  const figures = await load({ url, connections: CONNECTIONS, seconds, requests: [{ ...request, onResponse: (status) => { statuses[status] = (statuses[status] ?? 0) + 1 } }] })
  return { ...figures, statuses }
}

function command (): string {
  const env = ['CATALOGUE_SECONDS', 'CATALOGUE_PASSES', 'CATALOGUE_EXPORTS', 'CATALOGUE_ROWS', 'CATALOGUE_IMAGE_KB', 'CATALOGUE_WRITE']
    .filter((name) => process.env[name] !== undefined)
    .map((name) => `${name}=${process.env[name]}`)
  if (process.env.DATABASE_URL) env.push('DATABASE_URL=<set>')
  return [...env, 'npx tsx bench/catalogue.ts', ...process.argv.slice(2)].join(' ')
}

const mb = (value: number): string => value.toFixed(1)

async function main (): Promise<void> {
  const startedAt = new Date()
  const loadAtStart = os.loadavg()
  console.log(`catalogue: ${ROWS} products, ${EXPORTS} exports of each kind, ${PASSES} pass(es) of ${SECONDS} s per image case on ${describeMachine(machine())}; load ${formatLoad(loadAtStart)}`)
  const png = noisePng(IMAGE_KB)
  const database = await benchDatabase()
  const uploads = mkdtempSync(path.join(os.tmpdir(), 'ups-bench-uploads-'))
  const exports: Export[] = []
  const passes: Array<Record<Case['id'], LoadFigures & { statuses: Record<number, number> }>> = []
  const passLoads: string[] = []
  let seedMs = 0
  let rssIdle = 0
  let etag = ''
  try {
    const service = await startServer({
      entry: 'src/server.ts',
      env: serviceEnv(database.url, { UPLOAD_DIR: uploads, CSV_MAX_ROWS: String(Math.max(ROWS, 100)), IMAGE_MAX_BYTES: String(Math.max(png.length, 1024)) }),
      readyPath: '/health/live'
    })
    try {
      const [user] = await userPool(service.url, 1, 'catalogue')
      seedMs = await seed(database.url, user!.id, ROWS)
      console.log(`  seeded ${ROWS.toLocaleString('en-US')} products in ${formatMs(seedMs)} ms (one INSERT ... SELECT FROM generate_series)`)
      rssIdle = memory(service.pid).rss

      // The exports first, before the image load has grown the heap. They alternate: CSV, JSON, CSV, ...
      for (let i = 0; i < EXPORTS; i++) {
        for (const kind of ['csv', 'json'] as const) {
          const result = { kind, ...await watched(service.pid, async () => kind === 'csv' ? await csvExport(service.url, ROWS) : await jsonExport(service.url, ROWS)) }
          exports.push(result)
          console.log(`  ${kind} export ${i + 1}: ${result.requests} request(s), ${(result.bytes / 1e6).toFixed(2)} MB, first byte ${formatMs(result.firstByteMs)} ms, all ${formatMs(result.totalMs)} ms; service RSS ${mb(result.rssBefore)} MB before, peak ${mb(result.peak)} MB (${result.peakFrom})`)
          await settle(500)
        }
      }

      // The image: one product, one upload (multipart), its ETag.
      const headers = { authorization: `Bearer ${user!.token}` }
      const created = await fetch(`${service.url}/api/product`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify({ title: 'Desk lamp', amount: 2599 }) })
      const product = await created.json() as { id: number }
      if (created.status !== 201) throw new Error(`create product: ${created.status} ${JSON.stringify(product)}`)
      const form = new FormData()
      form.append('image', new Blob([png], { type: 'image/png' }), 'lamp.png')
      const uploaded = await fetch(`${service.url}/api/product/${product.id}/image`, { method: 'POST', headers, body: form })
      if (uploaded.status !== 201) throw new Error(`upload: ${uploaded.status} ${await uploaded.text()}`)
      const first = await fetch(`${service.url}/api/product/${product.id}/image`)
      const body = Buffer.from(await first.arrayBuffer())
      if (first.status !== 200 || first.headers.get('content-type') !== 'image/png' || !body.equals(png)) throw new Error(`image GET: ${first.status} ${first.headers.get('content-type')}, ${body.length} bytes`)
      etag = first.headers.get('etag') ?? ''
      const requests: Record<Case['id'], autocannon.Request> = {
        product: { method: 'GET', path: `/api/product/${product.id}` },
        'image-200': { method: 'GET', path: `/api/product/${product.id}/image` },
        'image-304': { method: 'GET', path: `/api/product/${product.id}/image`, headers: { 'if-none-match': etag } }
      }
      const expected: Record<Case['id'], number> = { product: 200, 'image-200': 200, 'image-304': 304 }
      for (const c of CASES) await load({ url: service.url, connections: CONNECTIONS, seconds: WARMUP_SECONDS, requests: [requests[c.id]] })
      for (let pass = 0; pass < PASSES; pass++) {
        passLoads.push(formatLoad(os.loadavg()))
        const results = {} as (typeof passes)[number]
        // The order rotates from pass to pass: no case always runs first.
        for (let k = 0; k < CASES.length; k++) {
          const c = CASES[(k + pass) % CASES.length]!
          await settle()
          const figures = await measure(service.url, requests[c.id], SECONDS)
          const unexpected = Object.entries(figures.statuses).filter(([status]) => Number(status) !== expected[c.id])
          if (unexpected.length > 0 || figures.errors > 0) throw new Error(`${c.label}: answers ${JSON.stringify(figures.statuses)}, errors ${figures.errors}`)
          results[c.id] = figures
          console.log(`  pass ${pass + 1}: ${c.label.padEnd(52)} ${formatRps(figures.rps).padStart(7)} req/s  p50 ${formatMs(figures.p50)} ms  p99 ${formatMs(figures.p99)} ms  ${JSON.stringify(figures.statuses)}`)
        }
        passes.push(results)
      }
    } finally { await service.stop() }
  } finally {
    rmSync(uploads, { recursive: true, force: true })
    await database.drop()
  }

  const m = machine()
  const byKind = (kind: Export['kind']): Export[] => exports.filter((e) => e.kind === kind)
  const exportRow = (kind: Export['kind'], label: string): string[] => {
    const runs = byKind(kind)
    return [
      label, String(runs[0]!.requests), (runs[0]!.bytes / 1e6).toFixed(2),
      formatMs(median(runs.map((e) => e.totalMs))), runs.map((e) => formatMs(e.totalMs)).join(' / '),
      formatMs(median(runs.map((e) => e.firstByteMs))),
      `${mb(rssIdle)} / ${mb(Math.max(...runs.map((e) => e.rssBefore)))}`, mb(Math.max(...runs.map((e) => e.peak))),
      `+${mb(Math.max(...runs.map((e) => e.peak - e.rssBefore)))}`
    ]
  }
  const medians = Object.fromEntries(CASES.map((c) => [c.id, medianFigures(passes.map((p) => p[c.id]))])) as Record<Case['id'], LoadFigures>
  const ratio = (a: Case['id'], b: Case['id']): number => median(passes.map((p) => p[a].rps / p[b].rps))
  const csvMs = median(byKind('csv').map((e) => e.totalMs))
  const jsonMs = median(byKind('json').map((e) => e.totalMs))
  const peakFrom = [...new Set(exports.map((e) => e.peakFrom))].join(', ')
  const text = [
    `Measured ${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC on ${describeMachine(m)}; load average at the start ${formatLoad(loadAtStart)}, at the end ${formatLoad(m.load)}.`,
    `Command: \`${command()}\`. Database: ${database.description}. The service: src/server.ts with the bench's production settings (logs at info to a file), UPLOAD_DIR in the OS temp folder.`,
    '',
    `**CSV export of ${ROWS.toLocaleString('en-US')} products** (seeded in ${formatMs(seedMs)} ms by one \`INSERT ... SELECT FROM generate_series\`), ${EXPORTS} exports of each kind, alternating; peak RSS of the service process (${peakFrom}; VmHWM reset before each export) against its RSS just before:`,
    '',
    markdownTable(['export', 'requests', 'MB', 'wall ms (median)', 'wall ms per export', 'first byte ms', 'RSS idle / before MB', 'peak RSS MB', 'peak - before MB (max)'], [
      exportRow('csv', `CSV, \`Accept: text/csv\`, \`limit=${ROWS}\` (one page: CSV_MAX_ROWS)`),
      exportRow('json', `JSON, pages of ${JSON_PAGE} by \`nextCursor\` (baseline)`)
    ]),
    '',
    `**Image GET**: a ${(png.length / 1024).toFixed(0)} KB PNG (random pixels), ${CONNECTIONS} connections, ${PASSES} pass(es) of ${SECONDS} s per case (order rotating), medians; load average at each pass ${passLoads.join('; ')}:`,
    '',
    markdownTable(['case', 'req/s (median)', 'req/s per pass', 'p50 ms', 'p99 ms', 'MB/s', 'errors'], CASES.map((c) => {
      const f = medians[c.id]
      return [c.label, formatRps(f.rps), passes.map((p) => formatRps(p[c.id].rps)).join(' / '), formatMs(f.p50), formatMs(f.p99), c.id === 'image-200' ? formatRps(f.rps * png.length / 1e6) : '–', String(f.errors)]
    })),
    '',
    `Same-pass ratios (medians): image 304 / image 200 ${percent(ratio('image-304', 'image-200'))}; image 200 / product JSON ${percent(ratio('image-200', 'product'))}; image 304 / product JSON ${percent(ratio('image-304', 'product'))}. CSV export / JSON pages wall time ${percent(csvMs / jsonMs)}.`
  ].join('\n')
  console.log(`\n${text}\n`)
  if (WRITE) {
    writeSection(path.join(ROOT, 'bench', 'README.md'), 'catalogue', text)
    console.log('catalogue: results written to bench/README.md')
  }
}

await main()
