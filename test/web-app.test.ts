/**
 * The web app's files at `/` (WEB_APP, on by default), under the service's strict CSP. The
 * app itself is driven in Chromium by test/browser/*.test.ts.
 */
import { readFile } from 'node:fs/promises'
import { brotliDecompressSync, gunzipSync } from 'node:zlib'
import t from 'tap'
import { IMMUTABLE, passwordListFile, WEB_ROOT, WEBAUTHN_BUNDLE, WEBAUTHN_SCRIPT, webFiles } from '../src/plugins/web-app.js'
import { commonPasswords } from '../src/lib/password-rule.js'
import { loadConfig } from '../src/config.js'
import { assertProblem } from './helpers/assertions.js'
import { build } from './helpers/build.js'

t.test('WEB_APP on (the default): the shell at /, with the strict CSP; other paths keep the 404', async (t) => {
  const app = await build(t)
  const page = await app.inject({ method: 'GET', url: '/' })
  t.equal(page.statusCode, 200)
  t.match(page.headers['content-type'], /^text\/html/)
  t.match(page.headers['content-security-policy'], /script-src 'self'/, 'scripts from the service only')
  t.notMatch(page.headers['content-security-policy'], /script-src[^;]*unsafe-inline/, 'no inline scripts allowed')
  t.match(page.body, /<form id="login" method="post" action="\/api\/auth\/login">\s*(<!--[^>]*-->\s*)?<input type="hidden" name="redirect" value="\/#signed-in">/, 'a login form that posts without JavaScript and comes back to the app, to the message that it worked (303)')
  const html = await readFile(`${WEB_ROOT}index.html`, 'utf8')
  t.notMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script')
  t.notMatch(html, /\son[a-z]+=|\sstyle=|<style/i, 'no inline event handler or style')
  for (const url of ['/no-such-page.html', '/../package.json', '/app.js', '/assets/app.js', '/assets/app.0000000000.js']) {
    assertProblem(t, await app.inject({ method: 'GET', url }), 404, 'NOT_FOUND')
  }
})

t.test('the app\'s pages: each address serves the shell, so a reload or a link opens the page; other paths stay 404', async (t) => {
  const app = await build(t)
  const shell = (await app.inject({ method: 'GET', url: '/' })).body
  for (const url of ['/login', '/account', '/account/delete', '/security', '/products/new', '/products/42', '/products/42?from=mail', '/reset-password', '/verify-email']) {
    const page = await app.inject({ method: 'GET', url })
    t.equal(page.statusCode, 200, url)
    t.match(page.headers['content-type'], /^text\/html/, `${url}: HTML`)
    t.equal(page.headers['cache-control'], 'no-cache', `${url}: revalidated`)
    t.equal(page.body, shell, `${url}: the shell`)
  }
  for (const url of ['/products', '/products/abc', '/products/42/edit', '/products/-1', '/account/other', '/api/product/x/y', '/api/nothing', '/logins']) {
    assertProblem(t, await app.inject({ method: 'GET', url }), 404, 'NOT_FOUND')
  }
  t.equal((await app.inject({ method: 'POST', url: '/account' })).statusCode, 405, 'GET only: another method is 405')
})

t.test('page weight: the shell and every file it loads, gzip-compressed, within 60 kB', async (t) => {
  const { assets, html } = await webFiles()
  const total = [html, ...assets.values()].reduce((sum, file) => sum + file.encodings.gzip.length, 0)
  t.ok(total < 60_000, `${total} bytes`)
})

