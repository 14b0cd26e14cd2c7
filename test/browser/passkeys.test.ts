/**
 * Passkeys and two-step login in Chromium, through the web app's own buttons, with the
 * DevTools protocol's virtual authenticator as the user's device. The service runs at
 * http://localhost:<port> (its PUBLIC_URL): WebAuthn's relying party id cannot be an IP
 * address. A virtual authenticator belongs to one page, so each flow's page gets one holding
 * the passkeys the last flow left (signature counters included), as the same device would.
 *
 * Add a passkey in the security settings and rename it; log in with it and no username;
 * set up an authenticator app (its key read from the page, the codes computed by otplib);
 * then the password's second step by passkey, by code and by recovery code (once only).
 * Refused, with a message on the page: a cloned passkey whose counter went backwards, an
 * assertion made on another origin (which the relying party id allows, WEBAUTHN_ORIGINS
 * does not), the page opened at 127.0.0.1, and a deleted passkey still on the device. Then
 * an expired second step, new recovery codes, turning the app off, and (2-second access
 * cookies) the settings renewing an expired session as the other routes do.
 */
import { createServer } from 'node:http'
import { generate } from 'otplib'
import t from 'tap'
import type { CDPSession, Page, Response } from 'playwright-core'
import { WEBAUTHN_BUNDLE } from '../../src/plugins/web-app.js'
import { chromiumAvailable, flow, freePort, site } from '../helpers/chromium.js'
import { markVerified, newUser } from '../helpers/build.js'

/** A credential as the DevTools protocol lists and adds it (WebAuthn.Credential). */
interface Credential {
  credentialId: string
  isResidentCredential: boolean
  rpId?: string
  privateKey: string
  userHandle?: string
  signCount: number
}

interface Authenticator {
  cdp: CDPSession
  id: string
  credentials: () => Promise<Credential[]>
}

/** A virtual authenticator on `page` (user verification passes at once), holding `credentials`. */
async function authenticator (page: Page, credentials: Credential[] = []): Promise<Authenticator> {
  const cdp = await page.context().newCDPSession(page)
  await cdp.send('WebAuthn.enable')
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true }
  })
  for (const credential of credentials) await cdp.send('WebAuthn.addCredential', { authenticatorId, credential })
  return {
    cdp,
    id: authenticatorId,
    credentials: async () => (await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials as Credential[]
  }
}

/** The answer of `path` to what `action` makes the page send. */
async function answerTo (page: Page, path: string, action: () => Promise<void>): Promise<Response> {
  const [answer] = await Promise.all([
    page.waitForResponse((r) => new URL(r.url()).pathname === path && r.request().method() === 'POST'),
    action()
  ])
  return answer
}

/** A six-digit code that is not `code`. */
const wrongCode = (code: string): string => String((Number(code) + 500_000) % 1_000_000).padStart(6, '0')

/** A TOTP code for `secret` at `at` (ms), computed apart from the service. */
const codeFor = async (secret: string, at = Date.now()): Promise<string> => await generate({ secret, epoch: Math.floor(at / 1000) })

