/**
 * The failover test (`npm run test:failover`; long mode `npm run test:failover -- --long`):
 * the HA database of docker-compose.ha.yml for real, under a write load, losing its primary.
 *
 * On a throwaway compose project (`upse2fo<hex>`, a copy of the checkout, `.env` from
 * `.env.example`): docker-compose.yml + docker-compose.ha.yml up --build, then, while workers
 * register users and create products through the published port, the primary's container
 * is lost, one way per round:
 *   kill     `docker kill -s KILL` (short mode: this round only)
 *   stop     `docker stop` (Patroni hands over cleanly)
 *   network  `docker network disconnect` (the primary is cut off, still running)
 * Each round checks, and fails the run otherwise:
 * - every answer to a write is a 2xx, or a 503 in problem details with Retry-After: never a
 *   500, never a network error or a proxy 502/504;
 * - writes are acknowledged again within 30 s of the loss, with the API never restarted
 *   (the same containers, `RestartCount` 0);
 * - the old primary, started (or reconnected) again, rejoins as a replica: one leader only;
 * - every write acknowledged so far (the ids of the 2xx answers) is on the new primary, and
 *   on every member once replication has caught up; a registration has its e-mail in the
 *   outbox (the same transaction: no half-written record).
 * It prints the unavailability window per round (first failed write to the first write
 * acknowledged after the last failure) and ends with `down -v`, whatever happened.
 * Needs Docker and the base images (test/deploy/helpers/docker.ts, prepareDocker).
 * Not part of `npm test` (its budget): a command of its own, for `.ci/run`.
 */
import { randomBytes } from 'node:crypto'
import { readFile, rm, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { freePort } from '../src/db/embedded.js'
import { call, isAnswer, problemViolations } from '../test/faults/helpers/http.js'
import { composeCommand, copyCheckout, prepareDocker, run } from '../test/deploy/helpers/docker.js'

type Way = 'kill' | 'stop' | 'network'
const long = process.argv.includes('--long')
const keep = process.argv.includes('--keep')
const ways: Way[] = long ? ['kill', 'stop', 'network'] : ['kill']
/** Seconds of load before and after each loss. */
const BEFORE_MS = long ? 15_000 : 6_000
const RESUME_LIMIT_MS = 30_000
const WORKERS = 4

// FAILOVER_PROJECT + FAILOVER_DIR: run the rounds on a stack left by `--keep` (no build, no `up`).
const reuse = process.env.FAILOVER_PROJECT !== undefined && process.env.FAILOVER_DIR !== undefined
const project = process.env.FAILOVER_PROJECT ?? `upse2fo${randomBytes(4).toString('hex')}`
const log = (message: string): void => { console.log(`# ${new Date().toISOString().slice(11, 23)} ${message}`) }

interface Write { kind: 'user' | 'product', at: number, end: number, status?: number, id?: number, error?: string, body?: string }

const problems: string[] = []
const fail = (message: string): void => { problems.push(message); console.log(`not ok - ${message}`) }

async function must (command: string, args: string[], options: { cwd?: string, timeoutMs?: number } = {}): Promise<string> {
  const r = await run(command, args, { timeoutMs: 600_000, ...options })
  if (r.code !== 0) throw new Error(`${command} ${args.join(' ')} failed (${r.code}):\n${r.stdout.slice(-3000)}\n${r.stderr.slice(-3000)}`)
  return r.stdout
}

async function freeSubnet (): Promise<string> {
  const ids = (await run('docker', ['network', 'ls', '-q'])).stdout.split('\n').filter(Boolean)
  const used = (await run('docker', ['network', 'inspect', '--format', '{{range .IPAM.Config}}{{.Subnet}} {{end}}', ...ids])).stdout
  for (;;) {
    const second = 100 + Math.floor(Math.random() * 150)
    const third = Math.floor(Math.random() * 256)
    if (!used.includes(`10.${second}.`)) return `10.${second}.${third}.0/24`
  }
}

function withValues (example: string, values: Record<string, string>): string {
  let text = example
  for (const [name, value] of Object.entries(values)) {
    const line = new RegExp(`^${name}=.*$`, 'm')
    text = line.test(text) ? text.replace(line, `${name}=${value}`) : `${text}\n${name}=${value}\n`
  }
  return text
}

interface Member { name: string, role: string, state: string, lag?: number | string }

/** The member lost in the current round: asked last (cut off, it has a stale view). */
let lost: string | undefined

/** Patroni's view of the cluster, asked of any member that answers. */
async function cluster (): Promise<Member[]> {
  for (const member of ['pg1', 'pg2', 'pg3'].sort((a, b) => Number(a === lost) - Number(b === lost))) {
    const r = await run('docker', ['exec', container(member), 'curl', '-fsS', '-m', '2', 'http://127.0.0.1:8008/cluster'], { timeoutMs: 5000 })
    if (r.code === 0) {
      try { return (JSON.parse(r.stdout) as { members: Member[] }).members } catch {}
    }
  }
  return []
}

const container = (service: string): string => `${project}_${service}_1`

async function primary (): Promise<string | undefined> {
  return (await cluster()).find((m) => m.role === 'leader' && m.state === 'running')?.name
}

async function waitFor<T> (what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await sleep(1000)
  }
}

