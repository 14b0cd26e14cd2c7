import { Type } from 'typebox'
import { Id, Timestamp } from '../../lib/schemas.js'

export const CreateProductBody = Type.Object({
  title: Type.String({ minLength: 1, maxLength: 200 }),
  description: Type.String({ maxLength: 5000, default: '' }),
  amount: Type.Integer({ minimum: 0, maximum: 2_147_483_647, description: 'a whole number, e.g. a price in cents' })
}, { additionalProperties: false })

export const Product = Type.Object({
  id: Id,
  title: Type.String(),
  description: Type.String(),
  amount: Type.Integer(),
  creatorId: Type.Integer({ description: 'the user who created it' }),
  createdAt: Timestamp,
  updatedAt: Timestamp
})

export const ProductPage = Type.Object({
  items: Type.Array(Product),
  nextCursor: Type.Union([Type.Integer(), Type.Null()], { description: 'pass as `cursor` for the next page; null on the last page' })
})
