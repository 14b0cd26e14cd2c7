/**
 * The context API: request and reply decorators for the request-context operations.
 * README.md maps every operation to its API and its test; a decorator's comment starts with
 * the operation's name there (QueryInt, SendFile...).
 */
import { tmpdir } from 'node:os'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { defaultAjvFactory, type ContextOptions, type ResolvedContextOptions } from './options.js'
import { ContextOptionError } from './reply/errors.js'
import { registerReplyDecorators, resolveReplyOptions } from './reply/index.js'
import { registerRequestDecorators } from './request/index.js'
import { registerUploadDecorators } from './uploads.js'
// The decorators' types: each of these files declares its decorators on Fastify's types
// (`declare module 'fastify'`). Imported for that alone, so that dist/index.d.ts imports
// them too: a declaration file keeps side-effect imports and drops imports used only at
// run time, and a user of the built package would otherwise see no decorator.
import './request/accepts.js'
import './request/binding.js'
import './request/body.js'
import './request/forms.js'
import './request/locals.js'
import './request/params-query.js'
import './request/parser-decoder.js'
import './request/reading.js'
import './request/state.js'
import './reply/body.js'
import './reply/cookies.js'
import './reply/files.js'
import './reply/headers.js'
import './reply/redirects.js'
import './reply/serializers.js'
import './reply/views.js'
import './uploads.js'

export type { AjvFactory, ContextOptions } from './options.js'
export * from './request/errors.js'
export type {
  ClientHelloInfo, ContextRange, ContextRoute, ContextUserContext, FormFile, MultipartForm, ParserDecoderConfig, ParserType
} from './request/index.js'
export * from './reply/errors.js'
export type {
  ClearCookieOptions, CookieRecord, FilesOptions, RedirectBackOptions, RedirectToRouteParams, ReplyOptions, RouteParamValue,
  ViewData, ViewsOptions
} from './reply/index.js'
export { FileSystemStorage, MemoryStorage, type Storage } from './storage.js'
export type { UploadedFile, UploadedFilePart } from './uploads.js'
export { negotiateCharset, negotiateEncoding, negotiateLanguage, negotiateMedia } from './negotiation.js'

function resolveOptions (options: ContextOptions): ResolvedContextOptions {
  const subdomainOffset = options.subdomainOffset ?? 2
  if (!Number.isInteger(subdomainOffset) || subdomainOffset < 0) {
    throw new ContextOptionError('subdomainOffset must be a whole number >= 0')
  }
  if (options.proxyHeader !== undefined && (typeof options.proxyHeader !== 'string' || options.proxyHeader.trim() === '')) {
    throw new ContextOptionError('proxyHeader must be a header name')
  }
  const memoryThreshold = options.formFiles?.memoryThreshold ?? 1048576
  if (!Number.isSafeInteger(memoryThreshold) || memoryThreshold < 0) {
    throw new ContextOptionError('formFiles.memoryThreshold must be a whole number of bytes >= 0')
  }
  const tmpDir = options.formFiles?.tmpDir ?? tmpdir()
  if (typeof tmpDir !== 'string' || tmpDir === '') throw new ContextOptionError('formFiles.tmpDir must be a folder path')
  if (options.ajv !== undefined && typeof options.ajv !== 'function') throw new ContextOptionError('ajv must be a function that makes an Ajv instance from Ajv options')
  return {
    immutable: options.immutable ?? false,
    proxyHeader: options.proxyHeader?.toLowerCase(),
    enableSplittingOnParsers: options.enableSplittingOnParsers ?? false,
    subdomainOffset,
    rawBody: options.rawBody ?? true,
    xml: options.xml ?? false,
    parserDecoder: options.parserDecoder,
    formFiles: { memoryThreshold, tmpDir },
    ajv: options.ajv ?? defaultAjvFactory,
    reply: resolveReplyOptions(options)
  }
}

async function context (app: FastifyInstance, options: ContextOptions): Promise<void> {
  const resolved = resolveOptions(options)
  await registerRequestDecorators(app, resolved)
  await registerReplyDecorators(app, resolved)
  registerUploadDecorators(app)
}

export default fp(context, { name: 'context', fastify: '5.x' })
