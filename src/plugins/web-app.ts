/**
 * The web app (web/: plain HTML, CSS and JavaScript modules, no build step) at `/`, served by
 * @fastify/static. One route per file, listed at start (`wildcard: false`), so any other path
 * keeps the service's own 404. `web/` sits beside `src/` and `dist/`, so both resolve it.
 */
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import fastifyStatic from '@fastify/static'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

export const WEB_ROOT = fileURLToPath(new URL('../../web/', import.meta.url))
/** The paths of the links in the service's e-mail (src/modules/users: password reset, e-mail verification). */
export const LINK_PAGES = ['/reset-password', '/verify-email']
/** Where the page loads @simplewebauthn/browser (passkeys) from. */
export const WEBAUTHN_SCRIPT = '/vendor/simplewebauthn-browser.js'
/**
 * The package's one-file browser bundle, found the way Node resolves the package (its `esm/`
 * entry, then the bundle beside it): from src/, dist/ and the image's production node_modules alike.
 */
export const WEBAUTHN_BUNDLE = fileURLToPath(new URL('../dist/bundle/index.umd.min.js', import.meta.resolve('@simplewebauthn/browser')))

async function webApp (app: FastifyInstance): Promise<void> {
  const cache = { cacheControl: true, maxAge: 0 }
  await app.register(fastifyStatic, { root: WEB_ROOT, wildcard: false, index: 'index.html', ...cache })
  // The pages the e-mailed links open (`/reset-password#token=...`, `/verify-email#token=...`)
  // are the app itself: it reads the token from the fragment, which the browser never sends,
  // so no log, proxy or Referer sees it.
  for (const url of LINK_PAGES) {
    app.get(url, { schema: { hide: true } }, async (_request, reply) => await reply.sendFile('index.html'))
  }
  // The bundle sets `globalThis.SimpleWebAuthnBrowser`; it is revalidated as the app's own files are.
  app.get(WEBAUTHN_SCRIPT, { schema: { hide: true } }, async (_request, reply) =>
    await reply.sendFile(path.basename(WEBAUTHN_BUNDLE), path.dirname(WEBAUTHN_BUNDLE), cache))
}

export default fp(webApp, { name: 'web-app', fastify: '5.x' })
