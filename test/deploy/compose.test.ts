/**
 * The deployment as a user runs it (README, "Docker Compose"): the repository's own
 * docker-compose.yml and Dockerfile, a `.env` made from `.env.example` by setting the values
 * it asks for, `docker compose up --build --scale api=3` on a throwaway project (three API
 * replicas behind HAProxy, the one published port), then over real HTTP through that port:
 * requests reach all three replicas with the proxy's request id and the client's address;
 * register, login, read, create, change, delete; a product image uploaded through the proxy
 * (multipart) and read back; a password reset through the mail catcher that .env.example
 * turns on (COMPOSE_PROFILES=mail): the e-mail, sent while the catcher was down, arrives once it
 * is back, read from its REST API on its loopback port, and its link sets the new password;
 * TOTP enrolment and a second-step login, and a passkey (test/helpers/soft-authenticator.ts)
 * registered and used to sign in, each step sent to another replica directly; a
 * restart keeps the data and the image (in the database,
 * served by every replica); `stop` ends the API with exit 0 within its grace period;
 * `down -v` always.
 *
 * Needs a Docker engine. It starts one when none answers and gets the base images: pulled,
 * or, where no registry answers, built by `offline-base-images.sh` (OFFLINE_IMAGES_SCRIPT, or
 * ../shared/tools/ beside the checkout). If neither works it says why and fails (in CI, or
 * with COMPOSE_TEST=1) or skips (a developer's machine without Docker).
 * `npm test` runs it after the rest of the suite (scripts/test.ts); alone:
 * `npm test -- test/deploy/compose.test.ts`.
 */
import { createHash, randomBytes } from 'node:crypto'
import { readFile, rm, writeFile } from 'node:fs/promises'
import { get as httpGet, type IncomingHttpHeaders } from 'node:http'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { generateSync } from 'otplib'
import t from 'tap'
import { envVariables } from '../../src/config.js'
import { freePort } from '../../src/db/embedded.js'
import { call, isAnswer } from '../faults/helpers/http.js'
import { SoftAuthenticator } from '../helpers/soft-authenticator.js'
import { composeCommand, copyCheckout, prepareDocker, run, type Run } from './helpers/docker.js'
import { loadUsers, lostWrites, mixedLoad } from './helpers/load.js'

const project = `upsci${randomBytes(4).toString('hex')}`

/** `.env.example` with the values a user sets (README, "Docker Compose"). */
function makeEnv (example: string, values: Record<string, string>): string {
  let text = example
  for (const [name, value] of Object.entries(values)) {
    const line = new RegExp(`^${name}=.*$`, 'm')
    text = line.test(text) ? text.replace(line, `${name}=${value}`) : `${text}\n${name}=${value}\n`
  }
  return text
}

async function http (base: string, method: string, url: string, body?: unknown, token?: string): Promise<{ status: number, json: any, headers: Headers, text: string }> {
  const headers: Record<string, string> = {}
  if (body !== undefined) headers['content-type'] = 'application/json'
  if (token) headers.authorization = `Bearer ${token}`
  const res = await fetch(base + url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) })
  const text = await res.text()
  let json: unknown
  try { json = JSON.parse(text) } catch { json = undefined }
  return { status: res.status, json, headers: res.headers, text }
}

/**
 * GET with exactly these headers (node:http). Not fetch(): with If-None-Match it adds
 * `Cache-Control: no-cache` (the Fetch standard), and a no-cache request is never a 304.
 */
async function rawGet (url: string, headers: Record<string, string> = {}): Promise<{ status: number, headers: IncomingHttpHeaders, body: Buffer }> {
  return await new Promise((resolve, reject) => {
    httpGet(url, { headers }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (chunk: Buffer) => chunks.push(chunk))
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }) })
    }).on('error', reject)
  })
}

/** A real PNG: 1x1, one RGBA pixel (signature, IHDR, IDAT, IEND, with their CRCs). */
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64')

/** Waits until Docker reports every container healthy (the image's health check: /health/ready). */
async function waitHealthy (ids: string[], timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  let states = ''
  while (Date.now() < deadline) {
    states = (await run('docker', ['inspect', '--format', '{{.State.Health.Status}}', ...ids])).stdout
    if (states.trim().split('\n').every((s) => s === 'healthy')) return
    await sleep(1000)
  }
  throw new Error(`not every api container became healthy within ${timeoutMs} ms: ${states}`)
}

/** The JSON log lines of a container. */
async function logLines (id: string): Promise<Record<string, unknown>[]> {
  const out = await run('docker', ['logs', id])
  return (out.stdout + '\n' + out.stderr).split('\n').filter((l) => l.startsWith('{')).map((l) => { try { return JSON.parse(l) as Record<string, unknown> } catch { return {} } })
}

/** How many of these request ids each container logged as completed (containers with none left out). */
async function requestsPerContainer (ids: string[], requestIds: string[]): Promise<Map<string, number>> {
  const wanted = new Set(requestIds)
  const counts = new Map<string, number>()
  for (const id of ids) {
    const n = (await logLines(id)).filter((l) => l.msg === 'request completed' && wanted.has(String(l.reqId))).length
    if (n > 0) counts.set(id, n)
  }
  return counts
}

