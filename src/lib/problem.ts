/**
 * The one error shape of the service: RFC 9457 problem details
 * (`application/problem+json`), with a stable machine-readable `code`, the request id,
 * and field errors for validation failures. See docs/api.md, "Errors".
 */
import { STATUS_CODES } from 'node:http'
import createError from '@fastify/error'
import { Type, type Static } from 'typebox'

export const PROBLEM_MEDIA_TYPE = 'application/problem+json'
export const PROBLEM_CONTENT_TYPE = `${PROBLEM_MEDIA_TYPE}; charset=utf-8`

export const FieldError = Type.Object({
  /** The part of the request: `body`, `params`, `querystring` or `headers`. */
  in: Type.String(),
  /** JSON pointer of the offending field within that part, e.g. `/email`; empty for the whole part. */
  field: Type.String(),
  message: Type.String()
})

export const Problem = Type.Object({
  type: Type.String({ description: '`about:blank`: the status code and `code` say it all' }),
  title: Type.String({ description: 'the HTTP status phrase' }),
  status: Type.Integer(),
  detail: Type.String({ description: 'what went wrong with this request, for people' }),
  code: Type.String({ description: 'stable error code, for programs' }),
  instance: Type.String({ description: 'the request path' }),
  requestId: Type.String(),
  errors: Type.Optional(Type.Array(FieldError))
}, {
  // Registered once (src/app.ts): routes refer to it, the OpenAPI document has it as one component.
  $id: 'Problem',
  description: 'RFC 9457 problem details',
  examples: [{
    type: 'about:blank',
    title: 'Bad Request',
    status: 400,
    detail: 'Invalid request body: /email must match format "email"',
    code: 'VALIDATION_FAILED',
    instance: '/api/user',
    requestId: '8f14e45f-ceea-467f-a0b6-2a3d5c6e7f80',
    errors: [{ in: 'body', field: '/email', message: 'must match format "email"' }]
  }]
})

export type ProblemBody = Static<typeof Problem>

export function problemBody (status: number, code: string, detail: string, instance: string, requestId: string, errors?: Static<typeof FieldError>[]): ProblemBody {
  const body: ProblemBody = {
    type: 'about:blank',
    title: STATUS_CODES[status] ?? 'Error',
    status,
    detail,
    code,
    instance,
    requestId
  }
  if (errors) body.errors = errors
  return body
}

// Errors the service's own code throws; the error handler turns them into problem details.
export const Unauthorized = createError('UNAUTHORIZED', '%s', 401)
export const Forbidden = createError('FORBIDDEN', '%s', 403)
export const NotFound = createError('NOT_FOUND', '%s', 404)
export const BadRequest = createError('BAD_REQUEST', '%s', 400)
export const ServiceUnavailable = createError('SERVICE_UNAVAILABLE', '%s', 503)
