/** Schemas of the product resource; the TypeScript types come from them. */
import { Type, type Static } from 'typebox'
import { Id, MAX_INT4, Page, Timestamp } from '../../lib/schemas.js'
import { RENDITION_WIDTHS, type RenditionWidth } from './renditions.js'

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

/** `GET /api/product`'s query: the JSON page's, with a larger `limit` allowed for CSV, and the JSON list's filters. */
export function catalogueQuery (csvMaxRows: number) {
  return Type.Object({
    // One parameter for both representations, and which maximum applies depends on Accept,
    // which a schema cannot see: the widest is the schema's, and the two branches of `anyOf`
    // name each representation's (the route refuses a JSON page past JSON_MAX_LIMIT itself).
    limit: Type.Integer({
      minimum: 1,
      maximum: csvMaxRows,
      default: 20,
      description: `page size: at most ${JSON_MAX_LIMIT} for JSON (400 past it), ${csvMaxRows} for CSV (CSV_MAX_ROWS)`,
      anyOf: [
        { type: 'integer', maximum: JSON_MAX_LIMIT, title: 'JSON page', description: `a JSON page: at most ${JSON_MAX_LIMIT}` },
        { type: 'integer', maximum: csvMaxRows, title: 'CSV page', description: `a CSV page (Accept: text/csv): at most ${csvMaxRows}` }
      ]
    }),
    cursor: Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_INT4, description: 'the `nextCursor` of the previous page (CSV: the `cursor` of the `Link: rel="next"` header)' })),
    // The filters and the order are the JSON list's, a catalogue page as a person browses
    // it; the CSV export is the whole catalogue in id order (a 400 names a filter sent with it).
    sort: Type.Union([Type.Literal('oldest'), Type.Literal('newest')], { default: 'oldest', description: 'JSON only: `oldest` first (by id: the order of creation), or `newest` first; `nextCursor` follows the order asked' }),
    q: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'JSON only: products whose title contains this text, ignoring case (`%` and `_` are plain characters)', examples: ['lamp'] })),
    creatorId: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_INT4, description: 'JSON only: the products of this user (a signed-in page\'s "my products")', examples: [1] })),
    // A link cannot set Accept: a browser navigation or `<a download>` asks for HTML and
    // anything else, which negotiation answers with JSON.
    format: Type.Optional(Type.Union([Type.Literal('json'), Type.Literal('csv')], {
      description: 'the representation, whatever Accept says: `csv` for a plain link or `<a download>` (a browser\'s Accept gets JSON); absent: negotiated on Accept'
    }))
  }, { additionalProperties: false })
}

/** `GET /api/product/{id}/image`'s query: the width of a rendition (renditions.ts), and a client's own version. */
export const ImageQuery = Type.Object({
  w: Type.Optional(Type.Unsafe<RenditionWidth>({ type: 'integer', enum: [...RENDITION_WIDTHS], description: 'a WebP rendition this many pixels wide, for a thumbnail at display size (absent: the original)', examples: [256] })),
  v: Type.Optional(Type.String({ maxLength: 100, description: 'the product\'s `updatedAt`: the URL then names this version of the image, answered `Cache-Control: public, max-age=31536000, immutable` (any other value: `public, no-cache`, revalidated)', examples: ['2026-11-23T20:05:00.000Z'] }))
// Other parameters are ignored, as they were before `w`: cache-busting ones included.
})

/** The image upload's body, for the OpenAPI document (the route reads the parts itself). */
export const ImageUploadBody = {
  content: {
    'multipart/form-data': {
      // No `type`: the body is read from the stream, so Fastify sees no body to validate.
      schema: {
        properties: { image: { type: 'string', format: 'binary', description: 'one PNG, JPEG or WebP file (type judged from its bytes), at most IMAGE_MAX_BYTES; the field name is free' } },
        required: ['image'],
        examples: [{ image: '(the bytes of lamp.png)' }]
      }
    }
  }
} as const

const binary = { schema: { type: 'string', format: 'binary' }, example: '(the image bytes)' } as const

/** The image's bytes, in whichever of the three types it was stored as (media objects: an example each). */
export const ImageContent = {
  'image/png': binary,
  'image/jpeg': binary,
  'image/webp': binary
} as const

/** The CSV representation of a page (csv.ts). */
export const CatalogueCsv = {
  type: 'string',
  description: 'columns id, title, description, amount, creatorId, createdAt, updatedAt, imageUrl; RFC 4180 (CRLF), UTF-8, a header row, every text cell quoted, formula-like cells prefixed with \''
} as const

/** An example of the CSV representation (the media object's, beside CatalogueCsv). */
export const CATALOGUE_CSV_EXAMPLE = '"id","title","description","amount","creatorId","createdAt","updatedAt","imageUrl"\r\n1,"Desk lamp","Warm light",2599,1,"2026-11-23T20:05:00.000Z","2026-11-23T20:05:00.000Z","/api/product/1/image"\r\n'

/** An example page (the JSON media object's: the response is keyed by media type, so the schema's own examples are not lifted). */
export const PRODUCT_PAGE_EXAMPLE = {
  items: [{ id: 1, title: 'Desk lamp', description: 'Warm light', amount: 2599, creatorId: 1, createdAt: '2026-11-23T20:05:00.000Z', updatedAt: '2026-11-23T20:05:00.000Z', imageUrl: '/api/product/1/image' }],
  nextCursor: null
}

/** A JSON catalogue page as asked: keyset after `cursor` in the `sort` order, filtered. */
export interface CatalogueQuery {
  limit: number
  cursor?: number
  sort: 'oldest' | 'newest'
  q?: string
  creatorId?: number
}
