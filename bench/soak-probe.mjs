/**
 * Loaded into the server under soak (`node --expose-gc --import ./bench/soak-probe.mjs`):
 * on SIGWINCH (a signal close-with-grace leaves alone) it collects garbage and writes
 * the process's memory figures to SOAK_MEMORY_FILE, so the soak can compare the heap at
 * start and end without a debugger or an extra route.
 */
import { writeFileSync } from 'node:fs'

const file = process.env.SOAK_MEMORY_FILE
if (file) {
  process.on('SIGWINCH', () => {
    globalThis.gc?.()
    const { rss, heapUsed, heapTotal, external } = process.memoryUsage()
    writeFileSync(file, JSON.stringify({ at: Date.now(), rss, heapUsed, heapTotal, external }))
  })
}
