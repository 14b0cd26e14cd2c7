/** Serialized bodies: SPEC.md JSON, JSONP, XML and Format. */
import type { FastifyInstance, FastifyReply } from 'fastify'
import { XMLBuilder } from 'fast-xml-parser'
import { negotiateMedia } from '../negotiation.js'
import { ContextArgumentError, JsonpCallbackError } from './errors.js'

declare module 'fastify' {
  interface FastifyReply {
    /**
     * SPEC.md JSON: serializes `data` (with the route's response schema when it has one,
     * as `reply.serialize` does) and sends it as application/json, or as `contentType`.
     */
    json: (data: unknown, contentType?: string) => FastifyReply
    /**
     * SPEC.md JSONP: sends `callback(<json>);` as text/javascript with
     * `X-Content-Type-Options: nosniff`. The callback (default `callback`) must be a
     * JavaScript identifier or dotted path, else JsonpCallbackError (400).
     */
    jsonp: (data: unknown, callback?: string) => FastifyReply
    /**
     * SPEC.md XML: serializes `data` with fast-xml-parser's XMLBuilder and sends it as
     * application/xml. Keys are element names, `@_name` keys attributes; a value that is not
     * a plain object is wrapped in `<root>` (arrays as `<root><item>..</item></root>`).
     */
    xml: (data: unknown) => FastifyReply
    /**
     * SPEC.md Format: negotiates on Accept among text/plain, text/html and application/json
     * (earlier wins a tie; text/plain without Accept or without a match) and sends the body
     * as text, as `<p>escaped text</p>`, or as JSON. Adds `Vary: Accept`.
     */
    format: (body: unknown) => FastifyReply
  }
}

const JSON_TYPE = 'application/json; charset=utf-8'

/** An identifier or a dotted path of identifiers, as Express and Fiber accept (ASCII only). */
const JSONP_CALLBACK = /^[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*$/
const JSONP_CALLBACK_MAX = 128

function serialize (reply: FastifyReply, data: unknown): string {
  // reply.serialize applies the route's response schema; JSON.stringify(undefined) is undefined.
  const text: unknown = reply.serialize(data)
  return typeof text === 'string' ? text : 'null'
}

function json (this: FastifyReply, data: unknown, contentType?: string): FastifyReply {
  if (contentType !== undefined && (typeof contentType !== 'string' || contentType === '')) {
    throw new ContextArgumentError('reply.json: contentType must be a media type')
  }
  const body = serialize(this, data)
  this.header('content-type', contentType ?? JSON_TYPE)
  return this.send(body)
}

function jsonp (this: FastifyReply, data: unknown, callback = 'callback'): FastifyReply {
  if (typeof callback !== 'string' || callback.length > JSONP_CALLBACK_MAX || !JSONP_CALLBACK.test(callback)) {
    throw new JsonpCallbackError()
  }
  // U+2028/U+2029 are valid in JSON but ended string literals in JavaScript before ES2019.
  const body = serialize(this, data).replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029')
  this.header('x-content-type-options', 'nosniff')
  this.header('content-type', 'text/javascript; charset=utf-8')
  return this.send(`${callback}(${body});`)
}

const builder = new XMLBuilder({ ignoreAttributes: false, attributeNamePrefix: '@_' })

function isPlainObject (value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

/** XML text of `data` (see `reply.xml`). */
export function toXml (data: unknown): string {
  if (isPlainObject(data)) return builder.build(data) as string
  if (Array.isArray(data)) return builder.build({ root: { item: data } }) as string
  return builder.build({ root: data ?? '' }) as string
}

function xml (this: FastifyReply, data: unknown): FastifyReply {
  const body = toXml(data)
  this.header('content-type', 'application/xml; charset=utf-8')
  return this.send(body)
}

/** Offers of `format`, in the order that breaks ties: text/plain first, as SPEC.md falls back to it. */
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

function formatBody (this: FastifyReply, body: unknown): FastifyReply {
  const chosen = negotiateMedia(this.request.headers.accept, FORMAT_OFFERS)
  this.vary('Accept')
  const text = asText(body)
  switch (chosen) {
    case 'text/html':
      return this.header('content-type', 'text/html; charset=utf-8').send(`<p>${escapeHtml(text)}</p>`)
    case 'application/json':
      return this.json(typeof body === 'string' || body instanceof Uint8Array ? text : body)
    default:
      return this.header('content-type', 'text/plain; charset=utf-8').send(text)
  }
}

export function registerSerializerDecorators (app: FastifyInstance): void {
  app.decorateReply('json', json)
  app.decorateReply('jsonp', jsonp)
  app.decorateReply('xml', xml)
  app.decorateReply('format', formatBody)
}
