/** Schemas of the product resource; the TypeScript types come from them. */
import { Type, type Static } from 'typebox'
import { Id, MAX_INT4, Page, Timestamp } from '../../lib/schemas.js'

export const CreateProductBody = Type.Object({
  title: Type.String({ minLength: 1, maxLength: 200 }),
  description: Type.String({ maxLength: 5000, default: '' }),
  amount: Type.Integer({ minimum: 0, maximum: MAX_INT4, description: 'a whole number, e.g. a price in cents' })
}, { additionalProperties: false, examples: [{ title: 'Desk lamp', description: 'Warm light', amount: 2599 }] })
/** After validation: the default has filled in `description`. */
export type CreateProductInput = Static<typeof CreateProductBody>

export const Product = Type.Object({
  id: Id,
  title: Type.String(),
  description: Type.String(),
  amount: Type.Integer(),
  creatorId: Type.Integer({ description: 'the user who created it' }),
  createdAt: Timestamp,
  updatedAt: Timestamp
}, {
  examples: [{ id: 1, title: 'Desk lamp', description: 'Warm light', amount: 2599, creatorId: 1, createdAt: '2026-11-23T20:05:00.000Z', updatedAt: '2026-11-23T20:05:00.000Z' }]
})

export const ProductPage = Page(Product)
