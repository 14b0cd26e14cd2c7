/**
 * Configuration from the environment (and an optional `.env` file), validated once at
 * start. A wrong value stops the service with a message that names the variable.
 * Every variable is listed, with a comment, in `.env.example`.
 *
 * Secrets may also come from files (`SECRET_FILE`, `DB_PASSWORD_FILE`, ...: the Docker
 * secrets convention); a variable and its `_FILE` twin together are refused.
 */
import { randomBytes } from 'node:crypto'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { parseEnv } from 'node:util'
import envSchema from 'env-schema'
import { Type, type Static } from 'typebox'
import { parseApiKeys } from './lib/api-keys.js'
import { parseTrustProxy } from './lib/trust-proxy.js'

/** A duration as `ms` reads it: a number with ms, s, m, h or d (no unit: ms). */
const DURATION = '^[0-9]+(ms|s|m|h|d)?$'
/** The embedded PostgreSQL's data folder unless set (as root in a private folder it moves: src/db/open.ts). */
export const EMBEDDED_DB_DIR_DEFAULT = '.data/postgres'

export const EnvSchema = Type.Object({
  NODE_ENV: Type.Union([Type.Literal('development'), Type.Literal('production'), Type.Literal('test')], { default: 'development' }),
  HOST: Type.String({ default: '127.0.0.1', minLength: 1 }),
  PORT: Type.Integer({ default: 3000, minimum: 0, maximum: 65535 }),
  LOG_LEVEL: Type.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)), { default: 'info' }),

  // Database: DATABASE_URL wins; otherwise DB_HOST and the other DB_* build the URL;
  // with neither, `npm start` runs an embedded PostgreSQL (src/db/embedded.ts).
  DATABASE_URL: Type.Optional(Type.String({ pattern: '^postgres(ql)?://' })),
  DB_HOST: Type.Optional(Type.String({ minLength: 1 })),
  DB_PORT: Type.Integer({ default: 5432, minimum: 1, maximum: 65535 }),
  DB_USER: Type.String({ default: 'postgres', minLength: 1 }),
  DB_PASSWORD: Type.String({ default: 'postgres' }),
  DB_NAME: Type.String({ default: 'app', minLength: 1, pattern: '^[A-Za-z0-9_]+$' }),
  DB_POOL_SIZE: Type.Integer({ default: 10, minimum: 1, maximum: 200 }),
  /**
   * How many replicas of the service share the database: at start, DB_POOL_SIZE x API_REPLICAS
   * is checked against the server's max_connections (src/db/pool-budget.ts), with a warning.
   */
  API_REPLICAS: Type.Integer({ default: 1, minimum: 1, maximum: 1000 }),
  /**
   * The database URL leads to PgBouncer in transaction pooling mode: no named prepared
   * statements and no statement_timeout startup parameter (docs/operations.md, "PgBouncer").
   */
  DB_PGBOUNCER: Type.Boolean({ default: false }),

  // Database time limits (src/db/client.ts): a database that hangs is a 503 within seconds.
  /** Wait at most this long for a pool connection (a new one included). */
  DB_CONNECT_TIMEOUT_MS: Type.Integer({ default: 5000, minimum: 100, maximum: 600_000 }),
  /** Server side: PostgreSQL cancels a statement that runs longer (`statement_timeout`); 0 = no limit. */
  DB_STATEMENT_TIMEOUT_MS: Type.Integer({ default: 5000, minimum: 0, maximum: 3_600_000 }),
  /** Client side: give up on a query with no answer (a frozen server or network); keep it above the statement timeout; 0 = no limit. */
  DB_QUERY_TIMEOUT_MS: Type.Integer({ default: 7000, minimum: 0, maximum: 3_600_000 }),
  /** `/health/ready` answers 503 when the database has not answered within this time. */
  HEALTH_READY_TIMEOUT_MS: Type.Integer({ default: 1500, minimum: 100, maximum: 60_000 }),

  /** Data folder of the embedded PostgreSQL (kept between runs, git-ignored). */
  EMBEDDED_DB_DIR: Type.String({ default: EMBEDDED_DB_DIR_DEFAULT }),
  /** Port of the embedded PostgreSQL; 0 picks a free one. */
  EMBEDDED_DB_PORT: Type.Integer({ default: 0, minimum: 0, maximum: 65535 }),
  /** Apply pending migrations at start (the one migration path, also in the container). */
  MIGRATE_ON_START: Type.Boolean({ default: true }),
  /**
   * Run the embedded PostgreSQL when no database is configured. Unset: yes in development
   * and test, refused in production (a forgotten DATABASE_URL is a misconfiguration there).
   */
  EMBEDDED_DB: Type.Optional(Type.Boolean()),

  // Tokens and passwords.
  SECRET: Type.Optional(Type.String({ minLength: 32 })),
  /** Lifetime of an access token (JWT); short, since a refresh token renews it (docs/api.md, "Sessions"). */
  ACCESS_TOKEN_TTL: Type.Optional(Type.String({ pattern: DURATION })),
  /** The variable ACCESS_TOKEN_TTL replaces; still read when ACCESS_TOKEN_TTL is unset. */
  JWT_EXPIRES_IN: Type.Optional(Type.String({ pattern: DURATION })),
  /** Lifetime of a refresh token; every rotation issues a new one for this long. */
  REFRESH_TOKEN_TTL: Type.String({ default: '30d', pattern: DURATION }),
  /** Set `Secure` on the session cookies (false only for local HTTP: browsers then send them over plain HTTP). */
  COOKIE_SECURE: Type.Boolean({ default: true }),
  /**
   * Origins (scheme://host[:port], comma-separated) whose pages may send cookie-authenticated
   * changes; empty: only the service's own origin (src/modules/sessions/csrf.ts).
   */
  CSRF_TRUSTED_ORIGINS: Type.String({ default: '' }),
  BCRYPT_COST: Type.Integer({ default: 10, minimum: 4, maximum: 15 }),

  // Limits.
  BODY_LIMIT: Type.Integer({ default: 1_048_576, minimum: 1024 }),
  RATE_LIMIT_AUTH_MAX: Type.Integer({ default: 20, minimum: 1 }),
  RATE_LIMIT_AUTH_WINDOW_MS: Type.Integer({ default: 60_000, minimum: 1000 }),
  /** Failed logins per account (login name) per window before 429 (src/modules/auth/account-limit.ts). */
  LOGIN_FAILURES_MAX: Type.Integer({ default: 10, minimum: 1 }),
  LOGIN_FAILURES_WINDOW_MS: Type.Integer({ default: 900_000, minimum: 1000 }),
  // Abuse limits of issue 10 (docs/reliability.md, "Brute force"), one block:
  /** Changes of one's own record (PATCH and DELETE /api/user/:id) per user per window before 429. */
  ACCOUNT_CHANGES_MAX: Type.Integer({ default: 10, minimum: 1 }),
  ACCOUNT_CHANGES_WINDOW_MS: Type.Integer({ default: 900_000, minimum: 1000 }),
  /** Wrong admin keys per client address per window before 429 (src/modules/admin/api-keys.ts). */
  ADMIN_KEY_FAILURES_MAX: Type.Integer({ default: 10, minimum: 1 }),
  ADMIN_KEY_FAILURES_WINDOW_MS: Type.Integer({ default: 900_000, minimum: 1000 }),
  /**
   * Whose X-Forwarded-* headers to believe (src/lib/trust-proxy.ts): false (nobody), true
   * (everybody: only where nothing but the proxy can reach the service), or the proxy's
   * addresses and CIDR ranges, comma-separated (`10.77.0.10`, `10.0.0.0/8, fd00::/8`).
   */
  TRUST_PROXY: Type.String({ default: 'false' }),
  /** Served only over HTTPS (behind a TLS proxy): the CSP asks browsers to upgrade requests. */
  HTTPS_ONLY: Type.Boolean({ default: false }),
  /** How long in-flight requests get on SIGTERM before the process exits anyway (exit 1). */
  SHUTDOWN_GRACE_MS: Type.Integer({ default: 10_000, minimum: 0 }),
  /**
   * On SIGTERM, `/health/ready` answers 503 and requests are still served for this long
   * before the server stops accepting (part of SHUTDOWN_GRACE_MS): time for a proxy's health
   * check to take the instance out of rotation (docs/deployment.md, "Several replicas").
   */
  SHUTDOWN_DRAIN_MS: Type.Integer({ default: 0, minimum: 0, maximum: 600_000 }),

  // Metrics and load shedding (docs/operations.md). `/metrics` is served behind ADMIN_API_KEYS.
  /** Shed load (503 OVERLOADED + Retry-After) while the mean event loop delay exceeds this; 0 = never shed. */
  MAX_EVENT_LOOP_DELAY_MS: Type.Integer({ default: 200, minimum: 0, maximum: 60_000 }),
  /** How often the event loop delay is sampled: shedding starts and stops within about this time. */
  LOAD_SHED_SAMPLE_MS: Type.Integer({ default: 1000, minimum: 10, maximum: 60_000 }),
  /**
   * Shed load (503 OVERLOADED, before Fastify: src/lib/admission.ts) while this many admitted
   * requests are unfinished; 0 = no cap. Bounds the queue inside one process, and so the
   * latency of the requests it serves under overload (bench/README.md, "Load shedding").
   */
  LOAD_SHED_MAX_IN_FLIGHT: Type.Integer({ default: 256, minimum: 0, maximum: 1_000_000 }),
  /**
   * Requests in progress one client may hold (its address; behind a TRUSTED proxy the forwarded
   * one; an IPv6 /64 is one client): past it, 429 TOO_MANY_IN_PROGRESS with Retry-After, while
   * other clients are still admitted, so one client cannot drain LOAD_SHED_MAX_IN_FLIGHT; 0 = no share.
   */
  LOAD_SHED_MAX_IN_FLIGHT_PER_CLIENT: Type.Integer({ default: 32, minimum: 0, maximum: 1_000_000 }),
  /**
   * Slow clients (src/lib/admission.ts): in every window of this many ms, a request body must
   * arrive, and an answer the client holds up must be read, at SLOW_CLIENT_MIN_BYTES_PER_S at
   * least; below it the body gets 408 BODY_TOO_SLOW, the answer's connection is cut, and the
   * place is freed. So a client that stops sending or reading holds a place for one window; 0 = never.
   */
  SLOW_CLIENT_WINDOW_MS: Type.Integer({ default: 5000, minimum: 0, maximum: 600_000 }),
  /** The minimum rate of SLOW_CLIENT_WINDOW_MS, bytes per second (1024: a 5 MiB image in under 90 min, an attacker pays 1 KiB/s per place held). */
  SLOW_CLIENT_MIN_BYTES_PER_S: Type.Integer({ default: 1024, minimum: 1, maximum: 1_073_741_824 }),
  /** Shed load (503 OVERLOADED) while this many queries wait for a database pool connection; 0 = never. */
  LOAD_SHED_MAX_DB_WAITING: Type.Integer({ default: 0, minimum: 0, maximum: 100_000 }),
  /** `Retry-After` (seconds) of a shed request's 503. */
  LOAD_SHED_RETRY_AFTER_S: Type.Integer({ default: 2, minimum: 1, maximum: 3600 }),

  // Shared state (docs/operations.md, "Redis"): with REDIS_URL, the limits (per client, per
  // account, admin keys) are counted in Redis, so every replica sees the same counts.
  REDIS_URL: Type.Optional(Type.String({ pattern: '^rediss?://' })),
  /** Prefix of every key the service writes (several services or environments can share one Redis). */
  REDIS_KEY_PREFIX: Type.String({ default: 'ups:', maxLength: 100 }),
  /** Give up connecting to Redis after this long (then retry in the background). */
  REDIS_CONNECT_TIMEOUT_MS: Type.Integer({ default: 2000, minimum: 100, maximum: 60_000 }),
  /** A Redis command with no answer fails after this long (the request answers 503). */
  REDIS_COMMAND_TIMEOUT_MS: Type.Integer({ default: 1000, minimum: 50, maximum: 60_000 }),

  // Product images and the CSV catalogue (docs/api.md, "Product images", "CSV").
  /** Folder of uploaded product images, created at start (compose: the `uploads` volume). */
  UPLOAD_DIR: Type.String({ default: '.data/uploads', minLength: 1 }),
  /** Largest product image in bytes (413 past it). */
  IMAGE_MAX_BYTES: Type.Integer({ default: 5_242_880, minimum: 1024, maximum: 104_857_600 }),
  /** Largest `limit` of a CSV page of GET /api/product (a JSON page stays at most 100). */
  CSV_MAX_ROWS: Type.Integer({ default: 10_000, minimum: 100, maximum: 1_000_000 }),

  // Quotas on what one user can store (docs/api.md, "Quotas"), enforced in the database under
  // a lock of the user's row, so that concurrent requests and several replicas cannot pass them.
  /**
   * Products one user may hold. A seller lists a catalogue; a stolen or scripted token must
   * not fill the database: past it, creation is 409 PRODUCT_QUOTA_EXCEEDED until the user
   * deletes some.
   */
  PRODUCTS_MAX_PER_USER: Type.Integer({ default: 1000, minimum: 1, maximum: 1_000_000 }),
  /**
   * Bytes of product images one user may store, all their products together (a replacement
   * counts its new size minus the old). A seller pictures each product; one token must not
   * fill the upload volume: past it, an upload is 409 IMAGE_QUOTA_EXCEEDED and nothing is kept.
   * At least IMAGE_MAX_BYTES.
   */
  IMAGE_BYTES_MAX_PER_USER: Type.Integer({ default: 104_857_600, minimum: 1024, maximum: 1_099_511_627_776 }),
  /**
   * Live sessions (logins) per user. One person logs in from a few devices and browsers; a
   * script that logs in in a loop must not grow the sessions table: a login past the cap
   * ends the user's least recently used session instead of refusing (nobody is locked out).
   */
  SESSIONS_MAX_PER_USER: Type.Integer({ default: 10, minimum: 1, maximum: 1000 }),
  /**
   * Rotated refresh tokens kept per session, the ones whose reuse is detected (401
   * REFRESH_TOKEN_REUSED, the session revoked); older ones are deleted by the rotation. With
   * REFRESH_MIN_INTERVAL_MS, a thief needs this many rotations, so at least this many
   * intervals, to push a stolen token out: keep the product above ACCESS_TOKEN_TTL.
   */
  REFRESH_TOKENS_KEPT: Type.Integer({ default: 100, minimum: 1, maximum: 100_000 }),
  /**
   * The least time between two refreshes of one session, after its first (429 RATE_LIMITED
   * with Retry-After sooner; the token stays valid). A client refreshes when its access token expires, every
   * few minutes; a loop of rotations is abuse, and would push stolen tokens out of reuse
   * detection. 0 = no minimum.
   */
  REFRESH_MIN_INTERVAL_MS: Type.Integer({ default: 10_000, minimum: 0, maximum: 3_600_000 }),

  // Admin routes (key-auth): comma-separated keys; the first is current, all verify.
  ADMIN_API_KEYS: Type.String({ default: '' }),

  // Traces (docs/operations.md, "Traces"): OpenTelemetry over OTLP/HTTP (JSON) when the
  // endpoint is set; unset, no telemetry module is even loaded.
  /** The collector's base URL; spans go to `<endpoint>/v1/traces`. */
  OTEL_EXPORTER_OTLP_ENDPOINT: Type.Optional(Type.String({ pattern: '^https?://[^\\s]+$' })),
  /** Headers sent with every export, `name=value` pairs separated by commas (a collector's token). */
  OTEL_EXPORTER_OTLP_HEADERS: Type.String({ default: '', pattern: '^$|^\\s*[^=,\\s]+\\s*=[^,]*(,\\s*[^=,\\s]+\\s*=[^,]*)*$' }),
  /** `service.name` of every span. */
  OTEL_SERVICE_NAME: Type.String({ default: 'user-product-service', minLength: 1 }),
  /** Share of new traces recorded (0 to 1); a request whose `traceparent` is sampled is always recorded. */
  OTEL_TRACES_SAMPLER_ARG: Type.Number({ default: 1, minimum: 0, maximum: 1 })
})

