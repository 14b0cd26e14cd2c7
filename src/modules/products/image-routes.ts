/**
 * /api/product/:id/image: download (public, cached by validators, byte ranges), and the
 * writes, registered in the products' signed-in subtree: upload (creator only, multipart)
 * and removal (creator only). The logic is in images.ts.
 *
 * @fastify/multipart is registered in the writes' plugin only: everywhere else a multipart
 * body stays a 415, as the JSON API promises (test/abuse/body-limits.test.ts).
 */
import fastifyMultipart from '@fastify/multipart'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { BODY, empty, header, json, problems, SESSION_CHANGE, sessionAuth } from '../../lib/responses.js'
import { IdParams } from '../../lib/schemas.js'
import { MULTIPART_OVERHEAD, uploadLimits } from './images.js'
import { ImageContent, ImageQuery, ImageUploadBody, Product } from './schemas.js'

/** The name of the image route, for `app.getRouteURL` (routing plugin): the product JSON's `imageUrl`. */
export const PRODUCT_IMAGE_ROUTE = 'product-image'

/** The headers of an image answer (images.ts sends them). */
const IMAGE_HEADERS = {
  ETag: header('strong validator of the image\'s bytes: send it back as `If-None-Match` (304) or `If-Range`'),
  'Last-Modified': header('when the image was stored'),
  'Cache-Control': header('`public, no-cache`: cached, revalidated before each use'),
  'Accept-Ranges': header('`bytes`'),
  'Content-Disposition': header('`inline; filename="product-<id>.<png|jpg|webp>"`'),
  'Cross-Origin-Resource-Policy': header('`IMAGE_CROSS_ORIGIN_RESOURCE_POLICY` (`same-origin` by default): which origins\' pages may show the image')
}

export type ImageCorp = 'same-origin' | 'same-site' | 'cross-origin'

export interface ProductImageReadOptions {
  /**
   * IMAGE_CROSS_ORIGIN_RESOURCE_POLICY. helmet sends `same-origin` on every answer, which
   * keeps an `<img>` of another origin (even the same site) from showing the image; the
   * images are public, so a front-end elsewhere may be let in (Fetch standard, "Cross-Origin-Resource-Policy").
   */
  crossOriginResourcePolicy: ImageCorp
}

/** The download: public, outside the signed-in subtree. */
export const productImageRead: FastifyPluginAsyncTypebox<ProductImageReadOptions> = async (app, options) => {
  const { products, productImages } = app

  app.get('/:id/image', {
    config: { name: PRODUCT_IMAGE_ROUTE },
    schema: {
      operationId: 'getProductImage',
      tags: ['products'],
      summary: 'Download the image of a product',
      description: 'Public. Strong ETag and Last-Modified (If-None-Match / If-Modified-Since: 304); one byte range (Range, If-Range): 206 with Content-Range, 416 past the end; several ranges get the whole image. `X-Content-Type-Options: nosniff`, `Content-Disposition: inline`. ' +
        '`?w=128|256|512|1024`: a WebP rendition that wide (never wider than the original), whole (no ranges), with an ETag of its own; an original over 50 megapixels has none (415 `UNSUPPORTED_IMAGE_TYPE`).',
      params: IdParams,
      querystring: ImageQuery,
      response: {
        200: { description: 'the image; with `w`, its WebP rendition', headers: IMAGE_HEADERS, content: ImageContent },
        206: { description: 'the requested byte range of the image', headers: { ...IMAGE_HEADERS, 'Content-Range': header('`bytes <first>-<last>/<size>`') }, content: ImageContent },
        304: empty('not modified: the copy the client has is current', { ETag: IMAGE_HEADERS.ETag, 'Cache-Control': IMAGE_HEADERS['Cache-Control'] }),
        ...problems('VALIDATION_FAILED', 'NOT_FOUND', 'UNSUPPORTED_IMAGE_TYPE', 'RANGE_NOT_SATISFIABLE')
      }
    }
  }, async (request, reply) => {
    // On errors too: a 404 or 416 read by another origin's page is as harmless as the image.
    reply.header('cross-origin-resource-policy', options.crossOriginResourcePolicy)
    const product = await products.get(request.params.id)
    // A URL that names the product's version cannot name another image: cacheable for good.
    const versioned = request.query.v !== undefined && request.query.v === product.updatedAt.toISOString()
    return await productImages.send(request, reply, product, { width: request.query.w, versioned })
  })
}

/** Upload and removal; registered where `app.authenticate` is already the `onRequest` hook. */
export const productImageWrites: FastifyPluginAsyncTypebox<{ maxBytes: number }> = async (app, options) => {
  const { maxBytes } = options
  const { products, productImages } = app
  await app.register(fastifyMultipart, { limits: uploadLimits(maxBytes) })

  app.post('/:id/image', {
    // The file plus the form's own bytes; the file alone is held to maxBytes by multipart.
    bodyLimit: maxBytes + MULTIPART_OVERHEAD,
    schema: {
      operationId: 'uploadProductImage',
      tags: ['products'],
      summary: 'Upload (or replace) the image of a product you created',
      description: `One file in a multipart/form-data body, PNG, JPEG or WebP as its bytes say (not its name or Content-Type), at most IMAGE_MAX_BYTES (${maxBytes} here). 201 when the product had no image, 200 when it replaced one; the body is the product. Your images together take at most IMAGE_BYTES_MAX_PER_USER (a replacement counts its size minus the old one's): past it, 409 \`IMAGE_QUOTA_EXCEEDED\` and nothing is kept.`,
      security: sessionAuth,
      consumes: ['multipart/form-data'],
      params: IdParams,
      body: ImageUploadBody,
      response: {
        200: json(Product, { description: 'the image replaced the earlier one; the product' }),
        201: json(Product, { description: 'the product had no image; the product', headers: { Location: header('the image\'s URL (`imageUrl`)') } }),
        ...problems(...BODY, ...SESSION_CHANGE, 'VALIDATION_FAILED', 'BAD_REQUEST', 'IMAGE_MISSING', 'TOO_MANY_FILES', 'TOO_MANY_PARTS', 'UNSUPPORTED_IMAGE_TYPE', 'FORBIDDEN', 'NOT_FOUND', 'IMAGE_QUOTA_EXCEEDED')
      }
    }
  }, async (request, reply) => {
    const { id } = request.params
    const { replaced } = await productImages.upload(request, id, request.currentUser!.id)
    // 404 when deleted right after the upload: its image went with it.
    const product = await products.get(id)
    const imageUrl = app.getRouteURL(PRODUCT_IMAGE_ROUTE, { id })
    if (!replaced) reply.code(201).location(imageUrl)
    return await reply.send({ ...product, imageUrl: product.imageKey === null ? null : imageUrl })
  })

  app.delete('/:id/image', {
    schema: {
      operationId: 'deleteProductImage',
      tags: ['products'],
      summary: 'Remove the image of a product you created',
      security: sessionAuth,
      params: IdParams,
      response: { 204: empty('removed'), ...problems(...BODY, ...SESSION_CHANGE, 'VALIDATION_FAILED', 'FORBIDDEN', 'NOT_FOUND') }
    }
  }, async (request, reply) => {
    await productImages.remove(request.params.id, request.currentUser!.id)
    return await reply.code(204).send(null)
  })
}