if (chromiumAvailable(t)) {
  t.test('passkeys and two-step login in the web app', async (t) => {
    const { app, base, context, browser: chromium } = await site(t, {}, undefined, 'localhost')
    const user = newUser()
    const created = await app.inject({ method: 'POST', url: '/api/user', payload: user })
    t.equal(created.statusCode, 201)
    // A factor needs a verified address.
    await markVerified(app, created.json().id)
    const browser = await context()
    /** The passkeys on the user's device, as the last flow left them. */
    let device: Credential[] = []
    let secret = ''
    let recoveryCodes: string[] = []
    let confirmedAt = 0

    const status = (page: Page, text: string | RegExp) => page.getByRole('status').filter({ hasText: text })
    const security = async (page: Page) => await (await page.request.get('/api/security')).json()

    async function logInWithPassword (page: Page) {
      const form = page.locator('#login')
      await form.getByLabel('Username or e-mail').fill(user.username)
      await form.getByLabel('Password').fill(user.password)
      return await answerTo(page, '/api/auth/login', () => form.getByRole('button', { name: 'Log in' }).click())
    }

    async function logOut (t: any, page: Page) {
      await page.getByRole('button', { name: 'Log out' }).click()
      await t.resolves(status(page, 'You are logged out.').waitFor())
    }

    /** Password, then the second step's form (the 202 checked). */
    async function toSecondStep (t: any, page: Page, methods: string[]) {
      const login = await logInWithPassword(page)
      t.equal(login.status(), 202, 'the password is right: 202, a second step is needed')
      const ticket = await login.json()
      t.same([...ticket.methods].sort(), [...methods].sort(), 'the methods offered')
      t.notOk((await login.allHeaders())['set-cookie'], 'no session cookie before the second step')
      await page.getByRole('heading', { name: 'Second step' }).waitFor()
      t.notOk(await page.locator('#login').isVisible(), 'the password form gives way to the second step')
      return page.locator('#second-step')
    }

    await flow(t, browser, 'add a passkey in the security settings, see it listed, rename it', async (t, page, console) => {
      await page.goto('/security')
      const device0 = await authenticator(page)
      await logInWithPassword(page)
      await t.resolves(status(page, `Logged in as ${user.username}`).waitFor())
      await page.getByRole('link', { name: 'Security' }).click()
      await t.resolves(page.getByText('No passkeys yet.').waitFor())
      // Signed in elsewhere too, with the password alone: the first passkey says it stays so.
      const elsewhere = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: user.username, password: user.password } })
      t.equal(elsewhere.statusCode, 200)
      await page.reload()
      await t.resolves(page.getByText('No passkeys yet.').waitFor())

      const add = page.locator('#passkey-add')
      await add.getByLabel('Name of the new passkey (optional)').fill('Laptop')
      await add.getByLabel('Password').fill(user.password)
      const created = await answerTo(page, '/api/security/passkeys', () => add.getByRole('button', { name: 'Add a passkey' }).click())
      t.equal(created.status(), 201)
      await t.resolves(status(page, 'Passkey "Laptop" added.').waitFor())
      t.match(await page.getByRole('status').textContent(), /One other session was signed in with your password alone and stays signed in: "Sign out everywhere else", under Sessions, ends them\./, 'the first second factor offers to end the other session')
      t.equal((await app.inject({ method: 'POST', url: '/api/auth/logout', headers: { authorization: `Bearer ${elsewhere.json().token}` } })).statusCode, 204, 'that session ends (the flows below count their own)')
      const list = page.locator('#passkeys li')
      await t.resolves(list.filter({ hasText: 'Laptop' }).getByText('never used').waitFor(), 'listed, never used yet')
      t.equal(await list.count(), 1)
      const [held] = await device0.credentials()
      t.ok(held?.isResidentCredential, 'a discoverable credential (a passkey)')
      t.equal(held?.rpId, 'localhost', 'for the relying party id of PUBLIC_URL')
      const listed = (await security(page)).passkeys
      t.match(listed, [{ id: /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, name: 'Laptop', lastUsedAt: null }], 'the API lists it by the service\'s short id')
      t.not(listed[0].id, Buffer.from(held!.credentialId, 'base64').toString('base64url'), 'not by the device\'s credential id')

      await page.getByLabel('New name for Laptop').fill('Work laptop')
      const [renamed] = await Promise.all([
        page.waitForResponse((r) => r.request().method() === 'PATCH' && new URL(r.url()).pathname === `/api/security/passkeys/${listed[0].id}`),
        page.getByRole('button', { name: 'Rename Laptop' }).click()
      ])
      t.equal(renamed.status(), 200)
      await t.resolves(status(page, 'Passkey renamed to "Work laptop".').waitFor())
      await t.resolves(list.filter({ hasText: 'Work laptop' }).waitFor())
      t.match((await security(page)).passkeys, [{ name: 'Work laptop' }], 'renamed in the API too')
      t.same(console.filter((line) => /^(error|warning|pageerror):/.test(line)), [], 'no errors in the console (a CSP violation would show here)')
      device = await device0.credentials()
    })

    await flow(t, browser, 'log out, then "Sign in with a passkey" with no username typed', async (t, page) => {
      await page.goto('/security')
      const held = await authenticator(page, device)
      await logOut(t, page)
      t.equal(await page.getByLabel('Username or e-mail').inputValue(), '', 'no username typed')
      const login = await answerTo(page, '/api/auth/passkey/login', () => page.getByRole('button', { name: 'Sign in with a passkey' }).click())
      t.equal(login.status(), 200)
      t.match(await login.json(), { mode: 'cookie' })
      await t.resolves(status(page, `Logged in as ${user.username}`).waitFor())
      await t.resolves(page.locator('#passkeys li').filter({ hasText: 'Work laptop' }).getByText(/last used/).waitFor(), 'the list says it was used')
      t.same((await security(page)).session.methods, ['passkey'], 'the session was signed in with a passkey')
      device = await held.credentials()
    })

    await flow(t, browser, 'set up an authenticator app: the key on the page, a code from it turns it on, ten recovery codes shown once', async (t, page) => {
      await page.goto('/security')
      await page.getByRole('heading', { name: 'Security' }).waitFor()
      await t.resolves(page.getByText('Off: your password alone logs you in.').waitFor())
      await page.locator('#totp-start').getByLabel('Password').fill(user.password)
      await page.getByRole('button', { name: 'Set up an authenticator app' }).click()
      const confirm = page.locator('#totp-confirm')
      await confirm.waitFor()
      const shown = (await page.locator('#totp-secret').textContent()) ?? ''
      t.match(shown, /^[A-Z2-7]{4}( [A-Z2-7]{1,4})+$/, 'a base32 key, in groups of four')
      secret = shown.replaceAll(' ', '')
      t.match(await page.getByRole('img', { name: /QR code/ }).getAttribute('src'), /^data:image\/svg\+xml;base64,/, 'the QR code')
      t.match(await page.getByRole('link', { name: /authenticator app on this device/ }).getAttribute('href'), new RegExp(`^otpauth://totp/.*secret=${secret}`), 'the otpauth: link')
      t.ok(await page.getByRole('img', { name: /QR code/ }).evaluate((img: any) => img.complete && img.naturalWidth > 0), 'the QR code is drawn (the CSP allows data: images)')

      await confirm.getByLabel('Code from the app').fill(wrongCode(await codeFor(secret)))
      await confirm.getByRole('button', { name: 'Turn on two-step login' }).click()
      await t.resolves(confirm.getByRole('alert').filter({ hasText: /\w/ }).waitFor(), 'a wrong code: the detail, in the form')
      // A session signed in elsewhere with the password alone, before the second factor.
      const before = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username: user.username, password: user.password } })
      t.equal(before.statusCode, 200)
      confirmedAt = Date.now()
      await confirm.getByLabel('Code from the app').fill(await codeFor(secret, confirmedAt))
      const confirmed = await answerTo(page, '/api/security/totp/confirm', () => confirm.getByRole('button', { name: 'Turn on two-step login' }).click())
      t.equal(confirmed.status(), 200)
      await t.resolves(status(page, 'Two-step login is on.').waitFor())
      const codes = page.locator('#recovery-list li')
      await codes.first().waitFor()
      recoveryCodes = (await codes.allTextContents()).map((code) => code.trim())
      t.same(recoveryCodes, (await confirmed.json()).recoveryCodes, 'the ten codes the service made')
      t.equal(recoveryCodes.length, 10)
      t.notOk(await page.locator('#totp-secret').isVisible(), 'the key is no longer shown')
      await t.resolves(page.getByText('One other session was signed in with your password alone and stays signed in.').waitFor(), 'the other sessions are offered to be ended')
      await page.locator('#recovery-codes').getByRole('button', { name: 'Sign out everywhere else' }).click()
      await t.resolves(status(page, 'Signed out everywhere else: one session ended.').waitFor())
      const ended = await app.inject({ method: 'GET', url: '/api/security', headers: { authorization: `Bearer ${before.json().token as string}` } })
      t.equal(ended.statusCode, 401, 'the session from before the second factor has ended')
      t.equal(await codes.count(), 10, 'the codes stay until they are saved')
      await page.getByRole('button', { name: 'I have saved them' }).click()
      t.equal(await codes.count(), 0, 'the codes leave the page')
      await t.resolves(page.getByText(/^On since .* or a passkey\.$/).waitFor())
      await t.resolves(page.getByText('Recovery codes left: 10 of 10.').waitFor())
      t.match(await security(page), { totp: { enabled: true }, recoveryCodesLeft: 10 })
    })

    await flow(t, browser, 'log in with the password, then a passkey as the second step', async (t, page) => {
      await page.goto('/security')
      const held = await authenticator(page, device)
      await logOut(t, page)
      const step = await toSecondStep(t, page, ['totp', 'recoveryCode', 'recovery-code', 'passkey'])
      const done = await answerTo(page, '/api/auth/mfa/passkey', () => step.getByRole('button', { name: 'Use a passkey' }).click())
      t.equal(done.status(), 200)
      await t.resolves(status(page, `Logged in as ${user.username}`).waitFor())
      t.ok((await security(page)).session.methods.includes('passkey'), 'the session\'s methods')
      device = await held.credentials()
    })

    await flow(t, browser, 'log in with the password, then a code from the app (a wrong one first)', async (t, page) => {
      await page.goto('/security')
      await logOut(t, page)
      const step = await toSecondStep(t, page, ['totp', 'recoveryCode', 'recovery-code', 'passkey'])
      await step.getByLabel('Code from the app').fill(wrongCode(await codeFor(secret)))
      const refused = await answerTo(page, '/api/auth/mfa/totp', () => step.getByRole('button', { name: 'Continue' }).click())
      t.equal(refused.status(), 401)
      t.match(await refused.json(), { code: 'MFA_CODE_INVALID' })
      await t.resolves(step.getByRole('alert').filter({ hasText: /\w/ }).waitFor(), 'the detail, in the form')
      // A code is taken once: still in the 30 s step that turned the app on, the next step's.
      const sameStep = Math.floor(Date.now() / 30_000) === Math.floor(confirmedAt / 30_000)
      await step.getByLabel('Code from the app').fill(await codeFor(secret, sameStep ? Date.now() + 30_000 : Date.now()))
      const done = await answerTo(page, '/api/auth/mfa/totp', () => step.getByRole('button', { name: 'Continue' }).click())
      t.equal(done.status(), 200)
      await t.resolves(status(page, `Logged in as ${user.username}`).waitFor())
    })

    await flow(t, browser, 'log in with the password, then a recovery code; the same code again is refused', async (t, page) => {
      await page.goto('/security')
      await logOut(t, page)
      let step = await toSecondStep(t, page, ['totp', 'recoveryCode', 'recovery-code', 'passkey'])
      await step.getByRole('button', { name: 'Use a recovery code' }).click()
      await step.getByLabel('Recovery code').fill(recoveryCodes[0]!)
      const done = await answerTo(page, '/api/auth/mfa/totp', () => step.getByRole('button', { name: 'Continue' }).click())
      t.equal(done.status(), 200)
      await t.resolves(status(page, `Logged in as ${user.username}`).waitFor())
      await t.resolves(page.getByText('Recovery codes left: 9 of 10.').waitFor())

      await logOut(t, page)
      step = await toSecondStep(t, page, ['totp', 'recoveryCode', 'recovery-code', 'passkey'])
      await step.getByRole('button', { name: 'Use a recovery code' }).click()
      await step.getByLabel('Recovery code').fill(recoveryCodes[0]!)
      const again = await answerTo(page, '/api/auth/mfa/totp', () => step.getByRole('button', { name: 'Continue' }).click())
      t.equal(again.status(), 401)
      t.match(await again.json(), { code: 'MFA_CODE_INVALID' })
      await t.resolves(step.getByRole('alert').filter({ hasText: /\w/ }).waitFor(), 'refused, with the detail in the form')
      t.ok(await step.isVisible(), 'still at the second step')
      await step.getByRole('button', { name: 'Cancel' }).click()
      await t.resolves(page.locator('#login').waitFor(), 'back to the password')
    })

    await flow(t, browser, 'a cloned passkey whose counter went backwards is refused', async (t, page) => {
      await page.goto('/security')
      const original = await authenticator(page, device)
      const signIn = async () => await answerTo(page, '/api/auth/passkey/login', () => page.getByRole('button', { name: 'Sign in with a passkey' }).click())
      t.equal((await signIn()).status(), 200)
      await t.resolves(status(page, `Logged in as ${user.username}`).waitFor())
      device = await original.credentials()
      const [credential] = device
      t.ok(credential!.signCount >= 2, `the device counts its signatures (${credential!.signCount})`)
      t.ok(credential!.privateKey, 'the private key, to copy')
      await logOut(t, page)

      // A copy of the key on another device, whose counter is behind the original's.
      await original.cdp.send('WebAuthn.removeVirtualAuthenticator', { authenticatorId: original.id })
      await authenticator(page, [{ ...credential!, signCount: credential!.signCount - 2 }])
      const refused = await signIn()
      t.equal(refused.status(), 401)
      const problem = await refused.json()
      t.match(problem, { code: 'PASSKEY_REFUSED', detail: /counter/i })
      await t.resolves(page.locator('#login').getByRole('alert').filter({ hasText: problem.detail }).waitFor(), 'the detail, on the login form')
      t.ok(await page.locator('#login').isVisible(), 'not logged in')
      t.notOk(await page.getByRole('heading', { name: 'Security' }).isVisible())
    })

    await t.test('an assertion made on another origin, which the relying party id allows, is refused', async (t) => {
      // http://localhost:<other port>: the same RP id (localhost), not in WEBAUTHN_ORIGINS.
      const port = await freePort()
      const other = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>Another origin</title><p>Another site'))
      await new Promise<void>((resolve) => other.listen(port, '127.0.0.1', resolve))
      t.teardown(() => new Promise((resolve) => other.close(resolve)))
      const page = await browser.newPage()
      t.teardown(() => page.close())
      await page.goto(`http://localhost:${port}/`)
      await authenticator(page, device)
      await page.addScriptTag({ path: WEBAUTHN_BUNDLE })
      const optionsJSON = await (await fetch(`${base}/api/auth/passkey/options`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).json()
      const response = await page.evaluate(async (optionsJSON) => await (globalThis as any).SimpleWebAuthnBrowser.startAuthentication({ optionsJSON }), optionsJSON)
      const client = JSON.parse(Buffer.from(response.response.clientDataJSON, 'base64url').toString())
      t.equal(client.origin, `http://localhost:${port}`, 'the browser signed for the other origin')
      const refused = await fetch(`${base}/api/auth/passkey/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ response }) })
      t.equal(refused.status, 401)
      t.match(await refused.json(), { code: 'PASSKEY_REFUSED', detail: /origin/i })
    })

    await flow(t, browser, 'the page opened at 127.0.0.1 (an address the passkey is not for) says where passkeys work', async (t, page) => {
      await page.goto(base.replace('localhost', '127.0.0.1') + '/login')
      await authenticator(page, device)
      await page.getByRole('button', { name: 'Sign in with a passkey' }).click()
      await t.resolves(page.locator('#login').getByRole('alert').filter({ hasText: 'Passkeys work only at this service\'s own address' }).waitFor())
    })

    await flow(t, browser, 'a deleted passkey is refused, though the device still holds it', async (t, page) => {
      await page.goto('/security')
      const held = await authenticator(page, device)
      // The original device still signs in: the refused clone did not lock it.
      const login = await answerTo(page, '/api/auth/passkey/login', () => page.getByRole('button', { name: 'Sign in with a passkey' }).click())
      t.equal(login.status(), 200)
      await t.resolves(status(page, `Logged in as ${user.username}`).waitFor())
      const removed = page.waitForResponse((r) => r.request().method() === 'DELETE' && r.url().includes('/api/security/passkeys/'))
      await page.getByRole('button', { name: 'Delete Work laptop' }).click()
      const ask = page.getByRole('dialog', { name: 'Delete the passkey “Work laptop”?' })
      t.match(await ask.textContent(), 'you will have no passkey left', 'asked first, saying what is lost')
      await ask.getByRole('button', { name: 'Delete Work laptop' }).click()
      t.equal((await removed).status(), 204)
      await t.resolves(status(page, 'Passkey "Work laptop" deleted').waitFor())
      await t.resolves(page.getByText('No passkeys yet.').waitFor())
      t.same((await security(page)).passkeys, [])
      t.equal((await held.credentials()).length, 1, 'the device still holds it')

      await logOut(t, page)
      const refused = await answerTo(page, '/api/auth/passkey/login', () => page.getByRole('button', { name: 'Sign in with a passkey' }).click())
      t.equal(refused.status(), 401)
      const problem = await refused.json()
      t.match(problem, { code: 'PASSKEY_REFUSED' })
      await t.resolves(page.locator('#login').getByRole('alert').filter({ hasText: problem.detail }).waitFor(), 'the detail, on the login form')

      const step = await toSecondStep(t, page, ['totp', 'recoveryCode', 'recovery-code'])
      t.notOk(await step.getByRole('button', { name: 'Use a passkey' }).isVisible(), 'no passkey offered at the second step')
    })

    await flow(t, browser, 'an expired second step goes back to the password; new recovery codes replace the old; turning the app off', async (t, page) => {
      await page.goto('/security')
      // The ticket expires after 5 minutes: one the service no longer knows stands for it.
      await page.route('**/api/auth/mfa/totp', async (route) => {
        await route.continue({ postData: JSON.stringify({ ...route.request().postDataJSON(), mfaToken: 'x'.repeat(43) }) })
      }, { times: 1 })
      let step = await toSecondStep(t, page, ['totp', 'recoveryCode', 'recovery-code'])
      await step.getByRole('button', { name: 'Use a recovery code' }).click()
      await step.getByLabel('Recovery code').fill(recoveryCodes[1]!)
      const expired = await answerTo(page, '/api/auth/mfa/totp', () => step.getByRole('button', { name: 'Continue' }).click())
      t.match(await expired.json(), { status: 401, code: 'MFA_TOKEN_INVALID' })
      await t.resolves(page.locator('#login').getByRole('alert').filter({ hasText: 'log in again' }).waitFor(), 'back to the password, saying why')
      t.notOk(await step.isVisible())

      step = await toSecondStep(t, page, ['totp', 'recoveryCode', 'recovery-code'])
      await step.getByRole('button', { name: 'Use a recovery code' }).click()
      await step.getByLabel('Recovery code').fill(recoveryCodes[1]!)
      await step.getByRole('button', { name: 'Continue' }).click()
      await t.resolves(status(page, `Logged in as ${user.username}`).waitFor(), 'the code the expired step did not use still works')
      await t.resolves(page.getByText('Recovery codes left: 8 of 10.').waitFor())

      await page.locator('#recovery-new').getByLabel('Password').fill(user.password)
      const made = await answerTo(page, '/api/security/recovery-codes', async () => {
        await page.getByRole('button', { name: 'Make new recovery codes' }).click()
        const ask = page.getByRole('dialog', { name: 'Make new recovery codes?' })
        t.match(await ask.textContent(), 'The 8 codes you have now stop working at once', 'asked first, saying what is lost')
        await ask.getByRole('button', { name: 'Make new recovery codes' }).click()
      })
      t.equal(made.status(), 200)
      await t.resolves(status(page, 'New recovery codes').waitFor())
      const fresh = (await page.locator('#recovery-list li').allTextContents()).map((code) => code.trim())
      t.same(fresh, (await made.json()).recoveryCodes, 'the ten new codes, shown')
      await page.getByRole('button', { name: 'I have saved them' }).click()
      await t.resolves(page.getByText('Recovery codes left: 10 of 10.').waitFor())

      await logOut(t, page)
      step = await toSecondStep(t, page, ['totp', 'recoveryCode', 'recovery-code'])
      await step.getByRole('button', { name: 'Use a recovery code' }).click()
      await step.getByLabel('Recovery code').fill(recoveryCodes[2]!)
      const old = await answerTo(page, '/api/auth/mfa/totp', () => step.getByRole('button', { name: 'Continue' }).click())
      t.match(await old.json(), { status: 401, code: 'MFA_CODE_INVALID' }, 'an old code no longer works')
      await step.getByLabel('Recovery code').fill(fresh[0]!)
      await step.getByRole('button', { name: 'Continue' }).click()
      await t.resolves(status(page, `Logged in as ${user.username}`).waitFor(), 'a new one does')

      const off = page.locator('#totp-disable')
      await off.getByLabel('Password').fill('not my password')
      await off.getByRole('button', { name: 'Turn off two-step login' }).click()
      const ask = page.getByRole('dialog', { name: 'Turn off two-step login?' })
      t.match(await ask.textContent(), 'recovery codes stop working for good', 'asked first, saying what is lost')
      await ask.getByRole('button', { name: 'Turn off two-step login' }).click()
      await t.resolves(off.getByRole('alert').filter({ hasText: /password/i }).waitFor(), 'a wrong password: the detail, and still logged in')
      t.ok(await page.getByRole('heading', { name: 'Security' }).isVisible())
      await off.getByLabel('Password').fill(user.password)
      await off.getByRole('button', { name: 'Turn off two-step login' }).click()
      await ask.getByRole('button', { name: 'Turn off two-step login' }).click()
      await t.resolves(status(page, 'Two-step login is off').waitFor())
      await t.resolves(page.getByText('Off: your password alone logs you in.').waitFor())
      t.match(await security(page), { totp: { enabled: false }, recoveryCodesLeft: 0 })

      await logOut(t, page)
      const login = await logInWithPassword(page)
      t.equal(login.status(), 200, 'the password alone logs in again')
      await t.resolves(status(page, `Logged in as ${user.username}`).waitFor())
    })

    // Access cookies of 2 s: the settings' requests renew an expired one, as the others do.
    await t.test('an expired access cookie is refreshed for the security settings too', async (t) => {
      const { app, context } = await site(t, { env: { ACCESS_TOKEN_TTL: '2s' } }, chromium)
      const other = newUser()
      const created = await app.inject({ method: 'POST', url: '/api/user', payload: other })
      t.equal(created.statusCode, 201)
      await markVerified(app, created.json().id)
      await flow(t, await context(), 'set up an authenticator app after the access cookie expired', async (t, page) => {
        await page.goto('/security')
        const form = page.locator('#login')
        await form.getByLabel('Username or e-mail').fill(other.username)
        await form.getByLabel('Password').fill(other.password)
        await form.getByRole('button', { name: 'Log in' }).click()
        await page.getByRole('button', { name: 'Set up an authenticator app' }).waitFor()
        await page.waitForTimeout(2500)
        t.same(await page.context().cookies(`${page.url()}api/security`), [], 'the access cookie has expired')
        const refreshes: number[] = []
        page.on('response', (r) => { if (r.url().endsWith('/api/auth/refresh-token')) refreshes.push(r.status()) })
        await page.locator('#totp-start').getByLabel('Password').fill(other.password)
        await page.getByRole('button', { name: 'Set up an authenticator app' }).click()
        await t.resolves(page.locator('#totp-secret').filter({ hasText: /^[A-Z2-7]{4}( [A-Z2-7]{1,4})+$/ }).waitFor(), 'the key is shown')
        t.same(refreshes, [200], 'one refresh, then the request again')
      })
    })
  })
}
