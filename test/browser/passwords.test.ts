/**
 * New passwords and the secrets of two-step login in Chromium. Every new-password field has a
 * show-password toggle (a button with aria-pressed) and a hint of the rule (a polite live
 * region that describes the field): too short, one of the most common passwords (the list is
 * fetched only when such a field is first focused), and the API's 400 PASSWORD_TOO_COMMON
 * shown at the field on submit, at sign-up and at a password change. Then the authenticator
 * key, shown in groups of four, and the recovery codes: each copied (the clipboard read back,
 * the confirmation in the status line) and downloaded as a text file named for the site and
 * the account.
 */
import { readFile } from 'node:fs/promises'
import t from 'tap'
import { generate } from 'otplib'
import type { Page } from 'playwright-core'
import { chromiumAvailable, flow, site } from '../helpers/chromium.js'
import { markVerified, newUser } from '../helpers/build.js'

const status = (page: Page, text: string | RegExp) => page.getByRole('status').filter({ hasText: text })
const activeId = async (page: Page): Promise<string> => await page.evaluate(() => (globalThis as any).document.activeElement?.id ?? '')

if (chromiumAvailable(t)) {
  t.test('new passwords, the authenticator key and the recovery codes in the web app', async (t) => {
    const { app, base, context } = await site(t)
    const user = { ...newUser(), names: 'Grace Hopper' }
    const browser = await context({ permissions: ['clipboard-read', 'clipboard-write'] })
    let userId = 0

    await flow(t, browser, 'every new-password field: a toggle and a hint that describes it', async (t, page) => {
      await page.goto('/login')
      const fields = page.locator('input[autocomplete="new-password"]')
      const ids = await fields.evaluateAll((inputs: any[]) => inputs.map((input) => input.id))
      t.same(ids, ['signup-password', 'reset-new', 'password-new'], 'sign-up, the reset page, the password change')
      for (const id of ids) {
        const described = await page.locator(`#${id}`).getAttribute('aria-describedby')
        t.equal(described, `${id}-hint`, `${id}: described by its hint`)
        t.equal(await page.locator(`#${id}-hint`).getAttribute('aria-live'), 'polite', `${id}: the hint is a polite live region`)
        t.equal(await page.locator(`button[aria-controls="${id}"]`).getAttribute('aria-pressed'), 'false', `${id}: a toggle button, not pressed`)
      }
    })

    await flow(t, browser, 'sign up: the toggle shows the password, the hint says short and common, the API\'s refusal lands at the field', async (t, page) => {
      const lists: string[] = []
      page.on('request', (request) => { if (request.url().includes('/assets/common-passwords.')) lists.push(request.url()) })
      await page.goto('/login')
      const form = page.locator('#signup')
      await form.getByLabel('Username').fill(user.username)
      await form.getByLabel('E-mail').fill(user.email)
      await form.getByLabel('Name (optional)').fill(user.names)
      t.same(lists, [], 'the list is not fetched with the page')
      const password = form.getByLabel('Password (at least 8 characters)')
      const toggle = form.getByRole('button', { name: 'Show password' })
      const hint = page.locator('#signup-password-hint')

      await password.fill('abc')
      await t.resolves(hint.filter({ hasText: 'Too short: 3 of at least 8 characters.' }).waitFor(), 'a short password: the hint says so')
      t.equal(lists.length, 1, 'the list is fetched once a new-password field has the focus')

      t.equal(await password.getAttribute('type'), 'password', 'hidden at first')
      await toggle.click()
      t.equal(await password.getAttribute('type'), 'text', 'shown after the toggle')
      t.equal(await toggle.getAttribute('aria-pressed'), 'true', 'the toggle says it is pressed')
      t.equal(await activeId(page), 'signup-password', 'a click leaves the caret in the field')
      await toggle.focus()
      await page.keyboard.press('Space')
      t.equal(await password.getAttribute('type'), 'password', 'hidden again, from the keyboard')
      t.equal(await toggle.getAttribute('aria-pressed'), 'false')
      t.ok(await toggle.evaluate((node) => node === (globalThis as any).document.activeElement), 'from the keyboard, focus stays on the toggle')

      await password.fill('Password123')
      await t.resolves(hint.filter({ hasText: 'This is one of the most common passwords' }).waitFor(), 'a common password, in any case: the hint says so')
      t.equal(await hint.getAttribute('data-state'), 'common')

      await form.getByRole('button', { name: 'Sign up' }).click()
      const alert = form.getByRole('alert')
      await t.resolves(alert.filter({ hasText: 'one of the 17,950 most common passwords' }).waitFor(), 'the API\'s detail in the form')
      t.equal(await password.getAttribute('aria-invalid'), 'true', 'the field is marked')
      t.match(await password.getAttribute('aria-describedby'), /\bsignup-password-hint\b/, 'still described by the hint')
      t.match(await password.getAttribute('aria-describedby'), new RegExp(`\\b${await alert.getAttribute('id')}\\b`), 'and by the error')
      t.equal(await activeId(page), 'signup-password', 'focus on the field')

      await password.fill('a less common passphrase')
      await t.resolves(hint.filter({ hasText: 'Length fine: 24 of at most 72 bytes. Not one of the most common passwords.' }).waitFor())
      await password.fill('ünïcödé')
      await t.resolves(hint.filter({ hasText: 'Too short: 7 of at least 8 characters.' }).waitFor(), 'characters, not bytes, for the minimum')
      await password.fill('é'.repeat(37))
      await t.resolves(hint.filter({ hasText: 'Too long: 74 bytes, at most 72' }).waitFor(), 'bytes for the maximum')
      user.password = 'a less common passphrase'
      await password.fill(user.password)
      await form.getByRole('button', { name: 'Sign up' }).click()
      await t.resolves(status(page, `Welcome, ${user.names}`).waitFor(), 'a better one signs up')
      userId = Number(await page.evaluate('localStorage.getItem("userId")'))
    })

    await flow(t, browser, 'password change: a common new password is refused at its field', async (t, page) => {
      await page.goto('/account')
      const form = page.locator('#password')
      await form.getByLabel('Current password').fill(user.password)
      const fresh = form.getByLabel('New password')
      await fresh.fill('iloveyou1')
      await t.resolves(page.locator('#password-new-hint').filter({ hasText: 'one of the most common passwords' }).waitFor(), 'the hint')
      await form.getByRole('button', { name: 'Change password' }).click()
      await t.resolves(form.getByRole('alert').filter({ hasText: 'most common passwords' }).waitFor(), 'the API\'s detail')
      t.equal(await fresh.getAttribute('aria-invalid'), 'true', 'at the new password, not the current one')
      t.equal(await form.getByLabel('Current password').getAttribute('aria-invalid'), null)
      await form.getByRole('button', { name: 'Show password' }).click()
      t.equal(await fresh.getAttribute('type'), 'text')
      await fresh.fill('a rarer passphrase still')
      await form.getByRole('button', { name: 'Change password' }).click()
      await t.resolves(status(page, 'Password changed.').waitFor())
      t.equal(await fresh.getAttribute('type'), 'password', 'hidden again once sent')
      t.equal(await form.getByRole('button', { name: 'Show password' }).getAttribute('aria-pressed'), 'false')
      user.password = 'a rarer passphrase still'
    })

    // A second factor needs a verified address.
    await markVerified(app, userId)
    const readClipboard = async (page: Page): Promise<string> => await page.evaluate(() => (globalThis as any).navigator.clipboard.readText())
    const host = new URL(base).hostname

    await flow(t, browser, 'the authenticator key in groups of four, copied without spaces and downloaded; the recovery codes copied and downloaded', async (t, page) => {
      await page.goto('/security')
      await page.locator('#totp-start').getByLabel('Password').fill(user.password)
      await page.getByRole('button', { name: 'Set up an authenticator app' }).click()
      const confirm = page.locator('#totp-confirm')
      await confirm.waitFor()
      const shown = (await page.locator('#totp-secret').textContent()) ?? ''
      t.match(shown, /^([A-Z2-7]{4} )+[A-Z2-7]{1,4}$/, `groups of four: ${shown}`)
      const secret = shown.replaceAll(' ', '')

      const copyKey = confirm.getByRole('button', { name: 'Copy the key' })
      await copyKey.click()
      await t.resolves(status(page, 'Copied the authenticator key to the clipboard.').waitFor(), 'the confirmation, in the status line')
      t.equal(await readClipboard(page), secret, 'the clipboard holds the key without spaces')
      t.ok(await copyKey.evaluate((node) => node === (globalThis as any).document.activeElement), 'focus stays on the button')

      const [keyFile] = await Promise.all([page.waitForEvent('download'), confirm.getByRole('button', { name: 'Download the key' }).click()])
      t.equal(keyFile.suggestedFilename(), `${host}-${user.username}-authenticator-key.txt`, 'named for the site and the account')
      const keyText = await readFile((await keyFile.path())!, 'utf8')
      t.match(keyText, `\n${secret}\n`, 'the key, without spaces, on a line of its own')
      t.match(keyText, /otpauth:\/\/totp\//, 'and its otpauth: link')
      await t.resolves(status(page, `Saved the authenticator key as ${host}-${user.username}-authenticator-key.txt`).waitFor())

      await confirm.getByLabel('Code from the app').fill(await generate({ secret, epoch: Math.floor(Date.now() / 1000) }))
      await confirm.getByRole('button', { name: 'Turn on two-step login' }).click()
      await status(page, 'Two-step login is on.').waitFor()
      const box = page.locator('#recovery-codes')
      const codes = (await box.locator('#recovery-list li').allTextContents()).map((code) => code.trim())
      t.equal(codes.length, 10)

      await box.getByRole('button', { name: 'Copy the codes' }).click()
      await t.resolves(status(page, 'Copied the recovery codes to the clipboard.').waitFor())
      t.equal(await readClipboard(page), codes.join('\n'), 'the ten codes, one a line')

      const [codesFile] = await Promise.all([page.waitForEvent('download'), box.getByRole('button', { name: 'Download the codes' }).click()])
      t.equal(codesFile.suggestedFilename(), `${host}-${user.username}-recovery-codes.txt`)
      const codesText = await readFile((await codesFile.path())!, 'utf8')
      t.ok(codes.every((code) => codesText.includes(`\n${code}\n`)), 'every code, each on its own line')
      t.match(codesText, `Recovery codes of ${user.username} at ${new URL(base).host}`)
      await page.getByRole('button', { name: 'I have saved them' }).click()
      t.equal(await box.locator('#recovery-list li').count(), 0, 'the codes leave the page')
    })
  })
}