t.test('the common-password list: a hashed file of its own that the shell names but does not load, the very text the API checks', async (t) => {
  const app = await build(t)
  const shell = (await app.inject({ method: 'GET', url: '/' })).body
  const name = /<meta name="common-passwords" content="([^"]+)">/.exec(shell)?.[1]
  t.equal(name, passwordListFile().name, 'the shell names it')
  t.match(name, /^\/assets\/common-passwords\.[\w-]{10}\.txt$/, 'content-hashed')
  t.notMatch(shell, /(?:src|href)="\/assets\/common-passwords/, 'no link, preload or script loads it with the first page')
  const plain = await app.inject({ method: 'GET', url: name!, headers: { 'accept-encoding': 'identity' } })
  t.equal(plain.statusCode, 200)
  t.match(plain.headers['content-type'], /^text\/plain; charset=utf-8/)
  t.equal(plain.headers['cache-control'], IMMUTABLE, 'immutable: a new list is a new name')
  const list = commonPasswords()
  t.equal(plain.body, list.text, 'the text the API checks against')
  const lines = plain.body.trimEnd().split('\n')
  t.equal(lines.length, list.size, `${lines.length} passwords, one a line`)
  t.ok(lines.every((line, i) => line === line.toLowerCase() && (i === 0 || lines[i - 1]! < line)), 'lowercased, sorted, no repeats')
  t.ok(lines.includes('password123') && !lines.includes('123456'), 'those the length rule lets through only')
  const br = await app.inject({ method: 'GET', url: name!, headers: { 'accept-encoding': 'br, gzip' } })
  t.equal(brotliDecompressSync(br.rawPayload).toString(), plain.body, 'brotli when offered')
  t.ok(br.rawPayload.length < 60_000, `${br.rawPayload.length} bytes with brotli`)
  const gz = await app.inject({ method: 'GET', url: name!, headers: { 'accept-encoding': 'gzip' } })
  t.equal(gunzipSync(gz.rawPayload).toString(), plain.body, 'gzip otherwise')
  t.equal((await app.inject({ method: 'GET', url: name!, headers: { 'if-none-match': String(plain.headers.etag) } })).statusCode, 304, 'revalidated by its ETag')
})

t.test('CURRENCY: the shell names it for the prices; an unknown code stops the start', async (t) => {
  t.match((await (await build(t)).inject({ method: 'GET', url: '/' })).body, '<meta name="currency" content="EUR">', 'EUR by default')
  const yen = await build(t, { env: { CURRENCY: 'JPY' } })
  const page = (await yen.inject({ method: 'GET', url: '/products/1' })).body
  t.match(page, '<meta name="currency" content="JPY">', 'the configured code')
  t.notMatch(page, 'content="EUR"')
  for (const code of ['XYZ', 'eur', 'EURO']) {
    t.throws(() => loadConfig({ CURRENCY: code }, false), { name: 'ConfigError', message: /CURRENCY/ }, JSON.stringify(code))
  }
})

