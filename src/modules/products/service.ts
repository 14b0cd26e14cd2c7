/**
 * Product operations, built once and decorated as `app.products` (docs/architecture.md):
 * what the product and admin routes do with products, over the products repository.
 */
import createError from '@fastify/error'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { Forbidden, NotFound, Unauthorized } from '../../lib/problem.js'
import type { PageQueryInput } from '../../lib/schemas.js'
import { csvPage, type CsvPage } from './csv.js'
import type { ProductImages } from './images.js'
import type { ProductsRepository } from './repository.js'
import type { CatalogueQuery, CreateProductInput } from './schemas.js'

/** The creator holds PRODUCTS_MAX_PER_USER products: 409 (docs/api.md, "Quotas"), until they delete one. */
const ProductQuotaExceeded = createError<[number]>('PRODUCT_QUOTA_EXCEEDED', 'You hold %d products, the most one user may; delete one to create another', 409)

interface ProductsServiceDependencies {
  products: ProductsRepository
  /** A deleted product's image file is removed once its row is gone. */
  images: Pick<ProductImages, 'discard'>
}

function productsService ({ products, images }: ProductsServiceDependencies) {
  const missing = (id: number) => new NotFound(`Product ${id} does not exist`)

  return {
    /** A JSON page of products, filtered and in the order asked. */
    async page (query: CatalogueQuery) {
      return await products.page(query)
    },

    async get (id: number) {
      const product = await products.findById(id)
      if (product === null) throw missing(id)
      return product
    },

    /** A page of products as a CSV stream (csv.ts); `imageUrl` names a product's image. */
    async csvPage (query: PageQueryInput, imageUrl: (id: number) => string): Promise<CsvPage> {
      return await csvPage(products, query, imageUrl)
    },

    /**
     * Creates a product of `creatorId`; 409 when they hold PRODUCTS_MAX_PER_USER already; 401
     * when that user was deleted after the token check (the token no longer names anyone).
     */
    async create (data: CreateProductInput, creatorId: number) {
      const product = await products.create({ ...data, creatorId })
      if (product === null) throw new Unauthorized('The token has been revoked')
      if ('quota' in product) throw new ProductQuotaExceeded(product.quota)
      return product
    },

    /** Deletes a product of `creatorId`'s and its image: 404 when there is none, 403 when it is someone else's. */
    async deleteOwned (id: number, creatorId: number): Promise<void> {
      const { deleted, imageKey } = await products.delete(id, creatorId)
      await images.discard(imageKey)
      if (deleted) return
      if (await products.findById(id) === null) throw missing(id)
      throw new Forbidden('Only the creator of a product can delete it')
    },

    /** Deletes any product (admin) and its image; 404 when there is none. */
    async delete (id: number): Promise<void> {
      const { deleted, imageKey } = await products.delete(id)
      await images.discard(imageKey)
      if (!deleted) throw missing(id)
    }
  }
}

type ProductsService = ReturnType<typeof productsService>

declare module 'fastify' {
  interface FastifyInstance {
    products: ProductsService
  }
}

export default fp(async function productsServicePlugin (app: FastifyInstance) {
  app.decorate('products', productsService({ products: app.productsRepository, images: app.productImages }))
}, { name: 'products-service', fastify: '5.x', dependencies: ['products-repository', 'product-images'] })
