/**
 * Configuration from the environment (and an optional `.env` file), validated once at
 * start. A wrong value stops the service with a message that names the variable.
 *
 * `EnvSchema` holds the settings in sections (server, database, auth, limits, redis, mail,
 * telemetry, products); each leaf names its environment variable (`env`), and
 * carries its default and a description with its unit (the README's settings table is
 * generated from it). `loadConfig` returns the same sections, typed, and each section goes
 * whole to the plugin that owns it (src/app.ts).
 *
 * Secrets may also come from files (`SECRET_FILE`, `DB_PASSWORD_FILE`, ...: the Docker
 * secrets convention; a leaf with `fromFile`); a variable and its `_FILE` twin together are
 * refused. A variable may also be read under another name (`aliases`).
 */
import { randomBytes } from 'node:crypto'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { parseEnv } from 'node:util'
import envSchema from 'env-schema'
import { Type, type Static, type TSchema } from 'typebox'
import { parseApiKeys } from './lib/api-keys.js'
import { SetupError } from './lib/setup-error.js'
import { parseTrustProxy } from './lib/trust-proxy.js'

/** A duration as `ms` reads it: a number with ms, s, m, h or d (no unit: ms). */
const DURATION = '^[0-9]+(ms|s|m|h|d)?$'
/** The embedded PostgreSQL's data folder unless set (as root in a private folder it moves: src/db/open.ts). */
export const EMBEDDED_DB_DIR_DEFAULT = '.data/postgres'

const server = Type.Object({
  env: Type.Union([Type.Literal('development'), Type.Literal('production'), Type.Literal('test')], {
    env: 'NODE_ENV', default: 'development', description: '`production` requires `SECRET` and a configured database'
  }),
  host: Type.String({ env: 'HOST', default: '127.0.0.1', minLength: 1, description: 'address to listen on (`0.0.0.0` in a container)' }),
  port: Type.Integer({ env: 'PORT', default: 3000, minimum: 0, maximum: 65535, description: 'HTTP port (with Docker Compose: the port published on the host)' }),
  logLevel: Type.Union([Type.Literal('fatal'), Type.Literal('error'), Type.Literal('warn'), Type.Literal('info'), Type.Literal('debug'), Type.Literal('trace'), Type.Literal('silent')], {
    env: 'LOG_LEVEL', default: 'info', description: 'pino level; `silent` turns logs off'
  }),
  trustProxy: Type.String({
    env: 'TRUST_PROXY',
    default: 'false',
    description: 'whose `X-Forwarded-*` and `X-Request-Id` to believe: `false` (nobody), `true` (every peer: only where nothing but the proxy can connect), or the proxy\'s addresses and CIDR ranges, comma-separated (`10.77.0.10`); behind a proxy the per-client limits see real clients only when it is trusted'
  }),
  webApp: Type.Boolean({ env: 'WEB_APP', default: true, description: 'serve the web app (sign up, log in, profile, products) at `/`; `false` for an API-only deployment, where `/` is a 404' }),
  currency: Type.String({ env: 'CURRENCY', default: 'EUR', pattern: '^[A-Z]{3}$', description: 'ISO 4217 code of the currency the products\' `amount` is in (its minor units: 2599 is 25.99 EUR); the web app shows prices in it' }),
  httpsOnly: Type.Boolean({ env: 'HTTPS_ONLY', default: false, description: 'reached over HTTPS only (a TLS proxy in front): HSTS, and the CSP asks browsers to upgrade requests; leave false for plain HTTP (the OpenAPI page would load blank)' }),
  bodyLimit: Type.Integer({ env: 'BODY_LIMIT', default: 1_048_576, minimum: 1024, description: 'largest request body, in bytes (413 past it)' }),
  shutdownGraceMs: Type.Integer({ env: 'SHUTDOWN_GRACE_MS', default: 10_000, minimum: 0, description: 'on SIGTERM, how long (ms) in-flight requests get before the process exits anyway (exit 1)' }),
  shutdownDrainMs: Type.Integer({
    env: 'SHUTDOWN_DRAIN_MS',
    default: 0,
    minimum: 0,
    maximum: 600_000,
    description: 'on SIGTERM, first drain for this long (ms; part of `SHUTDOWN_GRACE_MS`, so shorter): `/health/ready` answers 503 while requests are still served, so a load balancer takes the instance out before it stops accepting (Docker Compose: 4000)'
  })
})

