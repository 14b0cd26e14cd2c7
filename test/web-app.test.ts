/**
 * The web app's files at `/` (WEB_APP, on by default), under the service's strict CSP. The
 * app itself is driven in Chromium by test/browser/*.test.ts.
 */
import { readdir, readFile } from 'node:fs/promises'
import t from 'tap'
import { WEB_ROOT, WEBAUTHN_BUNDLE, WEBAUTHN_SCRIPT } from '../src/plugins/web-app.js'
import { assertProblem } from './helpers/assertions.js'
import { build } from './helpers/build.js'

t.test('WEB_APP on (the default): the files at /, with the strict CSP; other paths keep the 404', async (t) => {
  const app = await build(t)
  const page = await app.inject({ method: 'GET', url: '/' })
  t.equal(page.statusCode, 200)
  t.match(page.headers['content-type'], /^text\/html/)
  t.match(page.headers['content-security-policy'], /script-src 'self'/, 'scripts from the service only')
  t.notMatch(page.headers['content-security-policy'], /script-src[^;]*unsafe-inline/, 'no inline scripts allowed')
  t.match(page.body, /<form id="login" method="post" action="\/api\/auth\/login">\s*(<!--[^>]*-->\s*)?<input type="hidden" name="redirect" value="\/">/, 'a login form that posts without JavaScript and comes back to the app (303)')
  for (const file of await readdir(WEB_ROOT)) {
    const res = await app.inject({ method: 'GET', url: `/${file}` })
    t.equal(res.statusCode, 200, file)
    t.equal(res.body, await readFile(`${WEB_ROOT}${file}`, 'utf8'), `${file}: as on disk`)
  }
  t.match((await app.inject({ method: 'GET', url: '/app.js' })).headers['content-type'], /^(text|application)\/javascript/, 'modules have a script type')
  const html = await readFile(`${WEB_ROOT}index.html`, 'utf8')
  t.notMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script')
  t.notMatch(html, /\son[a-z]+=|\sstyle=|<style/i, 'no inline event handler or style')
  assertProblem(t, await app.inject({ method: 'GET', url: '/no-such-page.html' }), 404, 'NOT_FOUND')
  assertProblem(t, await app.inject({ method: 'GET', url: '/../package.json' }), 404, 'NOT_FOUND')
})

t.test('@simplewebauthn/browser for the passkeys: one file from node_modules, cached as the app\'s files are; the QR code (a data: image) passes the CSP', async (t) => {
  const app = await build(t)
  const script = await app.inject({ method: 'GET', url: WEBAUTHN_SCRIPT })
  t.equal(script.statusCode, 200)
  t.match(script.headers['content-type'], /^(text|application)\/javascript/)
  t.equal(script.body, await readFile(WEBAUTHN_BUNDLE, 'utf8'), 'the package\'s bundle')
  t.match(script.body, /^\/\* \[@simplewebauthn\/browser@\d/, 'its banner')
  const page = await app.inject({ method: 'GET', url: '/app.js' })
  t.equal(script.headers['cache-control'], page.headers['cache-control'], 'the same cache policy as the app\'s own files')
  t.ok(script.headers.etag, 'revalidated by ETag')
  t.equal((await app.inject({ method: 'GET', url: WEBAUTHN_SCRIPT, headers: { 'if-none-match': script.headers.etag as string } })).statusCode, 304)
  t.match(page.body, `import '${WEBAUTHN_SCRIPT}'`, 'the app loads it')
  const csp = String(page.headers['content-security-policy'])
  t.match(csp, /(^|;)\s*img-src [^;]*\bdata:/, 'images from data: (the TOTP QR code)')
  t.match(csp, /(^|;)\s*script-src 'self'(;|$)/, 'scripts from the service only')
  const spec = (await app.inject({ method: 'GET', url: '/docs/json' })).json()
  t.notOk(spec.paths?.[WEBAUTHN_SCRIPT], 'not an API route')
})

t.test('WEB_APP=false: no files at /', async (t) => {
  const app = await build(t, { env: { WEB_APP: 'false' } })
  assertProblem(t, await app.inject({ method: 'GET', url: '/' }), 404, 'NOT_FOUND')
  assertProblem(t, await app.inject({ method: 'GET', url: '/app.js' }), 404, 'NOT_FOUND')
  assertProblem(t, await app.inject({ method: 'GET', url: WEBAUTHN_SCRIPT }), 404, 'NOT_FOUND')
})
