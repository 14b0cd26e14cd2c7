/** Schema atoms shared by the modules: ids, timestamps, pages, empty answers. */
import { Type, type Static, type TSchema } from 'typebox'

/** A timestamp: a `Date` in handlers, an ISO 8601 string on the wire. */
export const Timestamp = Type.Unsafe<Date>(Type.String({ format: 'date-time' }))

/** The largest PostgreSQL `integer` (ids, amounts). */
export const MAX_INT4 = 2_147_483_647

/** A row id: PostgreSQL `integer`, so anything above 2^31-1 cannot exist and is a 400. */
export const Id = Type.Integer({ minimum: 1, maximum: MAX_INT4, description: 'numeric id' })

export const IdParams = Type.Object({ id: Id }, { additionalProperties: false })

/** The query of every paged list: `limit` (default 20) and the `cursor` a previous page gave. */
export const PageQuery = Type.Object({
  limit: Type.Integer({ minimum: 1, maximum: 100, default: 20, description: 'page size (max 100)' }),
  cursor: Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_INT4, description: 'the `nextCursor` of the previous page' }))
}, { additionalProperties: false })
/** After validation: the default has filled in `limit`. */
export type PageQueryInput = Static<typeof PageQuery>

/** A page of `items` in id order and the cursor of the next one; its example is made of the item's. */
export function Page<T extends TSchema> (item: T) {
  const example = (item as { examples?: unknown[] }).examples?.[0]
  return Type.Object({
    items: Type.Array(item),
    nextCursor: Type.Union([Type.Integer(), Type.Null()], { description: 'pass as `cursor` for the next page; null on the last page' })
  }, example === undefined ? {} : { examples: [{ items: [example], nextCursor: null }] })
}
export interface PageOf<T> { items: T[], nextCursor: number | null }

/**
 * Keyset pagination, the answer: given the rows after the cursor in id order, one more than `limit`
 * (`WHERE id > $cursor ORDER BY id LIMIT $limit + 1`), the page and the cursor
 * of the next one (null when the extra row was not there, i.e. on the last page).
 */
export function keysetPage<T extends { id: number }> (rows: T[], limit: number): PageOf<T> {
  const items = rows.slice(0, limit)
  return { items, nextCursor: rows.length > limit ? items[items.length - 1]!.id : null }
}
