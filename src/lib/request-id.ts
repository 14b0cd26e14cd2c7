/**
 * Request ids. Behind the proxy (docker-compose.yml, deploy/haproxy.cfg) every request
 * arrives with the proxy's `X-Request-Id`; the service logs and answers with that id, so one
 * id follows the request through the proxy's log and ours. An incoming id is kept only when
 * it is valid: 1 to 128 characters of letters, digits and `-._:/+=@` (a UUID, HAProxy's
 * `%[uuid]`, nginx's `$request_id`, a trace id). Anything else (absent, empty, too long,
 * repeated headers joined with ", ", control characters) gets a fresh UUID: a client cannot
 * grow log lines or break their format through it.
 */
import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'

export const REQUEST_ID_HEADER = 'x-request-id'

const VALID_ID = /^[A-Za-z0-9\-._:/+=@]{1,128}$/

/** Fastify's `genReqId`: the valid incoming id, or a new UUID. */
export function requestId (request: IncomingMessage): string {
  const incoming = request.headers[REQUEST_ID_HEADER]
  return typeof incoming === 'string' && VALID_ID.test(incoming) ? incoming : randomUUID()
}
