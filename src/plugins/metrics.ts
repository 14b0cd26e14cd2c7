/**
 * Prometheus metrics (prom-client), collected per app in a registry of its own and served
 * by `GET /metrics` behind the admin key (src/modules/metrics/routes.ts,
 * docs/operations.md):
 * - `http_request_duration_seconds{method,route,status_code}`: the route is the pattern
 *   (`/api/product/:id`), never the URL; requests no route matched share `route="unmatched"`,
 *   so ids and 404 garbage cannot grow the label set;
 * - `http_requests_in_flight`: admission's own count (src/plugins/admission.ts), the figure
 *   LOAD_SHED_MAX_IN_FLIGHT caps; the routes never shed (`/health/live`, `/metrics`) are not
 *   in it; `http_rate_limited_total{method,route}` (every 429);
 *   `http_load_shed_total{reason}` (503s of the load shedding, src/plugins/admission.ts:
 *   `in_flight`, `db_queue`, `event_loop`; refused before routing, so no route label);
 *   `http_client_limited_total{reason}` (clients refused or cut by admission: `client_share`,
 *   `body_too_slow`, `read_too_slow`; never labelled by address);
 * - `db_pool_connections{state}`, `db_pool_waiting_clients`, `db_pool_max_connections` (pg's pool);
 * - `password_queue_size`, `password_task_duration_seconds{op}` (bcrypt in piscina, queue
 *   wait included);
 * - `backup_last_success_age_seconds{stanza}`, `backup_last_full_age_seconds{stanza}`,
 *   `backup_check_age_seconds{stanza}`, `backup_ok{stanza}`,
 *   `wal_archive_last_success_age_seconds{stanza}`, `wal_archive_failing{stanza}`: pgBackRest's
 *   info and pg_stat_archiver, read through the database (src/db/backup-state.ts); absent
 *   where no backup scheduler records them;
 * - prom-client's default process and Node.js metrics.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client'
import { sqlPool } from '../db/client.js'
import { LIMIT_REASONS, SHED_REASONS, type Admission } from './admission.js'
import { readBackupState, type BackupState } from '../db/backup-state.js'

declare module 'fastify' {
  interface FastifyInstance {
    metrics: Metrics
  }
}

interface Metrics {
  registry: Registry
}

export interface MetricsOptions {
  /** Admission (src/plugins/admission.ts): its refusals are `http_load_shed_total`. */
  admission: Admission
}

/** The label of requests no route matched (404s, and 405s of unknown methods). */
const UNMATCHED_ROUTE = 'unmatched'

/** The route pattern, never the URL: a bounded label set. */
function routeLabel (request: FastifyRequest): string {
  return request.routeOptions.url ?? UNMATCHED_ROUTE
}

