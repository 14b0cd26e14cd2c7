/**
 * The web app's pages in Chromium, on a laptop (1280x800) and a phone (390x844): every page
 * has its own address, opened by a deep link, kept by a reload and walked by back and
 * forward (back returns the catalogue to where it was scrolled); a page that needs a session shows the login in its place and itself after it,
 * with no login form flashing on a signed-in reload. The catalogue (newest first, the order
 * selectable, a search, "my products", an empty state that says what to do), prices in the
 * configured currency, a product's page, confirmations that name what is lost, focus and the
 * announced message after each action, a field's error at the field; the security page's
 * sessions, one signed out and "sign out everywhere else" seen from a second browser, and its
 * activity in words.
 * Screenshots of each page go to a folder the test prints (looked at, not compared).
 */
import { mkdir } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import t from 'tap'
import type { Page } from 'playwright-core'
import { chromiumAvailable, flow, site } from '../helpers/chromium.js'
import { newUser, registerAndLogin } from '../helpers/build.js'

/** A 1x1 PNG. */
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64')
const SCREENS = [
  { name: 'laptop', viewport: { width: 1280, height: 800 } },
  { name: 'phone', viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true }
]

/** Waits until the element with this id has the focus (a page moves it once its data is shown); false if it never does. */
const focused = async (page: Page, id: string): Promise<boolean> =>
  await page.waitForFunction((id) => (globalThis as any).document.activeElement?.id === id, id, { timeout: 5000 }).then(() => true, () => false)
/** The element is on the screen as it is scrolled now: seen without scrolling. */
const inView = async (page: Page, selector: string): Promise<boolean> => await page.locator(selector).evaluate((node: any) => {
  const box = node.getBoundingClientRect()
  return box.top >= 0 && box.bottom <= (globalThis as any).innerHeight && box.height > 0
})
const heading = (page: Page, name: string | RegExp) => page.getByRole('heading', { level: 1, name })
const status = (page: Page, text: string | RegExp) => page.getByRole('status').filter({ hasText: text })

async function logIn (page: Page, user: { username: string, password: string }): Promise<void> {
  const form = page.locator('#login')
  await form.getByLabel('Username or e-mail').fill(user.username)
  await form.getByLabel('Password').fill(user.password)
  await form.getByRole('button', { name: 'Log in' }).click()
  await status(page, `Logged in as ${user.username}`).waitFor()
}

