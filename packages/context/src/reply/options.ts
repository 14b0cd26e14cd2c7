/** Options of the response side of the context plugin, validated once at registration. */
import { realpathSync, statSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import type { FastifyCookieOptions } from '@fastify/cookie'
import { ContextOptionError } from './errors.js'

/** Where `reply.serveFile` and `reply.downloadFile` read files, and how they answer. */
export interface FilesOptions {
  /** The only folder files are sent from; a path that leaves it is refused with 403. */
  root: string | URL
  /** Dotfiles: 'ignore' (404, the default), 'deny' (403) or 'allow'. */
  dotfiles?: 'allow' | 'deny' | 'ignore'
  /** Cache-Control max-age in milliseconds (or an `ms` string). @default 0 */
  maxAge?: number | string
  /** Adds `immutable` to Cache-Control. @default false */
  immutable?: boolean
  /** Sends a (weak) ETag. @default true */
  etag?: boolean
  /** Sends Last-Modified. @default true */
  lastModified?: boolean
}

/** Templates for `reply.render`: @fastify/view with the Eta engine. */
export interface ViewsOptions {
  /** Folder of the `.eta` templates. */
  root: string | URL
  /** Cache compiled templates. @default NODE_ENV === 'production' */
  production?: boolean
}

export interface ReplyOptions {
  /** Enables `reply.serveFile` / `reply.downloadFile` from this folder. */
  files?: FilesOptions
  /**
   * Registers @fastify/view (Eta) for `reply.render`. Leave it out when @fastify/view is
   * registered before the context plugin (any engine).
   */
  views?: ViewsOptions
  /**
   * Options for @fastify/cookie, which the plugin registers when it is not registered yet
   * (`reply.setCookieRecord`, `reply.clearCookies`).
   */
  cookie?: FastifyCookieOptions
  /**
   * Origins (`https://app.example.com`) besides the request's own whose Referer
   * `reply.redirectBack` follows. Anything else falls back. @default []
   */
  redirectBackOrigins?: readonly string[]
}

export interface ResolvedFilesOptions {
  root: string
  /** `root` with every symbolic link resolved: files are contained by their real path. */
  realRoot: string
  dotfiles: 'allow' | 'deny' | 'ignore'
  maxAge: number | string
  immutable: boolean
  etag: boolean
  lastModified: boolean
}

export interface ResolvedReplyOptions {
  files: ResolvedFilesOptions | undefined
  views: { root: string, production: boolean } | undefined
  cookie: FastifyCookieOptions
  redirectBackOrigins: ReadonlySet<string>
}

function directory (value: unknown, name: string): string {
  const given = value instanceof URL ? fileURLToPath(value) : value
  if (typeof given !== 'string' || given === '') throw new ContextOptionError(`${name} must be a folder path`)
  const absolute = path.resolve(given)
  let isDirectory = false
  try { isDirectory = statSync(absolute).isDirectory() } catch {}
  if (!isDirectory) throw new ContextOptionError(`${name} "${absolute}" is not a folder`)
  return absolute
}

function origin (value: unknown): string {
  if (typeof value === 'string') {
    try {
      const url = new URL(value)
      if ((url.protocol === 'http:' || url.protocol === 'https:') && url.origin === value.replace(/\/$/, '')) return url.origin
    } catch {}
  }
  throw new ContextOptionError(`redirectBackOrigins: "${String(value)}" is not an origin such as https://app.example.com`)
}

function resolveFiles (files: FilesOptions): ResolvedFilesOptions {
  const dotfiles = files.dotfiles ?? 'ignore'
  if (!['allow', 'deny', 'ignore'].includes(dotfiles)) throw new ContextOptionError('files.dotfiles must be "allow", "deny" or "ignore"')
  const root = directory(files.root, 'files.root')
  return {
    root,
    realRoot: realpathSync(root),
    dotfiles,
    maxAge: files.maxAge ?? 0,
    immutable: files.immutable ?? false,
    etag: files.etag ?? true,
    lastModified: files.lastModified ?? true
  }
}

export function resolveReplyOptions (options: ReplyOptions): ResolvedReplyOptions {
  return {
    files: options.files === undefined ? undefined : resolveFiles(options.files),
    views: options.views === undefined
      ? undefined
      : { root: directory(options.views.root, 'views.root'), production: options.views.production ?? process.env.NODE_ENV === 'production' },
    cookie: { ...options.cookie },
    redirectBackOrigins: new Set((options.redirectBackOrigins ?? []).map(origin))
  }
}
