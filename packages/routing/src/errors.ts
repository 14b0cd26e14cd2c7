/**
 * Errors of the routing plugin. Configuration and programming errors carry 500; a request
 * error (a parameter that is not valid percent-encoding) carries 400. Each is a
 * constructor made by @fastify/error: test with `instanceof` or by `code`.
 */
import createError from '@fastify/error'

/** An option of the routing plugin has a wrong type or value. */
export const RoutingOptionError = createError<[string]>('FST_ROUTING_INVALID_OPTION', 'routing: %s', 500, TypeError)

/** A path pattern the routing model cannot read (the message says why). */
export const RoutePatternError = createError<[string, string]>('FST_ROUTING_INVALID_PATTERN', 'Route pattern "%s": %s', 500)

/** Two routes given the same name with different patterns. */
export const DuplicateRouteNameError = createError<[string, string, string]>(
  'FST_ROUTING_DUPLICATE_NAME',
  'Route name "%s" is used by "%s" and "%s"',
  500
)

/** `getRouteURL` / `redirectToRoute` with a name no route has. */
export const RouteNameNotFoundError = createError<[string]>('FST_ROUTING_NAME_NOT_FOUND', 'No route is named "%s"', 500)

/** `getRouteURL` / `redirectToRoute` without a value for a required parameter. */
export const RouteParamMissingError = createError<[string, string]>(
  'FST_ROUTING_PARAM_MISSING',
  'Route "%s" needs a value for parameter "%s"',
  500
)

/** A compiled pattern matched, but a parameter is not valid percent-encoding. */
export const RouteParamDecodeError = createError<[string]>('FST_ROUTING_BAD_PARAM', 'Parameter "%s" is not valid percent-encoding', 400)

/** `restartRouting` ran more times for one request than the `maxRestarts` option allows. */
export const RestartLimitError = createError<[number]>(
  'FST_ROUTING_RESTART_LIMIT',
  'Routing was restarted more than %d times for one request',
  500
)

/** `chain()` without handlers, or with something that is not a function. */
export const ChainHandlerError = createError<[string]>('FST_ROUTING_INVALID_CHAIN', 'chain(): %s', 500, TypeError)

/** A chain step threw, rejected with or passed to next() a value that is not an Error (the value is the `cause`). */
export const ChainNonErrorError = createError<[string, { cause: unknown }]>('FST_ROUTING_NON_ERROR', 'A chain handler failed with a value that is not an Error: %s', 500)

/** The path exists, but not for the request's method (405; the reply carries `Allow`). */
export const RouteMethodNotAllowedError = createError<[string, string, string]>(
  'FST_ROUTING_METHOD_NOT_ALLOWED',
  'Method %s is not allowed for %s; allowed: %s',
  405
)

/**
 * What `next()` resolves with in the last handler of a chain: no later handler matches. When
 * it reaches the top of the chain, the app's not-found handler answers.
 */
export const NoNextHandlerError = createError('FST_ROUTING_NO_NEXT_HANDLER', 'No later handler matches this request', 404)
