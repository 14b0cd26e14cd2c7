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

/**
 * Client-visible codes of the errors we know by code: Fastify's own for bad input and the
 * client errors (4xx) of the three plugin packages (packages/: key-auth, context, routing).
 * Listed one by one, so a renamed or new plugin error is a decision here (test/error-codes.test.ts
 * fails for a plugin 4xx missing from this map). Any other `FST_*` code (another plugin's) is
 * answered with its status and the status's generic code; a plugin's 5xx (a programming or
 * configuration error) is INTERNAL.
 */
export const KNOWN_CODES: Readonly<Record<string, readonly [status: number, code: string]>> = {
  FST_ERR_CTP_INVALID_JSON_BODY: [400, 'MALFORMED_JSON'],
  FST_ERR_CTP_EMPTY_JSON_BODY: [400, 'MALFORMED_JSON'],
  FST_ERR_CTP_BODY_TOO_LARGE: [413, 'PAYLOAD_TOO_LARGE'],
  FST_ERR_CTP_INVALID_MEDIA_TYPE: [415, 'UNSUPPORTED_MEDIA_TYPE'],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: [400, 'BAD_REQUEST'],
  FST_ERR_BAD_URL: [400, 'BAD_REQUEST'],
  FST_ERR_ASYNC_CONSTRAINT: [400, 'BAD_REQUEST'],

  FST_KEYAUTH_MISSING_OR_MALFORMED: [401, 'API_KEY_MISSING'],
  FST_KEYAUTH_INVALID_KEY: [401, 'API_KEY_INVALID'],

  FST_CONTEXT_BIND_FAILED: [400, 'VALIDATION_FAILED'],
  FST_CONTEXT_PARAM_NOT_INTEGER: [400, 'BAD_REQUEST'],
  FST_CONTEXT_FORM_FILE_MISSING: [400, 'BAD_REQUEST'],
  FST_CONTEXT_RANGE_MALFORMED: [400, 'BAD_REQUEST'],
  FST_CONTEXT_MALFORMED_XML: [400, 'BAD_REQUEST'],
  FST_CONTEXT_CORRUPT_BODY: [400, 'BAD_REQUEST'],
  FST_CONTEXT_MALFORMED_MULTIPART: [400, 'BAD_REQUEST'],
  FST_CONTEXT_INVALID_JSONP_CALLBACK: [400, 'BAD_REQUEST'],
  FST_CONTEXT_UNSAFE_UPLOAD_PATH: [400, 'BAD_REQUEST'],
  FST_CONTEXT_INVALID_XML_NAME: [400, 'BAD_REQUEST'],
  FST_CONTEXT_FILE_FORBIDDEN: [403, 'FORBIDDEN'],
  FST_CONTEXT_FILE_NOT_FOUND: [404, 'NOT_FOUND'],
  FST_CONTEXT_DECODED_BODY_TOO_LARGE: [413, 'PAYLOAD_TOO_LARGE'],
  FST_CONTEXT_MULTIPART_TOO_LARGE: [413, 'PAYLOAD_TOO_LARGE'],
  FST_CONTEXT_UPLOAD_TOO_LARGE: [413, 'PAYLOAD_TOO_LARGE'],
  FST_CONTEXT_UNSUPPORTED_BODY_TYPE: [415, 'UNSUPPORTED_MEDIA_TYPE'],
  FST_CONTEXT_UNSUPPORTED_CONTENT_ENCODING: [415, 'UNSUPPORTED_MEDIA_TYPE'],
  FST_CONTEXT_NOT_MULTIPART: [415, 'UNSUPPORTED_MEDIA_TYPE'],
  FST_CONTEXT_RANGE_NOT_SATISFIABLE: [416, 'RANGE_NOT_SATISFIABLE'],
  // The client went away: nobody reads this answer; logged as the client's, not as a fault.
  FST_CONTEXT_CLIENT_GONE: [499, 'CLIENT_CLOSED_REQUEST'],

  FST_ROUTING_BAD_PARAM: [400, 'BAD_REQUEST'],
  FST_ROUTING_NO_NEXT_HANDLER: [404, 'NOT_FOUND'],
  FST_ROUTING_METHOD_NOT_ALLOWED: [405, 'METHOD_NOT_ALLOWED']
}