t.test('delivery: hashed, immutable, compressed files; a no-cache shell that names them and preloads the modules of the start', async (t) => {
  const app = await build(t)
  const { names } = await webFiles()
  const page = await app.inject({ method: 'GET', url: '/', headers: { 'accept-encoding': 'identity' } })
  t.equal(page.headers['cache-control'], 'no-cache', 'the shell is revalidated on every visit')
  t.equal((await app.inject({ method: 'GET', url: '/', headers: { 'if-none-match': String(page.headers.etag) } })).statusCode, 304, 'by its ETag')
  const linked = [...page.body.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)].map((m) => m[1]!)
  const preloaded = [...page.body.matchAll(/<link rel="modulepreload" href="([^"]+)">/g)].map((m) => m[1]!)
  const onDemand = ['/security.js', WEBAUTHN_SCRIPT]
  t.same(new Set(preloaded), new Set([...names].filter(([source]) => source.endsWith('.js') && !onDemand.includes(source)).map(([, name]) => name)), 'every module of the start preloaded: one round of script requests')
  t.same(onDemand.filter((source) => preloaded.includes(names.get(source)!)), [], 'not the security page and the passkey library, which the app imports when first needed')
  t.ok(linked.includes(names.get('/app.css')!) && linked.includes(names.get('/app.js')!), 'the shell names the hashed style sheet and app')
  t.notMatch(page.body, /"\/(app|api)\.(js|css)"/, 'and no unhashed file')

  for (const [source, name] of names) {
    t.match(name, /^\/assets\/[\w.-]+\.[\w-]{10}\.(js|css)$/, `${source}: a content-hashed name`)
    const plain = await app.inject({ method: 'GET', url: name, headers: { 'accept-encoding': 'identity' } })
    t.equal(plain.statusCode, 200, name)
    t.equal(plain.headers['cache-control'], IMMUTABLE, `${name}: immutable for a year`)
    t.equal(plain.headers.vary, 'Accept-Encoding')
    t.match(plain.headers['content-type'], source.endsWith('.js') ? /^text\/javascript/ : /^text\/css/)
    const disk = source === WEBAUTHN_SCRIPT ? await readFile(WEBAUTHN_BUNDLE, 'utf8') : await readFile(`${WEB_ROOT}${source.slice(1)}`, 'utf8')
    const unrenamed = plain.body.replace(/\/assets\/([\w-]+)\.[\w-]{10}\.js/g, (_m, base: string) => base === 'simplewebauthn-browser' ? WEBAUTHN_SCRIPT : `./${base}.js`)
    t.equal(unrenamed.replace('\'./simplewebauthn-browser.js\'', `'${WEBAUTHN_SCRIPT}'`), disk, `${name}: the file on disk, its imports renamed`)
    const br = await app.inject({ method: 'GET', url: name, headers: { 'accept-encoding': 'gzip, deflate, br' } })
    t.equal(br.headers['content-encoding'], 'br', 'brotli when offered')
    t.equal(brotliDecompressSync(br.rawPayload).toString(), plain.body, 'the same bytes')
    t.ok(br.rawPayload.length < plain.rawPayload.length || plain.rawPayload.length < 200, `${br.rawPayload.length} < ${plain.rawPayload.length} bytes`)
    const gz = await app.inject({ method: 'GET', url: name, headers: { 'accept-encoding': 'gzip' } })
    t.same([gz.headers['content-encoding'], gunzipSync(gz.rawPayload).toString()], ['gzip', plain.body], 'gzip otherwise')
  }
  const app2 = (await app.inject({ method: 'GET', url: names.get('/app.js')! })).body
  t.match(app2, names.get('/api.js')!, 'the app imports api.js by its hashed name')
  t.ok(app2.includes(`import('${names.get('/security.js')!}')`), 'and the security page, on demand, by its own')
  const security = (await app.inject({ method: 'GET', url: names.get('/security.js')! })).body
  t.match(security, names.get(WEBAUTHN_SCRIPT)!, 'the security page imports the passkey library by its own')
})

t.test('@simplewebauthn/browser for the passkeys: the package\'s bundle from node_modules; the QR code (a data: image) passes the CSP', async (t) => {
  const app = await build(t)
  const { names } = await webFiles()
  const script = await app.inject({ method: 'GET', url: names.get(WEBAUTHN_SCRIPT)!, headers: { 'accept-encoding': 'identity' } })
  t.equal(script.statusCode, 200)
  t.equal(script.body, await readFile(WEBAUTHN_BUNDLE, 'utf8'), 'the package\'s bundle')
  t.match(script.body, /^\/\* \[@simplewebauthn\/browser@\d/, 'its banner')
  const csp = String(script.headers['content-security-policy'])
  t.match(csp, /(^|;)\s*img-src [^;]*\bdata:/, 'images from data: (the TOTP QR code)')
  t.match(csp, /(^|;)\s*script-src 'self'(;|$)/, 'scripts from the service only')
  const spec = (await app.inject({ method: 'GET', url: '/docs/json' })).json()
  t.notOk(Object.keys(spec.paths ?? {}).some((path) => path.startsWith('/assets')), 'not an API route')
})

t.test('WEB_APP=false: no files at /', async (t) => {
  const app = await build(t, { env: { WEB_APP: 'false' } })
  assertProblem(t, await app.inject({ method: 'GET', url: '/' }), 404, 'NOT_FOUND')
  const { names } = await webFiles()
  assertProblem(t, await app.inject({ method: 'GET', url: names.get('/app.js')! }), 404, 'NOT_FOUND')
  assertProblem(t, await app.inject({ method: 'GET', url: names.get(WEBAUTHN_SCRIPT)! }), 404, 'NOT_FOUND')
})