const database = Type.Object({
  url: Type.Optional(Type.String({ env: 'DATABASE_URL', fromFile: true, pattern: '^postgres(ql)?://', description: 'PostgreSQL URL; wins over the `DB_*` variables' })),
  host: Type.Optional(Type.String({ env: 'DB_HOST', minLength: 1, description: 'database host; with neither it nor `DATABASE_URL`, `npm start` runs an embedded PostgreSQL' })),
  port: Type.Integer({ env: 'DB_PORT', default: 5432, minimum: 1, maximum: 65535, description: 'database port' }),
  user: Type.String({ env: 'DB_USER', default: 'postgres', minLength: 1, description: 'database role' }),
  password: Type.String({ env: 'DB_PASSWORD', fromFile: true, default: 'postgres', description: 'database password (required by Docker Compose)' }),
  name: Type.String({ env: 'DB_NAME', default: 'app', minLength: 1, pattern: '^[A-Za-z0-9_]+$', description: 'database name' }),
  poolSize: Type.Integer({ env: 'DB_POOL_SIZE', default: 10, minimum: 1, maximum: 200, description: 'connections in the pool (per replica)' }),
  replicas: Type.Integer({
    env: 'API_REPLICAS',
    default: 1,
    minimum: 1,
    maximum: 1000,
    description: 'replicas of the service on this database: at start `DB_POOL_SIZE` x `API_REPLICAS` is checked against the server\'s `max_connections`, with a warning when it does not fit (src/db/pool-budget.ts)'
  }),
  pgbouncer: Type.Boolean({
    env: 'DB_PGBOUNCER',
    default: false,
    description: 'the database URL leads to PgBouncer in transaction pooling mode: no named prepared statements, no `statement_timeout` startup parameter (set it on the role), no pool budget check (docs/operations.md, "PgBouncer")'
  }),
  connectTimeoutMs: Type.Integer({
    env: 'DB_CONNECT_TIMEOUT_MS',
    default: 5000,
    minimum: 100,
    maximum: 600_000,
    description: 'wait at most this long (ms) for a pool connection, a new one included (then 503); raise it for a database that takes long to accept connections (one that resumes from a pause)'
  }),
  statementTimeoutMs: Type.Integer({
    env: 'DB_STATEMENT_TIMEOUT_MS',
    default: 5000,
    minimum: 0,
    maximum: 3_600_000,
    description: 'PostgreSQL cancels a longer statement, lock waits included (`statement_timeout`, ms; then 503); 0 = none. The client gives up on a query the server does not answer at all 2 s after it (src/db/client.ts)'
  }),
  migrateOnStart: Type.Boolean({ env: 'MIGRATE_ON_START', default: true, description: 'apply pending migrations at start (also in the container: the one migration path); `false`: `npm run db:migrate`' }),
  embedded: Type.Optional(Type.Boolean({
    env: 'EMBEDDED_DB',
    description: 'run the embedded PostgreSQL when no database is configured; unset: yes in development and test, refused in production (`true` runs it there on purpose)'
  })),
  embeddedDir: Type.String({
    env: 'EMBEDDED_DB_DIR',
    default: EMBEDDED_DB_DIR_DEFAULT,
    description: 'data folder of the embedded PostgreSQL (kept between runs, git-ignored); unset, as root in a folder the `postgres` user cannot enter: `/var/tmp/user-product-service-<hash>/postgres`, named in the start line'
  }),
  embeddedPort: Type.Integer({ env: 'EMBEDDED_DB_PORT', default: 0, minimum: 0, maximum: 65535, description: 'port of the embedded PostgreSQL; 0 picks a free one' })
})

