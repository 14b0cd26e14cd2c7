/**
 * README.md "Request reading". Operations Fastify already has with the same meaning are not
 * wrapped (hostname, host, protocol, originalUrl, raw, server...): README.md says
 * which native API provides each.
 */
import { isIP } from 'node:net'
import type { TLSSocket } from 'node:tls'
import type { FastifyInstance, FastifyRequest, RouteHandlerMethod } from 'fastify'
import freshLib from 'fresh'
import { lookup } from 'mime-types'
import parseRange from 'range-parser'
import type { ResolvedContextOptions } from '../options.js'
import { hasBody } from './body.js'
import { ContextArgumentError } from '../reply/errors.js'
import { ClientGoneError, RangeMalformedError, RangeNotSatisfiableError, RangeSizeError } from './errors.js'
import { stateOf } from './state.js'
import { forwardedEntry } from './trust.js'

/** Range (README.md "Request reading"): the unit and the byte ranges, `end` inclusive, in the order requested. */
export interface ContextRange {
  type: string
  ranges: Array<{ start: number, end: number }>
}

/** What Node exposes of a TLS handshake (the original's ClientHelloInfo has more; Node keeps no more). */
export interface ClientHelloInfo {
  /** SNI server name sent by the client, or undefined without SNI. */
  serverName: string | undefined
  /** Negotiated protocol version, e.g. `TLSv1.3`. */
  protocol: string | null
  /** Negotiated ALPN protocol, e.g. `http/1.1`, or false when none was negotiated. */
  alpnProtocol: string | false | null
  /** Negotiated cipher suite. */
  cipher: { name: string, standardName: string, version: string }
  /** Signature algorithms shared by client and server (TLS 1.2+), most preferred first. */
  signatureAlgorithms: string[]
}

/** The matched route (Route: method, path, params, handlers). */
export interface ContextRoute {
  method: string | string[] | undefined
  /** The route pattern as registered, prefix included (undefined for the 404 handler). */
  path: string | undefined
  params: Record<string, string>
  /** Fastify has one handler per route; hooks are listed by `app.printRoutes({ includeHooks: true })`. */
  handler: RouteHandlerMethod
  config: unknown
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Get: header value by case-insensitive name; `defaultValue` (else '') when absent. */
    get: (key: string, defaultValue?: string) => string
    /** GetReqHeaders: lower-cased names to every value received for them. */
    getReqHeaders: () => Record<string, string[]>
    /** Method: the method; with an argument replaces it (upper-cased). Not `method`: Fastify's getter. */
    requestMethod: (override?: string) => string
    /** Path: the path part of the URL, as received (not decoded); with an argument replaces it. */
    path: (override?: string) => string
    /** BaseURL: `clientProtocol()://clientHost()`. */
    baseURL: () => string
    /**
     * Protocol: `http` or `https` as the client used it: X-Forwarded-Proto's client-facing
     * entry from a trusted proxy (Fastify's `trustProxy`), else the socket's. Fastify's
     * `request.protocol` takes the header's last entry instead.
     */
    clientProtocol: () => string
    /** Hostname's host with port: X-Forwarded-Host's client-facing entry from a trusted proxy, else Host. */
    clientHost: () => string
    /** Hostname: `clientHost()` without the port. */
    clientHostname: () => string
    /** Secure: `clientProtocol() === 'https'`. */
    secure: () => boolean
    /**
     * IP: the remote address (the socket's peer); with the `proxyHeader` option and a request
     * from a trusted proxy (Fastify's `trustProxy`), the address that header gives. Not `ip`:
     * Fastify's getter, which reads X-Forwarded-For under trustProxy.
     */
    ipAddress: () => string
    /** IPs: the addresses of X-Forwarded-For as listed. Not `ips`: Fastify's needs trustProxy and differs. */
    forwardedIps: () => string[]
    /** IsFromLocal: the connection comes from a loopback address (IPv4 or IPv6). */
    isFromLocal: () => boolean
    /** Subdomains: host labels nearest-to-root first, less the first `offset` (default: option subdomainOffset). */
    subdomains: (offset?: number) => string[]
    /** XHR: X-Requested-With is XMLHttpRequest (case-insensitive). */
    xhr: () => boolean
    /** Is: the request has a body whose Content-Type is the type of `extension` (`json`, `.json`, or a full type). */
    is: (extension: string) => boolean
    /** Fresh: the client's cached copy is fresh (GET/HEAD, 2xx/304, ETag / Last-Modified set on the reply). */
    fresh: () => boolean
    /** Stale: !fresh(). */
    stale: () => boolean
    /** Range: the Range header for a resource of `size` bytes; throws RangeNotSatisfiableError / RangeMalformedError. */
    range: (size: number) => ContextRange
    /** ClientHelloInfo: TLS handshake details, or null on a plain connection. */
    clientHelloInfo: () => ClientHelloInfo | null
    /** Route: the matched route. */
    route: () => ContextRoute
    /** App: the Fastify instance (its settings: `app().contextOptions`). */
    app: () => FastifyInstance
    /** Context: a signal that aborts (reason ClientGoneError) when the client goes away before the response is sent. */
    context: () => AbortSignal
  }
  interface FastifyInstance {
    /** The context plugin's resolved settings (README.md "Settings (plugin options)"). */
    contextOptions: Readonly<ResolvedContextOptions>
  }
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/
const LOOPBACK = /^(?:127(?:\.\d{1,3}){3}|::1|::ffff:127(?:\.\d{1,3}){3}|0{0,4}(?::0{0,4}){6}:0{0,3}1)$/i

