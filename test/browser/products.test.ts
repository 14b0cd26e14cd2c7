/**
 * The web app's products in Chromium, on a phone-width screen: the paginated list, creating
 * a product with an image (previewed before the upload) and a price in euros, its thumbnail
 * in the list, a refused image shown as the problem's detail, deleting one's own product
 * from its page (after a confirmation), and the catalogue's CSV download.
 */
import { readFile } from 'node:fs/promises'
import t from 'tap'
import { chromiumAvailable, flow, site } from '../helpers/chromium.js'
import { registerAndLogin } from '../helpers/build.js'

/** A 1x1 PNG. */
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64')

if (chromiumAvailable(t)) {
  t.test('products in the web app', async (t) => {
    const { app, context } = await site(t)
    // Twelve products of someone else: more than the app's page of ten.
    const other = await registerAndLogin(app)
    for (let i = 1; i <= 12; i++) {
      await app.inject({ method: 'POST', url: '/api/product', headers: other.auth, payload: { title: `Seeded ${i}`, amount: i } })
    }
    const me = await registerAndLogin(app)
    const phone = await context({ viewport: { width: 375, height: 740 }, isMobile: true, hasTouch: true })

    await flow(t, phone, 'a visitor sees the first page, then the next, and no create form', async (t, page) => {
      await page.goto('/')
      const items = page.locator('#list > li')
      await t.resolves(items.nth(9).waitFor())
      t.equal(await items.count(), 10, 'a page of ten')
      t.notOk(await page.locator('#create').isVisible(), 'creating needs a login')
      t.notOk(await page.getByRole('link', { name: 'New product' }).isVisible(), 'so it is not offered')
      t.equal(await page.getByRole('button', { name: /^Delete/ }).count(), 0, 'nothing to delete')
      await page.getByRole('button', { name: 'More products' }).click()
      await t.resolves(items.nth(11).waitFor())
      t.equal(await items.count(), 12)
      t.equal(await page.evaluate('document.activeElement.textContent'), await items.nth(10).getByRole('heading').textContent(), 'focus on the first product of the new page')
      t.notOk(await page.getByRole('button', { name: 'More products' }).isVisible(), 'no further page')
      t.ok(await page.evaluate('document.documentElement.scrollWidth <= innerWidth'), 'no sideways scrolling at 375 px')
    })

    await flow(t, phone, 'log in, create a product with an image: previewed, uploaded, listed', async (t, page, console) => {
      // The new-product page asks for a login first, then is itself.
      await page.goto('/products/new')
      const login = page.locator('#login')
      await login.getByLabel('Username or e-mail').fill(me.username)
      await login.getByLabel('Password').fill(me.password)
      await login.getByRole('button', { name: 'Log in' }).click()
      const form = page.locator('#create')
      await form.waitFor()
      await form.getByLabel('Title').fill('Brass lamp')
      await form.getByLabel('Description').fill('A lamp, =1+1 in a spreadsheet')
      await form.getByLabel('Price (EUR)').fill('42.00')
      await form.getByLabel('Image').setInputFiles({ name: 'lamp.png', mimeType: 'image/png', buffer: PNG })
      const preview = page.getByRole('img', { name: 'Preview of the chosen image' })
      await t.resolves(preview.waitFor(), 'the preview is shown')
      t.equal(await preview.getAttribute('src'), `data:image/png;base64,${PNG.toString('base64')}`, 'of the chosen file')
      await form.getByRole('button', { name: 'Create' }).click()
      await t.resolves(page.getByRole('status').filter({ hasText: 'Product "Brass lamp" created.' }).waitFor())
      t.equal(await page.locator('#preview').getAttribute('hidden'), '', 'the preview is cleared with the form')
      t.equal(await form.getByLabel('Title').inputValue(), '', 'and the form')
      await t.resolves(page.getByRole('heading', { name: 'Brass lamp' }).waitFor(), 'the product\'s page')
      t.ok(await page.getByRole('button', { name: 'Delete Brass lamp' }).isVisible(), 'one\'s own product can be deleted')
      await page.getByRole('link', { name: 'Back to the catalogue' }).click()
      const item = page.locator('#list > li').first()
      await t.resolves(item.filter({ hasText: 'Brass lamp' }).waitFor(), 'first in the catalogue: newest first')
      const thumb = item.locator('img')
      t.match(await thumb.getAttribute('src'), /^\/api\/product\/\d+\/image\?w=256&v=/, 'a thumbnail rendition')
      t.ok(await thumb.evaluate(async (img: any) => { await img.decode(); return img.naturalWidth === 1 }), 'the uploaded image loads from the service')
      t.match(await item.textContent(), /€42\.00/, 'the price in euros, from 4200 cents')
      t.same(console.filter((line) => /^(error|warning|pageerror):/.test(line)), [], 'no errors in the console (CSP violations would show here)')
    })

    await flow(t, phone, 'a file that is no image: the product is kept and the refusal\'s detail is shown', async (t, page) => {
      await page.goto('/products/new')
      const form = page.locator('#create')
      await form.getByLabel('Title').fill('Not a picture')
      await form.getByLabel('Price (EUR)').fill('0.01')
      await form.getByLabel('Image').setInputFiles({ name: 'notes.png', mimeType: 'image/png', buffer: Buffer.from('just some text, not an image') })
      await form.getByRole('button', { name: 'Create' }).click()
      const alert = form.getByRole('alert')
      await t.resolves(alert.filter({ hasText: /refused/ }).waitFor())
      t.match(await alert.textContent(), /^The product was created, but its image was refused: .*(PNG|JPEG|WebP)/, 'the problem detail of the 415')
    })

    await flow(t, phone, 'delete one\'s own product, from its page, once confirmed', async (t, page) => {
      await page.goto('/')
      await page.getByRole('link', { name: 'Brass lamp' }).click()
      await page.getByRole('button', { name: 'Delete Brass lamp' }).click()
      const dialog = page.getByRole('dialog', { name: 'Delete “Brass lamp”?' })
      await t.resolves(dialog.waitFor(), 'asked first')
      await dialog.getByRole('button', { name: 'Delete Brass lamp' }).click()
      await t.resolves(page.getByRole('status').filter({ hasText: 'Product "Brass lamp" deleted.' }).waitFor())
      await page.locator('#list > li').first().waitFor()
      t.equal(await page.locator('#list > li').filter({ hasText: 'Brass lamp' }).count(), 0, 'gone from the list')
      const list = (await app.inject({ method: 'GET', url: '/api/product?limit=100' })).json() as { items: Array<{ title: string }> }
      t.notOk(list.items.some((p) => p.title === 'Brass lamp'), 'gone from the service')
    })

    await flow(t, phone, 'download the catalogue as CSV: a plain link, saved by the browser as products.csv', async (t, page) => {
      await page.goto('/')
      const [download] = await Promise.all([
        page.waitForEvent('download'),
        page.getByRole('link', { name: 'Download the catalogue (CSV)' }).click()
      ])
      t.equal(download.suggestedFilename(), 'products.csv')
      const csv = await readFile(await download.path(), 'utf8')
      const lines = csv.trimEnd().split('\r\n')
      t.match(lines[0], /^"?id"?,/, 'a header row')
      t.equal(lines.length, 1 + 13, 'the twelve seeded products and the refused image\'s product')
      t.match(csv, /"Seeded 12"/)
      t.match(csv, /"Not a picture"/)
    })
  })
}
