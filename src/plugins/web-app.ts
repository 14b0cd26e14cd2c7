/**
 * The web app (web/: plain HTML, CSS and JavaScript modules, no build step) at `/`.
 *
 * Its files are read once at start and served from memory, as a build step would leave them:
 * - each script and style sheet under a content-hashed name, `/assets/<name>.<hash>.<ext>`,
 *   `Cache-Control: public, max-age=31536000, immutable` (a new version is a new name), the
 *   imports between modules rewritten to those names (`from './api.js'`, leaves first);
 * - the HTML shell `no-cache` (revalidated by ETag), naming the hashed files, with a
 *   `<link rel="modulepreload">` for every module the app's start imports, so the browser
 *   fetches them all at once: the request chain is HTML -> scripts -> API, never script ->
 *   script. What the app loads on demand (`import()`: the security page and the passkey
 *   library) is not preloaded: a page that does not need it never fetches it;
 * - each gzip- and brotli-compressed at start, the encoding negotiated (`Vary: Accept-Encoding`);
 * - the common-password list (src/lib/password-rule.ts) as one more hashed file, named in the
 *   shell's `<meta name="common-passwords">` and fetched by the app only when a new-password
 *   field is first focused, so it is no part of the first page; compressed at its first
 *   request, off the event loop (brotli's best quality costs about 0.8 s of CPU on its 168 kB).
 *   Only these files: API answers stay uncompressed (a compressed answer that carries a
 *   secret beside what an attacker sends can leak it by its length: BREACH).
 * Any other path keeps the service's own 404. `web/` sits beside `src/` and `dist/`, so
 * both resolve it.
 */
import { createHash } from 'node:crypto'
import { readdir, readFile } from 'node:fs/promises'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { brotliCompress, brotliCompressSync, constants, gzip, gzipSync } from 'node:zlib'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import context from '@user-product-service/context'
import { commonPasswords } from '../lib/password-rule.js'
import { NotFound } from '../lib/problem.js'

export const WEB_ROOT = fileURLToPath(new URL('../../web/', import.meta.url))
/** The paths of the links in the service's e-mail (src/modules/users: password reset, e-mail verification). */
export const LINK_PAGES = ['/reset-password', '/verify-email']
/**
 * The app's own pages (web/app.js routes them with the History API): each address serves the
 * shell, so a reload or a shared link opens the page itself. Any other path keeps the 404.
 */
export const APP_PAGES = ['/', '/index.html', '/login', '/account', '/account/delete', '/security', '/products/new', '/products/:id(^\\d+$)', ...LINK_PAGES]
/** The name the app imports @simplewebauthn/browser (passkeys) by: its hashed file is served instead. */
export const WEBAUTHN_SCRIPT = '/vendor/simplewebauthn-browser.js'
/**
 * The package's one-file browser bundle, found the way Node resolves the package (its `esm/`
 * entry, then the bundle beside it): from src/, dist/ and the image's production node_modules alike.
 */
export const WEBAUTHN_BUNDLE = fileURLToPath(new URL('../dist/bundle/index.umd.min.js', import.meta.resolve('@simplewebauthn/browser')))