export type Env = Static<typeof EnvSchema>

export interface Config extends Omit<Env, 'ACCESS_TOKEN_TTL' | 'CSRF_TRUSTED_ORIGINS'> {
  /** ACCESS_TOKEN_TTL, else JWT_EXPIRES_IN, else 15m. */
  ACCESS_TOKEN_TTL: string
  /** The parsed origins, e.g. `https://app.example.com` (no trailing slash). */
  CSRF_TRUSTED_ORIGINS: string[]
  /** The signing secret: configured, or (development, test) generated. */
  SECRET: string
  /** True when SECRET was generated rather than configured. */
  secretGenerated: boolean
}

export class ConfigError extends Error {
  override name = 'ConfigError'
}

/** Variables that may instead name a file holding the value (`SECRET_FILE=/run/secrets/jwt`). */
const FILE_VARIABLES = ['SECRET', 'DB_PASSWORD', 'DATABASE_URL', 'ADMIN_API_KEYS', 'REDIS_URL', 'OTEL_EXPORTER_OTLP_HEADERS'] as const

/** Where development keeps its generated SECRET, so a restart (`npm run dev`) keeps everyone logged in. */
const DEV_SECRET_FILE = path.join('.data', 'dev-secret')

export interface LoadOptions {
  /**
   * A `.env` file read first, whose values the variables override; by default `.env` when
   * reading process.env, none otherwise.
   */
  dotenvFile?: string | false
  /**
   * Where a development SECRET is generated once and kept (mode 0600); by default
   * `.data/dev-secret` when reading process.env, none otherwise (a new secret per call).
   */
  devSecretFile?: string | false
}

