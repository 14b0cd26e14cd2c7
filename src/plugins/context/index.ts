/**
 * The context API: request and reply decorators for the request-context operations of
 * SPEC.md. docs/context-api.md maps every operation to its API and its test.
 */
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { ContextOptions, ResolvedContextOptions } from './options.js'
import { registerReplyDecorators, resolveReplyOptions } from './reply/index.js'
import { registerRequestDecorators } from './request/index.js'

export type { ContextOptions } from './options.js'
export * from './request/errors.js'
export type {
  ClientHelloInfo, ContextRange, ContextRoute, ContextUserContext, FormFile, MultipartForm, ParserDecoderConfig, ParserType
} from './request/index.js'
export * from './reply/errors.js'
export type {
  ClearCookieOptions, CookieRecord, FilesOptions, RedirectBackOptions, RedirectToRouteParams, ReplyOptions, RouteParamValue,
  Storage, UploadedFile, UploadedFilePart, ViewData, ViewsOptions
} from './reply/index.js'
export { FileSystemStorage, MemoryStorage } from './reply/index.js'
export { negotiateCharset, negotiateEncoding, negotiateLanguage, negotiateMedia } from './negotiation.js'

function resolveOptions (options: ContextOptions): ResolvedContextOptions {
  const subdomainOffset = options.subdomainOffset ?? 2
  if (!Number.isInteger(subdomainOffset) || subdomainOffset < 0) {
    throw new TypeError('context: subdomainOffset must be a whole number >= 0')
  }
  if (options.proxyHeader !== undefined && (typeof options.proxyHeader !== 'string' || options.proxyHeader.trim() === '')) {
    throw new TypeError('context: proxyHeader must be a header name')
  }
  return {
    immutable: options.immutable ?? false,
    proxyHeader: options.proxyHeader?.toLowerCase(),
    enableSplittingOnParsers: options.enableSplittingOnParsers ?? false,
    subdomainOffset,
    rawBody: options.rawBody ?? true,
    xml: options.xml ?? false,
    parserDecoder: options.parserDecoder,
    reply: resolveReplyOptions(options)
  }
}

async function context (app: FastifyInstance, options: ContextOptions): Promise<void> {
  const resolved = resolveOptions(options)
  await registerRequestDecorators(app, resolved)
  await registerReplyDecorators(app, resolved)
}

export default fp(context, { name: 'context', fastify: '5.x' })
