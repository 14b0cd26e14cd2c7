/**
 * Stalled readers of the CSV catalogue (test/faults/stalled-csv-readers.test.ts, and through
 * the proxy in test/deploy/stalled-csv-proxy.test.ts): long rows, the service's RSS, and
 * connections that read an answer's head and then nothing.
 */
import { readFileSync } from 'node:fs'
import net from 'node:net'
import type pg from 'pg'

/** VmRSS of a process, in MB. */
export function rss (pid: number): number {
  const line = /^VmRSS:\s*(\d+)\s*kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return Number(line?.[1]) / 1024
}

/** RSS once it moved less than 2 MB over 2 s (or after 30 s). */
export async function settledRss (pid: number): Promise<number> {
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

/**
 * `rows` products of `creatorId` with the longest text the API takes: a 200-character title
 * and a 5,000-character description of 2- and 3-byte UTF-8 characters and quotes (~7 KB of
 * CSV a row).
 */
export async function seedLongProducts (sql: pg.Client, creatorId: number, rows: number): Promise<void> {
  await sql.query(`
    INSERT INTO products (title, description, amount, creator_id, created_at, updated_at)
    SELECT left(i || ' ' || repeat('Título «largo» ', 20), 200),
           left(i || ' ' || repeat('Descripción «muy» larga, 日本語の説明, "quoted" ', 200), 5000),
           i, $1, now(), now()
      FROM generate_series(1, $2::int) AS i`, [creatorId, rows])
}

export interface Stalled { socket: net.Socket, status: Promise<number>, closed: () => boolean }

/**
 * GET `path` as CSV, read up to the end of the answer's head, then stop reading. Each from
 * its own loopback address (by `index`), so that no per-client limit applies.
 */
export function stalledReader (port: number, index: number, path: string): Stalled {
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
  socket.write(`GET ${path} HTTP/1.1\r\nHost: test\r\nAccept: text/csv\r\n\r\n`)
  return { socket, status, closed: () => closed }
}

/**
 * Opens `first` stalled readers, then `more`: RSS settled after each group. The first group
 * pays what any burst of requests costs once (V8's heap grows to its working size and
 * stays); the second shows what each stalled reader holds: the result is MB per reader.
 */
export async function memoryPerStalledReader (pid: number, port: number, path: string, first: number, more: number): Promise<{ each: number, before: number, after: number, statuses: number[], stillOpen: number, readers: Stalled[] }> {
  const group1 = Array.from({ length: first }, (_, i) => stalledReader(port, i, path))
  const statuses = await Promise.all(group1.map(async (r) => await r.status))
  const before = await settledRss(pid)
  const group2 = Array.from({ length: more }, (_, i) => stalledReader(port, first + i, path))
  statuses.push(...await Promise.all(group2.map(async (r) => await r.status)))
  const after = await settledRss(pid)
  const readers = [...group1, ...group2]
  return { each: (after - before) / more, before, after, statuses, stillOpen: readers.filter((r) => !r.closed()).length, readers }
}
