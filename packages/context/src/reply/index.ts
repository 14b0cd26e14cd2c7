/**
 * Reply decorators of the context API. One module per group; README.md "Response side" maps each operation to its API and test.
 * Operations Fastify already has with the same meaning stay native: Status (`reply.code` /
 * `reply.status`), Send and SendString (`reply.send`), Set (`reply.header`), Redirect
 * (`reply.redirect(url, status = 302)`).
 */
import fastifyCookie from '@fastify/cookie'
import fastifyView from '@fastify/view'
import { Eta } from 'eta'
import type { FastifyInstance } from 'fastify'
import { registerBodyDecorators } from './body.js'
import { registerCookieDecorators } from './cookies.js'
import { registerFileDecorators } from './files.js'
import { registerHeaderDecorators } from './headers.js'
import type { ResolvedReplyOptions } from './options.js'
import { registerRedirectDecorators } from './redirects.js'
import { registerSerializerDecorators } from './serializers.js'
import { registerViewDecorators } from './views.js'

export * from './errors.js'
export { resolveReplyOptions } from './options.js'
export type { FilesOptions, ReplyOptions, ResolvedReplyOptions, ViewsOptions } from './options.js'
export type { ClearCookieOptions, CookieRecord } from './cookies.js'
export type { RedirectBackOptions, RedirectToRouteParams, RouteParamValue } from './redirects.js'
export type { ViewData } from './views.js'

export async function registerReplyDecorators (app: FastifyInstance, options: { reply: ResolvedReplyOptions }): Promise<void> {
  const { reply } = options
  // @fastify/cookie serializes cookies; register it unless the application (or the
  // request side of this plugin) already did.
  if (!app.hasDecorator('serializeCookie')) await app.register(fastifyCookie, reply.cookie)
  if (reply.views !== undefined && !app.hasReplyDecorator('viewAsync')) {
    await app.register(fastifyView, { engine: { eta: new Eta() }, root: reply.views.root, production: reply.views.production })
  }

  registerBodyDecorators(app)
  registerHeaderDecorators(app)
  registerSerializerDecorators(app)
  registerFileDecorators(app, reply.files)
  registerViewDecorators(app)
  registerCookieDecorators(app)
  registerRedirectDecorators(app, reply.redirectBackOrigins)
}
