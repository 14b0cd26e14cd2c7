/**
 * Account recovery and e-mail verification in Chromium, with the e-mail delivered over real
 * SMTP (test/helpers/smtp-sink.ts) and its link opened in the page: sign up, follow the
 * verification link (the profile says "Verified."), change the address (pending until the
 * link e-mailed to the new one is followed), forget the password, ask for a link on
 * the login form, set a new password on the page the link opens (the session in another
 * browser ends, the old password stops working, the new one logs in), and a used link shows
 * the problem's detail. The token never stays in the address bar.
 */
import t from 'tap'
import { chromiumAvailable, flow, site } from '../helpers/chromium.js'
import { newUser } from '../helpers/build.js'
import { startSmtpSink, type Received } from '../helpers/smtp-sink.js'

const PUBLIC_URL = 'https://shop.example.com'

/** The path and fragment of the first link to PUBLIC_URL in a message: what the page opens. */
function linkIn (received: Received): string {
  const link = /https:\/\/shop\.example\.com(\/[a-z-]+#token=[A-Za-z0-9_-]+)/.exec(received.mail.text ?? '')
  if (link === null) throw new Error(`no link in: ${received.mail.text}`)
  return link[1]!
}

if (chromiumAvailable(t)) {
  t.test('recovery and verification in the web app', async (t) => {
    const sink = await startSmtpSink(t)
    const { context } = await site(t, {
      env: { SMTP_URL: sink.url, PUBLIC_URL },
      tuning: { mail: { pollMs: 100, retryBaseMs: 100 } }
    })
    const user = newUser()
    const browser = await context()
    const mailTo = async (subject: RegExp, count: number): Promise<Received[]> => {
      const deadline = Date.now() + 15_000
      for (;;) {
        const found = sink.received.filter((r) => subject.test(r.mail.subject ?? '') && r.mail.text?.includes(PUBLIC_URL))
        if (found.length >= count) return found
        if (Date.now() > deadline) throw new Error(`waited for ${count} messages matching ${subject}, got ${found.length}`)
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
    }

    await flow(t, browser, 'sign up: the profile says the address is not verified; its link verifies it', async (t, page) => {
      await page.goto('/login')
      const form = page.locator('#signup')
      await form.getByLabel('Username').fill(user.username)
      await form.getByLabel('E-mail').fill(user.email)
      await form.getByLabel('Password').fill(user.password)
      await form.getByRole('button', { name: 'Sign up' }).click()
      await t.resolves(page.locator('#email-state').filter({ hasText: 'Not verified yet' }).waitFor())
      t.ok(await page.getByRole('button', { name: 'E-mail the verification link again' }).isVisible(), 'the profile offers to send the link again')

      const [verification] = await mailTo(/verify/i, 1)
      const link = linkIn(verification!)
      t.match(link, /^\/verify-email#token=/)
      await page.goto(link)
      await t.resolves(page.getByRole('status').filter({ hasText: 'Your e-mail address is verified. Log in again' }).waitFor(), 'a first verification ends the sessions made before it')
      t.equal(new URL(page.url()).pathname + new URL(page.url()).hash, '/login', 'the token is gone from the address bar: the login page')
      const login = page.locator('#login')
      await login.getByLabel('Username or e-mail').fill(user.username)
      await login.getByLabel('Password').fill(user.password)
      await login.getByRole('button', { name: 'Log in' }).click()
      await page.getByRole('status').filter({ hasText: 'Logged in as' }).waitFor()
      await page.getByRole('link', { name: 'Profile' }).click()
      await t.resolves(page.locator('#email-state').filter({ hasText: 'Verified.' }).waitFor(), 'the profile shows it')
      t.notOk(await page.getByRole('button', { name: 'E-mail the verification link again' }).isVisible())
    })

    await flow(t, browser, 'a change of address: pending until the link e-mailed to it is followed, then the profile has it', async (t, page) => {
      await page.goto('/account')
      await page.locator('#profile').waitFor()
      const moved = newUser().email
      await page.locator('#details-email').fill(moved)
      await page.getByLabel('Current password (for a new e-mail address)').fill(user.password)
      await page.getByRole('button', { name: 'Save' }).click()
      await t.resolves(page.getByRole('status').filter({ hasText: `A confirmation link was sent to ${moved}` }).waitFor())
      t.match(await page.locator('#email-state').textContent(), `Changing to ${moved}`)
      t.equal(await page.locator('#details-email').inputValue(), user.email, 'the current address until then')
      const verifications = await mailTo(/verify/i, 2)
      const toMoved = verifications.find((r) => !Array.isArray(r.mail.to) && r.mail.to?.text === moved)
      t.ok(toMoved, 'the link went to the new address')
      await page.goto(linkIn(toMoved!))
      await t.resolves(page.getByRole('status').filter({ hasText: 'Your e-mail address is verified.' }).waitFor())
      await t.resolves(page.locator('#email-state').filter({ hasText: /^Verified\.$/ }).waitFor(), 'nothing pending any more')
      t.equal(await page.locator('#details-email').inputValue(), moved, 'the new address is the account\'s')
      user.email = moved
    })

    const elsewhere = await context()
    await flow(t, elsewhere, 'a session in another browser, to be ended by the reset', async (t, page) => {
      await page.goto('/account')
      const form = page.locator('#login')
      await form.getByLabel('Username or e-mail').fill(user.username)
      await form.getByLabel('Password').fill(user.password)
      await form.getByRole('button', { name: 'Log in' }).click()
      await t.resolves(page.getByRole('heading', { name: 'Profile' }).waitFor())
    })

    const newPassword = 'a password found again'
    const fresh = await context()
    await flow(t, fresh, 'forgot password: the login form asks for a link, its page sets a new password', async (t, page) => {
      await page.goto('/login')
      await page.getByRole('button', { name: 'Forgot your password?' }).click()
      const forgot = page.locator('#forgot')
      await forgot.getByLabel('Your account\'s e-mail').fill(user.email)
      await forgot.getByRole('button', { name: 'E-mail me a reset link' }).click()
      await t.resolves(page.getByRole('status').filter({ hasText: 'If an account has this address' }).waitFor(), 'the same answer whether or not the address is known')

      const [resetMail] = await mailTo(/reset/i, 1)
      const link = linkIn(resetMail!)
      t.match(link, /^\/reset-password#token=/)
      await page.goto(link)
      await page.getByRole('heading', { name: 'Choose a new password' }).waitFor()
      t.equal(new URL(page.url()).hash, '', 'the token is gone from the address bar')
      t.ok(await page.locator('#reset-new').evaluate((input) => input === (globalThis as any).document.activeElement), 'focus is on the new password')
      const reset = page.locator('#reset-password')
      await reset.getByLabel('New password').fill(newPassword)
      await reset.getByRole('button', { name: 'Set the new password' }).click()
      await t.resolves(page.getByRole('status').filter({ hasText: 'Your new password is set' }).waitFor())

      const login = page.locator('#login')
      await login.getByLabel('Username or e-mail').fill(user.username)
      await login.getByLabel('Password').fill(user.password)
      await login.getByRole('button', { name: 'Log in' }).click()
      await t.resolves(login.getByRole('alert').filter({ hasText: /./ }).waitFor(), 'the old password is refused')
      await login.getByLabel('Password').fill(newPassword)
      await login.getByRole('button', { name: 'Log in' }).click()
      await t.resolves(page.getByRole('status').filter({ hasText: `Logged in as ${user.username}` }).waitFor(), 'the new one logs in')

      // The same link again: its page shows why it no longer works.
      await page.goto(link)
      await reset.getByLabel('New password').fill('yet another password')
      await reset.getByRole('button', { name: 'Set the new password' }).click()
      await t.resolves(reset.getByRole('alert').filter({ hasText: /invalid|used|expired/i }).waitFor(), 'a used link: the problem\'s detail')
    })

    await flow(t, elsewhere, 'the other browser\'s session ended with the reset', async (t, page) => {
      await page.goto('/account')
      await t.resolves(page.getByRole('heading', { name: 'Log in' }).waitFor(), 'back at the login form')
      t.equal(await page.locator('#profile').isVisible(), false)
    })
  })
}