/** Rows of a query on a member, through psql in its container (the API's role and database). */
async function sql (member: string, query: string): Promise<string> {
  return (await must('docker', ['exec', '-e', 'PGPASSWORD=failover-db-password', container(member), 'psql', '-h', '127.0.0.1', '-U', 'postgres', '-d', 'app', '-tAc', query])).trim()
}

async function main (): Promise<void> {
  const why = await prepareDocker()
  if (why !== undefined) throw new Error(`Docker is not usable here: ${why}`)
  const compose = await composeCommand()
  const dir = reuse ? process.env.FAILOVER_DIR! : await copyCheckout()
  if (!reuse) {
    const subnet = await freeSubnet()
    const example = await readFile(path.join(dir, '.env.example'), 'utf8')
    await writeFile(path.join(dir, '.env'), withValues(example, {
      DB_PASSWORD: 'failover-db-password',
      DB_REPLICATION_PASSWORD: 'failover-replication-password',
      SECRET: randomBytes(48).toString('base64'),
      PORT: String(await freePort()),
      COMPOSE_SUBNET: subnet,
      PROXY_IP: subnet.replace(/0\/24$/, '10'),
      COMPOSE_IP_RANGE: subnet.replace(/0\/24$/, '128/25'),
      // No mail catcher: registrations' e-mail waits in the outbox, which is what is checked.
      COMPOSE_PROFILES: '',
      // Registrations are the heaviest write; the load measures the database, not bcrypt.
      BCRYPT_COST: '4',
      RATE_LIMIT_AUTH_MAX: '100000',
      // One owner creates every product: its quota (1,000 by default) must not end the load.
      PRODUCTS_MAX_PER_USER: '1000000'
    }))
  }
  const env = await readFile(path.join(dir, '.env'), 'utf8')
  const port = Number(/^PORT=(\d+)$/m.exec(env)?.[1])
  const dc = async (...args: string[]): Promise<string> => await must(compose[0]!, [...compose.slice(1), '-p', project, '-f', 'docker-compose.yml', '-f', 'docker-compose.ha.yml', ...args], { cwd: dir, timeoutMs: 1_200_000 })
  const base = `http://127.0.0.1:${port}`
  const figures: string[] = []
  try {
    let started = Date.now()
    if (!reuse) {
      log(`${project}: up --build (port ${port}, ${dir})`)
      // The build's output is long and its error last; a failed `up` after a good build (seen
      // once here under load, reason lost) is tried again once.
      await dc('build')
      await dc('up', '-d').catch(async () => await dc('up', '-d'))
    }
    await waitFor('the API ready through the proxy', 300_000, async () => {
      const r = await call(base, 'GET', '/health/ready', { timeoutMs: 3000 })
      return isAnswer(r) && r.status === 200 ? true : undefined
    })
    log(`ready in ${Date.now() - started} ms; cluster: ${JSON.stringify(await cluster())}`)
    const apiIds = (await dc('ps', '-q', 'api')).split('\n').filter(Boolean)

    // A user whose token creates the products.
    const owner = { username: `owner_${project}`, email: `owner_${project}@example.com`, password: 'failover owner password' }
    const made = await call(base, 'POST', '/api/user', { body: owner })
    if (!isAnswer(made) || made.status !== 201) throw new Error(`cannot register: ${JSON.stringify(made)}`)
    const login = await call(base, 'POST', '/api/auth/login', { body: { username: owner.username, password: owner.password } })
    if (!isAnswer(login) || login.status !== 200) throw new Error(`cannot log in: ${JSON.stringify(login)}`)
    const token = login.json.token as string

    const writes: Write[] = []
    const state = { running: true, n: 0 }
    const worker = async (): Promise<void> => {
      while (state.running) {
        const n = state.n++
        const kind = n % 2 === 0 ? 'user' : 'product'
        const r = kind === 'user'
          ? await call(base, 'POST', '/api/user', { body: { username: `fo_${project}_${n}`, email: `fo_${project}_${n}@example.com`, password: 'failover load password' }, timeoutMs: 30_000 })
          : await call(base, 'POST', '/api/product', { body: { title: `failover ${n}`, amount: n }, token, timeoutMs: 30_000 })
        const w: Write = { kind, at: r.at, end: r.at + r.ms }
        if (isAnswer(r)) {
          w.status = r.status
          if (r.status >= 200 && r.status < 300) w.id = r.json.id as number
          else {
            w.body = r.body.slice(0, 300)
            for (const v of problemViolations(r)) fail(v)
          }
          if (r.status !== 503 && (r.status < 200 || r.status >= 300)) fail(`${kind} write answered ${r.status}: ${r.body.slice(0, 300)}`)
        } else {
          w.error = r.error
          fail(`${kind} write: network error ${r.error}`)
        }
        writes.push(w)
        // A client told to retry waits a little, as Retry-After asks (shortened: the window is measured).
        if (w.status === 503) await sleep(250)
      }
    }
    const workers = Array.from({ length: WORKERS }, async () => await worker())

    for (const way of ways) {
      await sleep(BEFORE_MS)
      // A round starts on a whole cluster: a primary, its synchronous standby, and the third
      // member streaming (the only member that may be promoted is the synchronous one).
      await waitFor('three members running, one of them the synchronous standby', 300_000, async () => {
        const list = await cluster()
        return list.length === 3 && list.every((m) => m.state === 'running') && list.some((m) => m.role === 'sync_standby') ? true : undefined
      })
      const old = await waitFor('a primary', 60_000, primary)
      const from = writes.length
      const lostAt = Date.now()
      lost = old
      log(`round ${way}: losing the primary ${old}`)
      if (way === 'kill') await must('docker', ['kill', '-s', 'KILL', container(old)])
      else if (way === 'stop') await must('docker', ['stop', '-t', '30', container(old)])
      else await must('docker', ['network', 'disconnect', `${project}_backend`, container(old)])
      const lostDone = Date.now()
      const next = await waitFor('a new primary', 60_000, async () => {
        const p = await primary()
        return p !== undefined && p !== old ? p : undefined
      })
      log(`round ${way}: ${next} is the primary ${Date.now() - lostAt} ms after the loss`)
      // Writes acknowledged again: a 2xx write that started after the loss.
      const resumed = await waitFor('a write acknowledged after the loss', RESUME_LIMIT_MS + 30_000, async () =>
        writes.slice(from).find((w) => w.at > lostDone && w.id !== undefined))
      await sleep(BEFORE_MS)
      const round = writes.slice(from)
      const failed = round.filter((w) => w.id === undefined)
      const lastFailure = failed.at(-1)
      const after = lastFailure === undefined ? undefined : round.find((w) => w.id !== undefined && w.at >= lastFailure.end)
      const window = failed.length === 0 ? 0 : (after?.end ?? Date.now()) - failed[0]!.at
      const resumeMs = resumed.end - lostAt
      const statuses: Record<string, number> = {}
      for (const w of round) statuses[w.status ?? w.error ?? '?'] = (statuses[w.status ?? w.error ?? '?'] ?? 0) + 1
      const line = `${way}: ${round.length} writes (${JSON.stringify(statuses)}), first write acknowledged ${resumeMs} ms after the loss, unavailability window ${window} ms, new primary ${next} after ${old}`
      figures.push(line)
      log(line)
      if (resumeMs > RESUME_LIMIT_MS) fail(`${way}: writes resumed only ${resumeMs} ms after the loss (limit ${RESUME_LIMIT_MS})`)

      // The old primary comes back, and must follow the new one.
      if (way === 'kill' || way === 'stop') await must('docker', ['start', container(old)])
      else await must('docker', ['network', 'connect', '--alias', old, `${project}_backend`, container(old)])
      const members = await waitFor(`${old} back as a replica`, 120_000, async () => {
        const list = await cluster()
        const back = list.find((m) => m.name === old)
        return back !== undefined && back.role !== 'leader' && back.state === 'running' && list.length === 3 ? list : undefined
      })
      const leaders = members.filter((m) => m.role === 'leader')
      if (leaders.length !== 1) fail(`${way}: ${leaders.length} leaders after ${old} came back: ${JSON.stringify(members)}`)
      // Never a second primary: the old one is in recovery, whatever Patroni says.
      const inRecovery = await sql(old, 'SELECT pg_is_in_recovery()')
      if (inRecovery !== 't') fail(`${way}: ${old} is not in recovery after it came back (${inRecovery})`)
      lost = undefined
      log(`round ${way}: ${old} rejoined: ${JSON.stringify(members)}`)
    }

    state.running = false
    await Promise.all(workers)
    started = Date.now()

    // Every acknowledged write, on the primary and (once caught up) on every member.
    const users = writes.filter((w) => w.kind === 'user' && w.id !== undefined).map((w) => w.id!)
    const products = writes.filter((w) => w.kind === 'product' && w.id !== undefined).map((w) => w.id!)
    const leader = await waitFor('a primary', 60_000, primary)
    await waitFor('every member caught up', 60_000, async () => {
      const list = await cluster()
      return list.length === 3 && list.every((m) => m.role === 'leader' || (m.state === 'running' && (m.lag === 0 || m.lag === '0'))) ? true : undefined
    })
    for (const member of ['pg1', 'pg2', 'pg3']) {
      const foundUsers = Number(await sql(member, `SELECT count(*) FROM users WHERE id IN (${users.join(',') || 'NULL'})`))
      const foundProducts = Number(await sql(member, `SELECT count(*) FROM products WHERE id IN (${products.join(',') || 'NULL'})`))
      const line = `${member}${member === leader ? ' (primary)' : ''}: ${foundUsers} of ${users.length} acknowledged users, ${foundProducts} of ${products.length} acknowledged products`
      log(line)
      if (member === leader) figures.push(line)
      if (foundUsers !== users.length || foundProducts !== products.length) fail(`lost writes on ${member}: ${line}`)
    }
    // A registration and its verification e-mail are one transaction: a user row without its
    // outbox message would be a half-written record.
    const orphans = await sql(leader, `SELECT count(*) FROM users u WHERE u.username LIKE 'fo\\_${project}\\_%' AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.kind = 'verify-email' AND (o.payload->>'userId')::int = u.id)`).catch((error: Error) => `? (${error.message.split('\n')[0]})`)
    log(`registrations without their e-mail in the outbox: ${orphans}`)
    if (orphans !== '0') fail(`registrations without their outbox message: ${orphans}`)

    // Backups go on across the failover: the first primary's scheduler took a full backup into
    // the shared repository, and the new primary archives its WAL there on its new timeline
    // (`pgbackrest check` forces a segment switch and waits for it in the repository).
    // The first backup may still be running (a primary lost in the middle of one leaves it to
    // the next): wait for one, up to two minutes.
    let backups = await run('docker', ['exec', container(leader), 'pgbackrest', 'info', '--output=json'], { timeoutMs: 60_000 })
    const count = (): number => { try { return ((JSON.parse(backups.stdout) as Array<{ backup?: unknown[] }>)[0]?.backup ?? []).length } catch { return 0 } }
    for (const deadline = Date.now() + 120_000; count() === 0 && Date.now() < deadline;) {
      await sleep(2000)
      backups = await run('docker', ['exec', container(leader), 'pgbackrest', 'info', '--output=json'], { timeoutMs: 60_000 })
    }
    const sets = count()
    const check = await run('docker', ['exec', container(leader), 'pgbackrest', 'check'], { timeoutMs: 180_000 })
    log(`pgBackRest on ${leader}: ${sets} backup(s) in the repository; check ${check.code === 0 ? 'passed' : `failed: ${check.stderr.slice(-500)}`}`)
    if (sets < 1) fail(`no backup in the repository: ${backups.stdout.slice(0, 500)} ${backups.stderr.slice(-500)}`)
    if (check.code !== 0) fail(`pgbackrest check on the new primary ${leader} failed: ${check.stdout.slice(-500)} ${check.stderr.slice(-500)}`)
    figures.push(`pgBackRest after the failover: ${sets} backup(s); the new primary ${leader} archives (pgbackrest check passed: ${check.code === 0})`)

    const restarts = (await must('docker', ['inspect', '--format', '{{.RestartCount}} {{.State.StartedAt}}', ...apiIds])).trim().split('\n')
    if (restarts.some((r) => !r.startsWith('0 '))) fail(`the API restarted: ${restarts.join('; ')}`)
    const acknowledged = writes.filter((w) => w.id !== undefined).length
    figures.push(`${writes.length} writes, ${acknowledged} acknowledged, all checked on every member; API containers never restarted`)
  } finally {
    if (keep) log(`kept: ${project} in ${dir}`)
    else {
      await run(compose[0]!, [...compose.slice(1), '-p', project, '-f', 'docker-compose.yml', '-f', 'docker-compose.ha.yml', 'down', '-v', '--rmi', 'local', '-t', '5'], { cwd: dir, timeoutMs: 300_000 })
      await rm(dir, { recursive: true, force: true })
    }
  }
  console.log(`\n## Failover (${long ? 'long' : 'short'} mode) on ${os.cpus().length} x ${os.cpus()[0]?.model ?? '?'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB: \`npm run test:failover${long ? ' -- --long' : ''}\``)
  for (const line of figures) console.log(`- ${line}`)
}

try {
  await main()
} catch (error) {
  fail(String((error as Error).stack ?? error))
}
console.log(problems.length === 0 ? '\nok - failover' : `\nnot ok - failover: ${problems.length} problem(s)`)
process.exit(problems.length === 0 ? 0 : 1)
