/**
 * The options of key-auth, their defaults, and their validation. Options are checked once,
 * when the plugin is registered or the per-route hook is created, so that a mistake stops
 * the application at start rather than showing up at request time. The caller's object
 * is read, never changed.
 */
import type { FastifyReply, FastifyRequest } from 'fastify'
import { KeyAuthOptionError } from './errors.js'
import { defaultErrorHandler } from './default-error-handler.js'
import { compileLookup, type KeyExtractor, type KeySource, type ParsedLookup } from './lookup.js'

/** Where the key is read: `header:<name>`, `cookie:<name>`, `query:<name>`, `form:<name>` or `param:<name>`. */
export type KeyLookup = `${KeySource}:${string}`

/** The request hooks key-auth can run in: each runs before the route handler. */
export type KeyAuthHookName = 'onRequest' | 'preParsing' | 'preValidation' | 'preHandler'

/**
 * Decides whether a key is valid. Resolve `true` to accept; anything else rejects with
 * `KeyAuthInvalidKeyError`. A throw or rejection rejects with that error (throw
 * `KeyAuthMissingOrMalformedError` to get the missing-or-malformed answer).
 */
export type KeyAuthValidator = (request: FastifyRequest, key: string) => boolean | Promise<boolean>

/** Runs when the key is valid, after the key is stored on the request. It may answer; if it does not, the request goes on. */
export type KeyAuthSuccessHandler = (request: FastifyRequest, reply: FastifyReply) => unknown

/**
 * Runs when the key is missing, malformed or invalid. It should answer (`reply.send`) or
 * throw; if it does neither, key-auth throws `error` to Fastify's error handler, so a
 * request that failed never reaches the route handler.
 */
export type KeyAuthErrorHandler = (request: FastifyRequest, reply: FastifyReply, error: Error) => unknown

/** The options of the per-route hook (`keyAuthHook`) and of the plugin. */
export interface KeyAuthOptions {
  /** Decides whether a key is valid. Required. */
  validator: KeyAuthValidator
  /** Where the key is read. Default `header:Authorization`. */
  keyLookup?: KeyLookup
  /**
   * The scheme word before the key in a header (`<scheme> <key>`, case-insensitive, one or
   * more spaces or tabs). `''`: the whole header value is the key. Default `Bearer` for
   * `header:Authorization`, `''` for any other header; only header sources take one.
   */
  authScheme?: string
  /** When it returns `true`, the request passes through without a key. */
  next?: (request: FastifyRequest) => boolean
  /** Runs when the key is valid. Default: continue to the route handler. */
  successHandler?: KeyAuthSuccessHandler
  /** Runs when the key is missing or invalid. Default: 401 with the text bodies of README.md "Errors". */
  errorHandler?: KeyAuthErrorHandler
  /** The name under which the valid key is stored: `request.keyAuth[contextKey]`. Default `token`. */
  contextKey?: string
}

/** The options of the plugin: those of the hook, plus where it runs. */
export interface KeyAuthPluginOptions extends KeyAuthOptions {
  /**
   * The hook the plugin adds to the context it is registered in. Default `onRequest`
   * (`preHandler` for `form:` lookups, which need the parsed body). `false` adds no hook
   * and decorates the instance with the verification function instead (see `decorator`).
   */
  hook?: KeyAuthHookName | false
  /** With `hook: false`: the name of the instance decorator. Default `verifyKeyAuth`. */
  decorator?: string
}

/** The options after validation, with defaults applied and the lookup compiled. */
export interface ResolvedKeyAuthOptions {
  lookup: ParsedLookup
  extract: KeyExtractor
  validator: KeyAuthValidator
  next: ((request: FastifyRequest) => boolean) | undefined
  successHandler: KeyAuthSuccessHandler | undefined
  errorHandler: KeyAuthErrorHandler
  contextKey: string
}

