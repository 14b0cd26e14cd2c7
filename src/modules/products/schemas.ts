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
  updatedAt: Timestamp,
  imageUrl: Type.Union([Type.String(), Type.Null()], { description: 'where its image is served (`GET /api/product/{id}/image`); null without an image' })
}, {
  examples: [{ id: 1, title: 'Desk lamp', description: 'Warm light', amount: 2599, creatorId: 1, createdAt: '2026-11-23T20:05:00.000Z', updatedAt: '2026-11-23T20:05:00.000Z', imageUrl: '/api/product/1/image' }]
})

export const ProductPage = Page(Product)

/** The JSON page limit: a CSV page may be larger (CSV_MAX_ROWS), the JSON one not. */
export const JSON_MAX_LIMIT = 100

/** `GET /api/product`'s query: the JSON page's, with a larger `limit` allowed for CSV. */
export function catalogueQuery (csvMaxRows: number) {
  return Type.Object({
    limit: Type.Integer({ minimum: 1, maximum: csvMaxRows, default: 20, description: `page size: at most ${JSON_MAX_LIMIT} for JSON, ${csvMaxRows} for CSV (CSV_MAX_ROWS)` }),
    cursor: Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_INT4, description: 'the `nextCursor` of the previous page (CSV: the `cursor` of the `Link: rel="next"` header)' }))
  }, { additionalProperties: false })
}

/** The image upload's body, for the OpenAPI document (the route reads the parts itself). */
export const ImageUploadBody = {
  content: {
    'multipart/form-data': {
      // No `type`: the body is read from the stream, so Fastify sees no body to validate.
      schema: {
        properties: { image: { type: 'string', format: 'binary', description: 'one PNG, JPEG or WebP file (type judged from its bytes), at most IMAGE_MAX_BYTES; the field name is free' } },
        required: ['image']
      }
    }
  }
} as const

const binary = { type: 'string', format: 'binary' } as const

/** The image's bytes, in whichever of the three types it was stored as. */
export const ImageContent = {
  'image/png': { schema: binary },
  'image/jpeg': { schema: binary },
  'image/webp': { schema: binary }
} as const
