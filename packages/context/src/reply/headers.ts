/**
 * Response headers: Append, Vary, Type, Links, Location, GetRespHeader,
 * GetRespHeaders, Attachment. Set is Fastify's `reply.header`.
 */
import path from 'node:path'
import { create as contentDisposition } from 'content-disposition'
import type { FastifyInstance, FastifyReply } from 'fastify'
import { contentType, lookup } from 'mime-types'
import { ContextArgumentError } from './errors.js'

declare module 'fastify' {
  interface FastifyReply {
    /**
     * Append: adds each value to the header's comma-separated list unless it is
     * already there, creating the header when unset.
     */
    append: (field: string, ...values: string[]) => FastifyReply
    /** Vary: adds fields to Vary, case-insensitively without duplicates, keeping the existing order. */
    vary: (...fields: string[]) => FastifyReply
    /**
     * Type: Content-Type from a file extension (`html`, `.html`), with
     * `; charset=<charset>` when given; unknown extensions give application/octet-stream.
     * (Fastify's own `reply.type` takes a full media type.)
     */
    typeFromExtension: (extension: string, charset?: string) => FastifyReply
    /** Links: `links(url, rel, url, rel, ...)` sets `Link: <url>; rel="rel", <url>; rel="rel"`. */
    links: (...urlRelPairs: string[]) => FastifyReply
    /** Location: sets the Location header (characters not allowed in a URL are percent-encoded). */
    location: (url: string) => FastifyReply
    /** GetRespHeader: a response header by name (case-insensitive), `defaultValue` ('' unless given) when unset. */
    getRespHeader: (key: string, defaultValue?: string) => string
    /** GetRespHeaders: every response header set so far, lower-case name to list of values. */
    getRespHeaders: () => Record<string, string[]>
    /**
     * Attachment: `Content-Disposition: attachment`, with the file name (its base
     * name, RFC 6266 / RFC 5987 encoded) and the Content-Type of its extension when given.
     */
    attachment: (filename?: string) => FastifyReply
  }
}

/** The values of a header as a list: arrays as they are, strings split on commas. */
function headerTokens (value: string | number | string[] | undefined): string[] {
  if (value === undefined) return []
  const list = Array.isArray(value) ? value : String(value).split(',')
  return list.map((item) => item.trim()).filter((item) => item !== '')
}

function checkStrings (values: unknown[], operation: string): asserts values is string[] {
  for (const value of values) {
    if (typeof value !== 'string') throw new ContextArgumentError(`reply.${operation} takes strings`)
  }
}

function append (this: FastifyReply, field: string, ...values: string[]): FastifyReply {
  checkStrings([field, ...values], 'append')
  if (values.length === 0) return this
  const tokens = headerTokens(this.getHeader(field))
  const before = tokens.length
  for (const value of values) {
    if (value !== '' && !tokens.includes(value)) tokens.push(value)
  }
  if (tokens.length !== before) this.header(field, tokens.join(', '))
  return this
}

function vary (this: FastifyReply, ...fields: string[]): FastifyReply {
  checkStrings(fields, 'vary')
  const tokens = headerTokens(this.getHeader('vary'))
  if (tokens.includes('*')) return this
  const seen = new Set(tokens.map((token) => token.toLowerCase()))
  const before = tokens.length
  for (const field of fields.flatMap((f) => headerTokens(f))) {
    if (field === '*') {
      this.header('vary', '*')
      return this
    }
    if (!seen.has(field.toLowerCase())) {
      seen.add(field.toLowerCase())
      tokens.push(field)
    }
  }
  if (tokens.length !== before) this.header('vary', tokens.join(', '))
  return this
}

function typeFromExtension (this: FastifyReply, extension: string, charset?: string): FastifyReply {
  checkStrings(charset === undefined ? [extension] : [extension, charset], 'typeFromExtension')
  const type = (extension === '' ? false : lookup(extension)) || 'application/octet-stream'
  this.header('content-type', charset ? `${type}; charset=${charset}` : type)
  return this
}

function links (this: FastifyReply, ...pairs: string[]): FastifyReply {
  checkStrings(pairs, 'links')
  if (pairs.length === 0) return this
  if (pairs.length % 2 !== 0) throw new ContextArgumentError('reply.links takes pairs of url and rel')
  const parts: string[] = []
  for (let i = 0; i < pairs.length; i += 2) {
    const url = pairs[i] as string
    const rel = pairs[i + 1] as string
    if (/[<>\s]/.test(url) || /["\\]/.test(rel)) throw new ContextArgumentError('reply.links: a url may not hold <, > or spaces, nor a rel quotes')
    parts.push(`<${url}>; rel="${rel}"`)
  }
  this.header('link', parts.join(', '))
  return this
}

// Characters that may stay as they are in a URL, and well-formed %XX escapes (the
// `encodeurl` package's rule): everything else is percent-encoded as UTF-8.
const NOT_URL_SAFE = /(?:[^\x21\x23-\x3B\x3D\x3F-\x5F\x61-\x7A\x7C\x7E]|%(?:[^0-9A-Fa-f]|[0-9A-Fa-f][^0-9A-Fa-f]|$))+/g
const LONE_SURROGATE = /(^|[^\uD800-\uDBFF])[\uDC00-\uDFFF]|[\uD800-\uDBFF]([^\uDC00-\uDFFF]|$)/g

/** Percent-encodes what may not appear in a URL, leaving existing escapes alone. */
export function encodeUrl (url: string): string {
  return url.replace(LONE_SURROGATE, '$1\uFFFD$2').replace(NOT_URL_SAFE, encodeURI)
}

function location (this: FastifyReply, url: string): FastifyReply {
  checkStrings([url], 'location')
  this.header('location', encodeUrl(url))
  return this
}

function getRespHeader (this: FastifyReply, key: string, defaultValue = ''): string {
  const value = this.getHeader(key)
  if (value === undefined) return defaultValue
  return Array.isArray(value) ? value.join(', ') : String(value)
}

function getRespHeaders (this: FastifyReply): Record<string, string[]> {
  const headers: Record<string, string[]> = {}
  for (const [name, value] of Object.entries(this.getHeaders())) {
    if (value === undefined) continue
    headers[name.toLowerCase()] = Array.isArray(value) ? value.map(String) : [String(value)]
  }
  return headers
}

/** Content-Disposition for `filename` (its base name), RFC 6266 with an RFC 5987 `filename*` when not ASCII. */
export function attachmentHeader (filename: string): string {
  return contentDisposition(path.basename(filename))
}

function attachment (this: FastifyReply, filename?: string): FastifyReply {
  if (filename === undefined || filename === '') {
    this.header('content-disposition', 'attachment')
    return this
  }
  checkStrings([filename], 'attachment')
  const type = contentType(path.extname(filename))
  if (type) this.header('content-type', type)
  this.header('content-disposition', attachmentHeader(filename))
  return this
}

export function registerHeaderDecorators (app: FastifyInstance): void {
  app.decorateReply('append', append)
  app.decorateReply('vary', vary)
  app.decorateReply('typeFromExtension', typeFromExtension)
  app.decorateReply('links', links)
  app.decorateReply('location', location)
  app.decorateReply('getRespHeader', getRespHeader)
  app.decorateReply('getRespHeaders', getRespHeaders)
  app.decorateReply('attachment', attachment)
}
