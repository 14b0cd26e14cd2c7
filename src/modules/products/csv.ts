/**
 * The catalogue as CSV (docs/api.md, "CSV"): `GET /api/product` with `Accept: text/csv`.
 * The same page as the JSON answer (`limit` rows after `cursor`, id order), streamed a batch
 * at a time from the products repository's catalogue reads (keyset: no cursor, no
 * connection held between batches).
 *
 * Memory per connection is bounded whatever the client's reading speed: a batch is cut at
 * about BATCH_BYTES of CSV (at least one row, at most BATCH_ROWS), turned into CSV text at
 * once (its rows let go), and the next one is read only when the response has taken that
 * text (the stream has no buffer of its own: highWaterMark 0). A stalled reader holds one
 * batch's text and what the kernel buffers, not a batch of rows.
 *
 * Cells: RFC 4180 (CRLF, every string quoted, quotes doubled), UTF-8, a header row. Cells
 * a spreadsheet would run as a formula (starting with = + - @ TAB CR, or their full-width
 * forms) get a leading `'` (OWASP "CSV Injection"; csv-stringify's `escape_formulas`).
 * Numbers are never escaped (`-5` stays a number; amounts are never negative anyway).
 *
 * The page's next cursor cannot go in the body: it goes in a `Link: <...>; rel="next"`
 * header, found before the first byte is sent by one index-only query (`catalogueEnds`).
 */
import { Readable } from 'node:stream'
import { stringify, type Options } from 'csv-stringify/sync'
import { MAX_INT4 } from '../../lib/schemas.js'
import type { CatalogueRow } from './repository.js'

export const CSV_CONTENT_TYPE = 'text/csv; charset=utf-8; header=present'

export const CSV_COLUMNS = ['id', 'title', 'description', 'amount', 'creatorId', 'createdAt', 'updatedAt', 'imageUrl'] as const

/** CSV bytes per database round trip (about): what a connection holds while its client does not read. */
export const BATCH_BYTES = 64 * 1024

/** Rows per round trip at most: short rows need no more to amortise it. */
export const BATCH_ROWS = 500

/** The two catalogue reads a page needs (the products repository's). */
export interface Catalogue {
  catalogueEnds: (after: number, limit: number) => Promise<number[]>
  catalogueBatch: (from: number, last: number, count: number, bytes: number) => Promise<CatalogueRow[]>
}

export interface CsvPage {
  /** The CSV text, streamed. */
  body: Readable
  /** The cursor of the next page, or null on the last one. */
  nextCursor: number | null
}

const CSV_OPTIONS: Options = {
  columns: [...CSV_COLUMNS],
  record_delimiter: 'windows',
  quoted_string: true,
  escape_formulas: true
}

/**
 * One page of the catalogue as a CSV stream. The first batch is read before this resolves,
 * so an unreachable database is still a 503 in problem details; a failure later can only
 * cut the stream short (the client sees an incomplete chunked body, never a short "success").
 */
export async function csvPage (catalogue: Catalogue, page: { limit: number, cursor?: number }, imageUrl: (id: number) => string): Promise<CsvPage> {
  const after = page.cursor ?? 0
  const ends = await catalogue.catalogueEnds(after, page.limit)
  const nextCursor = ends.length === 2 ? ends[0]! : null
  // Rows inserted while the page streams have larger ids: bounded, the page stays the page.
  const last = ends[0] ?? MAX_INT4
  const batch = async (from: number, rows: number): Promise<CatalogueRow[]> => await catalogue.catalogueBatch(from, last, rows, BATCH_BYTES)
  const first = await batch(after, Math.min(BATCH_ROWS, page.limit))

  const text = (rows: CatalogueRow[], header: boolean): Buffer => Buffer.from(stringify(rows.map((row) => [
    row.id, row.title, row.description, row.amount, row.creatorId, row.createdAt.toISOString(), row.updatedAt.toISOString(), row.hasImage ? imageUrl(row.id) : ''
  ]), { ...CSV_OPTIONS, header }))

  // `rows` is the generator's own: the first batch is let go with it.
  async function * chunks (rows: CatalogueRow[]): AsyncGenerator<Buffer> {
    let remaining = page.limit
    let header = true
    while (header || rows.length > 0) {
      const chunk = text(rows, header)
      const sent = rows.length
      const lastSent = rows.at(-1)?.id
      // No rows are held while the client reads this chunk: only its text (the same Buffer
      // the response writes).
      rows = []
      header = false
      yield chunk
      remaining -= sent
      if (lastSent === undefined || lastSent >= last || remaining <= 0) return
      // Long rows make short batches: scan a few times the last batch's count, not BATCH_ROWS.
      rows = await batch(lastSent, Math.min(BATCH_ROWS, remaining, Math.max(16, 4 * sent)))
    }
  }

  // highWaterMark 0: the next batch is read when the response has taken the last chunk (its
  // 'drain'), never ahead. A client that goes away destroys the stream: the generator returns.
  const body = Readable.from(chunks(first), { objectMode: false, highWaterMark: 0 })
  return { body, nextCursor }
}
