/**
 * Answers the errors Node's HTTP parser raises before Fastify sees a request (a request
 * or header timeout, headers too large, a malformed request line or header, a request
 * that is both chunked and length-delimited...) in the service's one error shape, then
 * closes the connection. Fastify's default writes a different JSON body.
 */
import { STATUS_CODES } from 'node:http'
import type { Socket } from 'node:net'
import { PROBLEM_CONTENT_TYPE, problemBody } from './problem.js'

const ANSWERS: Record<string, [number, string, string]> = {
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'REQUEST_TIMEOUT', 'The request was not received in time'],
  HPE_HEADER_OVERFLOW: [431, 'HEADERS_TOO_LARGE', 'The request headers are too large']
}

export function clientErrorHandler (error: Error & { code?: string }, socket: Socket): void {
  // A reset connection has no one left to answer.
  if (error.code === 'ECONNRESET' || socket.destroyed) return
  const [status, code, detail] = ANSWERS[error.code ?? ''] ?? [400, 'BAD_REQUEST', 'The request is not valid HTTP']
  if (socket.writable) {
    const body = JSON.stringify(problemBody(status, code, detail, '', ''))
    socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: ${PROBLEM_CONTENT_TYPE}\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`)
  }
  socket.destroy()
}