async function metricsPlugin (app: FastifyInstance, options: MetricsOptions): Promise<void> {
  const registry = new Registry()
  collectDefaultMetrics({ register: registry })

  const duration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'Time from the start of a request to the end of its response, by route pattern and status',
    labelNames: ['method', 'route', 'status_code'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry]
  })
  const rateLimited = new Counter({
    name: 'http_rate_limited_total',
    help: 'Requests refused with 429 (per-client and per-account limits), by route pattern',
    labelNames: ['method', 'route'] as const,
    registers: [registry]
  })
  const { admission } = options
  // Read from admission when scraped: no listener or count of its own on each request.
  // eslint-disable-next-line no-new
  new Gauge({
    name: 'http_requests_in_flight',
    help: 'Requests admitted and not yet answered or aborted (what LOAD_SHED_MAX_IN_FLIGHT caps; /health/live and /metrics are not counted)',
    registers: [registry],
    collect () { this.set(admission.inFlight) }
  })
  // eslint-disable-next-line no-new
  new Counter({
    name: 'http_load_shed_total',
    help: 'Requests refused with 503 OVERLOADED by the load shedding, by reason (in_flight: LOAD_SHED_MAX_IN_FLIGHT, db_queue: LOAD_SHED_MAX_DB_WAITING, event_loop: MAX_EVENT_LOOP_DELAY_MS)',
    labelNames: ['reason'] as const,
    registers: [registry],
    collect () {
      this.reset()
      for (const reason of SHED_REASONS) this.inc({ reason }, admission.refused[reason])
    }
  })

  // eslint-disable-next-line no-new
  new Counter({
    name: 'http_client_limited_total',
    help: 'Clients refused or cut by admission, by reason (client_share: 429 past LOAD_SHED_MAX_IN_FLIGHT_PER_CLIENT; body_too_slow: 408, a body below SLOW_CLIENT_MIN_BYTES_PER_S; read_too_slow: an answer not read at that rate, its connection cut)',
    labelNames: ['reason'] as const,
    registers: [registry],
    collect () {
      this.reset()
      for (const reason of LIMIT_REASONS) this.inc({ reason }, admission.limited[reason])
    }
  })

  const pool = sqlPool(app.prisma)
  // eslint-disable-next-line no-new
  new Gauge({
    name: 'db_pool_connections',
    help: 'Connections of the PostgreSQL pool, by state (idle, in use)',
    labelNames: ['state'] as const,
    registers: [registry],
    collect () {
      this.set({ state: 'idle' }, pool.idleCount)
      this.set({ state: 'in_use' }, pool.totalCount - pool.idleCount)
    }
  })
  // eslint-disable-next-line no-new
  new Gauge({
    name: 'db_pool_waiting_clients',
    help: 'Queries waiting for a pool connection (all connections in use)',
    registers: [registry],
    collect () { this.set(pool.waitingCount) }
  })
  // eslint-disable-next-line no-new
  new Gauge({
    name: 'db_pool_max_connections',
    help: 'Size of the PostgreSQL pool (DB_POOL_SIZE)',
    registers: [registry],
    collect () { this.set(pool.options.max) }
  })

  // One read of the backup state per scrape, shared by its gauges (prom-client collects them
  // at once). A scrape never waits on a busy pool for it: past a second it shows the last
  // state read (the read goes on, and the next scrape gets it), so /metrics answers while
  // every connection is taken (what an overload alert needs).
  let backupRead: Promise<BackupState[]> | undefined
  let backupKnown: BackupState[] = []
  const backupState = async (): Promise<BackupState[]> => {
    backupRead ??= readBackupState(pool).then((state) => { backupKnown = state; return state }, (error: unknown) => {
      app.log.warn({ err: error }, 'metrics: cannot read the backup state from the database')
      return backupKnown
    }).finally(() => { backupRead = undefined })
    let timer: NodeJS.Timeout | undefined
    const late = new Promise<BackupState[]>((resolve) => { timer = setTimeout(() => { resolve(backupKnown) }, 1000).unref() })
    try {
      return await Promise.race([backupRead, late])
    } finally {
      clearTimeout(timer)
    }
  }
  const backupGauge = (name: string, help: string, value: (state: BackupState) => number | undefined): void => {
    // eslint-disable-next-line no-new
    new Gauge({
      name,
      help,
      labelNames: ['stanza'] as const,
      registers: [registry],
      async collect () {
        this.reset()
        for (const state of await backupState()) {
          const v = value(state)
          if (v !== undefined) this.set({ stanza: state.stanza }, v)
        }
      }
    })
  }
  backupGauge('backup_last_success_age_seconds', 'Seconds since the newest backup (full or incremental) in pgBackRest\'s repository ended, from pgbackrest info', (s) => s.lastBackupAge)
  backupGauge('backup_last_full_age_seconds', 'Seconds since the newest full backup in pgBackRest\'s repository ended, from pgbackrest info', (s) => s.lastFullAge)
  backupGauge('backup_check_age_seconds', 'Seconds since the backup scheduler last read pgbackrest info (it does every minute)', (s) => s.checkedAge)
  backupGauge('backup_ok', '1 when the backup scheduler\'s last backup and info call succeeded, 0 when one failed (the scheduler\'s log says why)', (s) => s.error === null ? 1 : 0)
  backupGauge('wal_archive_last_success_age_seconds', 'Seconds since archive_command (pgbackrest archive-push) last stored a WAL segment in the repository, from pg_stat_archiver', (s) => s.archivedAge)
  backupGauge('wal_archive_failing', '1 when archive_command failed after its last success: WAL is piling up in pg_wal', (s) => s.archiveFailing ? 1 : 0)

  const passwords = app.passwords
  // eslint-disable-next-line no-new
  new Gauge({
    name: 'password_queue_size',
    help: 'Password hashes and verifications waiting for a worker thread',
    registers: [registry],
    collect () { this.set(passwords.queueSize()) }
  })
  const passwordTime = new Histogram({
    name: 'password_task_duration_seconds',
    help: 'Time of a bcrypt hash or verification, waiting in the queue included',
    labelNames: ['op'] as const,
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry]
  })
  passwords.onTask((op, seconds) => { passwordTime.observe({ op }, seconds) })

  app.decorate('metrics', { registry })

  app.addHook('onResponse', (request, reply, done) => {
    const route = routeLabel(request)
    duration.observe({ method: request.method, route, status_code: reply.statusCode }, reply.elapsedTime / 1000)
    if (reply.statusCode === 429) rateLimited.inc({ method: request.method, route })
    done()
  })
}

export default fp(metricsPlugin, { name: 'metrics', fastify: '5.x', dependencies: ['prisma', 'passwords'] })
