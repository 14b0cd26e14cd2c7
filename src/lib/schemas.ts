/** Schema atoms shared by the modules: ids, timestamps, pagination. */
import { Type } from 'typebox'

/** A timestamp: a `Date` in handlers, an ISO 8601 string on the wire. */
export const Timestamp = Type.Unsafe<Date>(Type.String({ format: 'date-time' }))

/** A row id: PostgreSQL `integer`, so anything above 2^31-1 cannot exist and is a 400. */
export const Id = Type.Integer({ minimum: 1, maximum: 2_147_483_647, description: 'numeric id' })

export const IdParams = Type.Object({ id: Id }, { additionalProperties: false })

/**
 * Keyset pagination: given up to `limit + 1` rows in id order, the page and the cursor of
 * the next one (null when the extra row was not there, i.e. on the last page).
 */
export function keysetPage<T extends { id: number }> (rows: T[], limit: number): { items: T[], nextCursor: number | null } {
  const items = rows.slice(0, limit)
  return { items, nextCursor: rows.length > limit ? items[items.length - 1]!.id : null }
}

export const Pagination = Type.Object({
  limit: Type.Integer({ minimum: 1, maximum: 100, default: 20, description: 'page size (max 100)' }),
  cursor: Type.Optional(Type.Integer({ minimum: 0, maximum: 2_147_483_647, description: 'the `nextCursor` of the previous page' }))
}, { additionalProperties: false })