const auth = Type.Object({
  secret: Type.Optional(Type.String({
    env: 'SECRET',
    fromFile: true,
    minLength: 32,
    description: 'JWT signing secret (HS256), 32+ characters (`openssl rand -base64 48`); required in production; unset in development: generated once and kept in `.data/dev-secret`'
  })),
  accessTokenTtl: Type.String({
    env: 'ACCESS_TOKEN_TTL',
    aliases: ['JWT_EXPIRES_IN'],
    default: '15m',
    pattern: DURATION,
    description: 'access token (JWT) lifetime (a number with `ms`, `s`, `m`, `h` or `d`), short since the refresh token renews it; `JWT_EXPIRES_IN` is read as an alias when it is unset'
  }),
  refreshTokenTtl: Type.String({ env: 'REFRESH_TOKEN_TTL', default: '30d', pattern: DURATION, description: 'refresh token lifetime (a duration, as above); every refresh issues a new one for this long; longer than `ACCESS_TOKEN_TTL`' }),
  refreshMinIntervalMs: Type.Integer({
    env: 'REFRESH_MIN_INTERVAL_MS',
    default: 10_000,
    minimum: 0,
    maximum: 3_600_000,
    description: 'least time (ms) between two refreshes of one session, after its first (sooner: 429 with Retry-After, the token stays valid); 0 = none. Lower it with a shorter `ACCESS_TOKEN_TTL`; 100 of these intervals should exceed `ACCESS_TOKEN_TTL`, so a thief cannot rotate a stolen token out of reuse detection (docs/api.md, "Sessions")'
  }),
  sessionsMaxPerUser: Type.Integer({
    env: 'SESSIONS_MAX_PER_USER',
    default: 10,
    minimum: 1,
    maximum: 1000,
    description: 'live sessions (logins) per user; a login past it ends the user\'s least recently used session (nobody is locked out)'
  }),
  cookieSecure: Type.Boolean({ env: 'COOKIE_SECURE', default: true, description: 'browser session cookies are `Secure` and named `__Secure-*`; `false` only for plain-HTTP local development' }),
  cookieSameSite: Type.Union([Type.Literal('strict'), Type.Literal('none')], {
    env: 'COOKIE_SAMESITE',
    default: 'strict',
    description: '`SameSite` of the session cookies: `strict`, or `none` for a front-end on another site (`app.example.org` calling `api.example.com`) listed in `CORS_ORIGINS`; `none` needs `COOKIE_SECURE=true`, and browsers that block third-party cookies still withhold them: such a front-end is better served by token mode (docs/api.md, "Browser clients")'
  }),
  corsOrigins: Type.String({
    env: 'CORS_ORIGINS',
    aliases: ['CSRF_TRUSTED_ORIGINS'],
    default: '',
    description: 'comma-separated origins (`https://app.example.com`: scheme, host, optional port; never `*`) of front-ends besides the service\'s own: their pages may read answers and send credentials (CORS), and send cookie-authenticated changes (others: 403 `CSRF_REJECTED`); `CSRF_TRUSTED_ORIGINS` is read as an alias when it is unset'
  }),
  passwordResetTtl: Type.String({
    env: 'PASSWORD_RESET_TTL',
    default: '30m',
    pattern: DURATION,
    description: 'how long the link of a password-reset e-mail works (a duration, as above), counted from when it is sent; each link works once'
  }),
  requireVerifiedEmail: Type.Boolean({
    env: 'REQUIRE_VERIFIED_EMAIL',
    default: false,
    description: 'refuse login (403 `EMAIL_NOT_VERIFIED`, after the password is checked) until the user has followed the link of the verification e-mail sent at registration (a new address takes effect only once its own link is followed, so it is verified then); off: accounts work at once and `emailVerifiedAt` only tells'
  }),
  webauthnRpId: Type.Optional(Type.String({
    env: 'WEBAUTHN_RP_ID',
    pattern: '^[a-z0-9.-]+$',
    description: 'the WebAuthn relying party id passkeys are bound to: the site\'s host name (`example.com` serves `shop.example.com` too); unset: the host of `PUBLIC_URL`. Changing it later strands every registered passkey'
  })),
  webauthnRpName: Type.String({ env: 'WEBAUTHN_RP_NAME', default: 'User and product service', minLength: 1, maxLength: 100, description: 'the name browsers show when they ask to create or use a passkey' }),
  webauthnOrigins: Type.String({
    env: 'WEBAUTHN_ORIGINS',
    default: '',
    description: 'comma-separated origins whose pages may register and use passkeys (`https://shop.example.com`); unset: the origin of `PUBLIC_URL`. Each must be `https` (or `http` on localhost) on the RP id or a subdomain of it, or the service does not start'
  }),
  recentSignInMaxAge: Type.String({
    env: 'RECENT_SIGN_IN_MAX_AGE',
    default: '0',
    pattern: DURATION,
    description: 'a duration (`15m`): changes of the password, the e-mail address, the second factors and passkeys, and deleting the account then need a session signed in at most this long ago, with the second factor when the account has one (403 `RECENT_SIGN_IN_REQUIRED`: log in again); `0`: no such requirement'
  }),
  bcryptCost: Type.Integer({ env: 'BCRYPT_COST', default: 10, minimum: 4, maximum: 15, description: 'bcrypt cost; each +1 doubles the hashing time' }),
  adminApiKeys: Type.String({
    env: 'ADMIN_API_KEYS',
    fromFile: true,
    default: '',
    description: 'comma-separated admin keys, all accepted (rotate by adding the new one first); empty: the admin routes refuse every request. Each key: 32+ characters and about 128 bits (no repeats, no sequences), or the service does not start (exit 78): `openssl rand -base64 32`'
  })
})