export interface ResolvedKeyAuthPluginOptions extends ResolvedKeyAuthOptions {
  hook: KeyAuthHookName | false
  decorator: string
}

const HOOK_OPTIONS = ['validator', 'keyLookup', 'authScheme', 'next', 'successHandler', 'errorHandler', 'contextKey']
const PLUGIN_OPTIONS = [...HOOK_OPTIONS, 'hook', 'decorator']
/** Options Fastify's `register` itself takes; they may reach the plugin and are ignored. */
const REGISTER_OPTIONS = ['prefix', 'logLevel', 'logSerializers']
const HOOK_NAMES: readonly KeyAuthHookName[] = ['onRequest', 'preParsing', 'preValidation', 'preHandler']
/** An identifier: what `app.decorate` accepts and what reads well as `app.<name>`. */
const DECORATOR_NAME = /^[A-Za-z_$][\w$]*$/

function optionalFunction (options: object, name: string): void {
  const value = (options as Record<string, unknown>)[name]
  if (value !== undefined && typeof value !== 'function') throw new KeyAuthOptionError(`${name} must be a function`)
}

function checkKnown (options: object, known: readonly string[]): void {
  for (const name of Object.keys(options)) {
    if (!known.includes(name) && !REGISTER_OPTIONS.includes(name)) {
      throw new KeyAuthOptionError(`unknown option "${name}" (known: ${known.join(', ')})`)
    }
  }
}

export function resolveOptions (options: KeyAuthOptions): ResolvedKeyAuthOptions {
  if (typeof options !== 'object' || options === null) throw new KeyAuthOptionError('options must be an object')
  checkKnown(options, HOOK_OPTIONS)
  return resolveCommon(options)
}

export function resolvePluginOptions (options: KeyAuthPluginOptions): ResolvedKeyAuthPluginOptions {
  if (typeof options !== 'object' || options === null) throw new KeyAuthOptionError('options must be an object')
  checkKnown(options, PLUGIN_OPTIONS)
  const common = resolveCommon(options)
  const needsBody = common.lookup.source === 'form'

  const hook = options.hook ?? (needsBody ? 'preHandler' : 'onRequest')
  if (hook !== false && !HOOK_NAMES.includes(hook)) {
    throw new KeyAuthOptionError(`hook must be false or one of ${HOOK_NAMES.join(', ')}`)
  }
  if (needsBody && (hook === 'onRequest' || hook === 'preParsing')) {
    throw new KeyAuthOptionError(`keyLookup "${common.lookup.lookup}" reads the parsed body, which ${hook} runs before: use hook preValidation or preHandler`)
  }

  const decorator = options.decorator ?? 'verifyKeyAuth'
  if (typeof decorator !== 'string' || !DECORATOR_NAME.test(decorator)) {
    throw new KeyAuthOptionError('decorator must be an identifier such as "verifyKeyAuth"')
  }
  if (options.decorator !== undefined && hook !== false) {
    throw new KeyAuthOptionError('decorator is used only with hook: false')
  }
  return { ...common, hook, decorator }
}

function resolveCommon (options: KeyAuthOptions): ResolvedKeyAuthOptions {
  if (typeof options.validator !== 'function') {
    throw new KeyAuthOptionError('validator is required: a function (request, key) => boolean | Promise<boolean>')
  }
  for (const name of ['next', 'successHandler', 'errorHandler']) optionalFunction(options, name)

  const contextKey = options.contextKey ?? 'token'
  if (typeof contextKey !== 'string' || contextKey === '') throw new KeyAuthOptionError('contextKey must be a non-empty string')

  const lookup = compileLookup(options.keyLookup ?? 'header:Authorization', options.authScheme)
  return {
    lookup: lookup.parsed,
    extract: lookup.extract,
    validator: options.validator,
    next: options.next,
    successHandler: options.successHandler,
    errorHandler: options.errorHandler ?? defaultErrorHandler(lookup.parsed.scheme),
    contextKey
  }
}
