/**
 * The restore drill (docs/operations.md, "Backups and point-in-time recovery"), on the
 * repository's own docker-compose.yml and images: under a write load of registrations,
 * product creations and image uploads (300 KiB each, stored in the database) through the
 * proxy, take a full backup (the documented "backup now" command), keep writing, note an
 * instant T, keep writing until the WAL past T is archived, then destroy the database (its
 * container and its volume) while the load still runs. Between the backup and T the
 * repository is unreachable for a while: writes go on, /metrics says archiving fails, and
 * the WAL of that stretch is archived once it is back (the restore replays through it).
 * `docker compose run --rm db-restore --target T` first refuses a time no backup covers
 * (the database untouched), then restores; `docker compose up -d` starts the service on
 * the restored data. Every write acknowledged before T is there, none sent after T is
 * (a write sent before T and acknowledged after it may be either); the API, which ran
 * throughout, answers again: logins of users registered before T, their products, and a
 * 404 for a product created after T. /metrics shows the backup and archive ages.
 *
 * Short mode (default, CI: `npm run test:durability`): small data, a few minutes.
 * Long mode: DRILL_SEED_ROWS=100000 adds that many users and products (SQL, before the
 * full backup) and reports the restore time (RTO); figures in docs/operations.md.
 */
import { createHash, randomBytes } from 'node:crypto'
import { readFile, rm, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { freePort } from '../../src/db/embedded.js'
import { call, isAnswer } from '../faults/helpers/http.js'
import { composeCommand, copyCheckout, prepareDocker, run, type Run } from '../deploy/helpers/docker.js'

const project = `e1drill${randomBytes(4).toString('hex')}`
const SEED_ROWS = Number(process.env.DRILL_SEED_ROWS ?? 0)
const ADMIN_KEY = randomBytes(24).toString('hex')

interface Write { kind: 'user' | 'product' | 'image', key: string, sent: number, acked: number }

/** A product image of 300 KiB (two of the database's 256 KiB chunks), different every time. */
function image (): { bytes: Buffer, sha: string } {
  const bytes = Buffer.concat([PNG_SIGNATURE, randomBytes(300 * 1024)])
  return { bytes, sha: createHash('sha256').update(bytes).digest('hex') }
}
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])

/** The SHA-256 of a product's image as the service serves it, undefined when it has none. */
async function servedImage (base: string, productId: string): Promise<string | undefined> {
  const res = await fetch(`${base}/api/product/${productId}/image`, { signal: AbortSignal.timeout(15_000) })
  if (res.status !== 200) return undefined
  return createHash('sha256').update(Buffer.from(await res.arrayBuffer())).digest('hex')
}

function setEnv (text: string, values: Record<string, string>): string {
  for (const [name, value] of Object.entries(values)) {
    const line = new RegExp(`^${name}=.*$`, 'm')
    text = line.test(text) ? text.replace(line, `${name}=${value}`) : `${text}\n${name}=${value}\n`
  }
  return text
}

async function scrape (base: string): Promise<string> {
  const r = await call(base, 'GET', '/metrics', { headers: { authorization: `Bearer ${ADMIN_KEY}` } })
  return isAnswer(r) && r.status === 200 ? r.body : ''
}

