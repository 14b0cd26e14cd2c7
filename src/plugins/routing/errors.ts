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