const limits = Type.Object({
  authMax: Type.Integer({
    env: 'RATE_LIMIT_AUTH_MAX',
    default: 20,
    minimum: 1,
    description: 'requests that cost a bcrypt computation (registration, login, the password reset, `PATCH /api/user/:id` with `currentPassword`, `DELETE /api/user/:id`, the factor changes that check the current password) per client address per minute, all together (429 with Retry-After past it); the second step and passkeys have their own (`RATE_LIMIT_SECOND_STEP_MAX`)'
  }),
  secondStepMax: Type.Integer({
    env: 'RATE_LIMIT_SECOND_STEP_MAX',
    default: 30,
    minimum: 1,
    description: 'sign-ins completed by a code or a passkey (`POST /api/auth/mfa/totp`, `/api/auth/mfa/passkey`, `/api/auth/passkey/login`) per client address per minute, apart from `RATE_LIMIT_AUTH_MAX` (429 with Retry-After past it); a wrong code also counts against the account\'s `LOGIN_FAILURES_MAX`. Passkey options spend neither: each client address holds at most 50 live challenges'
  }),
  loginFailuresMax: Type.Integer({
    env: 'LOGIN_FAILURES_MAX',
    default: 10,
    minimum: 1,
    description: 'wrong password guesses per account per `LOGIN_FAILURES_WINDOW_MS`, from any client: failed logins and wrong current passwords (429 with Retry-After past it; anyone can so lock an account for one window: docs/reliability.md, "Brute force")'
  }),
  loginFailuresWindowMs: Type.Integer({ env: 'LOGIN_FAILURES_WINDOW_MS', default: 900_000, minimum: 1000, description: 'the window of `LOGIN_FAILURES_MAX` (ms): how long an account stays locked' }),
  maxInFlight: Type.Integer({
    env: 'LOAD_SHED_MAX_IN_FLIGHT',
    default: 256,
    minimum: 0,
    maximum: 1_000_000,
    description: 'shed load (503 `OVERLOADED` with Retry-After, before Fastify sees the request) while this many requests are in progress in this process; 0 = no cap. Bounds the queue, and so the latency under overload (docs/operations.md)'
  }),
  maxInFlightPerClient: Type.Integer({
    env: 'LOAD_SHED_MAX_IN_FLIGHT_PER_CLIENT',
    default: 32,
    minimum: 0,
    maximum: 1_000_000,
    description: 'requests in progress one client may hold (its address; behind a proxy named in `TRUST_PROXY`, the forwarded one; an IPv6 /64 is one client); past it 429 `TOO_MANY_IN_PROGRESS` with Retry-After while others are admitted; 0 = no share'
  }),
  maxEventLoopDelayMs: Type.Integer({ env: 'MAX_EVENT_LOOP_DELAY_MS', default: 200, minimum: 0, maximum: 60_000, description: 'shed load too while the mean event loop delay exceeds this (ms); 0 = never' }),
  maxDbWaiting: Type.Integer({
    env: 'LOAD_SHED_MAX_DB_WAITING',
    default: 0,
    minimum: 0,
    maximum: 100_000,
    description: 'shed load too while this many queries wait for a database pool connection; 0 = never (opt-in: measured, it cost more throughput than it saved latency; docs/operations.md)'
  }),
  slowClientWindowMs: Type.Integer({
    env: 'SLOW_CLIENT_WINDOW_MS',
    default: 5000,
    minimum: 0,
    maximum: 600_000,
    description: 'in every window of this many ms, a request body must arrive, and an answer the client holds up must be read, at `SLOW_CLIENT_MIN_BYTES_PER_S` at least: below it the body gets 408 `BODY_TOO_SLOW` and an unread answer\'s connection is cut, freeing its place; 0 = never (docs/operations.md, "Slow and greedy clients")'
  }),
  slowClientMinBytesPerS: Type.Integer({
    env: 'SLOW_CLIENT_MIN_BYTES_PER_S',
    default: 1024,
    minimum: 1,
    maximum: 1_073_741_824,
    description: 'the minimum rate of `SLOW_CLIENT_WINDOW_MS`, in bytes per second (1024: a 5 MiB image in under 90 min, while an attacker pays 1 KiB/s per place held)'
  })
})

const redis = Type.Object({
  url: Type.Optional(Type.String({
    env: 'REDIS_URL',
    fromFile: true,
    pattern: '^rediss?://',
    description: '`redis://` or `rediss://` URL: the per-client and per-account limits count in Redis, shared by every replica; unset, each process counts alone. While Redis is down, login, registration, password checks and admin keys answer 503 with Retry-After; reads stay up (docs/operations.md, "Redis")'
  })),
  keyPrefix: Type.String({ env: 'REDIS_KEY_PREFIX', default: 'ups:', maxLength: 100, description: 'prefix of every key the service writes (several services or environments can share one Redis)' })
})

const mail = Type.Object({
  smtpUrl: Type.Optional(Type.String({
    env: 'SMTP_URL',
    fromFile: true,
    pattern: '^smtps?://',
    description: 'where e-mail (password resets) goes, as nodemailer reads it: `smtp://user:pass@host:587` (STARTTLS when the server offers it; `?requireTLS=true` insists), `smtps://user:pass@host:465` (TLS from the start). Required in production; unset in development, each message is written to the log and to `MAIL_DIR` instead (docs/operations.md, "E-mail")'
  })),
  from: Type.String({ env: 'MAIL_FROM', default: 'User Product Service <no-reply@localhost>', minLength: 3, description: 'the `From` of every e-mail: an address of your domain that your SMTP server may send as' }),
  publicUrl: Type.Optional(Type.String({
    env: 'PUBLIC_URL',
    pattern: '^https?://[^\\s]+$',
    description: 'the service\'s address as users reach it (`https://shop.example.com`): the base of every link in an e-mail, never taken from a request\'s `Host`. Required in production; unset: `http://localhost:<PORT>`'
  })),
  dir: Type.String({ env: 'MAIL_DIR', default: '.data/mail', minLength: 1, description: 'without `SMTP_URL` (development), the folder each e-mail is written to as a `.eml` file' })
})

