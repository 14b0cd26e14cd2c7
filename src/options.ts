/**
 * The Fastify server options, built from the configuration. Used by the server and by
 * the test helper alike, so tests run the service as it runs in production.
 */
import { randomUUID } from 'node:crypto'
import type { FastifyServerOptions } from 'fastify'
import type { Config } from './config.js'

/** Log paths never written: credentials in headers and any password in a logged object. */
export const REDACTED_PATHS = [
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
 * @param logStream where logs go (default stdout); tests pass a stream to read them.
 */
export function serverOptions (config: Pick<Config, 'LOG_LEVEL' | 'BODY_LIMIT' | 'TRUST_PROXY' | 'NODE_ENV'>, logStream?: NodeJS.WritableStream): FastifyServerOptions {
  return {
    logger: {
      level: config.LOG_LEVEL,
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      ...(logStream ? { stream: logStream } : {})
    },
    bodyLimit: config.BODY_LIMIT,
    trustProxy: config.TRUST_PROXY,
    // Our own ids: a client-chosen id could forge log lines.
    requestIdHeader: false,
    genReqId: () => randomUUID(),
    // Slow or stalled clients do not hold a connection forever.
    connectionTimeout: 0,
    requestTimeout: 30_000,
    keepAliveTimeout: 72_000,
    routerOptions: { maxParamLength: 200, ignoreTrailingSlash: true },
    return503OnClosing: true,
    forceCloseConnections: 'idle'
  }
}
