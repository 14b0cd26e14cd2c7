/**
 * Static files (README.md "Static files"): `app.static(prefix, root, options?)` registers
 * @fastify/static so the files under `root` are served at `prefix` (`/` exposes
 * `/dir/file` as `root/dir/file`).
 *
 * Defaults differ from @fastify/static's on two points: dotfiles are ignored (404) rather
 * than served, and `decorateReply` is always false, so any number of folders can be served
 * (an app that wants @fastify/static's `reply.sendFile` registers @fastify/static itself; the
 * context plugin's `reply.serveFile(path, compress?)` does not clash with it). Traversal (`..`, encoded
 * or not) is refused by @fastify/static and @fastify/send; a directory URL serves its
 * index.html (`/dir` and `/dir/` alike); answers carry a weak ETag and Last-Modified and
 * honour If-None-Match / If-Modified-Since (304) and Range (206). README.md.
 */
import fastifyStatic, { type FastifyStaticOptions } from '@fastify/static'
import type { FastifyInstance } from 'fastify'

export type StaticOptions = Omit<FastifyStaticOptions, 'root' | 'prefix' | 'decorateReply'>

declare module 'fastify' {
  interface FastifyInstance {
    /** Static: serves the files under `root` at URL `prefix`. Await it (or let the app's ready() do so). */
    static: (prefix: string, root: string, options?: StaticOptions) => FastifyInstance & PromiseLike<undefined>
  }
}

/**
 * @param keepExact called with the wildcard URL @fastify/static will register, before it
 * does: the routing plugin adds no route at its bare prefix (README.md "Static files").
 */
export function registerStatic (app: FastifyInstance, keepExact: (url: string) => void): void {
  app.decorate('static', function serveStatic (this: FastifyInstance, prefix: string, root: string, options: StaticOptions = {}) {
    keepExact(`${prefix.endsWith('/') ? prefix : `${prefix}/`}*`)
    return this.register(fastifyStatic, { dotfiles: 'ignore', ...options, prefix, root, decorateReply: false })
  })
}
