/**
 * The Fastify server options, built from the configuration. Used by the server and by
 * the test helper alike, so tests run the service as it runs in production.
 */
import type { ServerOptions } from 'node:http'
import { createRequire } from 'node:module'
import { LogController, type FastifyBaseLogger, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify'
import type { ServerSettings } from './config.js'
import pino from 'pino'
import { clientErrorHandler } from './lib/client-error.js'
import { requestIds } from './lib/request-id.js'
import { parseTrustProxy } from './lib/trust-proxy.js'
import { frameworkErrorHandler } from './plugins/error-handler.js'

/** Log paths never written: credentials in headers and any password in a logged object. */
const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-api-key"]',
  'res.headers["set-cookie"]',
  'password',
  '*.password',
  'passwordHash',
  '*.passwordHash',
  'body.password',
  'token',
  '*.token'
]

/**
 * One log line per request, written when the answer has gone: `request completed` (or
 * `request errored`) with the request (method, url, host, client address), the status and
 * the time taken. Fastify's default adds an `incoming request` line as each request
 * arrives: a second serialisation, redaction and write on every request (bench/README.md,
 * "The floor") for a line that only tells that a request began; a request that never ends
 * shows in the in-flight metric instead.
 */
class OneLinePerRequest extends LogController {
  /**
   * The `request completed` line holds only what Fastify's `req` and `res` serializers give
   * (method, URL, host, client address and port; the status), the id and the time: no
   * header, body or password can be in it, so it is written by a child of the app's logger
   * without the redaction pass, which costs every other line a copy of its objects
   * (bench/README.md, "Node and the start command"). One child per app logger.
   */
  readonly #lines = new WeakMap<FastifyBaseLogger, FastifyBaseLogger>()

  override incomingRequest (): void {}

  override requestCompleted (error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (error) {
      reply.log.error({ req: request, res: reply, err: error, responseTime: reply.elapsedTime }, 'request errored')
      return
    }
    const app = request.server.log
    let lines = this.#lines.get(app)
    if (lines === undefined) {
      lines = app.child({}, { redact: [] })
      this.#lines.set(app, lines)
    }
    lines.info({ reqId: request.id, req: request, res: reply, responseTime: reply.elapsedTime }, 'request completed')
  }
}

/**
 * How long a client may take, in ms. Node checks the header and request deadlines every
 * `checkInterval` ms, so a stalled client is dropped at most that much later.
 * - headers: from the first byte of a request to the end of its headers (slowloris);
 * - request: from the first byte to the end of the body, however fast it comes: the outer
 *   bound. A body that stops or trickles is cut much earlier by the minimum rate
 *   (SLOW_CLIENT_*, src/plugins/admission.ts), so this one can leave a slow link time for a
 *   5 MiB image (120 s: 44 KB/s);
 * - keepAlive: how long an idle kept-alive connection stays open between requests
 *   (above the 60 s idle timeout of common load balancers, so they close first);
 * - idle: socket inactivity at any time; 0 leaves it to the three above.
 */
export interface HttpTimeouts {
  headers: number
  request: number
  keepAlive: number
  idle: number
  checkInterval: number
}

export const HTTP_TIMEOUTS: HttpTimeouts = {
  headers: 10_000,
  request: 120_000,
  keepAlive: 72_000,
  idle: 0,
  checkInterval: 2_000
}

/** The Fastify (and Node http) options for these timeouts; tests pass shorter ones. */
export function timeoutOptions (timeouts: HttpTimeouts): Pick<FastifyServerOptions, 'connectionTimeout' | 'requestTimeout' | 'keepAliveTimeout'> & { http: ServerOptions } {
  return {
    connectionTimeout: timeouts.idle,
    requestTimeout: timeouts.request,
    keepAliveTimeout: timeouts.keepAlive,
    http: { headersTimeout: timeouts.headers, connectionsCheckingInterval: timeouts.checkInterval }
  }
}

/**
 * JSON lines on stdout are written in batches: LOG_BATCH_BYTES at a time, or whatever is
 * waiting every LOG_FLUSH_MS. One write per line was the largest single cost of a cheap read
 * (GET /api/user/:id: 23% more requests a second with batches; bench/README.md, "Node and
 * the start command"). Every exit writes what is waiting (pino flushes on `exit`: a graceful
 * stop, process.exit, an uncaught exception); only a process killed outright (SIGKILL, the
 * kernel's OOM killer) loses its last LOG_FLUSH_MS of lines. One destination per process:
 * stdout is one.
 */
export const LOG_BATCH_BYTES = 4096
export const LOG_FLUSH_MS = 100
let stdoutLines: pino.DestinationStream | undefined

/**
 * Human-readable logs in development, through pino-pretty (a development dependency, in a
 * worker thread) when it is installed; batched JSON lines everywhere else, and in development
 * without it (`node dist/server.js` with production dependencies only).
 */
function logDestination (env: ServerSettings['env']): { transport: { target: string, options: Record<string, unknown> } } | { stream: pino.DestinationStream } {
  if (env === 'development') {
    try {
      return { transport: { target: createRequire(import.meta.url).resolve('pino-pretty'), options: { translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' } } }
    } catch {}
  }
  stdoutLines ??= pino.destination({ dest: 1, sync: false, minLength: LOG_BATCH_BYTES, periodicFlush: LOG_FLUSH_MS })
  return { stream: stdoutLines }
}

/**
 * @param logStream where logs go (default stdout); tests pass a stream to read them.
 * @param logMixin fields added to every log line (with tracing on: the active span's
 *   `trace_id` and `span_id`, src/telemetry).
 */
export function serverOptions (server: Pick<ServerSettings, 'logLevel' | 'bodyLimit' | 'trustProxy' | 'env'>, logStream?: NodeJS.WritableStream, logMixin?: () => Record<string, string>): FastifyServerOptions {
  const trustProxy = parseTrustProxy(server.trustProxy)
  return {
    logger: {
      level: server.logLevel,
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      ...(logMixin ? { mixin: logMixin } : {}),
      ...(logStream ? { stream: logStream } : logDestination(server.env))
    },
    logController: new OneLinePerRequest(),
    bodyLimit: server.bodyLimit,
    trustProxy,
    // A valid X-Request-Id from a trusted proxy is kept, so the proxy's log line and ours
    // share it; anything else gets our own id (src/lib/request-id.ts).
    requestIdHeader: false,
    genReqId: requestIds(trustProxy),
    // Slow or stalled clients do not hold a connection forever.
    ...timeoutOptions(HTTP_TIMEOUTS),
    // Timeouts and malformed HTTP answer problem details too.
    clientErrorHandler,
    frameworkErrors: frameworkErrorHandler as FastifyServerOptions['frameworkErrors'],
    routerOptions: { maxParamLength: 200, ignoreTrailingSlash: true },
    // On close: no new connections, idle ones are closed, and a request that still
    // arrives on a busy kept-alive connection is served in full (answered with
    // `Connection: close`) rather than refused with Fastify's non-problem 503 body.
    // The database closes only after the last request (onClose hooks run after).
    return503OnClosing: false,
    forceCloseConnections: 'idle'
  }
}