async function waitReady (base: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  let last = ''
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`${base}/health/ready`, { signal: AbortSignal.timeout(3000) })
      if (res.status === 200) return
      last = `${res.status} ${await res.text()}`
    } catch (error) { last = String(error) }
    await sleep(1000)
  }
  throw new Error(`the API was not ready within ${timeoutMs} ms (last answer: ${last})`)
}

const REPLICAS = 3

/** IPv4 CIDR ranges overlap. */
function overlaps (a: string, b: string): boolean {
  const parse = (cidr: string): [number, number] => {
    const [ip = '', bits = '32'] = cidr.split('/')
    const value = ip.split('.').reduce((n, part) => n * 256 + Number(part), 0)
    return [value, Number(bits)]
  }
  const [x, xb] = parse(a)
  const [y, yb] = parse(b)
  const size = 2 ** (32 - Math.min(xb, yb))
  return Math.floor(x / size) === Math.floor(y / size)
}

/**
 * A /24 for the compose network (COMPOSE_SUBNET) that no network of this engine uses: the
 * file's default would collide with another run of this test on the same engine.
 */
async function freeSubnet (): Promise<string> {
  const ids = (await run('docker', ['network', 'ls', '-q'])).stdout.split('\n').filter(Boolean)
  const used = ids.length === 0 ? [] : (await run('docker', ['network', 'inspect', '--format', '{{range .IPAM.Config}}{{.Subnet}} {{end}}', ...ids])).stdout.split(/\s+/).filter((s) => /^\d+\.\d+\.\d+\.\d+\/\d+$/.test(s))
  for (;;) {
    const subnet = `10.${100 + Math.floor(Math.random() * 150)}.${Math.floor(Math.random() * 256)}.0/24`
    if (!used.some((other) => overlaps(subnet, other))) return subnet
  }
}

/** A non-loopback IPv4 address of this machine: "another machine" on the LAN reaches the published port there. */
function lanAddress (): string | undefined {
  for (const [name, list] of Object.entries(os.networkInterfaces())) {
    for (const entry of list ?? []) {
      if (entry.family === 'IPv4' && !entry.internal && !/^(docker|br-|veth)/.test(name)) return entry.address
    }
  }
  return undefined
}

/**
 * What an earlier run left behind when it was killed before its teardown (a runner timeout):
 * the containers, volumes, networks and images of `upsci*` projects older than this test can
 * run. A younger project may be another run in progress on the same engine: left alone.
 */
async function removeLeftovers (): Promise<void> {
  const lines = async (args: string[]): Promise<string[]> => (await run('docker', args)).stdout.split('\n').map((s) => s.trim()).filter(Boolean)
  const cutoff = Date.now() - 40 * 60_000
  const networks = (await lines(['network', 'ls', '--format', '{{.Name}}'])).filter((name) => /^upsci[0-9a-f]{8}_/.test(name))
  for (const network of networks) {
    const created = 1000 * Number((await lines(['network', 'inspect', '--format', '{{.Created.Unix}}', network]))[0])
    if (!(created < cutoff)) continue
    const stale = network.slice(0, network.indexOf('_'))
    const ids = await lines(['ps', '-aq', '--filter', `label=com.docker.compose.project=${stale}`])
    if (ids.length > 0) await run('docker', ['rm', '-f', ...ids])
    const volumes = (await lines(['volume', 'ls', '-q'])).filter((name) => name.startsWith(`${stale}_`))
    if (volumes.length > 0) await run('docker', ['volume', 'rm', ...volumes])
    await run('docker', ['network', 'rm', network])
    await run('docker', ['rmi', `${stale}_api`, `${stale}_mail-catcher`])
  }
  // A volume can outlive its network (a `down` cut short): judged by its own age.
  for (const volume of (await lines(['volume', 'ls', '-q'])).filter((name) => /^upsci[0-9a-f]{8}_/.test(name))) {
    const created = Date.parse((await lines(['volume', 'inspect', '--format', '{{.CreatedAt}}', volume]))[0] ?? '')
    if (created < cutoff) await run('docker', ['volume', 'rm', volume])
  }
}