/** Where a validation error was found, in words for the `detail`. */
const PART_NAMES: Record<string, string> = {
  body: 'request body',
  params: 'path parameters',
  querystring: 'query string',
  headers: 'headers',
  cookies: 'cookies'
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

  // The request's own stream failed: the client went away mid-body (Node's "aborted", code
  // ECONNRESET like a database socket's reset, hence told apart by origin, not by code), or
  // a body reader turned that into a 4xx of its own (a truncated multipart body). Nobody is
  // left to read the answer. A 5xx keeps its meaning: the client leaving does not hide it.
  const gone = request.raw.errored
  if (gone != null && (error === gone || (error.statusCode !== undefined && error.statusCode < 500))) {
    return problem(499, 'CLIENT_CLOSED_REQUEST', 'The client closed the connection before the request was received and answered')
  }

  if (error.validation) {
    const part = error.validationContext ?? 'body'
    const errors = fieldErrors(error.validation, part)
    const where = PART_NAMES[part] ?? part
    return problem(400, 'VALIDATION_FAILED', `Invalid ${where}: ${errors.map((e) => `${e.field || '(whole)'} ${e.message}`).join('; ')}`, errors)
  }
  const known = error.code ? KNOWN_CODES[error.code] : undefined
  if (known) return problem(known[0], known[1], error.message)

  const database = classifyDatabaseError(error)
  if (database) return problem(database.status, database.code, database.detail)

  const status = error.statusCode ?? 500
  if (status >= 400 && status < 500) {
    // Our own errors (src/lib/problem.ts, a code of ours) and other plugins' (rate limit, jwt,
    // multipart...: an FST_* code the client has no use for, so the status's generic code).
    const code = status === 429 ? 'RATE_LIMITED' : (error.code && !error.code.startsWith('FST_') ? error.code : defaultCode(status))
    return problem(status, code, error.message, (error as { fieldErrors?: ProblemBody['errors'] }).fieldErrors)
  }
  if (status === 503) return problem(503, 'SERVICE_UNAVAILABLE', error.message)
  return problem(500, 'INTERNAL', 'An unexpected error occurred; it has been logged with this request id.')
}

/** The methods a route of this service may serve, in the order `Allow` lists them. */
const METHODS = ['DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT']

function defaultCode (status: number): string {
  switch (status) {
    case 401: return 'UNAUTHORIZED'
    case 403: return 'FORBIDDEN'
    case 404: return 'NOT_FOUND'
    case 405: return 'METHOD_NOT_ALLOWED'
    case 406: return 'NOT_ACCEPTABLE'
    case 409: return 'CONFLICT'
    case 413: return 'PAYLOAD_TOO_LARGE'
    case 412: return 'PRECONDITION_FAILED'
    case 415: return 'UNSUPPORTED_MEDIA_TYPE'
    case 416: return 'RANGE_NOT_SATISFIABLE'
    default: return 'BAD_REQUEST'
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }
const escape = (text: string): string => text.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c)

/**
 * Where the error page's link goes: back to the page the browser came from when it is one of
 * this host's (a form of the web app), else the web app's start. Only a path leaves here, so
 * the link cannot lead to another site whatever the Referer says.
 */
function backTo (request: FastifyRequest): string {
  const referer = request.headers.referer
  if (referer === undefined) return '/'
  try {
    const from = new URL(referer)
    const path = from.pathname + from.search
    return from.host === request.host && !path.startsWith('//') ? path : '/'
  } catch { return '/' }
}

/**
 * The problem as a page, for a browser that navigates to the answer (a form posted without
 * JavaScript, a link followed): the same status, code and detail, readable, with a way back.
 * Scripts' fetches (`Sec-Fetch-Dest: empty`) and every other client keep the JSON.
 */
function problemPage (body: ProblemBody, back: string): string {
  const errors = body.errors === undefined
    ? ''
    : `<ul>${body.errors.map((e) => `<li><code>${escape(e.field || '(whole)')}</code> ${escape(e.message)}</li>`).join('')}</ul>`
  return '<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">' +
    `<title>${body.status} ${escape(body.title)}</title></head><body><main><h1>${escape(body.title)}</h1><p>${escape(body.detail)}</p>${errors}` +
    `<p><a href="${escape(back)}">Go back</a></p><p><small>Error <code>${escape(body.code)}</code>, request <code>${escape(body.requestId)}</code></small></p></main></body></html>`
}

export function sendProblem (reply: FastifyReply, body: ProblemBody): FastifyReply {
  if (body.status === 401 && !reply.hasHeader('www-authenticate')) reply.header('www-authenticate', 'Bearer')
  if (body.status === 503 && !reply.hasHeader('retry-after')) reply.header('retry-after', '5')
  const vary = reply.getHeader('vary')
  reply.code(body.status).header('vary', vary === undefined ? 'Sec-Fetch-Dest' : `${String(vary)}, Sec-Fetch-Dest`)
  const request = reply.request
  if (request.headers['sec-fetch-dest'] === 'document') return reply.type('text/html; charset=utf-8').send(problemPage(body, backTo(request)))
  return reply.type(PROBLEM_CONTENT_TYPE).send(body)
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

  // A path that exists for other methods is a 405 with `Allow` (RFC 9110 15.5.6), not a 404:
  // the router is asked, per method, whether the path matches a route (HEAD routes come with
  // GET ones). A path no method matches stays a 404, as does a request whose own method
  // matched and whose handler passed it on. OPTIONS is never asked: the CORS plugin's route
  // matches every path but answers only a listed origin's preflight (src/plugins/cors.ts),
  // so any other OPTIONS is answered as a method the path does not serve.
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? request.url
    const routed = (method: string) => method !== 'OPTIONS' && app.findRoute({ method, url: path }) !== null
    const allowed = routed(request.method) ? [] : METHODS.filter(routed)
    if (allowed.length > 0) {
      reply.header('allow', allowed.join(', '))
      return sendProblem(reply, problemBody(405, 'METHOD_NOT_ALLOWED', `${request.method} is not allowed on ${path}; allowed: ${allowed.join(', ')}`, path, request.id))
    }
    return sendProblem(reply, problemBody(404, 'NOT_FOUND', `No route for ${request.method} ${path}`, path, request.id))
  })
}

export default fp(errorHandler, { name: 'error-handler', fastify: '5.x' })
