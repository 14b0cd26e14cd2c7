/** /api/product: public reads, creation with a JWT, deletion by the creator only. */
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Forbidden, NotFound, Unauthorized } from '../../lib/problem.js'
import { bearerAuth, problems } from '../../lib/responses.js'
import { IdParams, Pagination } from '../../lib/schemas.js'
import { productsRepository } from './repository.js'
import { CreateProductBody, Product, ProductPage } from './schemas.js'

export const productRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const products = productsRepository(app.prisma)

  app.get('', {
    schema: {
      tags: ['products'],
      summary: 'List products, oldest first, a page at a time',
      querystring: Pagination,
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
  }, async (request) => {
    const product = await products.findById(request.params.id)
    if (product === null) throw new NotFound(`Product ${request.params.id} does not exist`)
    return product
  })

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
    const product = await products.create({ ...request.body, creatorId: request.currentUser!.id })
    // The user was deleted after the token check: the token no longer names anyone.
    if (product === null) throw new Unauthorized('The token has been revoked')
    return reply.code(201).send(product)
  })

  app.delete('/:id', {
    onRequest: app.authenticate,
    schema: {
      tags: ['products'],
      summary: 'Delete a product you created',
      security: bearerAuth,
      params: IdParams,
      response: { 204: { type: 'null', description: 'deleted' }, ...problems(400, 401, 403, 404) }
    }
  }, async (request, reply) => {
    const { id } = request.params
    if (await products.deleteOwned(id, request.currentUser!.id)) return reply.code(204).send(null)
    // Not deleted: tell apart "no such product" from "not yours".
    if (await products.findById(id) === null) throw new NotFound(`Product ${id} does not exist`)
    throw new Forbidden('Only the creator of a product can delete it')
  })
}
