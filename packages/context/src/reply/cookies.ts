/**
 * Cookies: Cookie and ClearCookie, serialized by @fastify/cookie.
 *
 * Fastify's @fastify/cookie already owns `reply.cookie(name, value, options)` and
 * `reply.clearCookie(name, options)`, so the README.md shapes are `setCookieRecord(cookie)`
 * and `clearCookies(...names)`. They write the Set-Cookie header at once (not at onSend
 * as @fastify/cookie does), so `getRespHeader('set-cookie')` sees them; a later record with
 * the same name, domain and path replaces the earlier one.
 */
import type { FastifyInstance, FastifyReply } from 'fastify'
import { ContextArgumentError } from './errors.js'

/** Cookie (README.md): the value given to the cookie-setting operation. */
export interface CookieRecord {
  name: string
  value: string
  /** @default '/' */
  path?: string
  domain?: string
  /** Seconds; sent as Max-Age (0 or less expires the cookie at once). */
  maxAge?: number
  /** Sent as Expires. */
  expires?: Date | number
  secure?: boolean
  httpOnly?: boolean
  /** 'lax' (the default when unset or empty), 'strict', 'none' (forces Secure) or 'disabled' (no attribute); any case. */
  sameSite?: string
  /** A session cookie: neither Max-Age nor Expires is sent, whatever maxAge/expires say. */
  sessionOnly?: boolean
}

/** What must match the original cookie for a browser to clear it (README.md's ClearCookie row). */
export interface ClearCookieOptions {
  /** @default '/' */
  path?: string
  domain?: string
  secure?: boolean
  httpOnly?: boolean
  sameSite?: string
}

declare module 'fastify' {
  interface FastifyReply {
    /** Cookie: sets a cookie from a Cookie record (see CookieRecord for each field). */
    setCookieRecord: (cookie: CookieRecord) => FastifyReply
    /**
     * ClearCookie: expires the named cookies, or every cookie the request sent when
     * no name is given. A last object argument gives the path/domain the cookies were set
     * with: a browser clears a cookie only when those match.
     */
    clearCookies: (...names: Array<string | ClearCookieOptions>) => FastifyReply
  }
}

type SameSite = 'lax' | 'strict' | 'none' | undefined
interface SerializeOptions {
  path: string
  domain?: string
  maxAge?: number
  expires?: Date
  secure?: boolean
  httpOnly?: boolean
  sameSite?: SameSite
}
type Serialize = (name: string, value: string, options: SerializeOptions) => string

/** The Set-Cookie values this reply wrote, by `name;domain;path`, to replace on a repeat. */
const kWritten = Symbol('context.reply.cookies')
type WithCookies = FastifyReply & { [kWritten]: Map<string, string> | null }

function sameSiteOf (value: string | undefined): SameSite {
  const lower = (value ?? '').toLowerCase()
  switch (lower) {
    case '':
    case 'lax': return 'lax'
    case 'strict':
    case 'none': return lower
    case 'disabled': return undefined
    default: throw new ContextArgumentError(`cookie sameSite must be lax, strict, none or disabled, not "${value}"`)
  }
}

function optionalString (value: unknown, field: string): string | undefined {
  if (value === undefined || value === '') return undefined
  if (typeof value !== 'string') throw new ContextArgumentError(`cookie ${field} must be a string`)
  return value
}

/** @fastify/cookie's serializer options for a Cookie record. */
export function serializeOptions (cookie: CookieRecord | (ClearCookieOptions & { maxAge?: number, expires?: Date })): SerializeOptions {
  const sameSite = sameSiteOf(cookie.sameSite)
  const options: SerializeOptions = {
    path: optionalString(cookie.path, 'path') ?? '/',
    domain: optionalString(cookie.domain, 'domain'),
    httpOnly: cookie.httpOnly === true,
    // Browsers refuse SameSite=None without Secure.
    secure: cookie.secure === true || sameSite === 'none',
    sameSite
  }
  if (!('sessionOnly' in cookie && cookie.sessionOnly === true)) {
    if (cookie.maxAge !== undefined) {
      if (!Number.isInteger(cookie.maxAge)) throw new ContextArgumentError('cookie maxAge must be a whole number of seconds')
      options.maxAge = cookie.maxAge
    }
    if (cookie.expires !== undefined) {
      const expires = cookie.expires instanceof Date ? cookie.expires : new Date(cookie.expires)
      if (Number.isNaN(expires.getTime())) throw new ContextArgumentError('cookie expires must be a valid date')
      options.expires = expires
    }
  }
  return options
}

function writeCookie (reply: FastifyReply, serialize: Serialize, name: string, value: string, options: SerializeOptions): void {
  const text = serialize(name, value, options)
  const self = reply as WithCookies
  const written = self[kWritten] ??= new Map()
  const key = `${name};${options.domain ?? ''};${options.path}`
  const previous = written.get(key)
  written.set(key, text)
  const current = reply.getHeader('set-cookie')
  const list = current === undefined ? [] : Array.isArray(current) ? current : [String(current)]
  const next = list.filter((entry) => entry !== previous)
  next.push(text)
  reply.removeHeader('set-cookie')
  reply.header('set-cookie', next)
}

/** Names of the cookies the request sent (parsed by @fastify/cookie, or from the header). */
function requestCookieNames (reply: FastifyReply, parse: (header: string) => Record<string, string | undefined>): string[] {
  const parsed = reply.request.cookies
  if (parsed !== null && parsed !== undefined) return Object.keys(parsed)
  const header = reply.request.headers.cookie
  return header === undefined ? [] : Object.keys(parse(header))
}

export function registerCookieDecorators (app: FastifyInstance): void {
  const serialize = app.serializeCookie as unknown as Serialize
  const parse = app.parseCookie

  function setCookieRecord (this: FastifyReply, cookie: CookieRecord): FastifyReply {
    if (cookie === null || typeof cookie !== 'object') throw new ContextArgumentError('reply.setCookieRecord takes a cookie record')
    if (typeof cookie.name !== 'string' || cookie.name === '') throw new ContextArgumentError('cookie name must be a non-empty string')
    if (typeof cookie.value !== 'string') throw new ContextArgumentError('cookie value must be a string')
    writeCookie(this, serialize, cookie.name, cookie.value, serializeOptions(cookie))
    return this
  }

  function clearCookies (this: FastifyReply, ...args: Array<string | ClearCookieOptions>): FastifyReply {
    const last = args.at(-1)
    const options = last !== undefined && typeof last === 'object' ? last : {}
    const names = (typeof last === 'object' ? args.slice(0, -1) : args) as unknown[]
    for (const name of names) {
      if (typeof name !== 'string' || name === '') throw new ContextArgumentError('reply.clearCookies takes cookie names, then an optional options object')
    }
    const targets = names.length > 0 ? names as string[] : requestCookieNames(this, parse)
    const expired = serializeOptions({ ...options, maxAge: 0, expires: new Date(0) })
    for (const name of targets) writeCookie(this, serialize, name, '', expired)
    return this
  }

  app.decorateReply(kWritten, null)
  app.decorateReply('setCookieRecord', setCookieRecord)
  app.decorateReply('clearCookies', clearCookies)
}
