/**
 * Request decorators of the context API (negotiation, request reading,
 * parameters, query, forms, cookies, bodies). README.md, "Request side", maps each
 * operation to its API and test.
 */
import type { FastifyInstance } from 'fastify'
import type { ResolvedContextOptions } from '../options.js'
import { registerAccepts } from './accepts.js'
import { registerBinding } from './binding.js'
import { registerBody } from './body.js'
import { registerForms } from './forms.js'
import { registerLocals } from './locals.js'
import { registerMultipartGuards } from './multipart.js'
import { registerParamsQuery } from './params-query.js'
import { registerParserDecoder } from './parser-decoder.js'
import { registerReading } from './reading.js'
import { registerState } from './state.js'

export * from './errors.js'
export type { ClientHelloInfo, ContextRange, ContextRoute } from './reading.js'
export type { FormFile, MultipartForm } from './forms.js'
export type { ContextUserContext } from './locals.js'
export type { ParserDecoderConfig, ParserType } from './parser-decoder.js'

export async function registerRequestDecorators (app: FastifyInstance, options: ResolvedContextOptions): Promise<void> {
  registerState(app, options)
  registerParserDecoder(app, options.parserDecoder)
  if (options.xml && !app.hasContentTypeParser('application/xml')) {
    // The XML text is kept as a string; bodyParser(schema) parses it with fast-xml-parser.
    app.addContentTypeParser(['application/xml', 'text/xml'], { parseAs: 'string' }, (_request, body, done) => { done(null, body) })
  }
  registerAccepts(app)
  registerReading(app, options)
  registerParamsQuery(app)
  registerForms(app, options)
  registerMultipartGuards(app)
  registerLocals(app)
  registerBody(app, options)
  registerBinding(app, options)
}
