/**
 * SIGTERM with SHUTDOWN_DRAIN_MS (the real server, child process): readiness turns 503 at
 * once, requests (new connections included) are still served for the drain time, then the
 * server closes as without a drain and exits 0. This is what lets a proxy take a replica out
 * of rotation before it stops accepting (test/deploy/rolling-restart-host.test.ts).
 */
import t from 'tap'
import { createTestDatabase } from '../helpers/database.js'
import { call, isAnswer } from './helpers/http.js'
import { spawnServer } from './helpers/server.js'

t.test('SIGTERM drains first: readiness 503, requests still served, then exit 0', async (t) => {
  // Long enough for a starved machine (load 30 on 2 cores) to answer a few requests in it.
  const DRAIN_MS = 8000
  const server = await spawnServer(t, { DATABASE_URL: await createTestDatabase(t), SHUTDOWN_DRAIN_MS: String(DRAIN_MS), SHUTDOWN_GRACE_MS: '30000' })
  const before = await call(server.url, 'GET', '/health/ready')
  t.equal(isAnswer(before) && before.status, 200, 'ready before the signal')

  const sent = Date.now()
  server.child.kill('SIGTERM')
  // Readiness until it turns 503, and reads (new connections: the drain answers with
  // Connection: close) until two were answered while draining; stop well before the close.
  const ready: number[] = []
  const failed: string[] = []
  const readsWhileDraining: number[] = []
  let drainingAfter: number | undefined
  while (Date.now() - sent < DRAIN_MS * 0.6 && readsWhileDraining.length < 2) {
    const probe = await call(server.url, 'GET', '/health/ready', { timeoutMs: 20_000 })
    if (!isAnswer(probe)) failed.push(`ready: ${probe.error}`)
    else {
      ready.push(probe.status)
      if (probe.status === 503) {
        drainingAfter ??= Date.now() - sent
        t.equal(probe.json?.code, 'SERVICE_UNAVAILABLE', 'a problem body')
      }
    }
    const read = await call(server.url, 'GET', '/api/product', { timeoutMs: 20_000 })
    if (!isAnswer(read)) failed.push(`read: ${read.error}`)
    else if (drainingAfter !== undefined) readsWhileDraining.push(read.status)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  const exit = await server.exited
  t.comment(`readiness 503 after ${drainingAfter} ms; ${readsWhileDraining.length} reads while draining; exit after ${exit.at - sent} ms`)
  t.same(failed, [], 'every request during the drain got an answer')
  t.ok(drainingAfter !== undefined, 'readiness answered 503 during the drain')
  t.same([...new Set(ready.slice(ready.indexOf(503)))], [503], 'and stayed 503')
  t.ok(readsWhileDraining.length >= 1, 'reads were sent while readiness said 503')
  t.same([...new Set(readsWhileDraining)], [200], 'and served')
  t.equal(exit.code, 0, 'exit 0')
  t.ok(exit.at - sent >= DRAIN_MS - 100, `it served for the whole drain before closing (${exit.at - sent} ms)`)
  t.ok(server.logs.some((l) => l.msg?.startsWith('draining')), 'the drain is logged')
})
