/** What other modules use of the products module. */
export type { ProductImages } from './images.js'
export type { ProductsRepository } from './repository.js'