/** The variables of a `.env` file, or none when there is no such file. */
function readDotenv (file: string): Record<string, string> {
  try {
    return parseEnv(readFileSync(file, 'utf8')) as Record<string, string>
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {}
    throw new ConfigError(`Cannot read ${file}: ${(error as Error).message}`)
  }
}

/** Replaces `<NAME>_FILE` by `<NAME>` read from that file (one trailing newline dropped). */
function readSecretFiles (variables: Record<string, string | undefined>): Record<string, string | undefined> {
  const result = { ...variables }
  for (const name of FILE_VARIABLES) {
    const file = result[`${name}_FILE`]
    delete result[`${name}_FILE`]
    if (file === undefined || file === '') continue
    if (result[name] !== undefined && result[name] !== '') {
      throw new ConfigError(`Invalid configuration: set ${name} or ${name}_FILE, not both`)
    }
    try {
      result[name] = readFileSync(file, 'utf8').replace(/\r?\n$/, '')
    } catch (error) {
      throw new ConfigError(`Invalid configuration: ${name}_FILE: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`)
    }
  }
  return result
}

/** The development secret kept in `file`, created on first use. */
function developmentSecret (file: string): string {
  try {
    const kept = readFileSync(file, 'utf8').trim()
    if (kept.length >= 32) return kept
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw new ConfigError(`Cannot read ${file}: ${(error as Error).message}`)
  }
  const secret = randomBytes(48).toString('base64url')
  mkdirSync(path.dirname(file), { recursive: true })
  writeFileSync(file, secret + '\n', { mode: 0o600 })
  return secret
}

