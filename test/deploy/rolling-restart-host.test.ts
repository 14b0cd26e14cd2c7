/**
 * Rolling restart on the host: three instances of the real server on free
 * loopback ports, HAProxy from Debian's packages running deploy/haproxy.cfg (the compose
 * file's proxy; test/deploy/helpers/haproxy.ts), the database of the suite and the local
 * Redis on 127.0.0.1:6379 (a key prefix of this run). Under a steady mixed load (reads,
 * logins, writes) through the proxy, each instance in turn gets SIGTERM, drains
 * (SHUTDOWN_DRAIN_MS: readiness 503, the proxy takes it out), exits 0 and is started again;
 * the next one goes once the proxy has the new one back. Then: 0 failed requests, 0 lost
 * writes (every 201 product reads back), every new instance served requests, and the
 * per-account limit holds across the replicas.
 *
 * Needs `haproxy` (apt-get install haproxy; .ci/run installs it): in CI its absence fails the
 * test, elsewhere it is skipped with the reason. Runs after the suite with test/deploy (alone:
 * it starts four processes).
 */
import { randomBytes } from 'node:crypto'
import { spawnSync } from 'node:child_process'
import t from 'tap'
import { envVariables } from '../../src/config.js'
import { freePort } from '../../src/db/embedded.js'
import { createTestDatabase } from '../helpers/database.js'
import { call, isAnswer } from '../faults/helpers/http.js'
import { spawnServer, waitFor, type ServerProcess } from '../faults/helpers/server.js'
import { haproxyMissing, startHaproxy } from './helpers/haproxy.js'
import { loadUsers, lostWrites, mixedLoad } from './helpers/load.js'

const sleep = async (ms: number) => await new Promise((resolve) => setTimeout(resolve, ms))
const REPLICAS = 3
const LOGIN_FAILURES_MAX = 5
// Redis-shared limits (h-redis, REDIS_URL): until the service reads REDIS_URL, each replica counts alone.
const redisShared = envVariables().includes('REDIS_URL')

const missing = haproxyMissing()
t.test('rolling restart behind HAProxy: 0 failed requests, 0 lost writes', { skip: missing !== undefined && !process.env.CI ? missing : false }, async (t) => {
  if (missing !== undefined) {
    t.fail(`the host proxy test cannot run: ${missing}`)
    return
  }
  const prefix = `ups-rolling-${randomBytes(4).toString('hex')}:`
  t.teardown(() => {
    // The run's keys (they expire with their windows anyway).
    spawnSync('sh', ['-c', `redis-cli -h 127.0.0.1 --scan --pattern '${prefix}*' | xargs -r redis-cli -h 127.0.0.1 del`], { stdio: 'ignore' })
  })
  const env = {
    DATABASE_URL: await createTestDatabase(t),
    // The suite's template database is migrated already: no CLI run per start.
    MIGRATE_ON_START: 'false',
    TRUST_PROXY: '127.0.0.1',
    SHUTDOWN_DRAIN_MS: '4000',
    SHUTDOWN_GRACE_MS: '15000',
    REDIS_URL: 'redis://127.0.0.1:6379',
    REDIS_KEY_PREFIX: prefix,
    LOGIN_FAILURES_MAX: String(LOGIN_FAILURES_MAX),
    // One user writes for the whole run (over 1,000 products in 50 s): the restart, not the
    // per-user quota, is what this test is about.
    PRODUCTS_MAX_PER_USER: '1000000'
  }
  const ports = await Promise.all(Array.from({ length: REPLICAS }, async () => await freePort()))
  const servers: ServerProcess[] = await Promise.all(ports.map(async (port) => await spawnServer(t, { ...env, PORT: String(port) }, 120_000)))
  const proxy = await startHaproxy(t, await freePort(), ports)
  const allUp = async (): Promise<boolean> => [...(await proxy.states()).values()].every((s) => s === 'UP')
  await waitFor('every server UP in HAProxy', allUp, 60_000, 200)

  const users = await loadUsers(proxy.url, 4, randomBytes(3).toString('hex'))
  const load = mixedLoad(proxy.url, users, { workers: 4, pauseMs: 10 })
  await sleep(2000)

  const restarts: string[] = []
  for (let i = 0; i < REPLICAS; i++) {
    const name = `api${i + 1}`
    const old = servers[i]!
    const signalled = Date.now()
    old.child.kill('SIGTERM')
    const outAfter = await waitFor(`${name} out of rotation`, async () => !(await proxy.states()).get(name)!.startsWith('UP'), 15_000, 100)
    const stillServing = old.alive()
    const exit = await old.exited
    t.equal(exit.code, 0, `${name} exited 0`)
    t.ok(stillServing, `${name}: the proxy took it out (after ${outAfter} ms) while it still served (drain)`)
    servers[i] = await spawnServer(t, { ...env, PORT: String(ports[i]) }, 120_000)
    const backAfter = await waitFor(`${name} back UP`, async () => (await proxy.states()).get(name) === 'UP', 60_000, 100)
    restarts.push(`${name}: out after ${outAfter} ms, exited after ${exit.at - signalled} ms, UP again ${backAfter} ms after its restart`)
    await sleep(1000)
  }
  await sleep(2000)
  const result = await load.stop()
  t.comment(restarts.join('\n'))
  t.comment(`${result.sent} requests: ${JSON.stringify(result.answers)}; ${result.created.length} products created`)

  t.same(result.failures, [], '0 failed requests')
  t.ok(result.sent > 100 && result.created.length > 20, 'a real load ran (reads, logins, writes)')
  t.same(await lostWrites(proxy.url, result.created), [], '0 lost writes: every 201 product reads back')
  for (const [i, server] of servers.entries()) {
    const served = server.logs.filter((l) => l.msg === 'request completed' && result.requestIds.includes(String(l.reqId))).length
    t.ok(served > 0, `the restarted api${i + 1} served load requests (${served}), by the proxy's request ids`)
  }

  await t.test('the per-account limit holds across the replicas', { todo: redisShared ? false : 'REDIS_URL (Redis-shared limits) is not in the service yet: each replica counts alone' }, async (t) => {
    const victim = users[0]!
    const before = await proxy.totals()
    const statuses: number[] = []
    for (let i = 0; i < LOGIN_FAILURES_MAX * REPLICAS; i++) {
      const r = await call(proxy.url, 'POST', '/api/auth/login', { body: { username: victim.username, password: `wrong guess ${i}` } })
      statuses.push(isAnswer(r) ? r.status : 0)
    }
    const after = await proxy.totals()
    const spread = [...after].filter(([name, total]) => total > (before.get(name) ?? 0)).length
    t.ok(spread >= 2, `the guesses went to ${spread} replicas`)
    t.equal(statuses.filter((s) => s === 401).length, LOGIN_FAILURES_MAX, `exactly LOGIN_FAILURES_MAX (${LOGIN_FAILURES_MAX}) wrong guesses answered 401 over ${REPLICAS} replicas`)
    t.equal(statuses.filter((s) => s === 429).length, LOGIN_FAILURES_MAX * (REPLICAS - 1), 'every later one 429')
  })
})
