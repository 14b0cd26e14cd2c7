/** The products module as the app and other modules use it: import nothing else of it (lint: docs/architecture.md). */
export { default as productImages, type ProductImages } from './images.js'
export { default as productsRepository, type ProductsRepository } from './repository.js'
export { productRoutes } from './routes.js'
export { default as productsService } from './service.js'