function headerText (value: string | string[] | number | undefined): string | undefined {
  if (value === undefined) return undefined
  return Array.isArray(value) ? value.join(', ') : String(value)
}

/**
 * Every header as received, one value per header line, names lower-cased. From rawHeaders
 * (name, value, name, value...): Node's headersDistinct is missing on injected requests.
 */
export function headerLines (request: FastifyRequest): Record<string, string[]> {
  const headers: Record<string, string[]> = Object.create(null)
  const raw = request.raw.rawHeaders
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = (raw[i] as string).toLowerCase()
    ;(headers[name] ??= []).push(raw[i + 1] as string)
  }
  return headers
}

export function registerReading (app: FastifyInstance, options: ResolvedContextOptions): void {
  app.decorate('contextOptions', Object.freeze({ ...options }))

  app.decorateRequest('get', function (this: FastifyRequest, key: string, defaultValue?: string): string {
    return headerText(this.headers[key.toLowerCase()]) ?? defaultValue ?? ''
  })

  app.decorateRequest('getReqHeaders', function (this: FastifyRequest): Record<string, string[]> {
    return headerLines(this)
  })

  app.decorateRequest('requestMethod', function (this: FastifyRequest, override?: string): string {
    if (override !== undefined) {
      if (typeof override !== 'string' || !TOKEN.test(override)) throw new ContextArgumentError(`requestMethod: "${String(override)}" is not an HTTP method token`)
      this.raw.method = override.toUpperCase()
    }
    return this.raw.method as string
  })

  app.decorateRequest('path', function (this: FastifyRequest, override?: string): string {
    const url = this.raw.url ?? '/'
    const queryAt = url.indexOf('?')
    if (override !== undefined) {
      if (typeof override !== 'string' || !override.startsWith('/')) throw new ContextArgumentError('path: the override must start with "/"')
      // Fastify's originalUrl reads raw.originalUrl, else raw.url: pin it before raw.url changes.
      ;(this.raw as { originalUrl?: string }).originalUrl ??= this.originalUrl
      this.raw.url = override + (queryAt === -1 ? '' : url.slice(queryAt))
      return override
    }
    return queryAt === -1 ? url : url.slice(0, queryAt)
  })

  app.decorateRequest('clientProtocol', function (this: FastifyRequest): string {
    const forwarded = forwardedEntry(this, 'x-forwarded-proto')?.toLowerCase()
    if (forwarded === 'http' || forwarded === 'https') return forwarded
    return (this.raw.socket as TLSSocket | null)?.encrypted === true ? 'https' : 'http'
  })

  app.decorateRequest('clientHost', function (this: FastifyRequest): string {
    return forwardedEntry(this, 'x-forwarded-host') ?? headerText(this.headers.host) ?? ''
  })

  app.decorateRequest('clientHostname', function (this: FastifyRequest): string {
    const host = this.clientHost()
    if (host.startsWith('[')) return host.slice(0, host.indexOf(']') + 1)
    return host.split(':', 1)[0] ?? ''
  })

  app.decorateRequest('baseURL', function (this: FastifyRequest): string {
    return `${this.clientProtocol()}://${this.clientHost()}`
  })

  app.decorateRequest('secure', function (this: FastifyRequest): boolean {
    return this.clientProtocol() === 'https'
  })

  app.decorateRequest('ipAddress', function (this: FastifyRequest): string {
    if (options.proxyHeader !== undefined) {
      // Only from a trusted proxy: any client can send the header.
      const forwarded = forwardedEntry(this, options.proxyHeader)
      if (forwarded !== undefined && isIP(forwarded) !== 0) return forwarded
    }
    // The remote address: not `request.ip`, which reads X-Forwarded-For under trustProxy
    // (a header this operation reads only when it is the configured proxyHeader).
    return this.raw.socket?.remoteAddress ?? ''
  })

  app.decorateRequest('forwardedIps', function (this: FastifyRequest): string[] {
    const header = headerText(this.headers['x-forwarded-for'])
    if (header === undefined) return []
    return header.split(',').map((address) => address.trim()).filter((address) => address !== '')
  })

  app.decorateRequest('isFromLocal', function (this: FastifyRequest): boolean {
    return LOOPBACK.test(this.raw.socket?.remoteAddress ?? '')
  })

  app.decorateRequest('subdomains', function (this: FastifyRequest, offset: number = options.subdomainOffset): string[] {
    if (!Number.isInteger(offset) || offset < 0) throw new ContextArgumentError('subdomains: offset must be a whole number >= 0')
    const hostname = this.clientHostname().replace(/\.$/, '')
    if (hostname === '' || hostname.startsWith('[') || isIP(hostname) !== 0) return []
    return hostname.split('.').reverse().slice(offset)
  })

  app.decorateRequest('xhr', function (this: FastifyRequest): boolean {
    return headerText(this.headers['x-requested-with'])?.toLowerCase() === 'xmlhttprequest'
  })

  app.decorateRequest('is', function (this: FastifyRequest, extension: string): boolean {
    if (!hasBody(this)) return false
    const contentType = headerText(this.headers['content-type'])
    if (contentType === undefined) return false
    const actual = (contentType.split(';')[0] ?? '').trim().toLowerCase()
    const wanted = extension.includes('/') ? extension.trim().toLowerCase() : lookup(extension)
    if (wanted === false || actual === '') return false
    if (wanted.endsWith('/*')) return actual.startsWith(wanted.slice(0, -1))
    return actual === wanted
  })

  app.decorateRequest('fresh', function (this: FastifyRequest): boolean {
    if (this.raw.method !== 'GET' && this.raw.method !== 'HEAD') return false
    const reply = stateOf(this).reply
    const status = reply.statusCode
    if (!((status >= 200 && status < 300) || status === 304)) return false
    return freshLib(this.headers, {
      etag: headerText(reply.getHeader('etag')),
      'last-modified': headerText(reply.getHeader('last-modified'))
    })
  })

  app.decorateRequest('stale', function (this: FastifyRequest): boolean {
    return !this.fresh()
  })

  app.decorateRequest('range', function (this: FastifyRequest, size: number): ContextRange {
    if (!Number.isSafeInteger(size) || size < 0) throw new RangeSizeError(String(size))
    const header = headerText(this.headers.range)
    if (header === undefined || header.trim() === '') throw new RangeMalformedError('no Range header')
    // RFC 9110 14.1.3: a suffix longer than the representation selects all of it (range-parser
    // would call it unsatisfiable): clamp such suffixes before parsing.
    const clamped = header.replace(/(=|,)(\s*)-(\d+)(?=\s*(?:,|$))/g, (match, separator: string, space: string, length: string) =>
      Number(length) > size ? `${separator}${space}-${size}` : match)
    const parsed = parseRange(size, clamped, { combine: false })
    if (parsed === -2) throw new RangeMalformedError(header)
    if (parsed === -1) throw new RangeNotSatisfiableError()
    return { type: parsed.type, ranges: parsed.map(({ start, end }) => ({ start, end })) }
  })

  app.decorateRequest('clientHelloInfo', function (this: FastifyRequest): ClientHelloInfo | null {
    const socket = this.raw.socket as TLSSocket | null
    if (socket === null || socket.encrypted !== true) return null
    const servername = (socket as TLSSocket & { servername?: string | false }).servername
    return {
      serverName: typeof servername === 'string' ? servername : undefined,
      protocol: socket.getProtocol(),
      alpnProtocol: socket.alpnProtocol ?? null,
      cipher: socket.getCipher(),
      signatureAlgorithms: socket.getSharedSigalgs()
    }
  })

  app.decorateRequest('route', function (this: FastifyRequest): ContextRoute {
    const route = this.routeOptions
    return {
      method: route.method,
      path: route.url,
      params: { ...(this.params as Record<string, string>) },
      handler: route.handler,
      config: route.config
    }
  })

  app.decorateRequest('app', function (this: FastifyRequest): FastifyInstance {
    return this.server
  })

  app.decorateRequest('context', function (this: FastifyRequest): AbortSignal {
    const state = stateOf(this)
    if (state.abort === undefined) {
      const controller = new AbortController()
      state.abort = controller
      const response = state.reply.raw
      // Fastify's own request.signal also fires once the request body has been read (Node's
      // IncomingMessage 'close'), mid-handler: here only a connection closed before the
      // response was sent counts.
      const onClose = (): void => {
        if (!response.writableFinished) controller.abort(new ClientGoneError())
      }
      if (response.destroyed || this.raw.socket?.destroyed === true) onClose()
      else response.once('close', onClose)
    }
    return state.abort.signal
  })
}
