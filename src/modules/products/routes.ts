/**
 * /api/product: public reads (JSON, or CSV for `Accept: text/csv`), and a signed-in subtree
 * whose one `onRequest` hook is `app.authenticate`: creation, deletion by the creator only,
 * and the image writes. The image routes are in image-routes.ts.
 */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import createError from '@fastify/error'
import { BODY, empty, header, json, problems, SESSION_CHANGE, sessionAuth } from '../../lib/responses.js'
import { IdParams } from '../../lib/schemas.js'
import { CSV_CONTENT_TYPE } from './csv.js'
import { productImageRead, productImageWrites, PRODUCT_IMAGE_ROUTE, type ImageCorp } from './image-routes.js'
import { CATALOGUE_CSV_EXAMPLE, CatalogueCsv, catalogueQuery, PRODUCT_PAGE_EXAMPLE, CreateProductBody, JSON_MAX_LIMIT, Product, ProductPage } from './schemas.js'

export interface ProductRoutesOptions {
  /** IMAGE_MAX_BYTES. */
  imageMaxBytes: number
  /** IMAGE_CROSS_ORIGIN_RESOURCE_POLICY. */
  imageCrossOriginResourcePolicy: ImageCorp
  /** CSV_MAX_ROWS: the largest `limit` of a CSV page. */
  csvMaxRows: number
}

/** JSON is UTF-8 (RFC 8259), so an Accept range asking for `charset=utf-8` is satisfied. */
const JSON_OFFER = 'application/json; charset=utf-8'

export const NotAcceptable = createError('NOT_ACCEPTABLE', 'The product list is served as application/json or text/csv; the Accept header allows neither', 406)

/** The 400 Ajv gives for a value out of range, for a rule of one representation that a schema cannot see. */
function queryError (param: string, keyword: string, params: Record<string, unknown>, message: string): Error {
  return Object.assign(new Error(`querystring/${param} ${message}`), {
    statusCode: 400,
    validationContext: 'querystring',
    validation: [{ instancePath: `/${param}`, keyword, params, message }]
  })
}

export const productRoutes: FastifyPluginAsyncTypebox<ProductRoutesOptions> = async (app, options) => {
  const { products } = app
  const imageUrl = (id: number): string => app.getRouteURL(PRODUCT_IMAGE_ROUTE, { id })
  /** A product row as the API shows it: its image as a URL (a named route), or null. */
  const present = <Row extends { id: number, imageKey: string | null }>(row: Row) => ({ ...row, imageUrl: row.imageKey === null ? null : imageUrl(row.id) })

  app.get('', {
    schema: {
      operationId: 'listProducts',
      tags: ['products'],
      summary: 'List products a page at a time (JSON: oldest or newest first, searched by title, one user\'s), or the catalogue as CSV for Accept: text/csv',
      description: 'Negotiated on Accept (`Vary: Accept`), unless `format` names the representation (`?format=csv`: a download link): JSON by default, `text/csv` when preferred (the same page, streamed, a header row, cells that a spreadsheet would run as formulas prefixed with `\'`; the next page in `Link: <...>; rel="next"`). 406 when neither is acceptable.',
      querystring: catalogueQuery(options.csvMaxRows),
      response: {
        200: {
          description: 'a page of products',
          headers: {
            Vary: header('`Accept`: the representation depends on it'),
            Link: header('CSV only: `<...>; rel="next"`, the URL of the next page (absent on the last one)'),
            'Content-Disposition': header('CSV only: `attachment; filename="products.csv"`')
          },
          content: {
            'application/json': { schema: ProductPage, example: PRODUCT_PAGE_EXAMPLE },
            'text/csv': { schema: CatalogueCsv, example: CATALOGUE_CSV_EXAMPLE }
          }
        },
        ...problems('VALIDATION_FAILED', 'NOT_ACCEPTABLE')
      }
    }
  }, async (request, reply) => {
    reply.vary('Accept')
    // Offered with the parameters each answer carries, so that an Accept range naming them
    // (`text/csv; charset=utf-8`, `;header=present`) is satisfied, and one naming others
    // (`charset=iso-8859-1`, `header=absent`) is not (docs/api.md, "CSV").
    const format = request.query.format
    const type = format === 'csv' ? CSV_CONTENT_TYPE : format === 'json' ? JSON_OFFER : request.accepts(JSON_OFFER, CSV_CONTENT_TYPE)
    if (type === '') throw new NotAcceptable()
    if (type === CSV_CONTENT_TYPE) {
      const { q, creatorId, sort } = request.query
      const filter = q !== undefined ? 'q' : creatorId !== undefined ? 'creatorId' : sort !== 'oldest' ? 'sort' : undefined
      if (filter !== undefined) throw queryError(filter, 'not', {}, 'applies to the JSON list only: the CSV export is the whole catalogue in id order')
      const page = await products.csvPage(request.query, imageUrl)
      if (page.nextCursor !== null) {
        const path = request.url.split('?')[0] ?? ''
        reply.links(`${path}?limit=${request.query.limit}&cursor=${page.nextCursor}${format === undefined ? '' : `&format=${format}`}`, 'next')
      }
      return await reply.type(CSV_CONTENT_TYPE).header('content-disposition', 'attachment; filename="products.csv"').send(page.body as never)
    }
    if (request.query.limit > JSON_MAX_LIMIT) throw queryError('limit', 'maximum', { comparison: '<=', limit: JSON_MAX_LIMIT }, `must be <= ${JSON_MAX_LIMIT}`)
    const page = await products.page(request.query)
    return await reply.type('application/json; charset=utf-8').send({ items: page.items.map(present), nextCursor: page.nextCursor })
  })

  app.get('/:id', {
    schema: {
      operationId: 'getProduct',
      tags: ['products'],
      summary: 'Fetch a product',
      params: IdParams,
      response: { 200: json(Product), ...problems('VALIDATION_FAILED', 'NOT_FOUND') }
    }
  }, async (request) => present(await products.get(request.params.id)))

  await app.register(productImageRead, { crossOriginResourcePolicy: options.imageCrossOriginResourcePolicy })

  const signedIn: FastifyPluginAsyncTypebox = async (app) => {
    app.addHook('onRequest', app.authenticate)

    app.post('', {
      schema: {
        operationId: 'createProduct',
        tags: ['products'],
        summary: 'Create a product; you are recorded as its creator',
        description: 'One user holds at most `PRODUCTS_MAX_PER_USER` products: past it, 409 `PRODUCT_QUOTA_EXCEEDED` until you delete one.',
        security: sessionAuth,
        body: CreateProductBody,
        response: { 201: json(Product, { description: 'the new product' }), ...problems(...BODY, ...SESSION_CHANGE, 'VALIDATION_FAILED', 'PRODUCT_QUOTA_EXCEEDED') }
      }
    }, async (request, reply) => {
      return reply.code(201).send(present(await products.create(request.body, request.currentUser!.id)))
    })

    app.delete('/:id', {
      schema: {
        operationId: 'deleteProduct',
        tags: ['products'],
        summary: 'Delete a product you created (and its image)',
        security: sessionAuth,
        params: IdParams,
        response: { 204: empty('deleted'), ...problems(...BODY, ...SESSION_CHANGE, 'VALIDATION_FAILED', 'FORBIDDEN', 'NOT_FOUND') }
      }
    }, async (request, reply) => {
      await products.deleteOwned(request.params.id, request.currentUser!.id)
      return reply.code(204).send(null)
    })

    await app.register(productImageWrites, { maxBytes: options.imageMaxBytes })
  }
  await app.register(signedIn)
}