const telemetry = Type.Object({
  endpoint: Type.Optional(Type.String({
    env: 'OTEL_EXPORTER_OTLP_ENDPOINT',
    pattern: '^https?://[^\\s]+$',
    description: 'OpenTelemetry collector\'s base URL: spans go over OTLP/HTTP (JSON) to `<endpoint>/v1/traces`; unset: no tracing, and no OpenTelemetry module is loaded (docs/operations.md, "Traces")'
  })),
  headers: Type.String({
    env: 'OTEL_EXPORTER_OTLP_HEADERS',
    fromFile: true,
    default: '',
    pattern: '^$|^\\s*[^=,\\s]+\\s*=[^,]*(,\\s*[^=,\\s]+\\s*=[^,]*)*$',
    description: 'headers sent with every export, `name=value` pairs separated by commas (a collector\'s token)'
  }),
  serviceName: Type.String({ env: 'OTEL_SERVICE_NAME', default: 'user-product-service', minLength: 1, description: '`service.name` of every span' }),
  sampleRatio: Type.Number({ env: 'OTEL_TRACES_SAMPLER_ARG', default: 1, minimum: 0, maximum: 1, description: 'share of new traces recorded (0 to 1); a request whose `traceparent` is sampled is always recorded' })
})

// Quotas on what one user can store (docs/api.md, "Quotas") are enforced in the database under
// a lock of the user's row, so that concurrent requests and several replicas cannot pass them.
const products = Type.Object({
  maxPerUser: Type.Integer({
    env: 'PRODUCTS_MAX_PER_USER',
    default: 1000,
    minimum: 1,
    maximum: 1_000_000,
    description: 'products one user may hold: a seller lists a catalogue, a stolen or scripted token must not fill the database; past it, creating one is 409 `PRODUCT_QUOTA_EXCEEDED`'
  }),
  imageMaxBytes: Type.Integer({ env: 'IMAGE_MAX_BYTES', default: 5_242_880, minimum: 1024, maximum: 104_857_600, description: 'largest product image (PNG, JPEG or WebP), in bytes (413 past it)' }),
  imageCrossOriginResourcePolicy: Type.Union([Type.Literal('same-origin'), Type.Literal('same-site'), Type.Literal('cross-origin')], {
    env: 'IMAGE_CROSS_ORIGIN_RESOURCE_POLICY',
    default: 'same-origin',
    description: '`Cross-Origin-Resource-Policy` of `GET /api/product/{id}/image`: `same-origin` (browsers show the images on the service\'s own pages only), `same-site` (also on a front-end of the same site, `app.example.com` beside `api.example.com`) or `cross-origin` (an `<img>` on any site; the images are public anyway)'
  }),
  imageBytesPerUser: Type.Integer({
    env: 'IMAGE_BYTES_MAX_PER_USER',
    default: 104_857_600,
    minimum: 1024,
    maximum: 1_099_511_627_776,
    description: 'bytes of product images one user may store, all products together (a replacement counts the difference); past it, an upload is 409 `IMAGE_QUOTA_EXCEEDED` and nothing is kept; at least `IMAGE_MAX_BYTES`'
  }),
  csvMaxRows: Type.Integer({ env: 'CSV_MAX_ROWS', default: 10_000, minimum: 100, maximum: 1_000_000, description: 'largest `limit` of a CSV page of `GET /api/product` (`Accept: text/csv`); a JSON page stays at most 100' })
})

/** Every setting, in sections; each leaf names its environment variable (`env`). */
export const EnvSchema = Type.Object({ server, database, auth, limits, redis, mail, telemetry, products })

type Settings = Static<typeof EnvSchema>

export type ServerSettings = Settings['server']
export type DatabaseSettings = Settings['database']
export interface AuthSettings extends Omit<Settings['auth'], 'secret' | 'corsOrigins' | 'webauthnRpId' | 'webauthnOrigins'> {
  /** The signing secret: configured, or (development, test) generated. */
  secret: string
  /** True when the secret was generated rather than configured. */
  secretGenerated: boolean
  /** REFRESH_TOKEN_TTL in milliseconds. */
  refreshTokenTtlMs: number
  /** The parsed CORS_ORIGINS, e.g. `https://app.example.com` (no trailing slash). */
  corsOrigins: string[]
  /** WEBAUTHN_RP_ID, or PUBLIC_URL's host. */
  webauthnRpId: string
  /** WEBAUTHN_ORIGINS, or PUBLIC_URL's origin. */
  webauthnOrigins: string[]
  /** RECENT_SIGN_IN_MAX_AGE in ms; 0 = off. */
  recentSignInMaxAgeMs: number
}
export type LimitsSettings = Settings['limits']
export type RedisSettings = Settings['redis']
export interface MailSettings extends Omit<Settings['mail'], 'publicUrl'> {
  /** PUBLIC_URL without a trailing slash, or its development default. */
  publicUrl: string
}
export type TelemetrySettings = Settings['telemetry']
export type ProductsSettings = Settings['products']

export interface Config {
  server: ServerSettings
  database: DatabaseSettings
  auth: AuthSettings
  limits: LimitsSettings
  redis: RedisSettings
  mail: MailSettings
  telemetry: TelemetrySettings
  products: ProductsSettings
  /** Variables that are set but not read (`RETIRED`), for a warning at start. */
  retired: string[]
}

