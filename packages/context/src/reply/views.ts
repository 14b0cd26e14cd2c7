/**
 * Templates: Render and Bind, through @fastify/view. The plugin registers
 * @fastify/view with Eta when given `views.root`; an application that registered
 * @fastify/view itself (any engine) before the context plugin gets `render` on top of it.
 */
import type { FastifyInstance, FastifyReply } from 'fastify'
import { ViewsNotConfiguredError } from './errors.js'

export type ViewData = Record<string, unknown>

declare module 'fastify' {
  interface FastifyReply {
    /**
     * Render: renders `view` with the bound variables overridden by `data`, then
     * each layout in turn with the result as `body` (innermost first), and sends text/html.
     * Errors (a missing template...) go to the error handler.
     */
    render: (view: string, data?: ViewData, ...layouts: string[]) => FastifyReply
    /** Bind: adds default template variables for this reply; `render` data overrides them. */
    bind: (variables: ViewData) => FastifyReply
  }
}

const kBound = Symbol('context.reply.bound')
type WithBound = FastifyReply & { [kBound]: ViewData | null }

type ViewAsync = (this: FastifyReply, page: string, data?: object) => Promise<string>

async function renderAll (reply: FastifyReply, view: string, data: ViewData, layouts: string[]): Promise<void> {
  const viewAsync = (reply as unknown as { viewAsync?: ViewAsync }).viewAsync
  if (typeof viewAsync !== 'function') throw new ViewsNotConfiguredError()
  let html = await viewAsync.call(reply, view, data)
  for (const layout of layouts) {
    html = await viewAsync.call(reply, layout, { ...data, body: html })
  }
  reply.header('content-type', 'text/html; charset=utf-8').send(html)
}

function render (this: FastifyReply, view: string, data: ViewData = {}, ...layouts: string[]): FastifyReply {
  const merged = { ...(this as WithBound)[kBound], ...data }
  renderAll(this, view, merged, layouts).catch((error: unknown) => this.send(error))
  return this
}

function bind (this: FastifyReply, variables: ViewData): FastifyReply {
  const self = this as WithBound
  self[kBound] = { ...self[kBound], ...variables }
  return this
}

export function registerViewDecorators (app: FastifyInstance): void {
  app.decorateReply(kBound, null)
  app.decorateReply('render', render)
  app.decorateReply('bind', bind)
}
