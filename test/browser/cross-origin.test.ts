/**
 * Pages of other origins calling the API in Chromium: a listed front-end (CORS_ORIGINS) reads
 * answers and exposed headers and sends a bearer-authenticated PATCH after a preflight; an
 * unlisted origin's page cannot read anything and its preflighted change is never sent; and
 * attacker pages (a form that submits itself, no-cors fetches) cannot use a logged-in
 * victim's session cookies to change anything.
 *
 * The origins, all on loopback so no name resolution is involved for the service:
 * - the service: http://127.0.0.1:<api port>
 * - the front-end: http://127.0.0.1:<front port>, listed. Same site as the service (a site
 *   ignores ports), so this is the "another origin, same site" row of README "Browsers".
 * - the attacker, same site: http://127.0.0.1:<evil port>, not listed. Chromium sends the
 *   SameSite=Strict session cookies with its requests (same site), so only the service's
 *   origin check (src/modules/identity/csrf.ts) stands between it and the session: the test that matters.
 * - the attacker, cross-site: http://localhost:<evil port>. `localhost` and `127.0.0.1` are
 *   different sites, so Chromium withholds the SameSite=Strict cookies: the request arrives
 *   unauthenticated (401), the defence in depth that a same-site attacker does not face.
 * Then a front-end on another site (http://localhost:<port>) in cookie mode, with
 * COOKIE_SAMESITE=none: in a profile that allows third-party cookies and in one that blocks
 * them; and a third site ([::1]) whose form the origin check alone must refuse.
 */
import { createServer, type Server } from 'node:http'
import t from 'tap'
import type { Page } from 'playwright-core'
import { chromiumAvailable, flow, site, thirdPartyCookiesAllowed } from '../helpers/chromium.js'
import { registerAndLogin } from '../helpers/build.js'
import { query } from '../helpers/database.js'

/** A static page server: `pages` maps a path to its HTML (set by the test before a visit). */
async function pageServer (t: { teardown: (fn: () => unknown) => void }, host: string): Promise<{ pages: Map<string, string>, port: number }> {
  const pages = new Map<string, string>()
  const server: Server = createServer((request, response) => {
    const html = pages.get(new URL(request.url ?? '/', 'http://x').pathname)
    response.writeHead(html === undefined ? 404 : 200, { 'content-type': 'text/html; charset=utf-8' })
    response.end(html ?? 'not found')
  })
  await new Promise<void>((resolve) => server.listen(0, host, resolve))
  t.teardown(async () => { await new Promise((resolve) => server.close(resolve)) })
  return { pages, port: (server.address() as { port: number }).port }
}

interface Seen { method: string, url: string, origin?: string, status?: number }

/**
 * Every request that reaches the service's socket, with its Origin and, once answered, its
 * status: an extra listener on the Node server, which only watches.
 */
function watch (server: Server): () => Seen[] {
  const seen: Seen[] = []
  server.prependListener('request', (request, response) => {
    const entry: Seen = { method: request.method ?? '', url: request.url ?? '', origin: request.headers.origin }
    seen.push(entry)
    response.on('finish', () => { entry.status = response.statusCode })
  })
  return () => seen.map((entry) => ({ ...entry }))
}

/** An HTML page whose form posts itself to `action` on load (a classic CSRF attack). */
function selfSubmittingForm (action: string, enctype: string, fields: Record<string, string>): string {
  const inputs = Object.entries(fields).map(([name, value]) => `<input type="hidden" name='${name}' value='${value}'>`).join('')
  return `<!doctype html><title>win a prize</title><form method="post" action="${action}" enctype="${enctype}">${inputs}</form><script>document.forms[0].submit()</script>`
}

/** Runs `fetch` in the page and reports what the page itself can see. */
async function pageFetch (page: Page, url: string, init: Record<string, unknown> = {}): Promise<{ status?: number, type?: string, body?: unknown, headers?: Record<string, string | null>, error?: string }> {
  return await page.evaluate(async ([url, init]) => {
    try {
      const response = await fetch(url as string, init as RequestInit)
      const text = response.type === 'opaque' ? '' : await response.text()
      return {
        status: response.status,
        type: response.type,
        body: text === '' ? null : JSON.parse(text),
        headers: { 'x-request-id': response.headers.get('x-request-id'), 'content-type': response.headers.get('content-type') }
      }
    } catch (error) {
      return { error: `${(error as Error).name}: ${(error as Error).message}` }
    }
  }, [url, init] as const)
}

