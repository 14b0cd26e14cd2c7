/**
 * The service's one error handler and not-found handler. Every error leaves as RFC 9457
 * problem details (src/lib/problem.ts). Client errors keep their message; server errors
 * are logged with their stack and answered with a generic detail, never the stack.
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { PROBLEM_CONTENT_TYPE, problemBody, type ProblemBody } from '../lib/problem.js'
import { classifyDatabaseError } from '../db/errors.js'

interface AjvError { instancePath: string, message?: string, keyword: string, params: Record<string, unknown> }

/** Fastify's own error codes for bad input, with the status and code we answer. */
const FASTIFY_CODES: Record<string, [number, string]> = {
  FST_ERR_CTP_INVALID_JSON_BODY: [400, 'MALFORMED_JSON'],
  FST_ERR_CTP_EMPTY_JSON_BODY: [400, 'MALFORMED_JSON'],
  FST_ERR_CTP_BODY_TOO_LARGE: [413, 'PAYLOAD_TOO_LARGE'],
  FST_ERR_CTP_INVALID_MEDIA_TYPE: [415, 'UNSUPPORTED_MEDIA_TYPE'],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: [400, 'BAD_REQUEST'],
  FST_ERR_BAD_URL: [400, 'BAD_REQUEST'],
  FST_ERR_ASYNC_CONSTRAINT: [400, 'BAD_REQUEST']
}

/** Where a validation error was found, in words for the `detail`. */
const PART_NAMES: Record<string, string> = {
  body: 'request body',
  params: 'path parameters',
  querystring: 'query string',
  headers: 'headers'
}

function fieldErrors (validation: AjvError[], part: string): { in: string, field: string, message: string }[] {
  return validation.map((v) => {
    if (v.keyword === 'required') return { in: part, field: `${v.instancePath}/${String(v.params.missingProperty)}`, message: 'is required' }
    if (v.keyword === 'additionalProperties') return { in: part, field: `${v.instancePath}/${String(v.params.additionalProperty)}`, message: 'is not allowed' }
    return { in: part, field: v.instancePath, message: v.message ?? 'is invalid' }
  })
}

export function toProblem (error: FastifyError & { validation?: AjvError[], validationContext?: string }, request: FastifyRequest): ProblemBody {
  const path = request.url.split('?')[0] ?? request.url
  const problem = (status: number, code: string, detail: string, errors?: { in: string, field: string, message: string }[]) =>
    problemBody(status, code, detail, path, request.id, errors)

  if (error.validation) {
    const part = error.validationContext ?? 'body'
    const errors = fieldErrors(error.validation, part)
    const where = PART_NAMES[part] ?? part
    return problem(400, 'VALIDATION_FAILED', `Invalid ${where}: ${errors.map((e) => `${e.field || '(whole)'} ${e.message}`).join('; ')}`, errors)
  }
  const known = error.code ? FASTIFY_CODES[error.code] : undefined
  if (known) return problem(known[0], known[1], error.message)

  const database = classifyDatabaseError(error)
  if (database) return problem(database.status, database.code, database.detail)

  const status = error.statusCode ?? 500
  if (status >= 400 && status < 500) {
    // Our own errors (src/lib/problem.ts) and plugins' (rate limit, jwt, multipart...).
    const code = status === 429 ? 'RATE_LIMITED' : (error.code && !error.code.startsWith('FST_') ? error.code : defaultCode(status))
    return problem(status, code, error.message)
  }
  if (status === 503) return problem(503, 'SERVICE_UNAVAILABLE', error.message)
  return problem(500, 'INTERNAL', 'An unexpected error occurred; it has been logged with this request id.')
}

function defaultCode (status: number): string {
  switch (status) {
    case 401: return 'UNAUTHORIZED'
    case 403: return 'FORBIDDEN'
    case 404: return 'NOT_FOUND'
    case 405: return 'METHOD_NOT_ALLOWED'
    case 406: return 'NOT_ACCEPTABLE'
    case 409: return 'CONFLICT'
    case 413: return 'PAYLOAD_TOO_LARGE'
    case 415: return 'UNSUPPORTED_MEDIA_TYPE'
    default: return 'BAD_REQUEST'
  }
}

export function sendProblem (reply: FastifyReply, body: ProblemBody): FastifyReply {
  if (body.status === 401 && !reply.hasHeader('www-authenticate')) reply.header('www-authenticate', 'Bearer')
  if (body.status === 503 && !reply.hasHeader('retry-after')) reply.header('retry-after', '5')
  return reply.code(body.status).type(PROBLEM_CONTENT_TYPE).send(body)
}

/**
 * Fastify answers a few errors before routing (a URL that does not decode, an async
 * constraint that fails) with its own body; the `frameworkErrors` server option
 * (src/options.ts) sends them here, so they leave as problem details too.
 */
export function frameworkErrorHandler (error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  reply.header('x-request-id', request.id)
  const body = toProblem(error, request)
  request.log.info({ code: body.code, status: body.status }, body.detail)
  sendProblem(reply, body)
}

async function errorHandler (app: FastifyInstance): Promise<void> {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const body = toProblem(error, request)
    if (body.status === 503 && error.code === 'SERVICE_UNAVAILABLE') {
      // Our own 503s (readiness): an expected state, not a fault; no stack trace.
      request.log.warn({ code: body.code, status: body.status }, body.detail)
    } else if (body.status >= 500) {
      request.log.error({ err: error }, 'request failed')
    } else {
      request.log.info({ code: body.code, status: body.status }, body.detail)
    }
    return sendProblem(reply, body)
  })

  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? request.url
    return sendProblem(reply, problemBody(404, 'NOT_FOUND', `No route for ${request.method} ${path}`, path, request.id))
  })
}

export default fp(errorHandler, { name: 'error-handler', fastify: '5.x' })
