/** README.md "Content negotiation": the Accepts family (rules in ../negotiation.ts). */
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { negotiateCharset, negotiateEncoding, negotiateLanguage, negotiateMedia } from '../negotiation.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** Accepts: the offer (extension or media type) Accept prefers, exactly as given, or ''. */
    accepts: (...offers: string[]) => string
    /** AcceptsCharsets: against Accept-Charset. */
    acceptsCharsets: (...offers: string[]) => string
    /** AcceptsEncodings: against Accept-Encoding (`identity` acceptable unless refused). */
    acceptsEncodings: (...offers: string[]) => string
    /** AcceptsLanguages: against Accept-Language. */
    acceptsLanguages: (...offers: string[]) => string
  }
}

function header (request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name]
  return Array.isArray(value) ? value.join(', ') : value
}

export function registerAccepts (app: FastifyInstance): void {
  app.decorateRequest('accepts', function (this: FastifyRequest, ...offers: string[]): string {
    return negotiateMedia(header(this, 'accept'), offers)
  })
  app.decorateRequest('acceptsCharsets', function (this: FastifyRequest, ...offers: string[]): string {
    return negotiateCharset(header(this, 'accept-charset'), offers)
  })
  app.decorateRequest('acceptsEncodings', function (this: FastifyRequest, ...offers: string[]): string {
    return negotiateEncoding(header(this, 'accept-encoding'), offers)
  })
  app.decorateRequest('acceptsLanguages', function (this: FastifyRequest, ...offers: string[]): string {
    return negotiateLanguage(header(this, 'accept-language'), offers)
  })
}
