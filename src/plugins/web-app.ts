/**
 * The web app (web/: plain HTML, CSS and JavaScript modules, no build step) at `/`, served by
 * @fastify/static. One route per file, listed at start (`wildcard: false`), so any other path
 * keeps the service's own 404. `web/` sits beside `src/` and `dist/`, so both resolve it.
 */
import { fileURLToPath } from 'node:url'
import fastifyStatic from '@fastify/static'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

export const WEB_ROOT = fileURLToPath(new URL('../../web/', import.meta.url))
/** The paths of the links in the service's e-mail (src/modules/users: password reset, e-mail verification). */
export const LINK_PAGES = ['/reset-password', '/verify-email']

async function webApp (app: FastifyInstance): Promise<void> {
  await app.register(fastifyStatic, { root: WEB_ROOT, wildcard: false, index: 'index.html', cacheControl: true, maxAge: 0 })
  // The pages the e-mailed links open (`/reset-password#token=...`, `/verify-email#token=...`)
  // are the app itself: it reads the token from the fragment, which the browser never sends,
  // so no log, proxy or Referer sees it.
  for (const url of LINK_PAGES) {
    app.get(url, { schema: { hide: true } }, async (_request, reply) => await reply.sendFile('index.html'))
  }
}

export default fp(webApp, { name: 'web-app', fastify: '5.x' })