function sample (text: string, name: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{stanza="main"} `))
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1))
}

async function waitFor (what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (await check()) return
    await sleep(1000)
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
}

t.setTimeout(3_600_000)
t.test('restore drill: point-in-time restore under a write load', { timeout: 3_500_000 }, async (t) => {
  const problem = await prepareDocker()
  if (problem !== undefined) {
    if (process.env.CI || process.env.COMPOSE_TEST === '1') t.fail(`The restore drill cannot run: ${problem}`)
    else await t.test('the drill', { skip: `cannot run here: ${problem}` }, async () => {})
    return
  }
  const compose = await composeCommand()
  const dir = await copyCheckout()
  const dc = async (args: string[], timeoutMs = 900_000): Promise<Run> => await run(compose[0]!, [...compose.slice(1), '-p', project, ...args], { cwd: dir, timeoutMs })
  const psql = async (sql: string): Promise<string> => {
    const r = await dc(['exec', '-T', 'db', 'psql', '-X', '-v', 'ON_ERROR_STOP=1', '-U', 'postgres', '-d', 'app', '-Atc', sql])
    if (r.code !== 0) throw new Error(`psql failed: ${r.stderr}`)
    return r.stdout
  }
  t.teardown(async () => {
    if (t.passing() === false) {
      const logs = await dc(['logs', '--no-color', '--tail', '60'])
      t.comment(`compose logs:\n${logs.stdout}${logs.stderr}`)
    }
    await dc(['--profile', 'restore', 'down', '-v', '--remove-orphans', '--rmi', 'local'])
    await rm(dir, { recursive: true, force: true })
  })

  const port = await freePort()
  const third = 20 + Math.floor(Math.random() * 200)
  const subnet = `10.${third}.${Math.floor(Math.random() * 256)}.0/24`
  const example = await readFile(path.join(dir, '.env.example'), 'utf8')
  await writeFile(path.join(dir, '.env'), setEnv(example, {
    DB_PASSWORD: randomBytes(12).toString('hex'),
    SECRET: randomBytes(48).toString('base64url'),
    PORT: String(port),
    PUBLIC_URL: `http://localhost:${port}`,
    COMPOSE_PROFILES: '',
    COMPOSE_SUBNET: subnet,
    PROXY_IP: subnet.replace(/0\/24$/, '10'),
    ADMIN_API_KEYS: ADMIN_KEY,
    // The drill's clients all come from one address and one user creates every product.
    RATE_LIMIT_AUTH_MAX: '1000000',
    PRODUCTS_MAX_PER_USER: '1000000',
    MAX_EVENT_LOOP_DELAY_MS: '0',
    // Short enough for a test to wait for; the default is 60.
    WAL_ARCHIVE_TIMEOUT: '5',
    // The drill takes its full backup itself (the scheduler's first one comes at start).
    BACKUP_INCR_INTERVAL: '100000'
  }))

  const up = await dc(['up', '--build', '-d'])
  t.equal(up.code, 0, 'docker compose up --build -d')
  if (up.code !== 0) { t.comment(up.stdout + up.stderr); return }
  const base = `http://127.0.0.1:${port}`
  await waitFor('the API through the proxy', 300_000, async () => { const r = await call(base, 'GET', '/health/ready'); return isAnswer(r) && r.status === 200 })

  await t.test('/metrics reads the backup state the scheduler recorded', async (t) => {
    await waitFor('the first full backup in /metrics', 300_000, async () => sample(await scrape(base), 'backup_last_full_age_seconds') !== undefined)
    await waitFor('an archived WAL segment in /metrics', 60_000, async () => sample(await scrape(base), 'wal_archive_last_success_age_seconds') !== undefined)
    const text = await scrape(base)
    t.equal(sample(text, 'backup_ok'), 1, 'backup_ok 1')
    t.equal(sample(text, 'wal_archive_failing'), 0, 'archiving works')
    t.ok(sample(text, 'wal_archive_last_success_age_seconds')! < 120, 'a segment archived in the last two minutes')
  })

  const owner = { username: `drill_owner_${project}`, email: `owner_${project}@example.com`, password: 'drill owner password' }
  t.equal((await call(base, 'POST', '/api/user', { body: owner }) as { status: number }).status, 201)
  const login = await call(base, 'POST', '/api/auth/login', { body: { username: owner.username, password: owner.password } })
  const token = isAnswer(login) ? login.json.token as string : ''

  if (SEED_ROWS > 0) {
    const started = Date.now()
    await psql(`INSERT INTO users (username, email, password_hash, updated_at) SELECT 'seed_' || g, 'seed_' || g || '@example.com', (SELECT password_hash FROM users WHERE username = '${owner.username}'), now() FROM generate_series(1, ${SEED_ROWS}) g`)
    await psql(`INSERT INTO products (title, description, amount, creator_id, updated_at) SELECT 'seed ' || g, 'a seeded product of the restore drill', g, (SELECT id FROM users WHERE username = '${owner.username}'), now() FROM generate_series(1, ${SEED_ROWS}) g`)
    t.comment(`seeded ${SEED_ROWS} users and ${SEED_ROWS} products in ${Date.now() - started} ms; database size ${await psql("SELECT pg_size_pretty(pg_database_size('app'))")}`)
  }

  // The write load: registrations, product creations and image uploads (onto the worker's
  // last product), each with its send and ack times.
  const writes: Write[] = []
  const state = { running: true, failures: 0 }
  const worker = async (w: number): Promise<void> => {
    let lastProduct: string | undefined
    for (let n = 0; state.running; n++) {
      const sent = Date.now()
      if (n % 3 === 2 && lastProduct !== undefined) {
        const { bytes, sha } = image()
        const form = new FormData()
        form.append('image', new Blob([bytes], { type: 'image/png' }), 'drill.png')
        const res = await fetch(`${base}/api/product/${lastProduct}/image`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: form, signal: AbortSignal.timeout(15_000) }).catch(() => undefined)
        if (res?.status === 201) writes.push({ kind: 'image', key: `${lastProduct}:${sha}`, sent, acked: Date.now() })
        else { state.failures++; await sleep(200) }
        await res?.arrayBuffer().catch(() => undefined)
      } else if (n % 3 === 0) {
        const username = `drill_${w}_${n}_${project}`
        const r = await call(base, 'POST', '/api/user', { body: { username, email: `${username}@example.com`, password: 'drill user password' }, timeoutMs: 10_000 })
        if (isAnswer(r) && r.status === 201) writes.push({ kind: 'user', key: username, sent, acked: Date.now() })
        else { state.failures++; await sleep(200) }
      } else {
        const r = await call(base, 'POST', '/api/product', { body: { title: `drill ${w} ${n}`, amount: n }, token, timeoutMs: 10_000 })
        if (isAnswer(r) && r.status === 201) {
          lastProduct = String(r.json.id)
          writes.push({ kind: 'product', key: lastProduct, sent, acked: Date.now() })
        } else { state.failures++; await sleep(200) }
      }
    }
  }
  const load = Promise.all([0, 1, 2, 3].map(worker))
  // The RPO as it happens: how old the newest archived segment gets while writes go on (a lost
  // disk loses the writes after it), sampled every second outside the repository's outage.
  const rpo = { max: 0, samples: 0, paused: false, running: true }
  const sampler = (async () => {
    while (rpo.running) {
      const age = rpo.paused ? undefined : sample(await scrape(base), 'wal_archive_last_success_age_seconds')
      if (age !== undefined && !rpo.paused) { rpo.max = Math.max(rpo.max, age); rpo.samples++ }
      await sleep(1000)
    }
  })()

  const backup = await dc(['exec', '-T', 'backup', 'pgbackrest', 'backup', '--type=full'])
  t.equal(backup.code, 0, `a full backup under the load (docker compose exec backup pgbackrest backup --type=full): ${backup.stderr.slice(-500)}`)
  // The repository becomes unreachable for a while (its directory unreadable to PostgreSQL
  // and the scheduler) with the load still writing: the service keeps answering, /metrics
  // says archiving fails, and once it is back the WAL piled up in pg_wal is archived: the
  // restore to T below replays through that stretch, so none of it was lost.
  await t.test('the repository unreachable for a while: writes go on, the metric says so, archiving catches up', async (t) => {
    rpo.paused = true
    t.equal((await dc(['exec', '-T', '-u', 'root', 'db', 'chmod', '000', '/var/lib/pgbackrest'])).code, 0, 'repository made unreachable')
    const ackedBefore = writes.length
    await waitFor('wal_archive_failing 1 in /metrics', 120_000, async () => sample(await scrape(base), 'wal_archive_failing') === 1)
    t.pass('/metrics: wal_archive_failing 1')
    await sleep(5000)
    t.ok(writes.length > ackedBefore, `writes acknowledged meanwhile: ${writes.length - ackedBefore}`)
    const logs = await dc(['logs', '--no-color', '--tail', '200', 'db'])
    t.match(logs.stdout + logs.stderr, /archive command failed|archive-push/, 'the database log says the archive command fails')
    t.equal((await dc(['exec', '-T', '-u', 'root', 'db', 'chmod', '750', '/var/lib/pgbackrest'])).code, 0, 'repository back')
    await waitFor('archiving caught up in /metrics', 180_000, async () => {
      const text = await scrape(base)
      return sample(text, 'wal_archive_failing') === 0 && (sample(text, 'wal_archive_last_success_age_seconds') ?? 999) < 15
    })
    t.pass('/metrics: wal_archive_failing 0, a segment archived in the last 15 s')
    rpo.paused = false
  })
  await sleep(5000)
  const T = new Date()
  t.comment(`T = ${T.toISOString()}, ${writes.length} writes acknowledged so far`)
  await sleep(5000)
  // Until the WAL past T is in the repository (WAL_ARCHIVE_TIMEOUT=5), still writing.
  await waitFor('the WAL past T archived', 120_000, async () => {
    const age = sample(await scrape(base), 'wal_archive_last_success_age_seconds')
    return age !== undefined && Date.now() - age * 1000 > T.getTime() + 2000
  })

  await t.test('a restore to a time no backup covers is refused, and the database is untouched', async (t) => {
    const before = await psql('SELECT count(*) FROM users')
    const refused = await dc(['run', '--rm', 'db-restore', '--target', '2001-01-01 00:00:00+00'])
    t.equal(refused.code, 2, 'exit code 2')
    t.match(refused.stderr + refused.stdout, /REFUSED: no backup covers 2001-01-01 00:00:00\.000000\+00: the oldest backup in the repository ended at/, 'says why')
    const busy = await dc(['run', '--rm', 'db-restore', '--target', T.toISOString()])
    t.equal(busy.code, 2, 'onto a volume that holds a database, without --delta: refused')
    t.match(busy.stderr + busy.stdout, /holds a database/)
    t.ok(Number(await psql('SELECT count(*) FROM users')) >= Number(before), 'the database still serves its data')
  })

  // The disaster: the database's container and its volume are gone, the API still running.
  rpo.running = false
  await sampler
  t.comment(`RPO measured: the newest archived WAL segment was at most ${rpo.max.toFixed(1)} s old over ${rpo.samples} samples under the load (WAL_ARCHIVE_TIMEOUT=5)`)
  const lost = Date.now()
  t.equal((await dc(['rm', '-sf', 'db', 'backup'])).code, 0, 'db and backup removed')
  const volume = await run('docker', ['volume', 'rm', `${project}_pgdata`])
  t.equal(volume.code, 0, `the pgdata volume destroyed: ${volume.stderr}`)
  await sleep(2000)
  state.running = false
  await load

  const restoreStarted = Date.now()
  const restore = await dc(['run', '--rm', 'db-restore', '--target', T.toISOString()], 3_000_000)
  const restoreMs = Date.now() - restoreStarted
  t.equal(restore.code, 0, 'docker compose run --rm db-restore --target T')
  t.comment((restore.stderr + restore.stdout).split('\n').filter((l) => l.includes('db-restore:') || l.includes('recovery stopping')).join('\n'))
  const upAgain = await dc(['up', '-d'])
  t.equal(upAgain.code, 0, 'docker compose up -d')
  await waitFor('the API ready on the restored database', 300_000, async () => { const r = await call(base, 'GET', '/health/ready'); return isAnswer(r) && r.status === 200 })
  const rtoMs = Date.now() - lost
  t.comment(`RTO: ${Math.round(rtoMs / 1000)} s from the volume's loss to a ready API (the restore command: ${Math.round(restoreMs / 1000)} s), ${SEED_ROWS} seeded rows, ${writes.length} acknowledged writes, ${state.failures} failed while the database was away`)

  await t.test('every write acknowledged before T is there, none sent after T', async (t) => {
    const users = new Set((await psql('SELECT username FROM users WHERE username LIKE \'drill\\_%\'')).split('\n').filter(Boolean))
    const products = new Set((await psql('SELECT id FROM products WHERE title LIKE \'drill %\'')).split('\n').filter(Boolean))
    // An image is there when its product serves exactly its bytes (the last image uploaded
    // onto a product before T replaces any earlier one: those are not expected).
    const served = new Map<string, string | undefined>()
    for (const w of writes.filter((w) => w.kind === 'image')) {
      const id = w.key.split(':')[0]!
      if (!served.has(id)) served.set(id, await servedImage(base, id))
    }
    const present = (w: Write): boolean => w.kind === 'image'
      ? served.get(w.key.split(':')[0]!) === w.key.split(':')[1]
      : (w.kind === 'user' ? users : products).has(w.key)
    const lastImageBeforeT = new Map<string, Write>()
    for (const w of writes) if (w.kind === 'image' && w.acked < T.getTime()) lastImageBeforeT.set(w.key.split(':')[0]!, w)
    const before = writes.filter((w) => w.acked < T.getTime() && (w.kind !== 'image' || lastImageBeforeT.get(w.key.split(':')[0]!) === w))
    const after = writes.filter((w) => w.sent > T.getTime())
    const images = before.filter((w) => w.kind === 'image').length
    t.ok(images >= 3, `images uploaded before T: ${images} (each product's last), ${after.filter((w) => w.kind === 'image').length} after`)
    const straddling = writes.length - before.length - after.length
    t.ok(before.length >= 10 && after.length >= 10, `writes on both sides of T: ${before.length} before, ${after.length} after, ${straddling} in flight at T`)
    const missing = before.filter((w) => !present(w))
    t.same(missing, [], `all ${before.length} writes acknowledged before T are present`)
    const resurrected = after.filter(present)
    t.same(resurrected, [], `none of the ${after.length} writes sent after T is`)
  })

  await t.test('the service answers on the restored data', async (t) => {
    const user = writes.find((w) => w.kind === 'user' && w.acked < T.getTime())!
    const again = await call(base, 'POST', '/api/auth/login', { body: { username: user.key, password: 'drill user password' } })
    t.equal(isAnswer(again) && again.status, 200, 'a user registered before T logs in')
    const product = writes.find((w) => w.kind === 'product' && w.acked < T.getTime())!
    const read = await call(base, 'GET', `/api/product/${product.key}`)
    t.equal(isAnswer(read) && read.status, 200, 'a product created before T reads back')
    const gone = writes.find((w) => w.kind === 'product' && w.sent > T.getTime())!
    const missing = await call(base, 'GET', `/api/product/${gone.key}`)
    t.equal(isAnswer(missing) && missing.status, 404, 'a product created after T is not there')
    const created = await call(base, 'POST', '/api/product', { body: { title: 'after the restore', amount: 1 }, token })
    t.equal(isAnswer(created) && created.status, 201, 'writes work (a token issued before T is still valid: SECRET is unchanged)')
    await waitFor('the archive working again in /metrics', 120_000, async () => {
      const text = await scrape(base)
      return sample(text, 'wal_archive_failing') === 0 && (sample(text, 'wal_archive_last_success_age_seconds') ?? 999) < 60
    })
    t.pass('WAL of the new timeline reaches the repository')
  })
})
