/**
 * The web app's weight and first load in Chromium: the bytes of the first page's HTML, CSS
 * and JavaScript (as sent and gzip-compressed), and the time from navigation to the `load`
 * event and to the product list shown, median of N loads, each in a fresh browser context
 * (empty cache). Rewrites "The web app" in bench/README.md.
 *
 *   npx tsx bench/web-app.ts            10 loads; WEB_LOADS=<n>, WEB_WRITE=0 prints only
 *   DATABASE_URL=postgresql://...       a fresh database on that server
 */
import { gzipSync } from 'node:zlib'
import { chromium } from 'playwright-core'
import { benchDatabase } from './lib/database.js'
import { describeMachine, formatLoad, machine } from './lib/machine.js'
import { startServer } from './lib/processes.js'
import { markdownTable, median } from './lib/report.js'
import { serviceEnv } from './lib/service.js'

const LOADS = Number(process.env.WEB_LOADS ?? 10)
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync']

const database = await benchDatabase()
// Ready, not only live: until its migrations are checked the service answers 503 (a problem, not the shell).
const service = await startServer({ entry: 'src/server.ts', env: serviceEnv(database.url), readyPath: '/health/ready' })
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', args: ARGS, headless: true })
try {
  // The shell and every file it names (the hashed assets), as sent: uncompressed, and
  // gzip-compressed at level 9 (the service sends brotli when asked, smaller still).
  const shell = await (await fetch(service.url + '/', { headers: { 'accept-encoding': 'identity' } })).text()
  const files = ['/', ...new Set([...shell.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)].map((m) => m[1]!))]
  const sizes = await Promise.all(files.map(async (file) => {
    const body = Buffer.from(await (await fetch(service.url + file, { headers: { 'accept-encoding': 'identity' } })).arrayBuffer())
    return { file, raw: body.length, gzip: gzipSync(body, { level: 9 }).length }
  }))
  const loads: Array<{ load: number, ready: number }> = []
  for (let i = 0; i < LOADS; i++) {
    const context = await browser.newContext()
    const page = await context.newPage()
    const start = performance.now()
    await page.goto(service.url + '/', { waitUntil: 'load' })
    const load = performance.now() - start
    // The catalogue shown, its products read: the router clears aria-busy once they are.
    await page.locator('main:not([aria-busy]) > #catalogue:not([hidden])').waitFor()
    loads.push({ load, ready: performance.now() - start })
    await context.close()
  }
  const total = { raw: sizes.reduce((s, f) => s + f.raw, 0), gzip: sizes.reduce((s, f) => s + f.gzip, 0) }
  const ms = (values: number[]): string => `${median(values).toFixed(0)} ms (${Math.min(...values).toFixed(0)}-${Math.max(...values).toFixed(0)})`
  const report = [
    `${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC, ${describeMachine(machine())}, load average ${formatLoad(machine().load)}; Chromium ${browser.version()}, headless, a fresh context (empty cache) per load, the service on 127.0.0.1 (\`npx tsx bench/web-app.ts\`).`,
    '',
    markdownTable(['file', 'bytes', 'gzip -9'], [...sizes.map((f) => [`\`${f.file}\``, String(f.raw), String(f.gzip)]), ['first page, in all', String(total.raw), String(total.gzip)]]),
    '',
    markdownTable(['first load, median of ' + String(LOADS) + ' (min-max)', 'time'], [
      ['navigation to the `load` event (HTML, CSS, the modules of the start)', ms(loads.map((l) => l.load))],
      ['navigation to the product list shown (+ `GET /api/product`)', ms(loads.map((l) => l.ready))]
    ])
  ].join('\n')
  console.log(report)
  if (process.env.WEB_WRITE !== '0') {
    const { writeSection } = await import('./lib/report.js')
    writeSection(new URL('./README.md', import.meta.url).pathname, 'web-app', `## The web app\n\n${report}`)
  }
} finally {
  await browser.close()
  await service.stop()
  await database.drop()
}
