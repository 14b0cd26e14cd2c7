/**
 * The OpenAPI page (/docs, Swagger UI) in Chromium, used as a reader would: "Try it out" to
 * register and log in (token mode), the Authorize dialog with the bearer token, an
 * authorized GET /api/user/{id}, a product, and an image upload through the file picker.
 * The statuses the page shows are checked, and the state on the service's side; the page
 * must run without a CSP violation (they show as console errors).
 */
import t from 'tap'
import type { Page } from 'playwright-core'
import { chromiumAvailable, flow, site } from '../helpers/chromium.js'
import { newUser } from '../helpers/build.js'
import { query } from '../helpers/database.js'

/** A 1x1 PNG. */
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64')

/** The operation's block, opened, with "Try it out" pressed. */
async function tryOut (page: Page, tag: string, operationId: string) {
  const block = page.locator(`#operations-${tag}-${operationId}`)
  await block.locator('.opblock-summary').first().click()
  await block.getByRole('button', { name: 'Try it out' }).click()
  return block
}

/** Presses Execute and returns the status the page shows and the answer as the browser got it. */
async function execute (page: Page, block: ReturnType<Page['locator']>, path: RegExp) {
  const [answer] = await Promise.all([
    page.waitForResponse((r) => path.test(new URL(r.url()).pathname) && r.request().method() !== 'OPTIONS'),
    block.getByRole('button', { name: 'Execute' }).click()
  ])
  const shown = block.locator('.live-responses-table tr.response .response-col_status').first()
  await shown.waitFor()
  return { shown: (await shown.textContent())?.trim(), answer }
}

if (chromiumAvailable(t)) {
  t.test('the OpenAPI page\'s try-it-out', async (t) => {
    const { app, context } = await site(t)
    const browser = await context()
    const user = newUser()
    let token = ''
    let userId = 0
    let productId = 0
    // One page for every step: the authorization the dialog sets lives in the page.
    await flow(t, browser, 'Swagger UI', async (t, page, consoleLines) => {
      await t.test('register and log in with "Try it out"', async (t: any) => {
        await page.goto('/docs')
        await page.locator('#operations-auth-register').waitFor()
        const register = await tryOut(page, 'auth', 'register')
        await register.locator('textarea.body-param__text').fill(JSON.stringify(user))
        const registered = await execute(page, register, /^\/api\/auth\/register$/)
        t.equal(registered.shown, '201', 'the page shows 201')
        const [stored] = await query<{ id: number }>(app, 'SELECT id FROM users WHERE username = $1', [user.username])
        t.ok(stored, 'the user exists')
        userId = stored!.id

        const login = await tryOut(page, 'auth', 'login')
        await login.locator('textarea.body-param__text').fill(JSON.stringify({ username: user.username, password: user.password }))
        const loggedIn = await execute(page, login, /^\/api\/auth\/login$/)
        t.equal(loggedIn.shown, '200', 'the page shows 200')
        const body = await loggedIn.answer.json()
        t.match(body, { mode: 'token', token: /\./ }, 'token mode')
        token = body.token
        t.match(await login.locator('.live-responses-table tr.response .response-col_description').first().textContent(), token.slice(0, 20), 'the token is shown in the page')
      })

      await t.test('authorize with the bearer token, then an authorized GET /api/user/{id}', async (t: any) => {
        await page.locator('.auth-wrapper').getByRole('button', { name: /Authorize/ }).click()
        const dialog = page.locator('.modal-ux')
        // By its heading: cookieAuth's description names bearerAuth too.
        const bearer = dialog.locator('.auth-container').filter({ has: page.locator('h4', { hasText: /^\s*bearerAuth/ }) })
        await bearer.locator('input').fill(token)
        await bearer.locator('button', { hasText: 'Authorize' }).click()
        await t.resolves(bearer.locator('button', { hasText: 'Logout' }).waitFor(), 'the dialog shows bearerAuth authorized')
        await bearer.locator('button.btn-done').click()
        await dialog.waitFor({ state: 'detached' })

        const get = await tryOut(page, 'users', 'getUser')
        await get.locator('tr[data-param-name="id"] input').fill(String(userId))
        const got = await execute(page, get, new RegExp(`^/api/user/${userId}$`))
        t.equal(got.shown, '200', 'the page shows 200')
        t.equal(got.answer.request().headers().authorization, `Bearer ${token}`, 'the page sent the bearer token')
        t.match(await got.answer.json(), { id: userId, username: user.username }, 'the user\'s record')
      })

      await t.test('create a product, then upload its image with the file picker', async (t: any) => {
        const create = await tryOut(page, 'products', 'createProduct')
        await create.locator('textarea.body-param__text').fill(JSON.stringify({ title: 'Desk lamp', amount: 2599 }))
        const created = await execute(page, create, /^\/api\/product$/)
        t.equal(created.shown, '201', 'the page shows 201')
        productId = (await created.answer.json()).id
        t.match((await query(app, 'SELECT title, creator_id AS "creatorId" FROM products WHERE id = $1', [productId]))[0], { title: 'Desk lamp', creatorId: userId }, 'stored, owned by the user')

        const upload = await tryOut(page, 'products', 'uploadProductImage')
        await upload.locator('tr[data-param-name="id"] input').fill(String(productId))
        const picker = upload.locator('input[type=file]')
        t.equal(await picker.count(), 1, 'the multipart body offers a file picker')
        await picker.setInputFiles({ name: 'lamp.png', mimeType: 'image/png', buffer: PNG })
        const uploaded = await execute(page, upload, new RegExp(`^/api/product/${productId}/image$`))
        t.equal(uploaded.shown, '201', 'the page shows 201: the first image of the product')
        t.match((await query(app, 'SELECT image_type AS "imageType", image_size AS "imageSize" FROM products WHERE id = $1', [productId]))[0], { imageType: 'image/png', imageSize: PNG.length }, 'the image is stored')
        const image = await app.inject({ method: 'GET', url: `/api/product/${productId}/image` })
        t.same(image.rawPayload, PNG, 'the same bytes are served')
      })

      t.same(consoleLines.filter((line: string) => /content security policy|^(error|warning|pageerror):/i.test(line)), [], 'no CSP violation, error or warning in the console')
    })
  })
}
