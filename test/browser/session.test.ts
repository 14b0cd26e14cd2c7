/**
 * The web app's session in Chromium: an expired access cookie is renewed with the refresh
 * cookie without the user noticing, a session ended elsewhere sends the user back to the
 * login form with a message, a refusal (a taken username) shows the problem's detail, and
 * the keyboard reaches the fields in reading order.
 */
import t from 'tap'
import { chromiumAvailable, flow, site } from '../helpers/chromium.js'
import { newUser } from '../helpers/build.js'

if (chromiumAvailable(t)) {
  t.test('sessions in the web app', async (t) => {
    // Access cookies of 2 s: the app must refresh during the test.
    const { app, base, context } = await site(t, { env: { ACCESS_TOKEN_TTL: '2s' } })
    const user = newUser()
    const created = await app.inject({ method: 'POST', url: '/api/user', payload: user })
    const id = created.json().id as number
    const browser = await context()

    await flow(t, await context(), 'the keyboard reaches the login fields, then sign-up, in reading order', async (t, page) => {
      await page.goto('/')
      await page.locator('#signup').waitFor()
      const order: string[] = []
      for (let i = 0; i < 8; i++) {
        await page.keyboard.press('Tab')
        order.push(await page.evaluate('document.activeElement.id || document.activeElement.textContent'))
      }
      t.same(order, ['login-username', 'login-password', 'Log in', 'signup-username', 'signup-email', 'signup-names', 'signup-password', 'Sign up'])
    })

    await flow(t, await context(), 'a taken username: the 409\'s detail, announced', async (t, page) => {
      await page.goto('/')
      const form = page.locator('#signup')
      await form.getByLabel('Username').fill(user.username)
      await form.getByLabel('E-mail').fill(newUser().email)
      await form.getByLabel('Password').fill('long enough password')
      await form.getByRole('button', { name: 'Sign up' }).click()
      const alert = form.getByRole('alert')
      await t.resolves(alert.filter({ hasText: /\w/ }).waitFor())
      t.match(await alert.textContent(), /username/i, 'says what is taken')
      t.ok(await form.isVisible(), 'the form stays, with what was typed')
      t.equal(await form.getByLabel('Username').inputValue(), user.username)
    })

    await flow(t, browser, 'an expired access cookie is refreshed on the next request', async (t, page) => {
      await page.goto('/')
      const login = page.locator('#login')
      await login.getByLabel('Username or e-mail').fill(user.username)
      await login.getByLabel('Password').fill(user.password)
      await login.getByRole('button', { name: 'Log in' }).click()
      await page.locator('#profile').waitFor()
      await page.waitForTimeout(2500)
      t.same(await browser.cookies(base + '/api/user'), [], 'the access cookie has expired')
      const refreshes: number[] = []
      page.on('response', (r) => { if (r.url().endsWith('/api/auth/refresh-token')) refreshes.push(r.status()) })
      await page.getByLabel('Name', { exact: true }).fill('Renewed')
      await page.getByRole('button', { name: 'Save' }).click()
      await t.resolves(page.getByRole('status').filter({ hasText: 'Profile saved.' }).waitFor())
      t.same(refreshes, [200], 'one refresh')
      await page.reload()
      t.equal(await page.getByLabel('Name', { exact: true }).inputValue(), 'Renewed', 'saved: the name is there after a reload')
    })

    await flow(t, browser, 'a session ended elsewhere: back to the login form, with a message', async (t, page) => {
      await page.goto('/')
      await page.locator('#profile').waitFor()
      // Another device changes the password: every other session ends.
      const other = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: user.username, password: user.password } })
      const changed = await app.inject({ method: 'PATCH', url: `/api/user/${id}`, headers: { authorization: `Bearer ${other.json().token as string}` }, payload: { password: 'changed elsewhere', currentPassword: user.password } })
      t.equal(changed.statusCode, 200)
      await page.getByLabel('Name', { exact: true }).fill('Too late')
      await page.getByRole('button', { name: 'Save' }).click()
      await t.resolves(page.getByRole('status').filter({ hasText: 'Your session has ended: log in again.' }).waitFor())
      t.ok(await page.locator('#login').isVisible(), 'the login form')
      t.notOk(await page.locator('#profile').isVisible(), 'the profile is gone')
      t.ok(await page.getByLabel('Username or e-mail').evaluate((input) => input === (globalThis as any).document.activeElement), 'focus on the login form')
    })
  })
}