export const IMMUTABLE = 'public, max-age=31536000, immutable'
const TYPES: Record<string, string> = { '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8', '.html': 'text/html; charset=utf-8', '.txt': 'text/plain; charset=utf-8' }
/** A module specifier in an import or export (`from './api.js'`, `import '/vendor/x.js'`, `import('./x.js')`). */
const IMPORT = /(\bfrom\s*|\bimport\s*\(?\s*)(['"])([^'"]+\.js)\2/g

export interface WebFile {
  type: string
  etag: string
  /** The bytes, then compressed: what each Content-Encoding sends. */
  encodings: { identity: Buffer, br: Buffer, gzip: Buffer }
}

const brotliOptions = (identity: Buffer) => ({ params: { [constants.BROTLI_PARAM_QUALITY]: 11, [constants.BROTLI_PARAM_SIZE_HINT]: identity.length } })
const etagOf = (identity: Buffer): string => `"${createHash('sha256').update(identity).digest('base64url').slice(0, 22)}"`
const hashedName = (source: string, etag: string): string => `/assets/${path.basename(source, path.extname(source))}.${etag.slice(1, 11)}${path.extname(source)}`

function webFile (name: string, text: string): WebFile {
  const identity = Buffer.from(text)
  return {
    type: TYPES[path.extname(name)] ?? 'application/octet-stream',
    etag: etagOf(identity),
    encodings: { identity, br: brotliCompressSync(identity, brotliOptions(identity)), gzip: gzipSync(identity, { level: 9 }) }
  }
}

let passwordList: { name: string, file: () => Promise<WebFile> } | undefined

/** The common-password list's hashed name, and the file, compressed at its first request (once per process). */
export function passwordListFile (): { name: string, file: () => Promise<WebFile> } {
  if (passwordList !== undefined) return passwordList
  const identity = Buffer.from(commonPasswords().text)
  const etag = etagOf(identity)
  let file: Promise<WebFile> | undefined
  const compress = async (): Promise<WebFile> => {
    const [br, gz] = await Promise.all([promisify(brotliCompress)(identity, brotliOptions(identity)), promisify(gzip)(identity, { level: 9 })])
    return { type: TYPES['.txt']!, etag, encodings: { identity, br, gzip: gz } }
  }
  passwordList = {
    name: hashedName('/common-passwords.txt', etag),
    file: async () => await (file ??= compress())
  }
  return passwordList
}

/** The app's files as served: the hashed assets by path, the HTML shell, and the hashed path of each source file. */
export async function webFiles (currency = 'EUR'): Promise<{ assets: Map<string, WebFile>, html: WebFile, names: Map<string, string> }> {
  const sources = new Map<string, string>()
  for (const file of await readdir(WEB_ROOT)) {
    if (file.endsWith('.js') || file.endsWith('.css')) sources.set(`/${file}`, await readFile(path.join(WEB_ROOT, file), 'utf8'))
  }
  sources.set(WEBAUTHN_SCRIPT, await readFile(WEBAUTHN_BUNDLE, 'utf8'))

  const assets = new Map<string, WebFile>()
  const names = new Map<string, string>()
  // Each module's static imports (`from`, `import '...'`; not `import()`), by source.
  const imports = new Map<string, string[]>()
  const resolve = (specifier: string, from: string): string => new URL(specifier, `http://app${from}`).pathname
  // A module's name hashes its text with its imports already renamed: a change anywhere
  // below it renames it too, so no browser ever pairs a new module with an old one.
  function add (source: string): string {
    const known = names.get(source)
    if (known !== undefined) return known
    const text = sources.get(source)
    if (text === undefined) throw new Error(`web/: ${source} is imported but is not one of the app's files`)
    const isModule = source.endsWith('.js') && source !== WEBAUTHN_SCRIPT
    const served = isModule
      ? text.replace(IMPORT, (_match, keyword: string, quote: string, specifier: string) => {
        const imported = resolve(specifier, source)
        if (!keyword.includes('(')) imports.set(source, [...imports.get(source) ?? [], imported])
        return `${keyword}${quote}${add(imported)}${quote}`
      })
      : text
    const file = webFile(source, served)
    const name = hashedName(source, file.etag)
    names.set(source, name)
    assets.set(name, file)
    return name
  }
  for (const source of sources.keys()) add(source)

  let html = await readFile(path.join(WEB_ROOT, 'index.html'), 'utf8')
  html = html.replace(/(\s(?:href|src)=")(\/[^"]+\.(?:js|css))"/g, (match, attribute: string, source: string) => {
    const name = names.get(source)
    return name === undefined ? match : `${attribute}${name}"`
  })
  // The prices' currency (CURRENCY), read by the app from the shell: no request before the first page.
  html = html.replace(/<meta name="currency" content="[A-Z]{3}">/, `<meta name="currency" content="${currency}">`)
  html = html.replace(/<meta name="common-passwords" content="[^"]*">/, `<meta name="common-passwords" content="${passwordListFile().name}">`)
  const started = new Set<string>()
  const start = (source: string): void => {
    if (started.has(source)) return
    started.add(source)
    for (const imported of imports.get(source) ?? []) start(imported)
  }
  start('/app.js')
  const preload = [...started].map((source) => `<link rel="modulepreload" href="${names.get(source)!}">`).join('\n')
  html = html.replace('</head>', `${preload}\n</head>`)
  return { assets, html: webFile('index.html', html), names }
}

async function send (request: FastifyRequest, reply: FastifyReply, file: WebFile, cacheControl: string): Promise<FastifyReply> {
  reply.header('cache-control', cacheControl).header('etag', file.etag).header('vary', 'Accept-Encoding').type(file.type)
  if (request.fresh()) return await reply.code(304).send()
  // No Accept-Encoding allows any coding (RFC 9110 12.5.3), but a client that sends none
  // (curl, a script) expects the bytes as they are.
  const coding = request.headers['accept-encoding'] === undefined ? 'identity' : request.acceptsEncodings('br', 'gzip', 'identity') as keyof WebFile['encodings'] | ''
  const body = file.encodings[coding === '' ? 'identity' : coding]
  if (coding === 'br' || coding === 'gzip') reply.header('content-encoding', coding)
  return await reply.header('content-length', body.length).send(body)
}

export interface WebAppOptions {
  /** ISO 4217 code of the products' amounts (CURRENCY). */
  currency: string
}

async function webApp (app: FastifyInstance, options: WebAppOptions): Promise<void> {
  if (!/^[A-Z]{3}$/.test(options.currency)) throw new Error(`web-app: currency must be an ISO 4217 code, not ${JSON.stringify(options.currency)}`)
  const { assets, html } = await webFiles(options.currency)
  const list = passwordListFile()
  // The context plugin (validators, encoding negotiation) for these routes only.
  await app.register(async function files (scope) {
    await scope.register(context, { rawBody: false })
    const shell = async (request: FastifyRequest, reply: FastifyReply) => await send(request, reply, html, 'no-cache')
    // The pages the e-mailed links open (`/reset-password#token=...`, `/verify-email#token=...`)
    // are the app itself: it reads the token from the fragment, which the browser never sends,
    // so no log, proxy or Referer sees it.
    for (const url of APP_PAGES) scope.get(url, { schema: { hide: true } }, shell)
    scope.get<{ Params: { name: string } }>('/assets/:name', { schema: { hide: true } }, async (request, reply) => {
      const asked = `/assets/${request.params.name}`
      const file = asked === list.name ? await list.file() : assets.get(asked)
      if (file === undefined) throw new NotFound('No such file of the web app')
      return await send(request, reply, file, IMMUTABLE)
    })
  })
}

export default fp(webApp, { name: 'web-app', fastify: '5.x' })
