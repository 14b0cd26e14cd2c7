/** Reply decorators of the context API (SPEC.md "Response writing"). */
import type { FastifyInstance } from 'fastify'
import type { ResolvedContextOptions } from '../options.js'

export async function registerReplyDecorators (_app: FastifyInstance, _options: ResolvedContextOptions): Promise<void> {
  // Filled in by the response-side issue.
}