// The runner's per-file timeout (package.json) is for unit tests; a cold image build takes minutes.
t.setTimeout(1_800_000)
const wanted = process.env.COMPOSE_TEST !== '0'
t.test('docker compose up --build serves the API from .env.example', { skip: wanted ? false : 'COMPOSE_TEST=0', timeout: 1_500_000 }, async (t) => {
  const problem = await prepareDocker()
  if (problem !== undefined) {
    // In CI (or when asked for) that is a failure; on a developer's machine without Docker, a
    // plain skip, so that `npm test` still tells the truth about everything else.
    if (process.env.CI || process.env.COMPOSE_TEST === '1') t.fail(`The compose test cannot run: ${problem}`)
    else await t.test('the deployment', { skip: `cannot run here: ${problem}. Install Docker, or set COMPOSE_TEST=0` }, async () => {})
    return
  }
  await removeLeftovers()
  const compose = await composeCommand()
  const dir = await copyCheckout()
  const dc = async (args: string[], timeoutMs = 600_000): Promise<Run> => await run(compose[0]!, [...compose.slice(1), '-p', project, ...args], { cwd: dir, timeoutMs })
  t.teardown(async () => {
    if (t.passing() === false) {
      const logs = await dc(['logs', '--no-color', '--tail', '80'])
      t.comment(`compose logs:\n${logs.stdout}${logs.stderr}`)
    }
    await dc(['down', '-v', '--remove-orphans', '--rmi', 'local'])
    await run('docker', ['image', 'prune', '-f', '--filter', 'label=stage=user-product-service-build'])
    await rm(dir, { recursive: true, force: true })
  })

  const example = await readFile(path.join(dir, '.env.example'), 'utf8')
  await t.test('compose refuses to start without the values .env.example asks for', async (t) => {
    await writeFile(path.join(dir, '.env'), example)
    const none = await dc(['config', '-q'])
    t.not(none.code, 0)
    t.match(none.stderr, /set DB_PASSWORD in \.env/, 'names DB_PASSWORD')
    await writeFile(path.join(dir, '.env'), makeEnv(example, { DB_PASSWORD: 'x' }))
    const noSecret = await dc(['config', '-q'])
    t.not(noSecret.code, 0)
    t.match(noSecret.stderr, /set SECRET in \.env/, 'a forgotten SECRET gets compose\'s message, not a restart loop')
    // Production empties the trial SMTP_URL (the mail catcher) to set its own: forgotten, compose says so.
    await writeFile(path.join(dir, '.env'), makeEnv(example, { DB_PASSWORD: 'x', SECRET: 'y'.repeat(40), SMTP_URL: '' }))
    const noSmtp = await dc(['config', '-q'])
    t.not(noSmtp.code, 0)
    t.match(noSmtp.stderr, /set SMTP_URL in \.env/, 'an emptied SMTP_URL gets compose\'s message')
  })

  const port = await freePort()
  const mailPort = await freePort()
  const password = randomBytes(12).toString('hex')
  const secret = randomBytes(48).toString('base64url')
  const subnet = await freeSubnet()
  const proxyIp = subnet.replace(/0\/24$/, '10')
  // Logs at info: each replica logs its requests, by the proxy's request id. The per-client
  // budget of bcrypt requests is raised: the load of the rolling restart logs in from one
  // address hundreds of times (the per-account limit keeps its default). No load shedding,
  // as in every other test (test/helpers/build.ts): on a machine shared by several builds a
  // replica that has just started lags past 200 ms and sheds (503 OVERLOADED, as designed),
  // which is not what the rolling restart measures. Nor is the per-user product quota: the
  // load's few users create products for minutes.
  await writeFile(path.join(dir, '.env'), makeEnv(example, { DB_PASSWORD: password, SECRET: secret, PUBLIC_URL: `http://localhost:${port}`, PORT: String(port), MAIL_CATCHER_PORT: String(mailPort), ACCESS_TOKEN_TTL: '2h', LOG_LEVEL: 'info', COMPOSE_SUBNET: subnet, PROXY_IP: proxyIp, RATE_LIMIT_AUTH_MAX: '100000', MAX_EVENT_LOOP_DELAY_MS: '0', PRODUCTS_MAX_PER_USER: '1000000' }))
  const valid = await dc(['config', '-q'])
  t.equal(valid.code, 0, `docker compose config is valid: ${valid.stderr}`)

  const up = await dc(['up', '--build', '-d', '--scale', `api=${REPLICAS}`], 900_000)
  t.equal(up.code, 0, `docker compose up --build -d --scale api=${REPLICAS}`)
  if (up.code !== 0) { t.comment(up.stdout + up.stderr); return }
  const base = `http://127.0.0.1:${port}`
  await waitReady(base, 180_000)
  t.pass('the API became ready through the published port (the proxy)')
  const apiIds = (await dc(['ps', '-q', 'api'])).stdout.split('\n').map((s) => s.trim()).filter(Boolean)
  t.equal(apiIds.length, REPLICAS, `${REPLICAS} api containers`)
  await waitHealthy(apiIds, 180_000)

  await t.test('the proxy is the only published port, besides the mail catcher\'s page on loopback', async (t) => {
    const published = (await dc(['ps'])).stdout
    const ports = (await run('docker', ['ps', '--filter', `label=com.docker.compose.project=${project}`, '--format', '{{.Label "com.docker.compose.service"}} {{.Ports}}'])).stdout
    t.match(ports, new RegExp(`^proxy .*:${port}->8080/tcp`, 'm'), `proxy publishes ${port}:\n${published}`)
    const catcher = ports.split('\n').find((l) => l.startsWith('mail-catcher ')) ?? ''
    t.match(catcher, new RegExp(`127\\.0\\.0\\.1:${mailPort}->1080/tcp`), `the mail catcher (COMPOSE_PROFILES=mail in .env.example) publishes its page on 127.0.0.1:${mailPort}`)
    t.equal(catcher.split('->').length, 2, `only there (not SMTP, not on every address): ${catcher}`)
    for (const line of ports.split('\n').filter((l) => l && !l.startsWith('proxy ') && !l.startsWith('mail-catcher '))) t.notMatch(line, /->/, `not published: ${line}`)
  })

  await t.test(`requests reach all ${REPLICAS} replicas, with the proxy's request id and the client's address`, async (t) => {
    const ids: string[] = []
    // HAProxy marks a replica up after 2 good checks; wait until each has served a request.
    const deadline = Date.now() + 60_000
    let served = new Map<string, number>()
    while (Date.now() < deadline) {
      for (let i = 0; i < 3 * REPLICAS; i++) {
        const res = await fetch(`${base}/api/product?limit=1`, { headers: { 'x-request-id': 'chosen-by-the-client', 'x-forwarded-for': '6.6.6.6' } })
        t.equal(res.status, 200)
        await res.arrayBuffer()
        ids.push(res.headers.get('x-request-id') ?? '')
      }
      served = await requestsPerContainer(apiIds, ids)
      if (served.size === REPLICAS) break
      await sleep(1000)
    }
    // A replica writes its "request completed" line as the answer leaves: the last lines can
    // reach `docker logs` a moment after the client has its answer.
    for (let i = 0; i < 20 && [...served.values()].reduce((a, b) => a + b, 0) < ids.length; i++) {
      await sleep(500)
      served = await requestsPerContainer(apiIds, ids)
    }
    t.equal(served.size, REPLICAS, `every replica served some of the ${ids.length} requests: ${[...served.values()].join(', ')}`)
    t.match(ids[0], /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, 'the id is the proxy\'s UUID, not the client\'s')
    t.equal(new Set(ids).size, ids.length, 'one id per request')
    t.equal([...served.values()].reduce((a, b) => a + b, 0), ids.length, 'each request logged once, by the id the client got back')
    const logged = (await logLines(apiIds[0]!)).find((l) => ids.includes(String(l.reqId)) && l.req !== undefined) as { req: { remoteAddress: string } } | undefined
    t.ok(logged, 'a logged request')
    t.not(logged?.req.remoteAddress, proxyIp, 'the API sees the client, not the proxy (TRUST_PROXY names the proxy)')
    t.not(logged?.req.remoteAddress, '6.6.6.6', 'and not an address the client made up')
  })

  const containerId = apiIds[0]!
  await t.test('every .env setting reaches the container; compose overrides only the layout', async (t) => {
    const env = JSON.parse((await run('docker', ['inspect', '--format', '{{json .Config.Env}}', containerId])).stdout) as string[]
    const inside = new Map(env.map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]))
    const overridden: Record<string, string> = { NODE_ENV: 'production', HOST: '0.0.0.0', PORT: '3000', DATABASE_URL: '', DB_HOST: 'db', DB_PORT: '5432', TRUST_PROXY: proxyIp, SHUTDOWN_DRAIN_MS: '4000' }
    for (const [, name] of example.matchAll(/^([A-Z_][A-Z0-9_]*)=/gm)) {
      t.ok(inside.has(name!), `${name} is passed`)
      if (name! in overridden) t.equal(inside.get(name!), overridden[name!], `${name} set by compose`)
    }
    t.equal(inside.get('SECRET'), secret)
    t.equal(inside.get('REDIS_URL'), 'redis://redis:6379', 'the redis service')
    t.equal(inside.get('ACCESS_TOKEN_TTL'), '2h')
    const user = (await run('docker', ['exec', containerId, 'id', '-un'])).stdout.trim()
    t.equal(user, 'node', 'the API runs as the non-root node user')
  })

  const alice = { username: `alice_${project}`, email: `alice_${project}@example.com`, password: 'wonderland rabbit hole' }
  let token = ''
  let userId = 0
  let kept = 0
  await t.test('register -> login -> read -> create -> change -> delete, over HTTP', async (t) => {
    const created = await http(base, 'POST', '/api/auth/register', alice)
    t.equal(created.status, 201, created.text)
    userId = created.json.id
    t.notOk('passwordHash' in created.json || 'password' in created.json, 'no password in the answer')
    const login = await http(base, 'POST', '/api/auth/login', { username: alice.username, password: alice.password })
    t.equal(login.status, 200, login.text)
    token = login.json.token
    const claims = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as { iat: number, exp: number }
    t.equal(claims.exp - claims.iat, 7200, 'ACCESS_TOKEN_TTL=2h from .env is used')
    // Sessions: a refresh rotates, a second use of the same refresh token is refused, logout ends a session.
    const second = await http(base, 'POST', '/api/auth/login', { username: alice.username, password: alice.password })
    const rotated = await http(base, 'POST', '/api/auth/refresh-token', { refreshToken: second.json.refreshToken })
    t.equal(rotated.status, 200, rotated.text)
    t.equal((await http(base, 'POST', '/api/auth/refresh-token', { refreshToken: second.json.refreshToken })).json.code, 'REFRESH_TOKEN_REUSED', 'reuse is detected')
    const third = await http(base, 'POST', '/api/auth/login', { username: alice.username, password: alice.password })
    t.equal((await http(base, 'POST', '/api/auth/logout', undefined, third.json.token)).status, 204, 'logout')
    t.equal((await http(base, 'GET', `/api/user/${userId}`, undefined, third.json.token)).status, 401, 'the logged-out token is refused at once')
    t.equal((await http(base, 'GET', `/api/user/${userId}`, undefined, token)).json.username, alice.username)
    t.equal((await http(base, 'GET', `/api/user/${userId}`)).status, 401, 'no token: 401')
    const lamp = await http(base, 'POST', '/api/product', { title: 'Desk lamp', description: 'Warm light', amount: 2599 }, token)
    t.equal(lamp.status, 201, lamp.text)
    kept = lamp.json.id
    const chair = await http(base, 'POST', '/api/product', { title: 'Chair', amount: 4900 }, token)
    t.equal(chair.status, 201)
    const email = `new_${project}@example.com`
    const changed = await http(base, 'PATCH', `/api/user/${userId}`, { email, currentPassword: alice.password }, token)
    t.equal(changed.status, 200, changed.text)
    t.equal(changed.json.user.pendingEmail, email, 'a new address waits for its link')
    t.equal((await http(base, 'DELETE', `/api/product/${chair.json.id}`, undefined, token)).status, 204)
    t.equal((await http(base, 'GET', `/api/product/${chair.json.id}`)).status, 404)
    const bob = { username: `bob_${project}`, email: `bob_${project}@example.com`, password: 'leaving the service' }
    const bobId = (await http(base, 'POST', '/api/user', bob)).json.id as number
    const bobToken = (await http(base, 'POST', '/api/auth/login', { username: bob.username, password: bob.password })).json.token as string
    const gone = await http(base, 'DELETE', `/api/user/${bobId}`, { password: bob.password }, bobToken)
    t.equal(gone.status, 204, `a user deletes their own account: ${gone.text}`)
    t.equal((await http(base, 'POST', '/api/auth/login', { username: bob.username, password: bob.password })).status, 401, 'and cannot log in any more')
    const bad = await http(base, 'POST', '/api/product', '{', token)
    t.equal(bad.status, 400, 'bad input: a 4xx problem')
    t.match(bad.headers.get('content-type'), /application\/problem\+json/)
  })

  await t.test('password reset through the mail catcher: sent while it is down, delivered once it is back; the link sets the new password', async (t) => {
    const mail = `http://127.0.0.1:${mailPort}`
    const carol = { username: `carol_${project}`, email: `carol_${project}@example.com`, password: 'forgot this one' }
    t.equal((await http(base, 'POST', '/api/auth/register', carol)).status, 201, 'registered')
    // The API does not depend on the catcher: with it stopped, the request is answered and
    // the message waits in the outbox (the first attempt fails: no such host on the network).
    t.equal((await dc(['stop', 'mail-catcher'], 60_000)).code, 0, 'the catcher stopped')
    const asked = await http(base, 'POST', '/api/auth/password-reset', { email: carol.email })
    t.equal(asked.status, 202, asked.text)
    await sleep(1500)
    t.equal((await fetch(`${base}/health/ready`)).status, 200, 'the API stays ready without its SMTP server')
    t.equal((await dc(['start', 'mail-catcher'], 60_000)).code, 0, 'the catcher started again')
    // The retry comes after the outbox's first backoff (5 s), from whichever replica.
    let link = ''
    let seen = ''
    const deadline = Date.now() + 60_000
    while (link === '' && Date.now() < deadline) {
      try {
        const messages = await (await fetch(`${mail}/email`, { signal: AbortSignal.timeout(3000) })).json() as Array<{ to: Array<{ address: string }>, subject: string, text?: string }>
        seen = messages.map((m) => `${m.to.map((a) => a.address).join(',')}: ${m.subject}`).join('; ')
        const reset = messages.find((m) => m.to.some((a) => a.address === carol.email) && /\/reset-password#token=/.test(m.text ?? ''))
        link = /https?:\/\/[^\s"<>]+\/reset-password#token=[^\s"<>]+/.exec(reset?.text ?? '')?.[0] ?? ''
      } catch { /* the catcher is starting */ }
      if (link === '') await sleep(500)
    }
    t.match(link, new RegExp(`^http://localhost:${port}/reset-password#token=`), `the e-mail's link, built from PUBLIC_URL (messages seen: ${seen})`)
    t.equal((await fetch(`${mail}/`)).status, 200, 'the catcher\'s page answers on its loopback port')
    if (link === '') return
    t.equal((await fetch(`${base}/reset-password`)).status, 200, 'the link\'s page is served')
    const token = new URL(link).hash.replace(/^#token=/, '')
    const newPassword = 'remembered at last'
    const confirmed = await http(base, 'POST', '/api/auth/password-reset/confirm', { token, password: newPassword })
    t.equal(confirmed.status, 204, confirmed.text)
    t.equal((await http(base, 'POST', '/api/auth/login', { username: carol.username, password: carol.password })).status, 401, 'the old password no longer works')
    t.equal((await http(base, 'POST', '/api/auth/login', { username: carol.username, password: newPassword })).status, 200, 'the new one does')
  })

  await t.test('second factors across replicas: TOTP enrolment and a second-step login; a passkey registered and used for a passwordless sign-in, each step on another replica', async (t) => {
    // The replicas addressed directly on the compose network (the host reaches it, as it
    // reaches the proxy's statistics page): each step of a flow goes to the next replica, so
    // every pending secret, ticket and challenge is read back by a replica that did not write it.
    const ips = (await run('docker', ['inspect', '--format', '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}', ...apiIds])).stdout.split('\n').map((s) => s.trim()).filter(Boolean)
    t.equal(new Set(ips).size, REPLICAS, `${REPLICAS} replica addresses: ${ips.join(', ')}`)
    let turn = 0
    const replica = (): string => `http://${ips[turn++ % ips.length]}:3000`
    const origin = `http://localhost:${port}` // PUBLIC_URL: the origin a browser reports, whichever replica answers
    const dave = { username: `dave_${project}`, email: `dave_${project}@example.com`, password: 'two factors please' }
    t.equal((await http(replica(), 'POST', '/api/auth/register', dave)).status, 201, 'registered')
    // Its address verified, as its link would (a factor needs it), in the deployment's database.
    await dc(['exec', '-T', 'db', 'sh', '-c', `psql -U "$POSTGRES_USER" -d "$POSTGRES_DB" -c "UPDATE users SET email_verified_at = now() WHERE username = '${dave.username}'"`])
    const token = (await http(replica(), 'POST', '/api/auth/login', { username: dave.username, password: dave.password })).json.token as string

    const enrol = await http(replica(), 'POST', '/api/security/totp', { currentPassword: dave.password }, token)
    t.equal(enrol.status, 200, `enrolment started: ${enrol.text.slice(0, 200)}`)
    const confirmed = await http(replica(), 'POST', '/api/security/totp/confirm', { code: generateSync({ secret: enrol.json.secret }), currentPassword: dave.password }, token)
    t.equal(confirmed.status, 200, `TOTP confirmed on another replica: ${confirmed.text.slice(0, 200)}`)
    const first = await http(replica(), 'POST', '/api/auth/login', { username: dave.username, password: dave.password })
    t.equal(first.status, 202, `the password alone asks for the second step: ${first.text}`)
    // The confirmation took this time step's code: the next step's (accepted one step early) completes the login.
    const code = generateSync({ secret: enrol.json.secret, epoch: Math.floor(Date.now() / 1000) + 30 })
    const second = await http(replica(), 'POST', '/api/auth/mfa/totp', { mfaToken: first.json.mfaToken, code })
    t.equal(second.status, 200, `the ticket redeemed on another replica with a TOTP code: ${second.text.slice(0, 200)}`)
    t.same((await http(replica(), 'GET', '/api/security', undefined, second.json.token)).json.session?.methods, ['password', 'totp'], 'a password + TOTP session')

    const authenticator = new SoftAuthenticator()
    const creation = await http(replica(), 'POST', '/api/security/passkey/options', { currentPassword: dave.password }, token)
    t.equal(creation.status, 200, `registration options: ${creation.text.slice(0, 200)}`)
    const added = await http(replica(), 'POST', '/api/security/passkeys', { response: authenticator.register(creation.json, origin), name: 'compose', currentPassword: dave.password }, token)
    t.equal(added.status, 201, `registered on another replica than the options': ${added.text}`)
    const request = await http(replica(), 'POST', '/api/auth/passkey/options', {})
    t.equal(request.status, 200, `sign-in options: ${request.text.slice(0, 200)}`)
    const signedIn = await http(replica(), 'POST', '/api/auth/passkey/login', { response: authenticator.authenticate(request.json, origin) })
    t.equal(signedIn.status, 200, `passwordless sign-in on another replica than the options': ${signedIn.text.slice(0, 200)}`)
    t.same((await http(base, 'GET', '/api/security', undefined, signedIn.json.token)).json.session?.methods, ['passkey'], 'a passkey session, read through the proxy')
  })

  // The image of the kept product: uploaded once, then read through the proxy before and after
  // the restarts below (in the database, which every replica reads).
  let imageUrl = ''
  let imageEtag = ''
  await t.test('a product image: multipart upload through the proxy, read back', async (t) => {
    const form = new FormData()
    form.append('image', new Blob([PNG], { type: 'image/png' }), 'lamp.png')
    const res = await fetch(`${base}/api/product/${kept}/image`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: form })
    const body = await res.json() as { imageUrl: string | null }
    t.equal(res.status, 201, `uploaded: ${JSON.stringify(body)}`)
    t.equal(body.imageUrl, `/api/product/${kept}/image`, 'the product carries its image URL')
    imageUrl = `${base}/api/product/${kept}/image`
    const read = await rawGet(imageUrl)
    t.equal(read.status, 200)
    t.equal(read.headers['content-type'], 'image/png')
    t.equal(read.headers['x-content-type-options'], 'nosniff')
    t.ok(read.body.equals(PNG), `the same ${PNG.length} bytes`)
    imageEtag = String(read.headers.etag ?? '')
    t.equal(imageEtag, `"${createHash('sha256').update(PNG).digest('base64url')}"`, 'a strong ETag: the SHA-256 of the bytes')
    t.equal((await rawGet(imageUrl, { 'if-none-match': imageEtag })).status, 304, 'If-None-Match: 304')
  })

  await t.test('the OpenAPI page works over plain HTTP from another machine', async (t) => {
    const address = lanAddress()
    if (address === undefined) { t.comment('this machine has no LAN address: the page is fetched on loopback only') }
    const host = address ?? '127.0.0.1'
    const page = await fetch(`http://${host}:${port}/docs`)
    t.equal(page.status, 200)
    const csp = page.headers.get('content-security-policy') ?? ''
    t.match(csp, /script-src 'self'/, 'a strict CSP')
    t.notMatch(csp, /upgrade-insecure-requests/, 'scripts are not forced to https')
    const html = await page.text()
    const scripts = [...html.matchAll(/<script[^>]+src="([^"]+)"/g)].map((m) => m[1]!)
    t.ok(scripts.length > 0, 'the page loads scripts')
    for (const src of scripts) {
      const url = new URL(src, `http://${host}:${port}/docs`)
      t.equal(url.protocol, 'http:', `${src} over http`)
      t.equal((await fetch(url)).status, 200, `${src} loads`)
    }
  })

  await t.test('the image serves the web app at / (web/ is copied into it)', async (t) => {
    const shell = await fetch(base + '/')
    t.equal(shell.status, 200, '/ loads')
    const files = [...(await shell.text()).matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)].map((m) => m[1]!)
    t.ok(files.length >= 3, `the shell names the app's files: ${files.join(', ')}`)
    for (const file of files) {
      const res = await fetch(base + file)
      t.equal(res.status, 200, `${file} loads`)
      t.equal(res.headers.get('cache-control'), 'public, max-age=31536000, immutable', `${file}: immutable`)
    }
  })

  await t.test(`rolling restart of the ${REPLICAS} replicas under load: 0 failed requests, 0 lost writes`, async (t) => {
    // The proxy's own view (its statistics page, in the compose network, not published).
    const states = async (): Promise<Map<string, string>> => {
      try {
        const csv = await (await fetch(`http://${proxyIp}:8404/stats;csv`, { signal: AbortSignal.timeout(3000) })).text()
        const [header = '', ...rows] = csv.split('\n').filter(Boolean)
        const names = header.replace(/^# /, '').split(',')
        const parsed = rows.map((row) => Object.fromEntries(row.split(',').map((value, i) => [names[i] ?? String(i), value])))
        return new Map(parsed.filter((r) => r.pxname === 'api' && /^api\d+$/.test(r.svname ?? '') && r.status !== 'MAINT').map((r) => [`${r.svname} ${r.addr}`, r.status!]))
      } catch { return new Map() }
    }
    const upCount = async (): Promise<number> => [...(await states()).values()].filter((s) => s === 'UP').length
    const until = async (what: string, check: () => Promise<boolean>, ms: number): Promise<void> => {
      const deadline = Date.now() + ms
      while (!await check()) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify([...(await states())])}`)
        await sleep(250)
      }
    }
    await until(`${REPLICAS} replicas UP in the proxy`, async () => await upCount() === REPLICAS, 60_000)
    const users = await loadUsers(base, 3, project)
    const load = mixedLoad(base, users, { workers: 4, pauseMs: 10 })
    await sleep(2000)
    const steps: string[] = []
    for (const id of apiIds) {
      const started = Date.now()
      // `docker restart` in two steps, to see the exit code: SIGTERM, the drain (readiness
      // 503: the proxy takes it out), the close, exit 0; then the start.
      const stopped = await run('docker', ['stop', '-t', '20', id], { timeoutMs: 60_000 })
      t.equal(stopped.code, 0, `docker stop ${id.slice(0, 12)}`)
      const exitCode = JSON.parse((await run('docker', ['inspect', '--format', '{{json .State.ExitCode}}', id])).stdout || 'null') as number | null
      t.equal(exitCode, 0, 'it stopped with exit 0 (drained and closed within its grace period)')
      const back = Date.now()
      t.equal((await run('docker', ['start', id], { timeoutMs: 60_000 })).code, 0, `docker start ${id.slice(0, 12)}`)
      await waitHealthy([id], 120_000)
      await until(`${REPLICAS} replicas UP again`, async () => await upCount() === REPLICAS, 60_000)
      steps.push(`${id.slice(0, 12)}: stopped in ${back - started} ms, back in the proxy ${Date.now() - back} ms after its start`)
    }
    await sleep(2000)
    const result = await load.stop()
    t.comment(steps.join('\n'))
    t.comment(`${result.sent} requests: ${JSON.stringify(result.answers)}; ${result.created.length} products created`)
    t.same(result.failures, [], '0 failed requests')
    t.ok(result.sent > 50 && result.created.length > 10, 'a real load ran (reads, logins, writes)')
    t.same(await lostWrites(base, result.created), [], '0 lost writes: every 201 product reads back')

    await t.test('the per-account limit holds across the replicas', { todo: envVariables().includes('REDIS_URL') ? false : 'REDIS_URL (Redis-shared limits) is not in the service yet: each replica counts alone' }, async (t) => {
      const max = Number(/^LOGIN_FAILURES_MAX=(\d+)/m.exec(example)?.[1] ?? 10)
      const statuses: number[] = []
      const guessIds: string[] = []
      for (let i = 0; i < max * REPLICAS; i++) {
        const r = await call(base, 'POST', '/api/auth/login', { body: { username: users[0]!.username, password: `wrong guess ${i}` } })
        statuses.push(isAnswer(r) ? r.status : 0)
        if (isAnswer(r)) guessIds.push(r.headers.get('x-request-id') ?? '')
      }
      t.ok((await requestsPerContainer(apiIds, guessIds)).size >= 2, 'the guesses went to several replicas')
      t.equal(statuses.filter((s) => s === 401).length, max, `exactly LOGIN_FAILURES_MAX (${max}) wrong guesses answered 401 over ${REPLICAS} replicas`)
      t.equal(statuses.filter((s) => s === 429).length, max * (REPLICAS - 1), 'every later one 429')
    })
  })

  await t.test('docker compose restart api: the data and the product image are still there', async (t) => {
    t.equal((await dc(['restart', 'api'])).code, 0)
    await waitReady(base, 120_000)
    await waitHealthy(apiIds, 120_000)
    const login = await http(base, 'POST', '/api/auth/login', { username: alice.username, password: alice.password })
    t.equal(login.status, 200, 'the user survives')
    t.equal((await http(base, 'GET', `/api/product/${kept}`)).json.title, 'Desk lamp', 'the product survives')
    t.equal((await http(base, 'GET', `/api/user/${userId}`, undefined, token)).status, 200, 'a token from before the restart still works (SECRET from .env)')

    await t.test('the product image survives, and every replica serves it (from the database)', { skip: imageUrl === '' ? 'the upload failed' : false }, async (t) => {
      // Read until each replica has answered (the proxy marks a restarted replica up after
      // two good checks); every answer must be the same image, whichever replica sent it.
      const ids: string[] = []
      const wrong: string[] = []
      let reads = 0
      const deadline = Date.now() + 60_000
      let served = new Map<string, number>()
      while (Date.now() < deadline) {
        for (let i = 0; i < 2 * REPLICAS; i++) {
          const read = await rawGet(imageUrl)
          const revalidated = await rawGet(imageUrl, { 'if-none-match': imageEtag })
          reads += 1
          ids.push(String(read.headers['x-request-id'] ?? ''), String(revalidated.headers['x-request-id'] ?? ''))
          if (read.status !== 200 || read.headers['content-type'] !== 'image/png' || !read.body.equals(PNG) || read.headers.etag !== imageEtag) {
            wrong.push(`GET: ${read.status} ${read.headers['content-type']} ${read.body.length} bytes, ETag ${read.headers.etag}`)
          }
          if (revalidated.status !== 304 || revalidated.body.length !== 0 || revalidated.headers.etag !== imageEtag) {
            wrong.push(`If-None-Match: ${revalidated.status} ${revalidated.body.length} bytes, ETag ${revalidated.headers.etag}`)
          }
        }
        served = await requestsPerContainer(apiIds, ids)
        if (served.size === REPLICAS) break
        await sleep(1000)
      }
      t.ok(reads > 0, `${reads} GETs and ${reads} GETs with If-None-Match`)
      t.same(wrong, [], 'every GET: 200, image/png, the same bytes and ETag; every If-None-Match: 304, no body, the same ETag')
      t.equal(served.size, REPLICAS, `every replica served the image: ${[...served.values()].join(', ')} of ${ids.length} requests`)
    })
  })

  await t.test('docker compose stop: every replica exits 0 within its grace period', async (t) => {
    const started = Date.now()
    t.equal((await dc(['stop', 'api'])).code, 0)
    const took = Date.now() - started
    for (const id of apiIds) {
      const state = JSON.parse((await run('docker', ['inspect', '--format', '{{json .State}}', id])).stdout) as { ExitCode: number, Running: boolean }
      t.equal(state.Running, false)
      t.equal(state.ExitCode, 0, 'graceful close (drain, then close): exit 0 (SIGKILL after the grace period would be 137)')
    }
    t.ok(took < 20_000, `stopped in ${took} ms, under stop_grace_period (20 s)`)
  })
})
