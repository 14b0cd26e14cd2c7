/**
 * Admission: the first thing every request meets, before Fastify builds its request and
 * reply, routes it, logs it or runs a hook. While the service is overloaded, a request is
 * refused here with a 503 in problem details (code `OVERLOADED`) and `Retry-After`, written
 * straight onto Node's response: a refusal costs what Node's HTTP layer costs (12 µs of CPU in
 * a closed loop, 20-25 µs in an open one) and none of Fastify's request lifecycle. That is still
 * a good part of a cheap read (80 µs), which is why the proxy in front sheds first
 * (bench/README.md and docs/operations.md, "Load shedding").
 *
 * Overloaded means (docs/operations.md, "Load shedding"):
 * - `maxInFlight` requests are already admitted and not finished (0: no cap). This bounds the
 *   work queued inside the process (in the database pool's queue above all), so an admitted
 *   request waits at most for the ones ahead of it;
 * - or a watched condition says so (`watch`): the database pool's queue, a lagging event
 *   loop (src/plugins/load-shedding.ts).
 *
 * The cap is not a pool one client can drain (docs/operations.md, "Slow and greedy clients"):
 * - one client (its address; behind a trusted proxy the forwarded one; an IPv6 /64 counts as
 *   one) holds at most `maxInFlightPerClient` of the places; past that its requests are
 *   refused with a 429 `TOO_MANY_IN_PROGRESS` and `Retry-After` while others are admitted;
 * - an admitted request whose body stops arriving, or whose answer stops being read, gives its
 *   place back within seconds: in every `slowClientWindowMs` the bytes must move at
 *   `slowClientMinBytesPerS` at least (a body: from the request's admission; an answer: while the
 *   socket is back-pressured, i.e. the client is what holds it up). A body that is too slow
 *   ends with a 408 `BODY_TOO_SLOW` (through Fastify's error handler: its body reader gets the
 *   error) and `Connection: close`; an answer that is not read is cut (nobody reads a
 *   problem). Both are counted (`limited`) and logged with the client, at most a few lines a
 *   second.
 *
 * Exempt paths (`exempt(path)`: the routes with `config: { loadShedding: false }`,
 * `/health/live` and `/metrics`) are never refused, and do not count.
 * Fastify is given this server through its `serverFactory` option (src/app.ts); `app.inject`
 * does not pass through it.
 */
