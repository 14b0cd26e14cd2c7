/** /api/product: public reads, creation with a JWT, deletion by the creator only. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { bearerAuth, problems } from '../../lib/responses.js'
import { IdParams, NoContent, PageQuery } from '../../lib/schemas.js'
import { CreateProductBody, Product, ProductPage } from './schemas.js'

export const productRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { products } = app

  app.get('', {
    schema: {
      tags: ['products'],
      summary: 'List products, oldest first, a page at a time',
      querystring: PageQuery,
      response: { 200: ProductPage, ...problems(400) }
    }
  }, async (request) => await products.page(request.query))

  app.get('/:id', {
    schema: {
      tags: ['products'],
      summary: 'Fetch a product',
      params: IdParams,
      response: { 200: Product, ...problems(400, 404) }
    }
  }, async (request) => await products.get(request.params.id))

  app.post('', {
    onRequest: app.authenticate,
    schema: {
      tags: ['products'],
      summary: 'Create a product; you are recorded as its creator',
      security: bearerAuth,
      body: CreateProductBody,
      response: { 201: Product, ...problems(400, 401, 413, 415) }
    }
  }, async (request, reply) => {
    return reply.code(201).send(await products.create(request.body, request.currentUser!.id))
  })

  app.delete('/:id', {
    onRequest: app.authenticate,
    schema: {
      tags: ['products'],
      summary: 'Delete a product you created',
      security: bearerAuth,
      params: IdParams,
      response: { 204: NoContent('deleted'), ...problems(400, 401, 403, 404) }
    }
  }, async (request, reply) => {
    await products.deleteOwned(request.params.id, request.currentUser!.id)
    return reply.code(204).send(null)
  })
}