if (chromiumAvailable(t)) {
  t.test('the web app\'s pages', async (t) => {
    const { app, context } = await site(t)
    const shots = path.join(tmpdir(), `web-app-pages-${process.pid}`)
    await mkdir(shots, { recursive: true })
    t.comment(`screenshots: ${shots}`)
    const seller = await registerAndLogin(app)
    const seeded: Array<{ id: number, title: string }> = []
    // Older ones first, so a page of the catalogue is taller than the screen.
    for (let i = 1; i <= 7; i++) {
      await app.inject({ method: 'POST', url: '/api/product', headers: seller.auth, payload: { title: `Filler ${i}`, amount: 100 * i } })
    }
    for (const [title, amount] of [['Oak desk lamp', 2599], ['Linen tea towel', 850], ['Cast iron pan', 4200]] as const) {
      seeded.push((await app.inject({ method: 'POST', url: '/api/product', headers: seller.auth, payload: { title, description: `A ${title.toLowerCase()}.\nSecond line.`, amount } })).json())
    }

    for (const screen of SCREENS) {
      const { name: on, ...options } = screen
      const shot = async (page: Page, name: string): Promise<void> => { await page.screenshot({ path: path.join(shots, `${on}-${name}.png`), fullPage: true }) }
      const user = { ...newUser(), names: `Tester on a ${on}` }
      t.equal((await app.inject({ method: 'POST', url: '/api/user', payload: user })).statusCode, 201)
      const browser = await context(options)

      await flow(t, browser, `${on}: a deep link, back and forward, a reload, an unknown product`, async (t, page, console) => {
        const lamp = seeded[0]!
        await page.goto(`/products/${lamp.id}`)
        await t.resolves(heading(page, lamp.title).waitFor(), 'the product page opens from its address')
        t.equal(await page.title(), `${lamp.title} – Products`)
        t.match(await page.locator('#product-price').textContent(), /^€25\.99$/, 'the price in euros, from 2599 cents')
        t.match(await page.locator('#product-description').textContent(), 'Second line.')
        t.match(await page.locator('#product-meta').textContent(), /Sold by seller no\. \d+, listed/)
        t.notOk(await page.getByRole('button', { name: /^Delete/ }).isVisible(), 'no delete for a visitor')
        await shot(page, 'product-visitor')

        await page.getByRole('link', { name: 'Back to the catalogue' }).click()
        await t.resolves(heading(page, 'Products').waitFor())
        t.equal(new URL(page.url()).pathname, '/', 'the catalogue\'s address')
        t.ok(await focused(page, 'catalogue-title'), 'focus on the new page\'s heading')
        const titles = page.locator('#list > li h2')
        await titles.nth(9).waitFor()
        t.same((await titles.allTextContents()).slice(0, 4), ['Cast iron pan', 'Linen tea towel', 'Oak desk lamp', 'Filler 7'], 'newest first')
        t.match(await page.locator('#list > li').first().textContent(), '€42.00')
        t.equal(await page.locator('#list img').count(), 0, 'no image, no broken thumbnail')
        await shot(page, 'catalogue-visitor')

        await page.goBack()
        await t.resolves(heading(page, lamp.title).waitFor(), 'back: the product again')
        await page.goForward()
        await t.resolves(heading(page, 'Products').waitFor(), 'forward: the catalogue again')

        // Scrolled down, a product, then back: the catalogue where it was left.
        await titles.nth(9).waitFor()
        await page.evaluate('window.scrollTo(0, document.documentElement.scrollHeight)')
        const left = await page.evaluate('scrollY') as number
        t.ok(left > 0, `the catalogue is taller than the screen (scrolled to ${left})`)
        await page.getByRole('link', { name: 'Filler 1' }).click()
        await heading(page, 'Filler 1').waitFor()
        t.equal(await page.evaluate('scrollY'), 0, 'a new page starts at its top')
        await page.goBack()
        await titles.nth(9).waitFor()
        await t.resolves(page.waitForFunction((y) => Math.abs((globalThis as any).scrollY - y) <= 1, left, { timeout: 5000 }), 'back: scrolled where it was')
        await page.goForward()
        await heading(page, 'Filler 1').waitFor()
        await page.goBack()
        await heading(page, 'Products').waitFor()

        await page.getByLabel('Search by title').fill('TEA')
        await page.getByRole('button', { name: 'Search' }).click()
        await page.waitForURL(/\?q=TEA$/)
        await t.resolves(page.locator('#list > li').filter({ hasText: 'Linen tea towel' }).waitFor())
        t.equal(await page.locator('#list > li').count(), 1, 'the search finds by title, ignoring case')
        await page.reload()
        await t.resolves(page.locator('#list > li').filter({ hasText: 'Linen tea towel' }).waitFor(), 'a reload keeps the search')
        t.equal(await page.getByLabel('Search by title').inputValue(), 'TEA')
        t.equal(await page.locator('#list > li').count(), 1)

        await page.getByLabel('Search by title').fill('no such thing')
        await page.getByRole('button', { name: 'Search' }).click()
        await t.resolves(page.locator('#empty').filter({ hasText: 'No product\'s title contains “no such thing”' }).waitFor(), 'an empty result says so')
        t.ok(await page.locator('#empty').getByRole('link', { name: 'clear the search' }).isVisible(), 'and what to do')
        await shot(page, 'catalogue-empty-search')
        await page.goBack()
        await t.resolves(page.locator('#list > li').filter({ hasText: 'Linen tea towel' }).waitFor(), 'back: the previous search')

        await page.goto('/index.html')
        await t.resolves(heading(page, 'Products').waitFor(), '/index.html: the catalogue')
        await page.goto('/products/99999999')
        await t.resolves(heading(page, 'Not found').waitFor(), 'an unknown product: a page that says so')
        t.same(console.filter((line) => /^(error|pageerror):/.test(line) && !/404/.test(line)), [], 'no errors in the console')
      })

      await flow(t, browser, `${on}: a page that needs a session shows the login in its place, then itself; a signed-in reload shows no login form`, async (t, page) => {
        await page.goto('/account')
        await t.resolves(heading(page, 'Log in').waitFor(), 'the login form')
        t.equal(new URL(page.url()).pathname, '/account', 'at the page\'s own address')
        await shot(page, 'login')
        await logIn(page, user)
        await t.resolves(heading(page, 'Profile').waitFor(), 'the page asked for')
        t.equal(new URL(page.url()).pathname, '/account')
        t.ok(await focused(page, 'status'), 'focus on the announced message')
        t.ok(await inView(page, '#status'), 'seen without scrolling')
        await shot(page, 'account')

        await page.addInitScript({
          content: `window.loginSeen = false
            const watch = () => {
              const form = document.getElementById('login')
              if (form !== null && form.offsetParent !== null) window.loginSeen = true
              if (document.getElementById('profile')?.offsetParent == null) requestAnimationFrame(watch)
            }
            requestAnimationFrame(watch)`
        })
        await page.reload()
        await t.resolves(heading(page, 'Profile').waitFor(), 'a reload keeps the page')
        t.equal(await page.evaluate('window.loginSeen'), false, 'the login form never showed while the session was read')

        await page.getByRole('link', { name: 'Security' }).click()
        await t.resolves(heading(page, 'Security').waitFor())
        t.ok(await focused(page, 'security-title'), 'focus on the heading')
        await page.goBack()
        await t.resolves(heading(page, 'Profile').waitFor(), 'back to the profile')
      })

      await flow(t, browser, `${on}: a field's error at its field, and no old success beside it`, async (t, page) => {
        await page.goto('/account')
        await heading(page, 'Profile').waitFor()
        await page.getByLabel('Name', { exact: true }).fill('Someone')
        await page.getByRole('button', { name: 'Save' }).click()
        await status(page, /^Profile saved\.$/).waitFor()
        await page.locator('#details-email').fill(`new.${user.email}`)
        await page.getByRole('button', { name: 'Save' }).click()
        const field = page.getByLabel('Current password (for a new e-mail address)')
        await t.resolves(page.locator('#details .error').filter({ hasText: 'Enter your current password' }).waitFor())
        t.equal(await field.getAttribute('aria-invalid'), 'true', 'the field is marked')
        const described = await field.getAttribute('aria-describedby') ?? ''
        t.match(await page.locator(`#${described.split(' ').pop()}`).textContent(), 'Enter your current password', 'and described by the error')
        t.ok(await focused(page, 'details-current'), 'focus on the field')
        t.equal(await page.locator('#status').textContent(), '', 'the earlier "Profile saved." is gone')
        await field.fill(user.password)
        await page.locator('#details-email').fill(user.email)
        await page.getByRole('button', { name: 'Save' }).click()
        await status(page, /^Profile saved\.$/).waitFor()
        t.equal(await field.getAttribute('aria-invalid'), null, 'unmarked once it passes')
      })

      await flow(t, browser, `${on}: my products, a new one with a picture, its page, and a deletion that asks first`, async (t, page) => {
        await page.goto('/')
        await page.locator('#list > li').first().waitFor()
        await page.getByLabel('Only my products').check()
        await t.resolves(page.locator('#empty').filter({ hasText: 'You have no products yet.' }).waitFor(), 'the empty state says what to do')
        t.match(page.url(), /\?seller=\d+$/, 'an address of its own')
        await shot(page, 'catalogue-mine-empty')
        await page.locator('#empty').getByRole('link', { name: 'Add your first product' }).click()
        await t.resolves(heading(page, 'New product').waitFor())
        t.ok(await focused(page, 'new-product-title'), 'focus on the heading')
        const form = page.locator('#create')
        await form.getByLabel('Title').fill(`Brass lamp ${on}`)
        await form.getByLabel('Description').fill('Warm light')
        // More than the API takes (2^31 - 1 cents): its validation problem names `amount`, shown at the price.
        await form.getByLabel('Price (EUR)').fill('30000000')
        await form.getByRole('button', { name: 'Create' }).click()
        const price = form.getByLabel('Price (EUR)')
        await t.resolves(form.locator('.error').filter({ hasText: /\w/ }).waitFor(), 'refused')
        t.equal(await price.getAttribute('aria-invalid'), 'true', 'at the price field')
        t.ok(await focused(page, 'create-price'), 'which has the focus')
        t.match(await price.getAttribute('aria-describedby'), /create-price-hint create-error/, 'described by its hint and the error')
        await form.getByLabel('Price (EUR)').fill('19.90')
        await form.getByLabel('Image').setInputFiles({ name: 'lamp.png', mimeType: 'image/png', buffer: PNG })
        await page.getByRole('img', { name: 'Preview of the chosen image' }).waitFor()
        await shot(page, 'new-product')
        await form.getByRole('button', { name: 'Create' }).click()
        await t.resolves(status(page, `Product "Brass lamp ${on}" created.`).waitFor())
        await t.resolves(heading(page, `Brass lamp ${on}`).waitFor(), 'its page next')
        t.match(new URL(page.url()).pathname, /^\/products\/\d+$/)
        const id = Number(new URL(page.url()).pathname.split('/').pop())
        t.equal((await app.inject({ method: 'GET', url: `/api/product/${id}` })).json().amount, 1990, 'stored in cents')
        t.equal(await page.locator('#product-price').textContent(), '€19.90')
        t.ok(await focused(page, 'status'), 'focus on the message')
        t.match(await page.locator('#product-meta').textContent(), /^Sold by you, listed/)
        const image = page.getByRole('img', { name: `Picture of Brass lamp ${on}` })
        t.match(await image.getAttribute('src'), /^\/api\/product\/\d+\/image\?v=.*&w=512$/, 'a rendition at display size')
        await page.waitForFunction(() => (globalThis as any).document.getElementById('product-image').complete)
        const loaded = await image.evaluate((img: any) => [img.naturalWidth, img.currentSrc])
        t.equal(loaded[0], 1, `it loads (${loaded[1]})`)
        await page.waitForFunction(() => (globalThis as any).document.getElementById('product-image').getBoundingClientRect().width === 1)
        t.pass('drawn at its own size, never enlarged (a 1 px picture is 1 px wide)')
        await shot(page, 'product-owner')

        const remove = page.getByRole('button', { name: `Delete Brass lamp ${on}` })
        await remove.click()
        const dialog = page.getByRole('dialog', { name: `Delete “Brass lamp ${on}”?` })
        await t.resolves(dialog.waitFor(), 'a dialog asks, naming the product')
        t.match(await dialog.textContent(), /picture and its price of €19\.90 are removed for everyone/, 'and what is lost')
        t.ok(await focused(page, 'confirm-cancel'), 'Cancel is focused first')
        await shot(page, 'confirm-delete-product')
        await dialog.getByRole('button', { name: 'Cancel' }).click()
        t.notOk(await dialog.isVisible(), 'closed')
        t.equal((await app.inject({ method: 'GET', url: `/api/product/${id}` })).statusCode, 200, 'nothing deleted')
        t.ok(await focused(page, 'product-delete'), 'focus back on the button')

        await remove.click()
        await dialog.getByRole('button', { name: `Delete Brass lamp ${on}` }).click()
        await t.resolves(status(page, `Product "Brass lamp ${on}" deleted.`).waitFor())
        await heading(page, 'Products').waitFor()
        t.equal(new URL(page.url()).pathname, '/', 'back at the catalogue')
        t.ok(await focused(page, 'status'), 'focus on the message')
        t.ok(await inView(page, '#status'), 'seen without scrolling')
        t.equal((await app.inject({ method: 'GET', url: `/api/product/${id}` })).statusCode, 404, 'gone from the service')

        await page.getByLabel('Order').selectOption('oldest')
        await page.waitForURL(/\?sort=oldest$/)
        await t.resolves(page.locator('#list > li h2').first().filter({ hasText: 'Filler 1' }).waitFor(), 'oldest first when asked')
        await page.goBack()
        await t.resolves(page.locator('#list > li h2').first().filter({ hasText: 'Cast iron pan' }).waitFor(), 'back: newest first again')
      })

      await flow(t, browser, `${on}: sessions: this device and another, one signed out, then everywhere else`, async (t, page) => {
        const other = await context(options)
        const elsewhere = await other.newPage()
        await elsewhere.goto('/login')
        await logIn(elsewhere, user)
        const third = await context()
        const thirdPage = await third.newPage()
        await thirdPage.goto('/login')
        await logIn(thirdPage, user)

        await page.goto('/security')
        await heading(page, 'Security').waitFor()
        const items = page.locator('#sessions > li')
        await items.nth(2).waitFor()
        t.equal(await items.count(), 3, 'three sessions')
        t.equal(await items.filter({ hasText: '(this device)' }).count(), 1, 'this one marked')
        t.match(await items.first().textContent(), /Chrome|Chromium/, 'the browser')
        t.match(await items.first().textContent(), /Signed in .* with password from (::ffff:)?127\.0\.0\.1/, 'how, when and from where')
        await shot(page, 'security-sessions')

        const thirdId = await thirdPage.evaluate(async () => {
          const answer = await fetch('/api/security/sessions', { headers: { accept: 'application/json' } })
          return ((await answer.json()) as { items: Array<{ current: boolean, id: string }> }).items.find((s) => s.current)!.id
        })
        const end = page.locator(`#sessions > li[data-session="${thirdId}"]`).getByRole('button', { name: /^Sign out/ })
        t.match(await end.getAttribute('aria-describedby'), `session-${thirdId}`, 'described by when and where that session began')
        await end.click()
        await t.resolves(status(page, /is signed out\.$/).waitFor(), 'one session signed out')
        t.equal(await items.count(), 2)
        await thirdPage.goto('/account')
        await t.resolves(heading(thirdPage, 'Log in').waitFor(), 'that browser must log in again')

        await page.getByRole('button', { name: 'Sign out the other session' }).click()
        await t.resolves(status(page, 'Signed out everywhere else: one session ended. This device stays signed in.').waitFor())
        t.equal(await items.count(), 1, 'only this device')
        t.notOk(await page.getByRole('button', { name: /Sign out (the other|everywhere)/ }).isVisible(), 'nothing else to sign out')
        const activity = page.locator('#activity > li')
        await t.resolves(activity.first().filter({ hasText: 'Every other session was signed out' }).waitFor(), 'the activity, newest first, in words')
        t.match(await activity.nth(1).textContent(), /^A session was signed out/)
        t.match(await activity.nth(2).textContent(), /^Signed in with password.*, (Chrome|Chromium).* from (::ffff:)?127\.0\.0\.1\.$/, 'when, the device, the address')
        await elsewhere.goto('/security')
        await t.resolves(heading(elsewhere, 'Log in').waitFor(), 'the other browser must log in again')
        t.equal(new URL(elsewhere.url()).pathname, '/security')
        await page.reload()
        await t.resolves(heading(page, 'Security').waitFor(), 'this one is still signed in')
      })

      await flow(t, browser, `${on}: deleting the account asks, naming what is lost, and needs the password`, async (t, page) => {
        await page.goto('/account')
        await page.getByRole('link', { name: 'Delete your account' }).click()
        await t.resolves(heading(page, 'Delete account').waitFor())
        t.equal(new URL(page.url()).pathname, '/account/delete')
        const form = page.locator('#delete-account')
        await form.getByLabel('Password').fill('not the password')
        await form.getByRole('button', { name: 'Delete my account' }).click()
        const dialog = page.getByRole('dialog', { name: `Delete the account ${user.username}?` })
        await dialog.waitFor()
        t.match(await dialog.textContent(), /your products and their pictures, your passkeys and every session/)
        await shot(page, 'confirm-delete-account')
        await dialog.getByRole('button', { name: 'Cancel' }).click()
        t.equal(await form.locator('.error').textContent(), '', 'nothing sent')
        await form.getByRole('button', { name: 'Delete my account' }).click()
        await dialog.getByRole('button', { name: 'Delete my account' }).click()
        await t.resolves(form.getByRole('alert').filter({ hasText: /password/i }).waitFor(), 'a wrong password is refused')
        t.equal(await form.getByLabel('Password').getAttribute('aria-invalid'), 'true', 'at its field')
        await form.getByLabel('Password').fill(user.password)
        await form.getByRole('button', { name: 'Delete my account' }).click()
        await dialog.getByRole('button', { name: 'Delete my account' }).click()
        await t.resolves(status(page, 'Your account has been deleted.').waitFor())
        t.equal(new URL(page.url()).pathname, '/')
        t.equal((await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: user.username, password: user.password } })).statusCode, 401, 'gone')
      })
    }
  })
}