/**
 * Reads and validates the configuration.
 * @param data the variables (defaults to process.env)
 */
export function loadConfig (data: Record<string, string | undefined> = process.env, options: LoadOptions | string | false = {}): Config {
  const opts: LoadOptions = typeof options === 'object' ? options : { dotenvFile: options }
  const fromProcess = data === process.env
  const dotenvFile = opts.dotenvFile ?? (fromProcess ? '.env' : false)
  const devSecretFile = opts.devSecretFile ?? (fromProcess ? DEV_SECRET_FILE : false)
  // An empty value (`DATABASE_URL=`) means "unset", so the default applies.
  const merged = Object.fromEntries(Object.entries(readSecretFiles({ ...(dotenvFile ? readDotenv(dotenvFile) : {}), ...data }))
    .filter(([name, value]) => value !== undefined && value !== '' && name in EnvSchema.properties))
  let env: Env
  try {
    env = envSchema<Env>({ schema: structuredClone(EnvSchema), data: merged, env: false })
  } catch (error) {
    // Ajv's message names the variable: "env/PORT must be <= 65535".
    throw new ConfigError(`Invalid configuration: ${(error as Error).message}`)
  }
  try {
    parseApiKeys(env.ADMIN_API_KEYS)
    parseTrustProxy(env.TRUST_PROXY)
  } catch (error) {
    throw new ConfigError(`Invalid configuration: ${(error as Error).message}`)
  }
  if (env.IMAGE_BYTES_MAX_PER_USER < env.IMAGE_MAX_BYTES) {
    throw new ConfigError(`Invalid configuration: IMAGE_BYTES_MAX_PER_USER (${env.IMAGE_BYTES_MAX_PER_USER}) must be at least IMAGE_MAX_BYTES (${env.IMAGE_MAX_BYTES}): a user could never store an image of the allowed size`)
  }
  if (env.SHUTDOWN_DRAIN_MS > 0 && env.SHUTDOWN_DRAIN_MS >= env.SHUTDOWN_GRACE_MS) {
    throw new ConfigError(`Invalid configuration: SHUTDOWN_DRAIN_MS (${env.SHUTDOWN_DRAIN_MS}) must be shorter than SHUTDOWN_GRACE_MS (${env.SHUTDOWN_GRACE_MS}): the drain is part of the grace period`)
  }
  const sessions = sessionSettings(env)
  const production = env.NODE_ENV === 'production'
  if (production && configuredDatabaseUrl(env) === undefined && env.EMBEDDED_DB !== true) {
    throw new ConfigError('Invalid configuration: no database configured in production. Set DATABASE_URL (or DB_HOST and the other DB_* variables), or EMBEDDED_DB=true to run the embedded PostgreSQL on purpose')
  }
  if (env.SECRET === undefined) {
    if (production) {
      throw new ConfigError('Invalid configuration: SECRET is required in production (at least 32 characters, e.g. `openssl rand -base64 48`)')
    }
    const secret = devSecretFile ? developmentSecret(devSecretFile) : randomBytes(48).toString('base64url')
    return { ...env, ...sessions, SECRET: secret, secretGenerated: true }
  }
  return { ...env, ...sessions, SECRET: env.SECRET, secretGenerated: false }
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }

/** Milliseconds of a duration that matches DURATION (`15m`, `30d`, `500`). */
export function durationMs (value: string): number {
  const [, amount, unit] = /^([0-9]+)(ms|s|m|h|d)?$/.exec(value) ?? []
  if (amount === undefined) throw new ConfigError(`Not a duration: ${value}`)
  return Number(amount) * UNIT_MS[unit ?? 'ms']!
}

/** Token lifetimes and the CSRF origins, checked together. */
function sessionSettings (env: Env): Pick<Config, 'ACCESS_TOKEN_TTL' | 'CSRF_TRUSTED_ORIGINS'> {
  if (env.ACCESS_TOKEN_TTL !== undefined && env.JWT_EXPIRES_IN !== undefined) {
    throw new ConfigError('Invalid configuration: set ACCESS_TOKEN_TTL or JWT_EXPIRES_IN (its old name), not both')
  }
  const access = env.ACCESS_TOKEN_TTL ?? env.JWT_EXPIRES_IN ?? '15m'
  const accessMs = durationMs(access)
  if (accessMs < 1000) throw new ConfigError('Invalid configuration: ACCESS_TOKEN_TTL must be at least 1s')
  if (durationMs(env.REFRESH_TOKEN_TTL) <= accessMs) {
    throw new ConfigError('Invalid configuration: REFRESH_TOKEN_TTL must be longer than ACCESS_TOKEN_TTL')
  }
  const origins = env.CSRF_TRUSTED_ORIGINS.split(',').map((o) => o.trim()).filter((o) => o !== '')
  for (const origin of origins) {
    let parsed: URL | undefined
    try { parsed = new URL(origin) } catch {}
    if (parsed === undefined || !/^https?:$/.test(parsed.protocol) || parsed.origin !== origin) {
      throw new ConfigError(`Invalid configuration: CSRF_TRUSTED_ORIGINS: ${JSON.stringify(origin)} is not an origin like https://app.example.com (scheme, host, optional port; no path or trailing slash)`)
    }
  }
  return { ACCESS_TOKEN_TTL: access, CSRF_TRUSTED_ORIGINS: origins }
}

/** The database URL the configuration names, or undefined when the embedded database should run. */
export function configuredDatabaseUrl (config: Pick<Env, 'DATABASE_URL' | 'DB_HOST' | 'DB_USER' | 'DB_PASSWORD' | 'DB_PORT' | 'DB_NAME'>): string | undefined {
  if (config.DATABASE_URL) return config.DATABASE_URL
  if (!config.DB_HOST) return undefined
  const user = encodeURIComponent(config.DB_USER)
  const password = encodeURIComponent(config.DB_PASSWORD)
  return `postgresql://${user}:${password}@${config.DB_HOST}:${config.DB_PORT}/${config.DB_NAME}`
}
