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
 * Exempt paths (`exempt(path)`: the routes with `config: { loadShedding: false }`,
 * `/health/live` and `/metrics`) are never refused, and do not count.
 * Fastify is given this server through its `serverFactory` option (src/app.ts); `app.inject`
 * does not pass through it.
 */
import http, { type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http'
import type { FastifyServerFactory } from 'fastify'
import { PROBLEM_CONTENT_TYPE, problemBody } from './problem.js'
import { REQUEST_ID_HEADER, type RequestId } from './request-id.js'

export type ShedReason = 'in_flight' | 'db_queue' | 'event_loop'
export const SHED_REASONS: readonly ShedReason[] = ['in_flight', 'db_queue', 'event_loop']

/** Why the service is overloaded now: the reason label and, for people, the figure. */
export interface Overload {
  reason: ShedReason
  /** Completes "The service is overloaded (...)", e.g. `120 requests waiting for a database connection`. */
  why: string
}

export interface AdmissionOptions {
  /** Refuse while this many admitted requests are unfinished; 0: no cap. */
  maxInFlight: number
  /** `Retry-After` of the 503, in seconds. */
  retryAfterSeconds: number
  /** The request id of a refusal: Fastify's `genReqId` (src/lib/request-id.ts). */
  requestId: RequestId
}

export interface Admission {
  /** `Retry-After` of a refusal (seconds, as sent). */
  readonly retryAfter: string
  /** Refusals so far, by reason (both here and by the load-shedding plugin's hook). */
  readonly refused: Readonly<Record<ShedReason, number>>
  /** A path (without the query) never refused and not counted. */
  exempt: (path: string) => void
  /** Adds a condition checked for every request after the in-flight cap. */
  watch: (check: () => Overload | undefined) => void
  /** Counts a refusal made elsewhere (under-pressure's hook inside Fastify). */
  count: (reason: ShedReason) => void
  /** The problem details of a refusal: the body's `detail`. */
  detail: (overload: Overload) => string
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

export function createAdmission (options: AdmissionOptions): Admission {
  const { maxInFlight } = options
  const retryAfter = String(options.retryAfterSeconds)
  const exempt = new Set<string>()
  const checks: Array<() => Overload | undefined> = []
  const refused: Record<ShedReason, number> = { in_flight: 0, db_queue: 0, event_loop: 0 }
  let inFlight = 0
  // One listener for every response: no closure per request ('close' comes once per
  // response, also when the client went away before the end).
  const release = (): void => { inFlight -= 1 }

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

  /** The 503: the problem details the error handler would send, written onto Node's response. */
  function refuse (request: IncomingMessage, response: ServerResponse, found: Overload, path: string): void {
    refused[found.reason] += 1
    const id = options.requestId(request)
    const body = JSON.stringify(problemBody(503, 'OVERLOADED', detail(found), path, id))
    const headers: http.OutgoingHttpHeaders = {
      'content-type': PROBLEM_CONTENT_TYPE,
      'content-length': Buffer.byteLength(body),
      'retry-after': retryAfter,
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
      [REQUEST_ID_HEADER]: id
    }
    // A body left unread would be read and thrown away to keep the connection: close it
    // instead. A request without a body keeps its connection (reconnecting costs more).
    if (request.headers['content-length'] !== undefined && request.headers['content-length'] !== '0') headers.connection = 'close'
    else if (request.headers['transfer-encoding'] !== undefined) headers.connection = 'close'
    response.writeHead(503, headers)
    response.end(body)
  }

  function admit (handler: RequestListener, request: IncomingMessage, response: ServerResponse): void {
    const url = request.url ?? '/'
    const query = url.indexOf('?')
    const path = query === -1 ? url : url.slice(0, query)
    if (exempt.has(path)) {
      handler(request, response)
      return
    }
    const found = overload()
    if (found !== undefined) {
      refuse(request, response, found, path)
      return
    }
    inFlight += 1
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
    return server
  }

  return {
    retryAfter,
    refused,
    exempt (path) { exempt.add(path) },
    watch (check) { checks.push(check) },
    count (reason) { refused[reason] += 1 },
    detail,
    serverFactory
  }
}
