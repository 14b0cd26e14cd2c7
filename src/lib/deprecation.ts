/**
 * Old names of the API kept working until their removal date (docs/api.md, "Names"): a route
 * registered again at its old URL, with the same handler and schema, marked `deprecated` in
 * the OpenAPI document and answering with `Deprecation` (RFC 9745), `Sunset` (RFC 8594) and
 * `Link: <successor>; rel="successor-version"` (RFC 5829).
 */
import type { FastifyInstance, onSendHookHandler, RouteHandlerMethod, RouteShorthandOptions } from 'fastify'
import { header } from './responses.js'

/** When the old names were deprecated, and the day they stop working. */
const DEPRECATED_ON = '2026-11-28'
const REMOVED_ON = '2027-06-01'

const midnight = (day: string) => new Date(`${day}T00:00:00Z`)

/** The headers of every answer to a deprecated URL, `successor` the one to use instead. */
function deprecationHeaders (successor: string): Record<string, string> {
  return {
    deprecation: `@${midnight(DEPRECATED_ON).getTime() / 1000}`,
    sunset: midnight(REMOVED_ON).toUTCString(),
    link: `<${successor}>; rel="successor-version"`
  }
}

/** The same headers, as the OpenAPI document describes them. */
const DOCUMENTED_HEADERS = {
  Deprecation: header(`\`@${midnight(DEPRECATED_ON).getTime() / 1000}\` (${DEPRECATED_ON}): this URL is deprecated (RFC 9745)`),
  Sunset: header(`\`${midnight(REMOVED_ON).toUTCString()}\`: the day this URL stops working (RFC 8594)`),
  Link: header('`<successor URL>; rel="successor-version"`: the URL to use instead')
}

/** What a deprecated name says in the document: what replaces it, and when it goes. */
export function deprecatedNote (successor: string): string {
  return `Deprecated: use ${successor} instead; removed on ${REMOVED_ON}.`
}

type Schema = { operationId?: string, summary?: string, description?: string, response?: Record<string, { headers?: Record<string, unknown> }> }
type Options = RouteShorthandOptions & { schema?: Schema }

/**
 * `deprecatedAlias(app, oldUrl).post(url, options, handler)` registers the route as
 * `app.post` would, and again at `oldUrl` (both under the scope's prefix): the same handler,
 * hooks and schema; the old one with its own operationId (`<id>Deprecated`),
 * `deprecated: true`, the deprecation headers on every answer (errors too) and documented on
 * its successes.
 */
export function deprecatedAlias<App extends FastifyInstance> (app: App, oldUrl: string): Pick<App, 'post'> {
  const post = (url: string, options: Options, handler: RouteHandlerMethod) => {
    app.post(url, options, handler)
    const successor = `POST ${app.prefix}${url}`
    const schema = options.schema ?? {}
    const response = Object.fromEntries(Object.entries(schema.response ?? {}).map(([status, answer]) =>
      [status, Number(status) < 300 ? { ...answer, headers: { ...answer.headers, ...DOCUMENTED_HEADERS } } : answer]))
    const headers = deprecationHeaders(`${app.prefix}${url}`)
    const announce: onSendHookHandler = async (_request, reply, payload) => {
      reply.headers(headers)
      return payload
    }
    app.post(oldUrl, {
      ...options,
      onSend: [...[options.onSend ?? []].flat(), announce],
      schema: {
        ...schema,
        operationId: `${schema.operationId}Deprecated`,
        summary: `Deprecated name of ${successor} (removed on ${REMOVED_ON})`,
        description: `${deprecatedNote(successor)} ${schema.description ?? ''}`.trim(),
        deprecated: true,
        response
      }
    }, handler)
    return app
  }
  // The route's types come from the caller's instance (its type provider), as with app.post.
  return { post: post as unknown as App['post'] }
}
