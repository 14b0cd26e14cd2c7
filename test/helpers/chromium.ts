/**
 * A real browser for the web app's tests: Debian's Chromium driven by playwright-core (the
 * `playwright` package's browser download cannot work offline). One browser per test file,
 * the service listening on 127.0.0.1 (a secure context to Chromium, so the Secure session
 * cookies are kept over plain HTTP). A flow that fails saves a screenshot and the page's
 * console under the OS temp dir and prints where.
 */
import { existsSync } from 'node:fs'
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { chromium, type Browser, type BrowserContext, type BrowserContextOptions, type Page } from 'playwright-core'
import { build, type BuildOptions, type TestApp } from './build.js'

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
export const NO_CHROMIUM_MESSAGE = `no Chromium at ${CHROMIUM}: install it with \`apt-get install -y --no-install-recommends chromium\` (or set CHROMIUM_PATH)`
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync']

interface Tap {
  teardown: (fn: () => unknown) => void
  plan: (n: number, reason?: string) => void
  comment: (...message: unknown[]) => void
  passing: () => boolean
  test: (name: string, fn: (t: Tap & Record<string, any>) => Promise<void>) => Promise<unknown>
}

/** False (and the file skipped) without a browser; in CI that is a failure instead. */
export function chromiumAvailable (t: Tap): boolean {
  if (existsSync(CHROMIUM)) return true
  if (process.env.CI) throw new Error(`CI needs a browser: ${NO_CHROMIUM_MESSAGE}`)
  t.plan(0, `skipped: ${NO_CHROMIUM_MESSAGE}`)
  return false
}

export interface Site {
  app: TestApp
  /** http://127.0.0.1:<port>, or http://localhost:<port> */
  base: string
  browser: Browser
  /** A fresh context (its own cookies and storage), closed at the end of the file. */
  context: (options?: BrowserContextOptions) => Promise<BrowserContext>
}

/** A port no one listens on now, on 127.0.0.1. */
export async function freePort (): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise((resolve) => server.close(resolve))
  return port
}

/**
 * The service on a free loopback port and a Chromium (`shared`, or one of its own), closed at
 * teardown. A second site of a file shares the first one's browser: a browser costs more
 * CPU to start than an app. With `host: 'localhost'` the page opens http://localhost:<port>,
 * which is also the service's PUBLIC_URL: WebAuthn's relying party ids cannot be IP addresses.
 */
export async function site (t: Tap, options: BuildOptions = {}, shared?: Browser, host: '127.0.0.1' | 'localhost' = '127.0.0.1'): Promise<Site> {
  let port = 0
  if (host === 'localhost') {
    port = await freePort()
    options = { ...options, env: { PUBLIC_URL: `http://localhost:${port}`, ...options.env } }
  }
  const app = await build(t, options)
  await app.listen({ port, host: '127.0.0.1' })
  port = (app.server.address() as { port: number }).port
  let browser = shared
  if (browser === undefined) {
    const launched = browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true })
    t.teardown(async () => { await launched.close() })
  }
  const base = `http://${host}:${port}`
  const context = async (options: BrowserContextOptions = {}): Promise<BrowserContext> => {
    const created = await browser!.newContext({ baseURL: base, acceptDownloads: true, ...options })
    // Every wait ends when its condition holds; the bound only decides how long a broken
    // step takes to fail: 20 s, because beside the rest of the suite on two cores Swagger UI's
    // first render of the document can take longer than 5 s.
    created.setDefaultTimeout(20_000)
    return created
  }
  return { app, base, browser, context }
}

/**
 * A Chromium profile whose settings allow third-party cookies, as a regular Chrome profile's
 * do by default (`profile.cookie_controls_mode` 0). The contexts of `site` are off the
 * record, where Chromium blocks them (blocked reason `UserPreferences`), as Safari does
 * everywhere. Closed and removed at teardown.
 */
export async function thirdPartyCookiesAllowed (t: Tap, base: string): Promise<BrowserContext> {
  const profile = await mkdtemp(path.join(tmpdir(), 'chromium-profile-'))
  await mkdir(path.join(profile, 'Default'))
  await writeFile(path.join(profile, 'Default', 'Preferences'), JSON.stringify({ profile: { cookie_controls_mode: 0 } }))
  const context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, args: ARGS, headless: true, baseURL: base })
  context.setDefaultTimeout(20_000)
  t.teardown(async () => {
    await context.close()
    await rm(profile, { recursive: true, force: true })
  })
  return context
}

const artifacts = path.join(tmpdir(), `browser-tests-${process.pid}`)

/**
 * Runs `fn` on a new page of `context` as a subtest. The page's console (CSP violations
 * show there as errors) is kept; on a failure the screenshot and the console go to a folder
 * under the OS temp dir, named in the failure.
 */
export async function flow (t: Tap, context: BrowserContext, name: string, fn: (t: any, page: Page, console: string[]) => Promise<void>): Promise<void> {
  await t.test(name, async (t) => {
    const page = await context.newPage()
    const log: string[] = []
    page.on('console', (message) => log.push(`${message.type()}: ${message.text()}`))
    page.on('pageerror', (error) => log.push(`pageerror: ${error.message}`))
    let thrown: unknown
    try {
      await fn(t, page, log)
    } catch (error) {
      thrown = error
    }
    if (thrown !== undefined || !t.passing()) {
      await mkdir(artifacts, { recursive: true })
      const file = path.join(artifacts, name.replace(/[^A-Za-z0-9]+/g, '-'))
      await page.screenshot({ path: `${file}.png`, fullPage: true }).catch(() => {})
      await writeFile(`${file}.console.txt`, `${page.url()}\n${log.join('\n')}\n`)
      const where = `screenshot and console log: ${file}.png, ${file}.console.txt`
      if (thrown !== undefined) throw new Error(`${(thrown as Error).message ?? String(thrown)}\n${where}`)
      t.comment(where)
    }
    await page.close()
  })
}

/** Signs `user` up through the page's own form (the page shows it): resolves once the app welcomes them. */
export async function signUpInPage (page: Page, user: { username: string, email: string, names: string, password: string }): Promise<void> {
  await page.getByRole('heading', { name: 'Sign up' }).waitFor()
  const form = page.locator('#signup')
  await form.getByLabel('Username').fill(user.username)
  await form.getByLabel('E-mail').fill(user.email)
  await form.getByLabel('Name (optional)').fill(user.names)
  await form.getByLabel('Password').fill(user.password)
  await form.getByRole('button', { name: 'Sign up' }).click()
  await page.getByRole('status').filter({ hasText: `Welcome, ${user.names}` }).waitFor()
}