/**
 * Variables the service does not read: tuning knobs that no operator has a reason to turn.
 * Each is a documented constant of the code that owns it; a test changes it through that
 * plugin's options. Set, it is ignored with a warning at start.
 */
export const RETIRED: Readonly<Record<string, string>> = {
  DB_QUERY_TIMEOUT_MS: 'the client-side query timeout is DB_STATEMENT_TIMEOUT_MS + 2 s (src/db/client.ts)',
  HEALTH_READY_TIMEOUT_MS: '/health/ready answers 503 after 1.5 s (src/modules/health/routes.ts)',
  LOAD_SHED_SAMPLE_MS: 'the event loop delay is sampled every second (src/plugins/load-shedding.ts)',
  LOAD_SHED_RETRY_AFTER_S: 'a shed request\'s Retry-After is 2 s (src/plugins/admission.ts)',
  REDIS_CONNECT_TIMEOUT_MS: 'a Redis connection attempt gives up after 2 s (src/plugins/redis.ts)',
  REDIS_COMMAND_TIMEOUT_MS: 'a Redis command fails after 1 s (src/plugins/redis.ts)',
  RATE_LIMIT_AUTH_WINDOW_MS: 'RATE_LIMIT_AUTH_MAX counts per minute (src/modules/identity/budgets.ts)',
  ACCOUNT_CHANGES_MAX: 'a user changes their own record at most 10 times per 15 min (src/modules/users/routes.ts)',
  ACCOUNT_CHANGES_WINDOW_MS: 'a user changes their own record at most 10 times per 15 min (src/modules/users/routes.ts)',
  ADMIN_KEY_FAILURES_MAX: 'a client may send 10 wrong admin keys per 15 min (src/modules/admin/api-keys.ts)',
  ADMIN_KEY_FAILURES_WINDOW_MS: 'a client may send 10 wrong admin keys per 15 min (src/modules/admin/api-keys.ts)',
  REFRESH_TOKENS_KEPT: '100 rotated refresh tokens are kept per session (src/modules/identity/repository.ts)',
  UPLOAD_DIR: 'product images are stored in the database; files from an older version are imported with scripts/import-uploads.ts (docs/operations.md)'
}

export class ConfigError extends SetupError {
  override name = 'ConfigError'
}

/** What a leaf of EnvSchema carries besides its JSON schema. */
interface LeafSchema extends TSchema { env: string, description: string, default?: unknown, fromFile?: boolean, aliases?: string[] }

interface Leaf { section: string, key: string, env: string, schema: LeafSchema, required: boolean }

/** The leaves of EnvSchema, in order. */
export function settings (): Leaf[] {
  const leaves: Leaf[] = []
  for (const [section, node] of Object.entries(EnvSchema.properties)) {
    const required = new Set<string>(node.required ?? [])
    for (const [key, schema] of Object.entries(node.properties as unknown as Record<string, LeafSchema>)) {
      leaves.push({ section, key, env: schema.env, schema, required: required.has(key) })
    }
  }
  return leaves
}

/** Every variable read, with its aliases and without the `_FILE` twins. */
export function envVariables (): string[] {
  return settings().flatMap((leaf) => [leaf.env, ...(leaf.schema.aliases ?? [])])
}

