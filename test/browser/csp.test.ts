/**
 * The Content-Security-Policy in Chromium: the web app's pages take styles from the service's
 * own files only (`style-src 'self'`: no inline style, no other https: origin) and work under
 * it with no violation reported (sign-up, the profile, the pages of the e-mailed links); an
 * inline style put into the page is refused and reported. The OpenAPI page (/docs) has its own
 * policy and renders under it, with no violation either.
 */
import t from 'tap'
import type { BrowserContext } from 'playwright-core'
import { chromiumAvailable, flow, signUpInPage, site } from '../helpers/chromium.js'
import { newUser } from '../helpers/build.js'

/** Every `securitypolicyviolation` of the context's pages, kept in the page (`window.violations`). */
async function recordViolations (context: BrowserContext): Promise<void> {
  await context.addInitScript({
    content: `window.violations = []
      document.addEventListener('securitypolicyviolation', (event) => { window.violations.push(event.violatedDirective + ' ' + event.blockedURI) })`
  })
}

const violations = async (page: { evaluate: (script: string) => Promise<unknown> }): Promise<string[]> => await page.evaluate('window.violations') as string[]

/** The directives of a CSP header, by name. */
function directives (header: string | undefined): Map<string, string> {
  return new Map((header ?? '').split(';').map((part) => part.trim()).filter(Boolean).map((part) => {
    const [name, ...values] = part.split(/\s+/)
    return [name!, values.join(' ')]
  }))
}

if (chromiumAvailable(t)) {
  t.test('the CSP of the web app and of the OpenAPI page', async (t) => {
    const { context } = await site(t)
    const browser = await context()
    await recordViolations(browser)
    const user = { ...newUser(), names: 'Grace Hopper' }

    await flow(t, browser, 'the web app: style-src \'self\', and it works with no violation', async (t, page, console) => {
      const answer = await page.goto('/login')
      const csp = directives(answer!.headers()['content-security-policy'])
      t.equal(csp.get('style-src'), '\'self\'', 'styles from the service\'s own files only')
      t.equal(csp.get('script-src'), '\'self\'')
      t.notOk(csp.get('img-src')?.includes('validator.swagger.io'), 'the OpenAPI page\'s allowance stays on its own route')
      await t.resolves(signUpInPage(page, user), 'signed up')
      await page.locator('#profile').waitFor()
      t.equal(await page.locator('#details-email').inputValue(), user.email, 'the profile shows the account')
      // The style sheet applies: the hidden login form is not shown, the app's font is not the default.
      t.not(await page.evaluate('getComputedStyle(document.body).fontFamily'), 'Times New Roman', 'web/app.css applies')
      for (const path of ['/reset-password#token=abc', '/verify-email#token=abc']) {
        const link = await page.goto(path)
        t.equal(directives(link!.headers()['content-security-policy']).get('style-src'), '\'self\'', `${path.split('#')[0]}: the same policy`)
        await page.locator('main').waitFor()
      }
      t.same(await violations(page), [], 'no violation reported')
      t.same(console.filter((line) => /^(error|pageerror):/.test(line) && /Content Security Policy|style/i.test(line)), [], 'none in the console either')
    })

    await flow(t, browser, 'an inline style put into the page is refused and reported', async (t, page) => {
      await page.goto('/')
      await page.getByRole('heading', { name: /Sign up|Profile|Products/ }).first().waitFor()
      const color = await page.evaluate(`(() => {
        const div = document.createElement('div')
        div.innerHTML = '<p id="injected" style="color: rgb(255, 0, 0)">injected</p><style>#injected { background: rgb(0, 255, 0) }</style>'
        document.body.append(div)
        const p = document.getElementById('injected')
        return [getComputedStyle(p).color, getComputedStyle(p).backgroundColor]
      })()`) as string[]
      t.not(color[0], 'rgb(255, 0, 0)', 'the style attribute is not applied')
      t.not(color[1], 'rgb(0, 255, 0)', 'nor the <style> element')
      await page.waitForFunction('window.violations.length >= 2')
      t.match((await violations(page)).join('\n'), /style-src/, 'both reported as style-src violations')
    })

    await flow(t, browser, 'the OpenAPI page renders under its own policy, with no violation', async (t, page, console) => {
      const answer = await page.goto('/docs')
      t.ok(directives(answer!.headers()['content-security-policy']).has('style-src'), 'a policy of its own')
      await page.locator('#operations-users-getUser').waitFor()
      await page.locator('#operations-users-getUser .opblock-summary').first().click()
      await page.locator('#operations-users-getUser').getByRole('button', { name: 'Try it out' }).waitFor()
      t.ok(await page.locator('.swagger-ui .info .title').isVisible(), 'the document\'s title is shown')
      t.same(await violations(page), [], 'no violation reported')
      t.same(console.filter((line) => /^(error|pageerror):/.test(line)), [], 'no error in the console')
    })
  })
}
