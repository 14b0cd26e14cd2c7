/**
 * The catalogue as CSV (docs/api.md, "CSV"): `GET /api/product` with `Accept: text/csv`.
 * The same page as the JSON answer (`limit` rows after `cursor`, id order), streamed: rows
 * are read in batches of BATCH_ROWS on the pg pool and written through csv-stringify as
 * the client reads, so memory stays flat however large the page.
 *
 * Cells: RFC 4180 (CRLF, every string quoted, quotes doubled), UTF-8, a header row. Cells
 * a spreadsheet would run as a formula (starting with = + - @ TAB CR, or their full-width
 * forms) get a leading `'` (OWASP "CSV Injection"; csv-stringify's `escape_formulas`).
 * Numbers are never escaped (`-5` stays a number; amounts are never negative anyway).
 *
 * The page's next cursor cannot go in the body: it goes in a `Link: <...>; rel="next"`
 * header, found before the first byte is sent by one index-only probe query.
 */
import { Readable, pipeline } from 'node:stream'
import { stringify } from 'csv-stringify'
import type pg from 'pg'

export const CSV_CONTENT_TYPE = 'text/csv; charset=utf-8; header=present'

export const CSV_COLUMNS = ['id', 'title', 'description', 'amount', 'creatorId', 'createdAt', 'updatedAt', 'imageUrl'] as const

/** Rows per database round trip: large enough to amortise it, small enough to stay cheap in memory. */
export const BATCH_ROWS = 500

export interface CatalogueRow {
  id: number
  title: string
  description: string
  amount: number
  creatorId: number
  createdAt: Date
  updatedAt: Date
  hasImage: boolean
}

const BATCH_SQL = `
  SELECT id, title, description, amount, creator_id AS "creatorId", created_at AS "createdAt", updated_at AS "updatedAt",
         image_key IS NOT NULL AS "hasImage"
    FROM products WHERE id > $1 AND id <= $2 ORDER BY id LIMIT $3`

// The ids of the page's last row and of the one after it, if any (index only).
const PROBE_SQL = 'SELECT id FROM products WHERE id > $1 ORDER BY id OFFSET $2 LIMIT 2'

const MAX_ID = 2_147_483_647

async function query<Row extends pg.QueryResultRow> (pool: pg.Pool, name: string | undefined, text: string, values: unknown[]): Promise<Row[]> {
  try {
    return (await pool.query<Row>({ name, text, values })).rows
  } catch (error) {
    // Wrapped so the error handler's classifier reads the driver error as the cause (503s).
    throw new Error(`Catalogue query ${name ?? '(unnamed)'} failed: ${(error as Error).message}`, { cause: error })
  }
}

export interface CsvPage {
  /** The CSV text, streamed. */
  body: Readable
  /** The cursor of the next page, or null on the last one. */
  nextCursor: number | null
}

/**
 * One page of the catalogue as a CSV stream. The first batch is read before this resolves,
 * so an unreachable database is still a 503 in problem details; a failure later can only
 * cut the stream short (the client sees an incomplete chunked body, never a short "success").
 */
/** `named` gives a statement's name, or undefined where statements must stay unnamed (DB_PGBOUNCER). */
export async function csvPage (pool: pg.Pool, page: { limit: number, cursor?: number }, imageUrl: (id: number) => string, named: (name: string) => string | undefined = (name) => name): Promise<CsvPage> {
  const after = page.cursor ?? 0
  const probe = await query<{ id: number }>(pool, named('catalogue-probe'), PROBE_SQL, [after, page.limit - 1])
  const nextCursor = probe.length === 2 ? probe[0]!.id : null
  // Rows inserted while the page streams have larger ids: bounded, the page stays the page.
  const last = probe[0]?.id ?? MAX_ID
  let remaining = page.limit
  const first = await query<CatalogueRow>(pool, named('catalogue-batch'), BATCH_SQL, [after, last, Math.min(BATCH_ROWS, remaining)])

  async function * rows (): AsyncGenerator<unknown[]> {
    let batch = first
    while (batch.length > 0) {
      for (const row of batch) {
        yield [row.id, row.title, row.description, row.amount, row.creatorId, row.createdAt.toISOString(), row.updatedAt.toISOString(), row.hasImage ? imageUrl(row.id) : '']
      }
      remaining -= batch.length
      if (remaining <= 0 || batch.length < BATCH_ROWS) return
      batch = await query<CatalogueRow>(pool, named('catalogue-batch'), BATCH_SQL, [batch[batch.length - 1]!.id, last, Math.min(BATCH_ROWS, remaining)])
    }
  }

  const csv = stringify({
    header: true,
    columns: [...CSV_COLUMNS],
    record_delimiter: 'windows',
    quoted_string: true,
    escape_formulas: true
  })
  // pipeline: a client that goes away stops the reads (the generator is returned).
  const body = pipeline(Readable.from(rows()), csv, () => {})
  return { body, nextCursor }
}