if (chromiumAvailable(t)) {
  t.test('pages of other origins calling the API', async (t) => {
    const front = await pageServer(t, '127.0.0.1')
    // The attacker's server answers on every loopback address: Chromium may resolve
    // `localhost` to ::1 or 127.0.0.1.
    const evil = await pageServer(t, '::')
    const frontOrigin = `http://127.0.0.1:${front.port}`
    const { app, base, context } = await site(t, { env: { CORS_ORIGINS: frontOrigin } })
    const requests = watch(app.server)
    front.pages.set('/', '<!doctype html><title>front-end</title><p>front-end</p>')
    evil.pages.set('/', '<!doctype html><title>not listed</title><p>not listed</p>')
    const user = await registerAndLogin(app)
    await app.inject({ method: 'POST', url: '/api/product', headers: user.auth, payload: { title: 'Desk lamp', amount: 2599 } })
    const names = async (): Promise<string | null> => (await app.inject({ method: 'GET', url: `/api/user/${user.id}`, headers: user.auth })).json().names

    await flow(t, await context(), 'a listed origin reads the product list and PATCHes with a bearer token after a preflight', async (t, page) => {
      await page.goto(`${frontOrigin}/`)
      const list = await pageFetch(page, `${base}/api/product`)
      t.equal(list.status, 200, 'GET /api/product')
      t.equal(list.type, 'cors', 'a CORS answer the page may read')
      t.match(list.body, { items: [{ title: 'Desk lamp' }] }, 'the JSON body is readable')
      const patch = await pageFetch(page, `${base}/api/user/${user.id}`, {
        method: 'PATCH',
        headers: { authorization: user.auth.authorization, 'content-type': 'application/json' },
        body: JSON.stringify({ names: 'Front End' })
      })
      t.equal(patch.status, 200, JSON.stringify(patch))
      t.match(patch.body, { user: { id: user.id, names: 'Front End' } }, 'the answer is readable')
      t.match(patch.headers?.['x-request-id'], /\S/, 'X-Request-Id is exposed to the page')
      t.equal(await names(), 'Front End', 'the change is stored')
      const preflight = requests().find((r) => r.method === 'OPTIONS' && r.url === `/api/user/${user.id}`)
      t.match(preflight, { origin: frontOrigin, status: 204 }, 'Chromium sent a preflight, answered 204')
      const sent = requests().filter((r) => r.method === 'PATCH')
      t.match(sent, [{ origin: frontOrigin, status: 200 }], 'then the PATCH')
    })

    await flow(t, await context(), 'an unlisted origin reads nothing, and its preflighted PATCH is never sent', async (t, page) => {
      const evilOrigin = `http://127.0.0.1:${evil.port}`
      await page.goto(`${evilOrigin}/`)
      const list = await pageFetch(page, `${base}/api/product`)
      t.match(list, { error: /^TypeError/ }, 'the GET fails in the page (no CORS header)')
      t.match(requests().filter((r) => r.method === 'GET' && r.origin === evilOrigin), [{ status: 200 }], 'the service answered, but the browser kept the answer from the page')
      const patch = await pageFetch(page, `${base}/api/user/${user.id}`, {
        method: 'PATCH',
        headers: { authorization: user.auth.authorization, 'content-type': 'application/json' },
        body: JSON.stringify({ names: 'Not Listed' })
      })
      t.match(patch, { error: /^TypeError/ }, 'the PATCH fails in the page')
      t.match(requests().filter((r) => r.origin === evilOrigin && r.method !== 'GET'), [{ method: 'OPTIONS', status: 403 }], 'only the preflight reached the service, refused 403')
      t.equal(await names(), 'Front End', 'unchanged')
    })

    // The victim logs in by cookie on the service's own origin; attacker pages then open in
    // the same browser context, so Chromium holds the victim's cookies while they run.
    const victim = await registerAndLogin(app)
    const victimId = victim.id
    const owned = (await app.inject({ method: 'POST', url: '/api/product', headers: victim.auth, payload: { title: 'Victim lamp', amount: 1 } })).json().id as number
    const browser = await context()
    const products = async (): Promise<number> => Number((await query<{ n: string }>(app, 'SELECT count(*) AS n FROM products WHERE creator_id = $1', [victimId]))[0]!.n)
    await flow(t, browser, 'the victim logs in by cookie', async (t, page) => {
      await page.goto('/')
      const login = await pageFetch(page, '/api/auth/login', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: victim.username, password: victim.password, mode: 'cookie' }) })
      t.match(login, { status: 200, body: { mode: 'cookie' } }, 'a cookie-mode login from the service\'s own page')
      t.equal((await browser.cookies(base + '/api')).length, 1, 'the access cookie is set')
    })
    const sessionWorks = async (page: Page): Promise<number | undefined> => {
      await page.goto('/')
      return (await pageFetch(page, `/api/user/${victimId}`)).status
    }

    for (const [name, origin, refusal] of [
      ['same site (another port of 127.0.0.1): the cookies are sent, the origin check refuses', `http://127.0.0.1:${evil.port}`, { status: 403, code: 'CSRF_REJECTED' }],
      ['cross-site (localhost): the SameSite=Strict cookies are withheld', `http://localhost:${evil.port}`, { status: 401, code: undefined }]
    ] as const) {
      await flow(t, browser, `attacker pages, ${name}`, async (t, page) => {
        const before = requests().length
        // A form can only GET or POST, with a urlencoded, multipart or text/plain body;
        // text/plain is the classic way to smuggle a JSON body.
        evil.pages.set('/form-product', selfSubmittingForm(`${base}/api/product`, 'text/plain', { '{"title":"pwned","amount":1,"x":"': '"}' }))
        const [formAnswer] = await Promise.all([
          page.waitForResponse((r) => r.url() === `${base}/api/product` && r.request().method() === 'POST'),
          page.goto(`${origin}/form-product`)
        ])
        t.equal(formAnswer.status(), refusal.status, 'the self-submitting form POST /api/product is refused')
        if (refusal.code !== undefined) t.match(await formAnswer.text(), `<code>${refusal.code}</code>`, 'by the origin check (the browser shows the problem as a page): so the cookie was sent')

        evil.pages.set('/form-logout', selfSubmittingForm(`${base}/api/auth/logout`, 'application/x-www-form-urlencoded', {}))
        const [logoutAnswer] = await Promise.all([
          page.waitForResponse((r) => r.url() === `${base}/api/auth/logout`),
          page.goto(`${origin}/form-logout`)
        ])
        t.equal(logoutAnswer.status(), refusal.status, 'the self-submitting form POST /api/auth/logout is refused')

        await page.goto(`${origin}/`)
        // The service's Cross-Origin-Resource-Policy: same-origin makes Chromium drop these
        // answers before the page (ERR_BLOCKED_BY_RESPONSE): what the service answered is
        // read on its side.
        const sentBefore = requests().length
        const noCors = await pageFetch(page, `${base}/api/product`, { method: 'POST', mode: 'no-cors', credentials: 'include', headers: { 'content-type': 'text/plain' }, body: '{"title":"pwned","amount":1}' })
        t.notOk(noCors.status, `the no-cors POST gives the page nothing (${JSON.stringify(noCors)})`)
        await pageFetch(page, `${base}/api/auth/logout`, { method: 'POST', mode: 'no-cors', credentials: 'include' })
        t.match(requests().slice(sentBefore), [
          { method: 'POST', url: '/api/product', origin, status: refusal.status },
          { method: 'POST', url: '/api/auth/logout', origin, status: refusal.status }
        ], 'the no-cors POSTs reached the service and were refused')

        // DELETE is not a method no-cors allows, so the attacker must ask for CORS: the
        // preflight is refused and the DELETE never leaves the browser.
        const productId = owned
        t.match(await pageFetch(page, `${base}/api/product/${productId}`, { method: 'DELETE', mode: 'no-cors', credentials: 'include' }), { error: /^TypeError/ }, 'no-cors refuses DELETE in the page')
        t.match(await pageFetch(page, `${base}/api/product/${productId}`, { method: 'DELETE', credentials: 'include' }), { error: /^TypeError/ }, 'a CORS DELETE fails in the page')
        const reached = requests().slice(before)
        t.same(reached.filter((r) => r.method === 'DELETE'), [], 'no DELETE reached the service')
        t.match(reached.filter((r) => r.method === 'OPTIONS'), [{ url: `/api/product/${productId}`, status: 403 }], 'only its preflight, refused')

        t.equal(await products(), 1, 'no product was created for the victim, and theirs is still there')
        t.equal(await sessionWorks(page), 200, 'the victim\'s cookie session still works: not logged out')
      })
    }
  })

  // README "Browsers", the "another site" row: a front-end at http://localhost:<port> calling
  // the service at http://127.0.0.1:<port> (different sites) in cookie mode.
  t.test('a front-end on another site in cookie mode (COOKIE_SAMESITE=none)', async (t) => {
    const front = await pageServer(t, '::')
    const evil = await pageServer(t, '::')
    const frontOrigin = `http://localhost:${front.port}`
    const { app, base, context } = await site(t, { env: { CORS_ORIGINS: frontOrigin, COOKIE_SAMESITE: 'none' } })
    const requests = watch(app.server)
    front.pages.set('/', '<!doctype html><title>front-end</title><p>front-end</p>')
    const user = await registerAndLogin(app)
    const names = async (): Promise<string | null> => (await app.inject({ method: 'GET', url: `/api/user/${user.id}`, headers: user.auth })).json().names
    const logIn = async (page: Page) => await pageFetch(page, `${base}/api/auth/login`, {
      method: 'POST',
      credentials: 'include',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: user.username, password: user.password, mode: 'cookie' })
    })

    await flow(t, await thirdPartyCookiesAllowed(t, base), 'where the browser allows third-party cookies: log in, read and change by cookie', async (t, page) => {
      await page.goto(`${frontOrigin}/`)
      t.match(await logIn(page), { status: 200, body: { mode: 'cookie', userId: user.id } }, 'login, cookie mode')
      t.match(await pageFetch(page, `${base}/api/user/${user.id}`, { credentials: 'include' }), { status: 200, body: { username: user.username } }, 'the cookie authenticates a read')
      const patch = await pageFetch(page, `${base}/api/user/${user.id}`, { method: 'PATCH', credentials: 'include', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ names: 'Other Site' }) })
      t.equal(patch.status, 200, `a cookie-authenticated PATCH from the listed origin (${JSON.stringify(patch)})`)
      t.equal(await names(), 'Other Site', 'stored')

      // SameSite=None cookies go with every site's requests now: the origin check alone
      // stands between another site's page and the session.
      const evilOrigin = `http://[::1]:${evil.port}`
      evil.pages.set('/form-product', selfSubmittingForm(`${base}/api/product`, 'text/plain', { '{"title":"pwned","amount":1,"x":"': '"}' }))
      const [answer] = await Promise.all([
        page.waitForResponse((r) => r.url() === `${base}/api/product` && r.request().method() === 'POST'),
        page.goto(`${evilOrigin}/form-product`)
      ])
      t.equal(answer.status(), 403, 'an unlisted site\'s self-submitting form is refused')
      t.match(await answer.text(), '<code>CSRF_REJECTED</code>', 'by the origin check, so the cookie went with it')
      t.match(requests().filter((r) => r.origin === evilOrigin), [{ method: 'POST', url: '/api/product', status: 403 }], 'the one request of that site, refused')
      t.equal((await app.inject({ method: 'GET', url: '/api/product?limit=100' })).json().items.length, 0, 'nothing created')
    })

    await flow(t, await context(), 'where the browser blocks third-party cookies (Safari, private windows): logged in, but the cookies never come back', async (t, page) => {
      await page.goto(`${frontOrigin}/`)
      t.match(await logIn(page), { status: 200 }, 'the login itself succeeds')
      t.match(await pageFetch(page, `${base}/api/user/${user.id}`, { credentials: 'include' }), { status: 401 }, 'the next request carries no cookie: 401, hence token mode for such front-ends')
    })
  })
}