import http, { type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http'
import { isIP, type Socket } from 'node:net'
import type { FastifyBaseLogger, FastifyServerFactory } from 'fastify'
import { PROBLEM_CONTENT_TYPE, problemBody } from '../lib/problem.js'
import { REQUEST_ID_HEADER, type RequestId } from '../lib/request-id.js'
import { clientAddressReader } from '../lib/trust-proxy.js'

export type ShedReason = 'in_flight' | 'db_queue' | 'event_loop'
export const SHED_REASONS: readonly ShedReason[] = ['in_flight', 'db_queue', 'event_loop']

/** Why a client was refused or cut: over its share, a body too slow, an answer not read. */
export type LimitReason = 'client_share' | 'body_too_slow' | 'read_too_slow'
export const LIMIT_REASONS: readonly LimitReason[] = ['client_share', 'body_too_slow', 'read_too_slow']

/** Why the service is overloaded now: the reason label and, for people, the figure. */
export interface Overload {
  reason: ShedReason
  /** Completes "The service is overloaded (...)", e.g. `120 requests waiting for a database connection`. */
  why: string
}

/**
 * `Retry-After` (seconds) of a refusal: long enough for a burst to pass, short enough that a
 * client retrying on it meets a service that recovered.
 */
export const RETRY_AFTER_SECONDS = 2

export interface AdmissionOptions {
  /** Refuse while this many admitted requests are unfinished; 0: no cap. */
  maxInFlight: number
  /** `Retry-After` of the 503 and of the 429, in seconds; RETRY_AFTER_SECONDS unless a test sets it. */
  retryAfterSeconds?: number
  /** The request id of a refusal: Fastify's `genReqId` (src/lib/request-id.ts). */
  requestId: RequestId
  /** Admitted requests one client may have unfinished; past that, 429; 0: no share. */
  maxInFlightPerClient?: number
  /** TRUST_PROXY, parsed (src/lib/trust-proxy.ts): whose X-Forwarded-For names the client. */
  trustProxy?: boolean | string[]
  /** The window of the minimum rates (ms): a body or an answer is cut after a window below the rate; 0: never. */
  slowClientWindowMs?: number
  /** The minimum rate of a body, and of an answer the client holds up, in bytes per second. */
  slowClientMinBytesPerS?: number
  /** CORS headers of a refusal, so that a front-end of another origin can read it (src/plugins/cors.ts). */
  corsHeaders?: (request: IncomingMessage) => http.OutgoingHttpHeaders
}

export interface Admission {
  /** `Retry-After` of a refusal (seconds, as sent). */
  readonly retryAfter: string
  /** Refusals so far, by reason (both here and by the load-shedding plugin's hook). */
  readonly refused: Readonly<Record<ShedReason, number>>
  /** Clients refused or cut so far, by reason. */
  readonly limited: Readonly<Record<LimitReason, number>>
  /** Admitted requests not yet finished (answered or aborted): what `maxInFlight` caps. */
  readonly inFlight: number
  /** A path (without the query) never refused and not counted. */
  exempt: (path: string) => void
  /** Adds a condition checked for every request after the in-flight cap. */
  watch: (check: () => Overload | undefined) => void
  /** Counts a refusal made elsewhere (under-pressure's hook inside Fastify). */
  count: (reason: ShedReason) => void
  /** The problem details of a refusal: the body's `detail`. */
  detail: (overload: Overload) => string
  /** Where the refusals and cuts are logged (the app's logger, once built); silent before. */
  useLogger: (log: FastifyBaseLogger) => void
  /** For Fastify's `serverFactory`: an HTTP server whose requests pass admission first. */
  serverFactory: FastifyServerFactory
}

/** The Fastify options that shape its HTTP server (already defaulted by Fastify). */
interface ServerSettings {
  http?: http.ServerOptions
  keepAliveTimeout?: number
  requestTimeout?: number
  connectionTimeout?: number
  maxRequestsPerSocket?: number | null
}

/** An admitted request while it is unfinished. */
interface Admitted {
  request: IncomingMessage
  response: ServerResponse
  socket: Socket
  client: string
  /** Start of the current window, and the bytes received (body) or drained (answer) then. */
  windowStart: number
  windowBytes: number
  /** Which direction the window measures: the body, or the answer. */
  phase: 'body' | 'answer' | 'idle'
  /** Links of the watched list (`createAdmission`); both cleared when the request leaves it. */
  newer?: Admitted
  older?: Admitted
}

const ADMITTED = Symbol('admitted')
type Tracked = ServerResponse & { [ADMITTED]?: Admitted }

/** A connection's last client key, and the X-Forwarded-For it was read with. */
const CLIENT = Symbol('client')
type Keyed = Socket & { [CLIENT]?: { forwardedFor: string | string[] | undefined, key: string } }

/**
 * The error a body reader gets when the body is too slow: Fastify's parsers (and multipart's)
 * pass it to the error handler, which answers 408 `BODY_TOO_SLOW` (its status and code).
 */
export class BodyTooSlowError extends Error {
  readonly code = 'BODY_TOO_SLOW'
  readonly statusCode = 408
}

/** One key per client: an IPv4 address, or an IPv6 /64 (one subscriber's usual allocation). */
export function clientKey (address: string): string {
  if (isIP(address) !== 6) return address
  const [left = '', right] = address.split('::')
  const head = left === '' ? [] : left.split(':')
  const tail = right === undefined || right === '' ? [] : right.split(':')
  const groups = right === undefined ? head : [...head, ...Array<string>(Math.max(0, 8 - head.length - tail.length)).fill('0'), ...tail]
  return `${groups.slice(0, 4).map((g) => (g.includes('.') ? g : g.replace(/^0+(?=.)/, '').toLowerCase())).join(':')}::/64`
}

/**
 * At most `perInterval` lines per interval (an attack makes thousands of events a second);
 * the lines dropped are counted in the next one (`suppressed`).
 */
function logLimiter (perInterval: number, intervalMs: number): (log: FastifyBaseLogger | undefined, fields: Record<string, unknown>, message: string) => void {
  let windowStart = 0
  let used = 0
  let suppressed = 0
  return (log, fields, message) => {
    if (log === undefined) return
    const now = Date.now()
    if (now - windowStart >= intervalMs) { windowStart = now; used = 0 }
    if (used >= perInterval) { suppressed += 1; return }
    used += 1
    log.warn(suppressed > 0 ? { ...fields, suppressed } : fields, message)
    suppressed = 0
  }
}

export function createAdmission (options: AdmissionOptions): Admission {
  const { maxInFlight } = options
  const perClient = options.maxInFlightPerClient ?? 0
  const windowMs = options.slowClientWindowMs ?? 0
  const minRate = options.slowClientMinBytesPerS ?? 0
  const clientAddress = clientAddressReader(options.trustProxy ?? false)
  const retryAfter = String(options.retryAfterSeconds ?? RETRY_AFTER_SECONDS)
  const exempt = new Set<string>()
  const checks: Array<() => Overload | undefined> = []
  const refused: Record<ShedReason, number> = { in_flight: 0, db_queue: 0, event_loop: 0 }
  const limited: Record<LimitReason, number> = { client_share: 0, body_too_slow: 0, read_too_slow: 0 }
  /** Unfinished admitted requests per client (entries removed at 0: at most `maxInFlight` of them). */
  const byClient = new Map<string, number>()
  /**
   * The admitted requests the minimum rates watch, newest first: a list linked through the
   * requests themselves, each unlinked (its links cleared) as it ends. Not a Set: the table of
   * a long-lived Set, rehashed as thousands of requests a second come and go, kept finished
   * requests (and all their objects) alive through the young generation's collections until
   * the next full one; the garbage collector then cost several times more per request
   * (bench/README.md, "Node and the start command").
   */
  let newest: Admitted | undefined
  function watch (admitted: Admitted): void {
    admitted.older = newest
    if (newest !== undefined) newest.newer = admitted
    newest = admitted
  }
  function unwatch (admitted: Admitted): void {
    // In the list: the newest, or some newer request links to it. Twice (a cut, then the close) is a no-op.
    if (newest !== admitted && admitted.newer === undefined) return
    if (admitted.newer === undefined) newest = admitted.older
    else admitted.newer.older = admitted.older
    if (admitted.older !== undefined) admitted.older.newer = admitted.newer
    admitted.newer = undefined
    admitted.older = undefined
  }
  let log: FastifyBaseLogger | undefined
  const warn = logLimiter(10, 1000)
  let inFlight = 0
  // One listener for every response: no closure per request ('close' comes once per
  // response, also when the client went away before the end).
  function release (this: Tracked): void {
    inFlight -= 1
    const admitted = this[ADMITTED]
    if (admitted === undefined) return
    unwatch(admitted)
    const count = (byClient.get(admitted.client) ?? 1) - 1
    if (count <= 0) byClient.delete(admitted.client)
    else byClient.set(admitted.client, count)
  }

  /** The current overload, if any: the in-flight cap first, then the watched conditions. */
  function overload (): Overload | undefined {
    if (maxInFlight > 0 && inFlight >= maxInFlight) return { reason: 'in_flight', why: `${inFlight} requests in progress` }
    for (const check of checks) {
      const found = check()
      if (found !== undefined) return found
    }
    return undefined
  }

  const detail = (found: Overload): string => `The service is overloaded (${found.why}); retry in ${retryAfter} s`

  /** A refusal (503 or 429): the problem details the error handler would send, written onto Node's response. */
  function refuse (request: IncomingMessage, response: ServerResponse, status: number, code: string, why: string, path: string): void {
    const id = options.requestId(request)
    const body = JSON.stringify(problemBody(status, code, why, path, id))
    const headers: http.OutgoingHttpHeaders = {
      'content-type': PROBLEM_CONTENT_TYPE,
      'content-length': Buffer.byteLength(body),
      'retry-after': retryAfter,
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
      [REQUEST_ID_HEADER]: id,
      ...options.corsHeaders?.(request)
    }
    // A body left unread would be read and thrown away to keep the connection: close it
    // instead. A request without a body keeps its connection (reconnecting costs more).
    if (request.headers['content-length'] !== undefined && request.headers['content-length'] !== '0') headers.connection = 'close'
    else if (request.headers['transfer-encoding'] !== undefined) headers.connection = 'close'
    response.writeHead(status, headers)
    response.end(body)
  }

  /** Ends a body that arrives below the minimum rate: its reader answers 408, or the connection is cut. */
  function cutBody (admitted: Admitted, received: number, elapsed: number): void {
    const { request, response, socket } = admitted
    limited.body_too_slow += 1
    unwatch(admitted)
    warn(log, { client: admitted.client, reason: 'body_too_slow', method: request.method, url: request.url, bytes: received, ms: elapsed }, `request body below ${minRate} bytes/s: cut`)
    // The answer closes the connection: the rest of the body is never read.
    response.shouldKeepAlive = false
    request.emit('error', new BodyTooSlowError(`The request body arrived too slowly (${received} bytes in ${(elapsed / 1000).toFixed(1)} s; at least ${minRate} bytes/s is required)`))
    // Nobody answered (the listener was not the body's reader): the connection goes anyway.
    setTimeout(() => { if (!response.writableEnded) socket.destroy() }, 1000).unref()
  }

  /** Cuts an answer the client does not read at the minimum rate: nobody would read a problem either. */
  function cutAnswer (admitted: Admitted, drained: number, elapsed: number): void {
    limited.read_too_slow += 1
    unwatch(admitted)
    warn(log, { client: admitted.client, reason: 'read_too_slow', method: admitted.request.method, url: admitted.request.url, bytes: drained, ms: elapsed }, `response read below ${minRate} bytes/s: connection cut`)
    admitted.socket.destroy()
  }

  /**
   * Every admitted request, once per tick: which side holds it up, and whether that side kept
   * the minimum rate over the last window. Bytes are the socket's: received, and handed to
   * the kernel (written minus still queued).
   */
  function sweep (): void {
    const now = Date.now()
    let older: Admitted | undefined
    for (let admitted = newest; admitted !== undefined; admitted = older) {
      // Read first: cutting this request unlinks it.
      older = admitted.older
      const { request, response, socket } = admitted
      let phase: Admitted['phase']
      let bytes: number
      if (!request.complete && !response.headersSent) {
        // Data the service has not consumed yet (its hooks still run) is not the client's delay.
        if (request.readableLength >= request.readableHighWaterMark) phase = 'idle'
        else phase = 'body'
        bytes = socket.bytesRead
      } else if (response.headersSent && socket.writableLength > 0) {
        phase = 'answer'
        bytes = socket.bytesWritten - socket.writableLength
      } else {
        // The service is working, or writing as fast as it produces: nobody to blame.
        phase = 'idle'
        bytes = 0
      }
      if (phase !== admitted.phase || phase === 'idle') {
        admitted.phase = phase
        admitted.windowStart = now
        admitted.windowBytes = bytes
        continue
      }
      const elapsed = now - admitted.windowStart
      if (elapsed < windowMs) continue
      const moved = bytes - admitted.windowBytes
      if (moved * 1000 < minRate * elapsed) {
        // Only a body someone waits for is cut (its reader answers the 408); before that the
        // service is still in its hooks, and the check comes again at the next tick.
        if (phase === 'body' && request.listenerCount('error') === 0) continue
        if (phase === 'body') cutBody(admitted, moved, elapsed)
        else cutAnswer(admitted, moved, elapsed)
        continue
      }
      admitted.windowStart = now
      admitted.windowBytes = bytes
    }
  }

  /**
   * The request's client key, read once per connection while its X-Forwarded-For stays the
   * same (a kept-alive client's requests; behind a proxy, one client's run of requests).
   */
  function clientOf (request: IncomingMessage): string {
    const socket = request.socket as Keyed
    const forwardedFor = request.headers['x-forwarded-for']
    const known = socket[CLIENT]
    if (known !== undefined && known.forwardedFor === forwardedFor) return known.key
    const key = clientKey(clientAddress(socket.remoteAddress, forwardedFor))
    socket[CLIENT] = { forwardedFor, key }
    return key
  }

  function admit (handler: RequestListener, request: IncomingMessage, response: ServerResponse): void {
    const url = request.url ?? '/'
    const query = url.indexOf('?')
    const path = query === -1 ? url : url.slice(0, query)
    if (exempt.has(path)) {
      handler(request, response)
      return
    }
    const client = clientOf(request)
    const mine = byClient.get(client) ?? 0
    if (perClient > 0 && mine >= perClient) {
      limited.client_share += 1
      warn(log, { client, reason: 'client_share', method: request.method, url, inProgress: mine }, 'client over its share of requests in progress: 429')
      refuse(request, response, 429, 'TOO_MANY_IN_PROGRESS', `This client already has ${mine} requests in progress; retry in ${retryAfter} s`, path)
      return
    }
    const found = overload()
    if (found !== undefined) {
      refused[found.reason] += 1
      refuse(request, response, 503, 'OVERLOADED', detail(found), path)
      return
    }
    inFlight += 1
    byClient.set(client, mine + 1)
    const admitted: Admitted = { request, response, socket: request.socket, client, windowStart: Date.now(), windowBytes: request.socket.bytesRead, phase: 'body' }
    ;(response as Tracked)[ADMITTED] = admitted
    if (windowMs > 0 && minRate > 0) watch(admitted)
    response.on('close', release)
    handler(request, response)
  }

  /** As Fastify builds its HTTP/1.1 server (fastify/lib/server.js), with admission in front. */
  const serverFactory: FastifyServerFactory = (handler, fastifyOptions): Server => {
    const settings = fastifyOptions as unknown as ServerSettings
    const server = http.createServer(settings.http ?? {}, (request, response) => { admit(handler as RequestListener, request, response) })
    if (typeof settings.keepAliveTimeout === 'number') server.keepAliveTimeout = settings.keepAliveTimeout
    if (typeof settings.requestTimeout === 'number') server.requestTimeout = settings.requestTimeout
    server.setTimeout(settings.connectionTimeout ?? 0)
    if (typeof settings.maxRequestsPerSocket === 'number' && settings.maxRequestsPerSocket > 0) server.maxRequestsPerSocket = settings.maxRequestsPerSocket
    if (windowMs > 0 && minRate > 0) {
      // A tenth of the window: a slow client is cut at most 10% past its window.
      const timer = setInterval(sweep, Math.max(20, Math.min(1000, Math.floor(windowMs / 10))))
      timer.unref()
      server.once('close', () => { clearInterval(timer) })
    }
    return server
  }

  return {
    retryAfter,
    refused,
    limited,
    get inFlight () { return inFlight },
    exempt (path) { exempt.add(path) },
    watch (check) { checks.push(check) },
    count (reason) { refused[reason] += 1 },
    detail,
    useLogger (logger) { log = logger },
    serverFactory
  }
}
