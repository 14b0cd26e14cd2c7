/**
 * Serialized bodies: JSON, JSONP, XML and Format. Each sets the Content-Type and the
 * context body (body.ts): nothing is sent until the handler ends, so the status and headers
 * can still change, and a later setBody / write replaces or extends the body (README.md "Response side").
 */
import type { FastifyInstance, FastifyReply } from 'fastify'
import { XMLBuilder } from 'fast-xml-parser'
import { negotiateMedia } from '../negotiation.js'
import { setContextBody } from './body.js'
import { ContextArgumentError, JsonpCallbackError, XmlNameError } from './errors.js'

declare module 'fastify' {
  interface FastifyReply {
    /**
     * JSON: serializes `data` (with the route's response schema when it has one,
     * as `reply.serialize` does) into the context body, as application/json, or as
     * `contentType` exactly as given. Sent when the handler ends.
     */
    json: (data: unknown, contentType?: string) => void
    /**
     * JSONP: sets the body to `callback(<json>);` as text/javascript with
     * `X-Content-Type-Options: nosniff`. The callback (default `callback`) must be a
     * JavaScript identifier or dotted path, else JsonpCallbackError (400).
     */
    jsonp: (data: unknown, callback?: string) => void
    /**
     * XML: serializes `data` with fast-xml-parser's XMLBuilder into the body, as
     * application/xml. Keys are element names, `@_name` keys attributes (each must be an XML
     * Name, else XmlNameError, 400); a value that is not a plain object is wrapped in `<root>`
     * (arrays as `<root><item>..</item></root>`).
     */
    xml: (data: unknown) => void
    /**
     * Format: negotiates on Accept among text/plain, text/html and application/json
     * (earlier wins a tie; text/plain without Accept or without a match) and sets the body
     * as text, as `<p>escaped text</p>`, or as JSON. Adds `Vary: Accept`.
     */
    format: (body: unknown) => void
  }
}

/**
 * No charset parameter: RFC 8259 section 11 defines none for application/json (JSON text
 * is UTF-8). The body goes to Fastify as a Buffer, so Fastify adds none either.
 */
const JSON_TYPE = 'application/json'