/** The flat JSON schema of the variables that env-schema validates: Ajv's errors name the variable. */
function flatSchema (leaves: Leaf[]): object {
  const properties: Record<string, object> = {}
  const required: string[] = []
  for (const leaf of leaves) {
    // Only JSON Schema goes to Ajv (its strict mode warns of unknown keywords).
    const { env, fromFile, aliases, description, ...schema } = leaf.schema
    properties[leaf.env] = schema
    if (leaf.required) required.push(leaf.env)
    for (const alias of aliases ?? []) {
      const { default: _default, ...withoutDefault } = schema
      properties[alias] = withoutDefault
    }
  }
  return { type: 'object', properties, required }
}

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
function readSecretFiles (variables: Record<string, string | undefined>, names: string[]): Record<string, string | undefined> {
  const result = { ...variables }
  for (const name of names) {
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
  const leaves = settings()
  const schema = flatSchema(leaves) as { properties: Record<string, unknown> }
  const variables = readSecretFiles({ ...(dotenvFile ? readDotenv(dotenvFile) : {}), ...data }, leaves.filter((l) => l.schema.fromFile === true).map((l) => l.env))
  // An empty value (`DATABASE_URL=`) means "unset", so the default applies.
  const merged = Object.fromEntries(Object.entries(variables).filter(([name, value]) => value !== undefined && value !== '' && name in schema.properties))
  for (const leaf of leaves) {
    for (const alias of leaf.schema.aliases ?? []) {
      if (merged[alias] !== undefined && merged[leaf.env] !== undefined) {
        throw new ConfigError(`Invalid configuration: set ${leaf.env} or ${alias} (its alias), not both`)
      }
    }
  }
  let env: Record<string, unknown>
  try {
    env = envSchema<Record<string, unknown>>({ schema, data: merged, env: false })
  } catch (error) {
    // Ajv's message names the variable: "env/PORT must be <= 65535".
    throw new ConfigError(`Invalid configuration: ${(error as Error).message}`)
  }
  const sections: Record<string, Record<string, unknown>> = {}
  for (const leaf of leaves) {
    const alias = (leaf.schema.aliases ?? []).find((name) => merged[name] !== undefined)
    const value = alias === undefined ? env[leaf.env] : env[alias]
    sections[leaf.section] ??= {}
    if (value !== undefined) sections[leaf.section]![leaf.key] = value
  }
  const read = sections as unknown as Settings
  try {
    parseApiKeys(read.auth.adminApiKeys)
    parseTrustProxy(read.server.trustProxy)
  } catch (error) {
    throw new ConfigError(`Invalid configuration: ${(error as Error).message}`)
  }
  if (read.products.imageBytesPerUser < read.products.imageMaxBytes) {
    throw new ConfigError(`Invalid configuration: IMAGE_BYTES_MAX_PER_USER (${read.products.imageBytesPerUser}) must be at least IMAGE_MAX_BYTES (${read.products.imageMaxBytes}): a user could never store an image of the allowed size`)
  }
  if (read.server.shutdownDrainMs > 0 && read.server.shutdownDrainMs >= read.server.shutdownGraceMs) {
    throw new ConfigError(`Invalid configuration: SHUTDOWN_DRAIN_MS (${read.server.shutdownDrainMs}) must be shorter than SHUTDOWN_GRACE_MS (${read.server.shutdownGraceMs}): the drain is part of the grace period`)
  }
  // The pattern admits any three capitals; the browser's Intl.NumberFormat throws on a code it does not know.
  if (!Intl.supportedValuesOf('currency').includes(read.server.currency)) {
    throw new ConfigError(`Invalid configuration: CURRENCY: ${JSON.stringify(read.server.currency)} is not an ISO 4217 currency code (EUR, USD, JPY)`)
  }
  const production = read.server.env === 'production'
  if (production && configuredDatabaseUrl(read.database) === undefined && read.database.embedded !== true) {
    throw new ConfigError('Invalid configuration: no database configured in production. Set DATABASE_URL (or DB_HOST and the other DB_* variables), or EMBEDDED_DB=true to run the embedded PostgreSQL on purpose')
  }
  // A wrong origin list is named as it was set, under its alias too.
  const session = sessionSettings(read.auth, merged.CSRF_TRUSTED_ORIGINS === undefined ? 'CORS_ORIGINS' : 'CSRF_TRUSTED_ORIGINS')
  let secret = read.auth.secret
  if (secret === undefined) {
    if (production) {
      throw new ConfigError('Invalid configuration: SECRET is required in production (at least 32 characters, e.g. `openssl rand -base64 48`)')
    }
    secret = devSecretFile ? developmentSecret(devSecretFile) : randomBytes(48).toString('base64url')
  }
  // Password reset is always on, so production needs a way to send its e-mail and links that
  // point at the service.
  if (production && read.mail.smtpUrl === undefined) {
    throw new ConfigError('Invalid configuration: SMTP_URL is required in production: password-reset e-mail needs an SMTP server (smtp://user:pass@host:587, or smtps:// for TLS from the start; docs/operations.md, "E-mail")')
  }
  if (production && read.mail.publicUrl === undefined) {
    throw new ConfigError('Invalid configuration: PUBLIC_URL is required in production: the links in e-mail are built from it (https://shop.example.com), never from a request\'s Host')
  }
  const publicUrl = (read.mail.publicUrl ?? `http://localhost:${read.server.port}`).replace(/\/+$/, '')
  return {
    ...read,
    auth: { ...read.auth, ...session, ...webauthnSettings(read.auth, publicUrl), secret, secretGenerated: read.auth.secret === undefined, recentSignInMaxAgeMs: durationMs(read.auth.recentSignInMaxAge) },
    mail: { ...read.mail, publicUrl },
    retired: Object.keys(RETIRED).filter((name) => variables[name] !== undefined && variables[name] !== '')
  }
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }

/** Milliseconds of a duration that matches DURATION (`15m`, `30d`, `500`). */
export function durationMs (value: string): number {
  const [, amount, unit] = /^([0-9]+)(ms|s|m|h|d)?$/.exec(value) ?? []
  if (amount === undefined) throw new ConfigError(`Not a duration: ${value}`)
  return Number(amount) * UNIT_MS[unit ?? 'ms']!
}

/** Token lifetimes, the browser origins and the cookie attributes, checked together. */
function sessionSettings (auth: Settings['auth'], originsVariable: string): Pick<AuthSettings, 'refreshTokenTtlMs' | 'corsOrigins'> {
  const accessMs = durationMs(auth.accessTokenTtl)
  if (accessMs < 1000) throw new ConfigError('Invalid configuration: ACCESS_TOKEN_TTL must be at least 1s')
  const refreshTokenTtlMs = durationMs(auth.refreshTokenTtl)
  if (refreshTokenTtlMs <= accessMs) {
    throw new ConfigError('Invalid configuration: REFRESH_TOKEN_TTL must be longer than ACCESS_TOKEN_TTL')
  }
  const origins = auth.corsOrigins.split(',').map((o) => o.trim()).filter((o) => o !== '')
  for (const origin of origins) {
    if (origin === '*' || origin === 'null') {
      // CORS forbids `*` with credentials, and a listed origin is also trusted with cookie
      // changes; `null` is what sandboxed frames and opaque redirects send, so anyone can.
      throw new ConfigError(`Invalid configuration: ${originsVariable}: ${origin} is refused: each listed origin may send credentials and cookie-authenticated changes, so the list names origins one by one (https://app.example.com)`)
    }
    let parsed: URL | undefined
    try { parsed = new URL(origin) } catch {}
    if (parsed === undefined || !/^https?:$/.test(parsed.protocol) || parsed.origin !== origin) {
      throw new ConfigError(`Invalid configuration: ${originsVariable}: ${JSON.stringify(origin)} is not an origin like https://app.example.com (scheme, host, optional port; no path or trailing slash)`)
    }
  }
  if (auth.cookieSameSite === 'none') {
    // Browsers drop a SameSite=None cookie that is not Secure (RFC 6265bis, "SameSite").
    if (!auth.cookieSecure) throw new ConfigError('Invalid configuration: COOKIE_SAMESITE=none requires COOKIE_SECURE=true: browsers refuse SameSite=None cookies that are not Secure')
    if (origins.length === 0) {
      throw new ConfigError('Invalid configuration: COOKIE_SAMESITE=none serves a front-end on another site, which must be listed in CORS_ORIGINS; with none listed it would only send the cookies along with other sites\' requests. List the front-end\'s origin, or leave COOKIE_SAMESITE=strict')
    }
  }
  return { refreshTokenTtlMs, corsOrigins: origins }
}

/**
 * The WebAuthn relying party: its id and the origins whose pages use it, when set, checked
 * together as browsers would: an origin must be a secure context (https, or http on localhost) whose host
 * is the RP id or a subdomain of it, else no browser would ever produce a passkey for it.
 */
function webauthnSettings (auth: Settings['auth'], publicUrl: string): Pick<AuthSettings, 'webauthnRpId' | 'webauthnOrigins'> {
  const rpId = auth.webauthnRpId ?? new URL(publicUrl).hostname
  const listed = auth.webauthnOrigins.split(',').map((o) => o.trim()).filter((o) => o !== '')
  // Unset, both follow PUBLIC_URL as it is (one on an IP address or plain HTTP simply gets no
  // working passkeys); what is set on purpose must work.
  if (auth.webauthnRpId === undefined && listed.length === 0) return { webauthnRpId: rpId, webauthnOrigins: [new URL(publicUrl).origin] }
  if (/^[0-9.]+$/.test(rpId) || rpId.startsWith('[')) {
    throw new ConfigError(`Invalid configuration: WEBAUTHN_RP_ID: ${JSON.stringify(rpId)} (set, or the host of PUBLIC_URL) is an IP address, which browsers refuse: use a host name (localhost in development)`)
  }
  const origins = listed.length > 0 ? listed : [new URL(publicUrl).origin]
  for (const origin of origins) {
    let parsed: URL | undefined
    try { parsed = new URL(origin) } catch {}
    if (parsed === undefined || parsed.origin !== origin) {
      throw new ConfigError(`Invalid configuration: WEBAUTHN_ORIGINS: ${JSON.stringify(origin)} is not an origin like https://shop.example.com`)
    }
    const local = parsed.hostname === 'localhost' || parsed.hostname.endsWith('.localhost')
    if (parsed.protocol !== 'https:' && !(parsed.protocol === 'http:' && local)) {
      throw new ConfigError(`Invalid configuration: WEBAUTHN_ORIGINS: ${origin} is not https: browsers offer passkeys to secure origins only (http only on localhost)`)
    }
    if (parsed.hostname !== rpId && !parsed.hostname.endsWith(`.${rpId}`)) {
      throw new ConfigError(`Invalid configuration: WEBAUTHN_ORIGINS: ${origin} is not on the RP id ${rpId} (WEBAUTHN_RP_ID, or the host of PUBLIC_URL) or a subdomain of it: browsers would refuse every passkey there`)
    }
  }
  return { webauthnRpId: rpId, webauthnOrigins: origins }
}

/** The database URL the configuration names, or undefined when the embedded database should run. */
export function configuredDatabaseUrl (database: Pick<DatabaseSettings, 'url' | 'host' | 'user' | 'password' | 'port' | 'name'>): string | undefined {
  if (database.url) return database.url
  if (!database.host) return undefined
  const user = encodeURIComponent(database.user)
  const password = encodeURIComponent(database.password)
  return `postgresql://${user}:${password}@${database.host}:${database.port}/${database.name}`
}
