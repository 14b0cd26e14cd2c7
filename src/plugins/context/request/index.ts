/** Request decorators of the context API (SPEC.md "Request-context operations"). */
import type { FastifyInstance } from 'fastify'
import type { ResolvedContextOptions } from '../options.js'

export async function registerRequestDecorators (_app: FastifyInstance, _options: ResolvedContextOptions): Promise<void> {
  // Filled in by the request-side issue.
}
