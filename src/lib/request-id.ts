/**
 * Request ids. Behind the proxy (docker-compose.yml, deploy/haproxy.cfg) every request
 * arrives with the proxy's `X-Request-Id`; the service logs and answers with that id, so one
 * id follows the request through the proxy's log and ours. An incoming id is kept only when
 * it comes from a trusted proxy (TRUST_PROXY: the socket's peer is one) and is valid: 1 to 128
 * characters of letters, digits and `-._:/+=@` (a UUID, HAProxy's `%[uuid]`, nginx's
 * `$request_id`, a trace id). Anything else (a client's own id, absent, empty, too long,
 * repeated headers joined with ", ", control characters) gets a fresh UUID: a client cannot
 * choose the id its requests are logged under, nor grow log lines or break their format.
 */
import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import { trustedPeer } from './trust-proxy.js'

export const REQUEST_ID_HEADER = 'x-request-id'

const VALID_ID = /^[A-Za-z0-9\-._:/+=@]{1,128}$/

export type RequestId = (request: IncomingMessage) => string

/**
 * Fastify's `genReqId` (and admission's, before Fastify): the valid id a trusted proxy sent,
 * or a new UUID. `trust` is parseTrustProxy's value.
 */
export function requestIds (trust: boolean | string[]): RequestId {
  const trusted = trustedPeer(trust)
  return (request) => {
    const incoming = request.headers[REQUEST_ID_HEADER]
    return typeof incoming === 'string' && VALID_ID.test(incoming) && trusted(request.socket?.remoteAddress) ? incoming : randomUUID()
  }
}
