/**
 * The web app in Chromium: sign up, the profile, a password change, log out, log in with
 * the form (with and without JavaScript), an error shown as the problem's detail, and the
 * account's deletion; the session cookies stay out of page scripts' reach (HttpOnly). Then
 * sessions, on an app with 2-second access cookies: an expired one is renewed with the
 * refresh cookie unnoticed, a session ended elsewhere sends the user back to the login form
 * with a message; a taken username shows the 409's detail; the keyboard reaches the fields
 * in reading order.
 */
import t from 'tap'
import { chromiumAvailable, flow, signUpInPage, site } from '../helpers/chromium.js'
import { newUser } from '../helpers/build.js'

if (chromiumAvailable(t)) {
  t.test('the account and its sessions in the web app', async (t) => {
    const { base, context, browser: shared } = await site(t)
    const user = { ...newUser(), names: 'Ada Lovelace' }
    const browser = await context()
    const newPassword = 'a brand new passphrase'
    let userId = ''

    await flow(t, browser, 'sign up, then the profile shows the account', async (t, page, console) => {
      await page.goto('/login')
      await t.resolves(signUpInPage(page, user), 'signed up through the form')
      t.ok(await page.locator('#status').evaluate((node) => node === (globalThis as any).document.activeElement), 'focus on the welcome, at the top of the page')
      t.equal(await page.evaluate('scrollY'), 0, 'not scrolled down')
      await page.getByRole('heading', { name: 'Profile' }).waitFor()
      t.equal(new URL(page.url()).pathname, '/account', 'the profile\'s own page, where the address waits to be verified')
      t.equal(await page.getByLabel('Name', { exact: true }).inputValue(), user.names)
      t.equal(await page.locator('#details-email').inputValue(), user.email)
      t.equal(await page.evaluate('document.cookie'), '', 'document.cookie cannot read the session cookies')
      userId = await page.evaluate('localStorage.getItem("userId")') as string
      const cookies = await browser.cookies(base + '/api')
      t.same(cookies.map((c) => [c.name, c.httpOnly, c.secure, c.sameSite]), [['__Secure-access_token', true, true, 'Strict']], 'the access cookie: HttpOnly, Secure, SameSite=Strict')
      t.same(console.filter((line) => /^(error|warning|pageerror):/.test(line)), [], 'no errors or warnings in the console (CSP violations would show here)')
      t.same(console, [], 'no advice either (Chromium\'s form checks)')
    })

    await flow(t, browser, 'profile change', async (t, page) => {
      await page.goto('/account')
      // The profile shows once the account is read, with its fields filled in the same turn.
      await page.locator('#profile').waitFor()
      const email = `changed.${user.email}`
      await page.getByLabel('Name', { exact: true }).fill('Augusta Ada King')
      await page.locator('#details-email').fill(email)
      await page.getByRole('button', { name: 'Save' }).click()
      await t.resolves(page.locator('#details .error').filter({ hasText: 'Enter your current password' }).waitFor(), 'a new address needs the password')
      await page.getByLabel('Current password (for a new e-mail address)').fill(user.password)
      await page.getByRole('button', { name: 'Save' }).click()
      await t.resolves(page.getByRole('status').filter({ hasText: `Profile saved. A confirmation link was sent to ${email}` }).waitFor())
      t.equal(await page.locator('#details-email').inputValue(), user.email, 'the field keeps the current address')
      await page.reload()
      await page.locator('#profile').waitFor()
      t.equal(await page.getByLabel('Name', { exact: true }).inputValue(), 'Augusta Ada King', 'kept after a reload')
      t.equal(await page.locator('#details-email').inputValue(), user.email, 'the address changes only once the new one confirms')
      t.match(await page.locator('#email-state').textContent(), `Changing to ${email}`, 'the pending address is shown')
      // Saving the name alone leaves the pending change.
      await page.getByLabel('Name', { exact: true }).fill('Ada Lovelace')
      await page.getByRole('button', { name: 'Save' }).click()
      await t.resolves(page.getByRole('status').filter({ hasText: /^Profile saved\.$/ }).waitFor())
      t.match(await page.locator('#email-state').textContent(), `Changing to ${email}`, 'still pending')
      await page.getByRole('button', { name: 'Cancel the change of address' }).click()
      await t.resolves(page.getByRole('status').filter({ hasText: `your address stays ${user.email}` }).waitFor())
      t.notMatch(await page.locator('#email-state').textContent(), 'Changing to', 'nothing pending')
    })

    await flow(t, browser, 'password change: a wrong current password is shown as the detail, the right one changes it', async (t, page) => {
      await page.goto('/account')
      const form = page.locator('#password')
      await form.getByLabel('Current password').fill('not my password')
      await form.getByLabel('New password').fill(newPassword)
      await form.getByRole('button', { name: 'Change password' }).click()
      await t.resolves(form.getByRole('alert').filter({ hasText: /password/i }).waitFor())
      t.match(await form.getByRole('alert').textContent(), /current password/i, 'the problem detail')
      await form.getByLabel('Current password').fill(user.password)
      await form.getByRole('button', { name: 'Change password' }).click()
      await t.resolves(page.getByRole('status').filter({ hasText: 'Password changed.' }).waitFor())
      await page.reload()
      await t.resolves(page.getByRole('heading', { name: 'Profile' }).waitFor(), 'still logged in: the change set new cookies')
    })

    await flow(t, browser, 'log out, then a wrong password and the right one in the login form', async (t, page) => {
      await page.goto('/account')
      await page.getByRole('button', { name: 'Log out' }).click()
      await t.resolves(page.getByRole('status').filter({ hasText: 'You are logged out.' }).waitFor())
      t.same(await browser.cookies(base + '/api'), [], 'the cookies are cleared')
      t.ok(await page.getByLabel('Username or e-mail').evaluate((input) => input === (globalThis as any).document.activeElement), 'focus moves to the login form')
      const form = page.locator('#login')
      await form.getByLabel('Username or e-mail').fill(user.username)
      await form.getByLabel('Password').fill(user.password)
      await form.getByRole('button', { name: 'Log in' }).click()
      const alert = form.getByRole('alert')
      await t.resolves(alert.filter({ hasText: /\w/ }).waitFor())
      t.match(await alert.textContent(), /username|password/i, 'the old password is refused, with the problem detail')
      await form.getByLabel('Password').fill(newPassword)
      await form.getByRole('button', { name: 'Log in' }).click()
      await t.resolves(page.getByRole('status').filter({ hasText: `Logged in as ${user.username}` }).waitFor())
      await page.getByRole('link', { name: 'Profile' }).click()
      await page.getByRole('heading', { name: 'Profile' }).waitFor()
      t.equal(await page.locator('#details-email').inputValue(), user.email)
    })

    await flow(t, await context({ javaScriptEnabled: false }), 'log in with JavaScript off: a wrong password shows a page with the detail and a way back; then the form posts, the cookies are set, the browser lands on a page saying so', async (t, page) => {
      const noScript = page.context()
      await page.goto('/')
      t.ok(await page.getByText('logging in works without it').isVisible(), 'the note for browsers without JavaScript')
      t.notOk(await page.locator('#signup').isVisible(), 'sign-up needs JavaScript, so it is not offered')
      const form = page.locator('#login')
      await form.getByLabel('Username or e-mail').fill(user.email)
      await form.getByLabel('Password').fill('not the password')
      const [refused] = await Promise.all([
        page.waitForResponse((r) => r.url().endsWith('/api/auth/login')),
        form.getByRole('button', { name: 'Log in' }).click()
      ])
      t.equal(refused.status(), 401, 'a wrong password is 401')
      await page.getByRole('heading', { name: 'Unauthorized' }).waitFor()
      t.match(await page.locator('main').textContent(), /username|password/i, 'a page with the problem\'s detail, not a JSON body')
      await page.getByRole('link', { name: 'Go back' }).click()
      await page.waitForURL(base + '/')
      await form.getByLabel('Username or e-mail').fill(user.email)
      await form.getByLabel('Password').fill(newPassword)
      const [answer] = await Promise.all([
        page.waitForResponse((r) => r.url().endsWith('/api/auth/login')),
        form.getByRole('button', { name: 'Log in' }).click()
      ])
      t.equal(answer.status(), 303, 'See Other')
      await page.waitForURL(base + '/#signed-in')
      t.equal(await page.title(), 'Products', 'the app, not a JSON body')
      t.ok(await page.getByRole('heading', { name: 'You are signed in' }).isVisible(), 'a page that says the login worked')
      t.notOk(await page.locator('#login').isVisible(), 'not the same form again')
      const cookies = await noScript.cookies(base + '/api')
      t.same(cookies.map((c) => [c.name, c.httpOnly]), [['__Secure-access_token', true]], 'the access cookie is set, HttpOnly')
      const me = await page.goto(`${base}/api/user/${userId}`)
      t.match(await me?.json(), { username: user.username }, 'the cookie authenticates the session')
    })

    await flow(t, browser, 'delete the account', async (t, page) => {
      await page.goto('/account/delete')
      const form = page.locator('#delete-account')
      await form.getByLabel('Password').fill(newPassword)
      await form.getByRole('button', { name: 'Delete my account' }).click()
      await page.getByRole('dialog').getByRole('button', { name: 'Delete my account' }).click()
      await t.resolves(page.getByRole('status').filter({ hasText: 'Your account has been deleted.' }).waitFor())
      t.same(await browser.cookies(base + '/api'), [], 'the cookies are cleared')
      const login = await page.request.post('/api/auth/login', { data: { username: user.username, password: newPassword } })
      t.equal(login.status(), 401, 'the account is gone')
    })

    // A second app on the same browser, whose access cookies last 2 s: the page must refresh.
    await t.test('sessions, with 2-second access cookies', async (t) => {
      const { app, base, context } = await site(t, { env: { ACCESS_TOKEN_TTL: '2s' } }, shared)
      const user = newUser()
      const created = await app.inject({ method: 'POST', url: '/api/user', payload: user })
      const id = created.json().id as number
      const browser = await context()

      await flow(t, await context(), 'the keyboard reaches the menu, the login fields, the passkey button, the forgotten-password link, then sign-up (the password\'s toggle after its field), in reading order', async (t, page) => {
        await page.goto('/login')
        await page.locator('#signup').waitFor()
        const order: string[] = []
        for (let i = 0; i < 13; i++) {
          await page.keyboard.press('Tab')
          order.push(await page.evaluate('document.activeElement.id || document.activeElement.textContent'))
        }
        t.same(order, ['Catalogue', 'Log in or sign up', 'login-username', 'login-password', 'Log in', 'passkey-login', 'forgot-open', 'signup-username', 'signup-email', 'signup-names', 'signup-password', 'Show password', 'Sign up'])
      })

      await flow(t, await context(), 'a taken username: the 409\'s detail, announced', async (t, page) => {
        await page.goto('/login')
        const form = page.locator('#signup')
        await form.getByLabel('Username').fill(user.username)
        await form.getByLabel('E-mail').fill(newUser().email)
        await form.getByLabel('Password').fill('long enough password')
        await form.getByRole('button', { name: 'Sign up' }).click()
        const alert = form.getByRole('alert')
        await t.resolves(alert.filter({ hasText: /\w/ }).waitFor())
        t.match(await alert.textContent(), /username/i, 'says what is taken')
        t.equal(await form.getByLabel('Username').getAttribute('aria-invalid'), 'true', 'at the username field')
        t.ok(await form.getByLabel('Username').evaluate((input) => input === (globalThis as any).document.activeElement), 'which has the focus')
        t.ok(await form.isVisible(), 'the form stays, with what was typed')
        t.equal(await form.getByLabel('Username').inputValue(), user.username)
      })

      await flow(t, browser, 'an expired access cookie is refreshed on the next request', async (t, page) => {
        await page.goto('/account')
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
        await page.locator('#profile').waitFor()
        t.equal(await page.getByLabel('Name', { exact: true }).inputValue(), 'Renewed', 'saved: the name is there after a reload')
      })

      await flow(t, browser, 'a session ended elsewhere: back to the login form, with a message', async (t, page) => {
        await page.goto('/account')
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
  })
}