/** An identifier or a dotted path of identifiers, as Express and Fiber accept (ASCII only). */
const JSONP_CALLBACK = /^[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*$/
const JSONP_CALLBACK_MAX = 128

function serialize (reply: FastifyReply, data: unknown): string {
  // reply.serialize applies the route's response schema; JSON.stringify(undefined) is undefined.
  const text: unknown = reply.serialize(data)
  return typeof text === 'string' ? text : 'null'
}

function json (this: FastifyReply, data: unknown, contentType?: string): void {
  if (contentType !== undefined && (typeof contentType !== 'string' || contentType === '')) {
    throw new ContextArgumentError('reply.json: contentType must be a media type')
  }
  const body = serialize(this, data)
  // The body goes to Fastify as a Buffer, so the type stays as given (Fastify appends
  // `; charset=utf-8` to JSON types of string payloads).
  setContextBody(this, Buffer.from(body, 'utf8'), JSON_TYPE, 'json')
  this.header('content-type', contentType ?? JSON_TYPE)
}

function jsonp (this: FastifyReply, data: unknown, callback = 'callback'): void {
  if (typeof callback !== 'string' || callback.length > JSONP_CALLBACK_MAX || !JSONP_CALLBACK.test(callback)) {
    throw new JsonpCallbackError()
  }
  // U+2028/U+2029 are valid in JSON but ended string literals in JavaScript before ES2019.
  const body = serialize(this, data).replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029')
  setContextBody(this, Buffer.from(`${callback}(${body});`, 'utf8'), 'text/javascript; charset=utf-8', 'jsonp')
  this.header('x-content-type-options', 'nosniff')
  this.header('content-type', 'text/javascript; charset=utf-8')
}

const ATTRIBUTE_PREFIX = '@_'
const TEXT_KEY = '#text'
const builder = new XMLBuilder({ ignoreAttributes: false, attributeNamePrefix: ATTRIBUTE_PREFIX, textNodeName: TEXT_KEY })

function isPlainObject (value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

// XML 1.0 (Fifth Edition) production [5] Name, from NameStartChar [4] and NameChar [4a].
const NAME_START = ':A-Z_a-z\\u00C0-\\u00D6\\u00D8-\\u00F6\\u00F8-\\u02FF\\u0370-\\u037D\\u037F-\\u1FFF\\u200C-\\u200D' +
  '\\u2070-\\u218F\\u2C00-\\u2FEF\\u3001-\\uD7FF\\uF900-\\uFDCF\\uFDF0-\\uFFFD\\u{10000}-\\u{EFFFF}'
const NAME_CHAR = NAME_START + '\\-.0-9\\u00B7\\u0300-\\u036F\\u203F-\\u2040'
// eslint-disable-next-line no-misleading-character-class -- NameChar lists combining marks (U+0300-036F) as a range, by design
const XML_NAME = new RegExp(`^[${NAME_START}][${NAME_CHAR}]*$`, 'u')
// Characters XML 1.0 production [2] Char does not allow (controls, lone surrogates, U+FFFE/FFFF).
const NOT_XML_CHAR = /[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu
const MAX_XML_DEPTH = 100

/** True when `name` matches the XML 1.0 Name production. */
export function isXmlName (name: string): boolean {
  return XML_NAME.test(name)
}

function quoted (key: string): string {
  return JSON.stringify(key.length > 64 ? `${key.slice(0, 64)}…` : key)
}

/**
 * A copy of `value` safe to hand to XMLBuilder: every key checked (element names and
 * `@_` attribute names must be XML Names; namespace declarations and `?` processing
 * instructions are refused, so a key cannot add markup), text that XML cannot hold replaced
 * by U+FFFD. The builder escapes `& < > " '` in text and attribute values.
 */
function checked (value: unknown, depth: number): unknown {
  if (typeof value === 'string') return value.replace(NOT_XML_CHAR, '\uFFFD')
  if (value === null || typeof value !== 'object') return value
  if (depth > MAX_XML_DEPTH) throw new ContextArgumentError(`reply.xml: data nested deeper than ${MAX_XML_DEPTH} levels (or circular)`)
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? '' : value.toISOString()
  if (Array.isArray(value)) return value.map((item) => checked(item, depth + 1))
  const copy: Record<string, unknown> = {}
  for (const [key, item] of Object.entries(value)) {
    if (key === TEXT_KEY) {
      copy[key] = checked(item, depth + 1)
      continue
    }
    const isAttribute = key.startsWith(ATTRIBUTE_PREFIX)
    const name = isAttribute ? key.slice(ATTRIBUTE_PREFIX.length) : key
    if (!isXmlName(name)) throw new XmlNameError(`${quoted(name)} is not an XML name`)
    if (isAttribute && (name === 'xmlns' || name.startsWith('xmlns:'))) {
      throw new XmlNameError(`${quoted(name)} would declare a namespace`)
    }
    if (isAttribute && item !== null && typeof item === 'object' && !(item instanceof Date)) {
      throw new XmlNameError(`attribute ${quoted(name)} must have a text value`)
    }
    copy[key] = checked(item, depth + 1)
  }
  return copy
}

/** XML text of `data` (see `reply.xml`). */
export function toXml (data: unknown): string {
  if (isPlainObject(data)) return builder.build(checked(data, 0)) as string
  if (Array.isArray(data)) return builder.build({ root: { item: checked(data, 1) } }) as string
  return builder.build({ root: checked(data ?? '', 1) }) as string
}

function xml (this: FastifyReply, data: unknown): void {
  const body = toXml(data)
  setContextBody(this, Buffer.from(body, 'utf8'), 'application/xml; charset=utf-8', 'xml')
  this.header('content-type', 'application/xml; charset=utf-8')
}

/** Offers of `format`, in the order that breaks ties: text/plain first, the fallback README.md's Format row names. */
const FORMAT_OFFERS = ['text/plain', 'text/html', 'application/json'] as const

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }

export function escapeHtml (text: string): string {
  return text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c] as string)
}

function asText (body: unknown): string {
  if (typeof body === 'string') return body
  if (body === undefined || body === null) return ''
  if (body instanceof Uint8Array) return Buffer.from(body).toString('utf8')
  if (typeof body === 'object') return JSON.stringify(body)
  return String(body)
}

function formatBody (this: FastifyReply, body: unknown): void {
  const chosen = negotiateMedia(this.request.headers.accept, FORMAT_OFFERS)
  this.vary('Accept')
  const text = asText(body)
  switch (chosen) {
    case 'text/html':
      setContextBody(this, Buffer.from(`<p>${escapeHtml(text)}</p>`, 'utf8'), 'text/html; charset=utf-8', 'format')
      this.header('content-type', 'text/html; charset=utf-8')
      return
    case 'application/json':
      this.json(typeof body === 'string' || body instanceof Uint8Array ? text : body)
      return
    default:
      setContextBody(this, Buffer.from(text, 'utf8'), 'text/plain; charset=utf-8', 'format')
      this.header('content-type', 'text/plain; charset=utf-8')
  }
}

export function registerSerializerDecorators (app: FastifyInstance): void {
  app.decorateReply('json', json)
  app.decorateReply('jsonp', jsonp)
  app.decorateReply('xml', xml)
  app.decorateReply('format', formatBody)
}
