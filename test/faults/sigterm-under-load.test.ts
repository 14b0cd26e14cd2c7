/**
 * Fault: SIGTERM while the real server (child process) is under load. It stops
 * accepting, every request it accepted completes with its real answer, and it exits 0
 * within SHUTDOWN_GRACE_MS; a request that never ends cannot hold it past the grace
 * period; a second signal forces the exit at once.
 */
import t from 'tap'
import { newUser } from '../helpers/build.js'
import { createTestDatabase } from '../helpers/database.js'
import { call, isAnswer, type Answer, type Failure } from './helpers/http.js'
import { stalledPost } from './helpers/raw.js'
import { spawnServer, waitFor, type LogLine } from './helpers/server.js'

const sleep = async (ms: number) => await new Promise((resolve) => setTimeout(resolve, ms))
const reqId = (l: LogLine) => String(l.reqId ?? l.requestId ?? '')

t.test('SIGTERM under load: every accepted request completes, exit 0', async (t) => {
  // Generous: on a busy 2-core CI machine the 16 in-flight logins can take seconds.
  const GRACE_MS = 20_000
  const server = await spawnServer(t, { DATABASE_URL: await createTestDatabase(t), BCRYPT_COST: '8', SHUTDOWN_GRACE_MS: String(GRACE_MS) })
  const users = [newUser(), newUser(), newUser(), newUser()]
  const results: (Answer | Failure)[] = []
  for (const body of users) {
    const r = await call(server.url, 'POST', '/api/user', { body })
    results.push(r)
    t.equal(isAnswer(r) && r.status, 201, 'a user to log in as')
  }
  let sigtermAt = Infinity
  const worker = async (n: number) => {
    // Login (bcrypt: slow), a list read, a registration; until refused.
    for (let i = n, refused = 0; refused < 3 && Date.now() < sigtermAt + GRACE_MS; i++) {
      const user = users[i % users.length]!
      const r = i % 3 === 0
        ? await call(server.url, 'POST', '/api/auth/login', { body: { username: user.username, password: user.password } })
        : i % 3 === 1 ? await call(server.url, 'GET', '/api/product') : await call(server.url, 'POST', '/api/user', { body: newUser() })
      results.push(r)
      if (!isAnswer(r)) refused++
    }
  }
  const load = Promise.all(Array.from({ length: 16 }, async (_, n) => await worker(n)))
  await sleep(1500)
  sigtermAt = Date.now()
  server.child.kill('SIGTERM')
  const exit = await server.exited
  await load

  const closeMs = exit.at - sigtermAt
  t.equal(exit.code, 0, 'exit code 0')
  t.ok(closeMs < GRACE_MS, `closed within the grace period (${closeMs} ms of ${GRACE_MS})`)

  const answers = results.filter(isAnswer)
  const failures = results.filter((r): r is Failure => !isAnswer(r))
  // One line per request, when its answer has gone: it began `responseTime` ms earlier.
  const completed = server.logs.filter((l) => l.msg === 'request completed')
  const closingAt = Number(server.logs.find((l) => l.msg === 'closing')?.time)
  const inFlight = completed.filter((l) => Number(l.time) - Number(l.responseTime) <= closingAt && Number(l.time) > closingAt)
  t.comment(`${results.length} requests, ${answers.length} answered, ${failures.length} refused after SIGTERM; ${inFlight.length} in flight at SIGTERM; closed in ${closeMs} ms`)

  t.ok(inFlight.length > 0, 'requests were in flight when the signal came')
  t.same(answers.map((a) => a.headers.get('x-request-id')).sort(), completed.map(reqId).sort(), 'every request the server accepted, it completed, and its answer reached the client')
  const count = (statuses: number[]) => statuses.reduce<Record<number, number>>((m, s) => ({ ...m, [s]: (m[s] ?? 0) + 1 }), {})
  t.same(count(answers.map((a) => a.status)), count(completed.map((l) => Number(l.res?.statusCode))), 'and every completed answer reached its client')
  t.same(answers.filter((a) => a.status >= 500).map((a) => a.body), [], 'no 5xx')
  t.same(failures.filter((f) => f.at < sigtermAt).map((f) => f.error), [], 'no request failed before the signal')
  t.equal(results.length - answers.length, failures.length, 'requests without an answer are exactly those never accepted')
})

t.test('a request that never ends cannot hold the close past the grace period', async (t) => {
  const server = await spawnServer(t, { DATABASE_URL: await createTestDatabase(t), SHUTDOWN_GRACE_MS: '1500' })
  const stalled = await stalledPost(server.url, '/api/user')
  await sleep(300)
  const sent = Date.now()
  server.child.kill('SIGTERM')
  const exit = await server.exited
  const ms = exit.at - sent
  t.ok(ms >= 1400 && ms < 4000, `exited after the grace period (${ms} ms)`)
  t.equal(exit.code, 1, 'with code 1: the close did not finish')
  t.match(server.output(), /killed by timeout \(1500ms\)/, 'and says why')
  stalled.socket.destroy()
})

t.test('a second signal forces the exit', async (t) => {
  const server = await spawnServer(t, { DATABASE_URL: await createTestDatabase(t), SHUTDOWN_GRACE_MS: '60000' })
  const stalled = await stalledPost(server.url, '/api/user')
  await sleep(300)
  server.child.kill('SIGTERM')
  await waitFor('the close to begin', () => server.logs.some((l) => l.msg === 'closing'), 5000, 20)
  await sleep(500)
  t.ok(server.alive(), 'after one signal it waits for the in-flight request')
  const second = Date.now()
  server.child.kill('SIGTERM')
  const exit = await server.exited
  t.ok(exit.at - second < 2000, `the second signal ends it at once (${exit.at - second} ms)`)
  t.equal(exit.code, 1, 'with code 1')
  t.match(server.output(), /second SIGTERM, exiting/, 'and says why')
  stalled.socket.destroy()
})
