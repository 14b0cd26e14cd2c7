/**
 * Stalled CSV readers through the compose deployment's proxy (deploy/haproxy.cfg run by
 * Debian's HAProxy on the host, in front of the real server in a child process): the proxy's
 * buffers fill, then it stops reading from the service, so the service holds what it holds
 * for a direct stalled reader (one batch of text, docs/api.md "CSV"), not more. The page is
 * 5,000 long rows (36 MB): the kernel buffers between the service and the proxy (which
 * read fast at first, so their windows grew) take several MB of it; 1,000 rows (7 MB) fit
 * there whole, and even a 500-row batch was never held then. 60 readers,
 * each from its own address (the proxy's 32 per address are not what this measures), under
 * the proxy's 64 requests in progress per replica; `timeout client` raised from 10 s to 60 s
 * so that the readers are still there when measured (a reader just fast enough to stay
 * would be).
 */
import t from 'tap'
import { freePort } from '../../src/db/embedded.js'
import { newUser } from '../helpers/build.js'
import { createTestDatabase, sqlClient } from '../helpers/database.js'
import { memoryPerStalledReader, seedLongProducts } from '../faults/helpers/csv-readers.js'
import { spawnServer } from '../faults/helpers/server.js'
import { haproxyMissing, startHaproxy } from './helpers/haproxy.js'

const missing = haproxyMissing()
if (missing !== undefined && process.env.CI !== undefined) throw new Error(`CI needs HAProxy: ${missing}`)

const ROWS = 5000
const FIRST = 16
const MORE = 44
/**
 * What a stalled reader may cost the service, at most: one batch of text, and RSS counts the
 * garbage of the MB each reader's answer put in the kernel buffers (1.3 MB each measured;
 * a 500-row batch held: 12.6 MB each).
 */
const PER_READER_MB = 4

t.test(`${FIRST + MORE} stalled CSV readers through the proxy keep the service's memory bounded`, { skip: missing }, async (t) => {
  const databaseUrl = await createTestDatabase(t)
  // As in compose: the service believes X-Forwarded-For from the proxy only (its per-client
  // share is then per reader). No minimum read rate on the service (see the faults test).
  const server = await spawnServer(t, { DATABASE_URL: databaseUrl, CSV_MAX_ROWS: String(ROWS), MIGRATE_ON_START: 'false', SLOW_CLIENT_WINDOW_MS: '0', TRUST_PROXY: '127.0.0.1' })
  // The large answers' lane (8 slots per replica as shipped) raised to 64, or only 8 readers
  // would reach the service: what this measures is the service's memory per stalled reader.
  const proxy = await startHaproxy(t, await freePort(), [Number(new URL(server.url).port)], { 'timeout client': '60s' },
    (config) => config.replace(/^(backend api_bulk\n[\s\S]*?maxconn) 8$/m, '$1 64'))
  for (let i = 0; (await proxy.states()).get('api1') !== 'UP' || (await proxy.states('api_bulk')).get('api1') !== 'UP'; i++) {
    if (i > 100) throw new Error(`the replica never came UP: ${JSON.stringify([...await proxy.states()])}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }

  const user = newUser()
  const created = await fetch(`${proxy.url}/api/user`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(user) })
  t.equal(created.status, 201, 'a creator, through the proxy')
  await seedLongProducts(await sqlClient(t, databaseUrl), (await created.json() as { id: number }).id, ROWS)
  for (let i = 0; i < 2; i++) {
    const res = await fetch(`${proxy.url}/api/product?limit=${ROWS}`, { headers: { accept: 'text/csv' } })
    t.equal(res.status, 200, 'the page, read at full speed through the proxy')
    await res.arrayBuffer()
  }

  const m = await memoryPerStalledReader(server.child.pid!, Number(new URL(proxy.url).port), `/api/product?limit=${ROWS}`, FIRST, MORE)
  t.same([...new Set(m.statuses)], [200], `${FIRST + MORE} stalled readers got their 200 and head through the proxy`)
  t.equal(m.stillOpen, FIRST + MORE, 'still connected when measured')
  t.ok(m.each < PER_READER_MB, `the service's RSS grew ${(m.after - m.before).toFixed(1)} MB for ${MORE} more stalled readers than the first ${FIRST}: ${m.each.toFixed(2)} MB each, at most ${PER_READER_MB} (${m.before.toFixed(0)} -> ${m.after.toFixed(0)} MB)`)
  for (const r of m.readers) r.socket.destroy()
})
