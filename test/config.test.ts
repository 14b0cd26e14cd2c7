import { mkdtemp, readFile, stat, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { ConfigError, configuredDatabaseUrl, EnvSchema, envVariables, loadConfig, RETIRED, settings } from '../src/config.js'
import { serverOptions } from '../src/options.js'

t.test('defaults', async (t) => {
  const config = loadConfig({}, false)
  t.match(config, {
    server: { env: 'development', host: '127.0.0.1', port: 3000, bodyLimit: 1048576 },
    auth: { accessTokenTtl: '15m', refreshTokenTtl: '30d', refreshTokenTtlMs: 30 * 86_400_000, cookieSecure: true, cookieSameSite: 'strict', corsOrigins: [], bcryptCost: 10 },
    database: { port: 5432, migrateOnStart: true },
    retired: []
  })
  t.equal(config.auth.secretGenerated, true, 'development generates a secret')
  t.ok(config.auth.secret.length >= 32)
  t.not(loadConfig({}, false).auth.secret, config.auth.secret, 'a new one each run')
  t.equal(configuredDatabaseUrl(config.database), undefined, 'no database configured: embedded')
})

t.test('a wrong value stops the service with a message naming the variable', async (t) => {
  const cases: Record<string, string>[] = [
    { PORT: 'abc' }, { PORT: '70000' }, { DB_PORT: '-1' }, { BCRYPT_COST: '3' }, { BCRYPT_COST: '20' },
    { JWT_EXPIRES_IN: 'forever' }, { ACCESS_TOKEN_TTL: '15 minutes' }, { REFRESH_TOKEN_TTL: '-1d' }, { COOKIE_SECURE: 'nah' },
    { CORS_ORIGINS: 'app.example.com' }, { CORS_ORIGINS: 'https://app.example.com/' }, { CORS_ORIGINS: 'https://a.example,ftp://b.example' },
    { CSRF_TRUSTED_ORIGINS: 'https://app.example.com/' }, { COOKIE_SAMESITE: 'lax' },
    { ACCESS_TOKEN_TTL: '500ms' }, { REFRESH_TOKEN_TTL: '10m' }, { LOG_LEVEL: 'loud' }, { NODE_ENV: 'staging' }, { SECRET: 'too-short' },
    { DATABASE_URL: 'mysql://x' }, { DB_NAME: 'bad name;' }, { BODY_LIMIT: '10' }, { MIGRATE_ON_START: 'maybe' },
    { SHUTDOWN_GRACE_MS: '-5' }, { HTTPS_ONLY: 'sometimes' }, { EMBEDDED_DB: 'perhaps' },
    { REDIS_URL: 'http://localhost:6379' }, { REDIS_KEY_PREFIX: 'x'.repeat(101) },
    { API_REPLICAS: '0' }, { DB_PGBOUNCER: 'yes please' }, { DB_CONNECT_TIMEOUT_MS: '10' }, { DB_STATEMENT_TIMEOUT_MS: 'soon' },
    { PRODUCTS_MAX_PER_USER: '0' }, { SESSIONS_MAX_PER_USER: '0' }, { REFRESH_MIN_INTERVAL_MS: '-1' },
    { LOAD_SHED_MAX_IN_FLIGHT: '-1' }, { SLOW_CLIENT_MIN_BYTES_PER_S: '0' }, { OTEL_TRACES_SAMPLER_ARG: '2' }, { CSV_MAX_ROWS: '10' },
    // Smaller than one image of IMAGE_MAX_BYTES: no such image could ever be stored.
    { IMAGE_BYTES_MAX_PER_USER: '4194304' }
  ]
  for (const env of cases) {
    const name = Object.keys(env)[0]!
    t.throws(() => loadConfig(env, false), { name: 'ConfigError', message: new RegExp(name) }, `${name}=${env[name]}`)
  }
})

t.test('session settings', async (t) => {
  t.match(loadConfig({ ACCESS_TOKEN_TTL: '5m', REFRESH_TOKEN_TTL: '7d', CORS_ORIGINS: ' https://app.example.com , http://localhost:5173 ' }, false).auth,
    { accessTokenTtl: '5m', refreshTokenTtl: '7d', refreshTokenTtlMs: 7 * 86_400_000, corsOrigins: ['https://app.example.com', 'http://localhost:5173'] })
  t.equal(loadConfig({ JWT_EXPIRES_IN: '2h' }, false).auth.accessTokenTtl, '2h', 'JWT_EXPIRES_IN is read as an alias')
  t.throws(() => loadConfig({ JWT_EXPIRES_IN: '2h', ACCESS_TOKEN_TTL: '5m' }, false), { name: 'ConfigError', message: /ACCESS_TOKEN_TTL or JWT_EXPIRES_IN/ }, 'not both')
  t.throws(() => loadConfig({ ACCESS_TOKEN_TTL: '2h', REFRESH_TOKEN_TTL: '1h' }, false), { name: 'ConfigError', message: /REFRESH_TOKEN_TTL must be longer/ })
})

t.test('passkeys: the relying party follows PUBLIC_URL, and what is set must be one browsers accept', async (t) => {
  t.match(loadConfig({}, false).auth, { webauthnRpId: 'localhost', webauthnOrigins: ['http://localhost:3000'], webauthnRpName: 'User and product service', recentSignInMaxAgeMs: 0 }, 'development: localhost')
  t.match(loadConfig({ PUBLIC_URL: 'https://shop.example.com/', RECENT_SIGN_IN_MAX_AGE: '15m' }, false).auth, { webauthnRpId: 'shop.example.com', webauthnOrigins: ['https://shop.example.com'], recentSignInMaxAgeMs: 900_000 })
  t.match(loadConfig({ PUBLIC_URL: 'http://127.0.0.1:3000' }, false).auth, { webauthnRpId: '127.0.0.1' }, 'unset and derived from an IP address: started (passkeys just will not work there)')
  t.match(loadConfig({ WEBAUTHN_RP_ID: 'example.com', WEBAUTHN_ORIGINS: 'https://shop.example.com, https://example.com' }, false).auth,
    { webauthnRpId: 'example.com', webauthnOrigins: ['https://shop.example.com', 'https://example.com'] }, 'a parent domain serves its subdomains')
  const refused: Array<[Record<string, string>, RegExp]> = [
    [{ WEBAUTHN_RP_ID: '10.0.0.1' }, /WEBAUTHN_RP_ID: "10.0.0.1".*IP address/],
    [{ WEBAUTHN_RP_ID: 'example.com', WEBAUTHN_ORIGINS: 'https://example.org' }, /WEBAUTHN_ORIGINS: https:\/\/example.org is not on the RP id example.com/],
    [{ WEBAUTHN_RP_ID: 'example.com', WEBAUTHN_ORIGINS: 'https://badexample.com' }, /not on the RP id/],
    [{ WEBAUTHN_RP_ID: 'shop.example.com', WEBAUTHN_ORIGINS: 'https://example.com' }, /not on the RP id/],
    [{ WEBAUTHN_ORIGINS: 'http://shop.example.com', WEBAUTHN_RP_ID: 'shop.example.com' }, /WEBAUTHN_ORIGINS: http:\/\/shop.example.com is not https/],
    [{ WEBAUTHN_ORIGINS: 'https://shop.example.com/login', WEBAUTHN_RP_ID: 'shop.example.com' }, /WEBAUTHN_ORIGINS: "https:\/\/shop.example.com\/login" is not an origin/],
    [{ PUBLIC_URL: 'https://shop.example.com', WEBAUTHN_ORIGINS: 'https://other.example.net' }, /not on the RP id shop.example.com/],
    [{ WEBAUTHN_RP_ID: 'Shop.Example.com' }, /WEBAUTHN_RP_ID/],
    [{ RECENT_SIGN_IN_MAX_AGE: 'soon' }, /RECENT_SIGN_IN_MAX_AGE/]
  ]
  for (const [env, message] of refused) t.throws(() => loadConfig(env, false), { name: 'ConfigError', message }, JSON.stringify(env))
  t.match(loadConfig({ WEBAUTHN_ORIGINS: 'http://localhost:5173,http://app.localhost:3000' }, false).auth, { webauthnRpId: 'localhost' }, 'plain http on localhost and its subdomains')
})

t.test('browser origins and cookies: impossible combinations stop the service', async (t) => {
  t.same(loadConfig({ CSRF_TRUSTED_ORIGINS: 'https://app.example.com' }, false).auth.corsOrigins, ['https://app.example.com'], 'CSRF_TRUSTED_ORIGINS is read as an alias of CORS_ORIGINS')
  t.throws(() => loadConfig({ CORS_ORIGINS: 'https://a.example', CSRF_TRUSTED_ORIGINS: 'https://b.example' }, false), { name: 'ConfigError', message: /CORS_ORIGINS or CSRF_TRUSTED_ORIGINS/ }, 'not both')
  for (const value of ['*', 'https://app.example.com,*', 'null']) {
    t.throws(() => loadConfig({ CORS_ORIGINS: value }, false), { name: 'ConfigError', message: /CORS_ORIGINS: (\*|null) is refused: each listed origin may send credentials/ }, `CORS_ORIGINS=${value}`)
  }
  t.throws(() => loadConfig({ CSRF_TRUSTED_ORIGINS: '*' }, false), { name: 'ConfigError', message: /CSRF_TRUSTED_ORIGINS: \* is refused/ }, 'through the alias too, named as set')
  t.throws(() => loadConfig({ COOKIE_SAMESITE: 'none', COOKIE_SECURE: 'false', CORS_ORIGINS: 'https://app.example.org' }, false),
    { name: 'ConfigError', message: /COOKIE_SAMESITE=none requires COOKIE_SECURE=true/ }, 'SameSite=None without Secure')
  t.throws(() => loadConfig({ COOKIE_SAMESITE: 'none' }, false), { name: 'ConfigError', message: /COOKIE_SAMESITE=none serves a front-end on another site, which must be listed in CORS_ORIGINS/ }, 'SameSite=None with no origin listed')
  t.match(loadConfig({ COOKIE_SAMESITE: 'none', CORS_ORIGINS: 'https://app.example.org' }, false).auth, { cookieSameSite: 'none', cookieSecure: true, corsOrigins: ['https://app.example.org'] })
})

/** What production needs besides SECRET and a database. */
const MAIL = { SMTP_URL: 'smtp://mail.example.com:587', PUBLIC_URL: 'https://shop.example.com' }

t.test('production refuses to start without SMTP_URL or PUBLIC_URL: password reset needs e-mail', async (t) => {
  const production = { NODE_ENV: 'production', SECRET: 's'.repeat(32), DB_HOST: 'db' }
  t.throws(() => loadConfig({ ...production, PUBLIC_URL: MAIL.PUBLIC_URL }, false), { name: 'ConfigError', message: /SMTP_URL is required in production/ })
  t.throws(() => loadConfig({ ...production, SMTP_URL: MAIL.SMTP_URL }, false), { name: 'ConfigError', message: /PUBLIC_URL is required in production.*never from a request's Host/ })
  t.throws(() => loadConfig({ ...production, ...MAIL, SMTP_URL: 'http://mail.example.com' }, false), { name: 'ConfigError', message: /SMTP_URL/ }, 'not an SMTP URL')
  const config = loadConfig({ ...production, ...MAIL, PUBLIC_URL: 'https://shop.example.com/' }, false)
  t.equal(config.mail.publicUrl, 'https://shop.example.com', 'no trailing slash')
  t.equal(config.mail.smtpUrl, MAIL.SMTP_URL)
  const development = loadConfig({ PORT: '4000' }, false)
  t.equal(development.mail.smtpUrl, undefined, 'development: no SMTP server needed')
  t.equal(development.mail.publicUrl, 'http://localhost:4000', 'development: links to the local service')
  t.equal(development.auth.passwordResetTtl, '30m')
})

t.test('production refuses to start without SECRET', async (t) => {
  const db = { DB_HOST: 'db', ...MAIL }
  t.throws(() => loadConfig({ NODE_ENV: 'production', ...db }, false), ConfigError)
  t.throws(() => loadConfig({ NODE_ENV: 'production', ...db }, false), /SECRET is required in production/)
  const config = loadConfig({ NODE_ENV: 'production', SECRET: 's'.repeat(32), ...db }, false)
  t.equal(config.auth.secretGenerated, false)
})

t.test('production with no database configured refuses to start the embedded one silently', async (t) => {
  const production = { NODE_ENV: 'production', SECRET: 's'.repeat(32), ...MAIL }
  t.throws(() => loadConfig(production, false), { name: 'ConfigError', message: /no database configured in production.*EMBEDDED_DB=true/ })
  t.equal(configuredDatabaseUrl(loadConfig({ ...production, EMBEDDED_DB: 'true' }, false).database), undefined, 'asked for explicitly: embedded')
  t.ok(loadConfig({ ...production, DATABASE_URL: 'postgresql://a@h/db' }, false))
  t.equal(loadConfig({}, false).database.embedded, undefined, 'development: embedded by default')
})

t.test('secrets from files (*_FILE)', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'config-'))
  const secret = path.join(dir, 'secret')
  await writeFile(secret, 'f'.repeat(40) + '\n')
  const password = path.join(dir, 'password')
  await writeFile(password, 'p@ss word\n')
  const config = loadConfig({ SECRET_FILE: secret, DB_PASSWORD_FILE: password, DB_HOST: 'db' }, false)
  t.equal(config.auth.secret, 'f'.repeat(40), 'one trailing newline dropped')
  t.equal(config.database.password, 'p@ss word')
  t.equal(configuredDatabaseUrl(config.database), 'postgresql://postgres:p%40ss%20word@db:5432/app')
  t.throws(() => loadConfig({ SECRET: 'g'.repeat(40), SECRET_FILE: secret }, false), { name: 'ConfigError', message: /SECRET or SECRET_FILE, not both/ })
  t.throws(() => loadConfig({ SECRET_FILE: path.join(dir, 'missing') }, false), { name: 'ConfigError', message: /SECRET_FILE: cannot read .*ENOENT/ })
  const fromDotenv = path.join(dir, '.env')
  await writeFile(fromDotenv, `SECRET_FILE=${secret}\n`)
  t.equal(loadConfig({}, fromDotenv).auth.secret, 'f'.repeat(40), 'a _FILE variable in .env works too')
  const keys = path.join(dir, 'keys')
  await writeFile(keys, 'cQXHu+OADM8lmuQm07Z89qTn09F5X/SLMMaTFhU+hQs=\n')
  t.equal(loadConfig({ ADMIN_API_KEYS_FILE: keys }, false).auth.adminApiKeys, 'cQXHu+OADM8lmuQm07Z89qTn09F5X/SLMMaTFhU+hQs=', 'every secret has its _FILE twin')
  t.equal(loadConfig({ PORT_FILE: secret }, false).server.port, 3000, 'a setting that is no secret has no _FILE twin')
})

t.test('development keeps its generated SECRET across restarts; production never writes one', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'config-'))
  const file = path.join(dir, 'sub', 'dev-secret')
  const first = loadConfig({}, { devSecretFile: file })
  t.equal(first.auth.secretGenerated, true)
  t.equal(loadConfig({}, { devSecretFile: file }).auth.secret, first.auth.secret, 'the same secret after a restart')
  t.equal((await stat(file)).mode & 0o777, 0o600, 'kept readable by its owner only')
  const other = path.join(dir, 'prod-secret')
  t.throws(() => loadConfig({ NODE_ENV: 'production', DB_HOST: 'db' }, { devSecretFile: other }), /SECRET is required/)
  await t.rejects(stat(other), { code: 'ENOENT' }, 'nothing written in production')
})

t.test('database URL: DATABASE_URL wins, else the DB_* variables', async (t) => {
  t.equal(configuredDatabaseUrl(loadConfig({ DATABASE_URL: 'postgresql://a@h/db', DB_HOST: 'other' }, false).database), 'postgresql://a@h/db')
  t.equal(
    configuredDatabaseUrl(loadConfig({ DB_HOST: 'db', DB_PORT: '6543', DB_USER: 'app user', DB_PASSWORD: 'p@ss:w/rd', DB_NAME: 'shop' }, false).database),
    'postgresql://app%20user:p%40ss%3Aw%2Frd@db:6543/shop',
    'credentials are URL-encoded'
  )
})

t.test('empty values mean unset; .env is read and the environment wins over it', async (t) => {
  t.equal(loadConfig({ DATABASE_URL: '', PORT: '' }, false).server.port, 3000)
  const dir = await mkdtemp(path.join(os.tmpdir(), 'config-'))
  const file = path.join(dir, '.env')
  await writeFile(file, '# comment\nPORT=4000\nLOG_LEVEL=warn\nDB_PASSWORD=\n')
  const config = loadConfig({ LOG_LEVEL: 'error' }, file)
  t.equal(config.server.port, 4000, 'from .env')
  t.equal(config.server.logLevel, 'error', 'the environment wins')
  t.equal(config.database.password, 'postgres', 'empty in .env: the default')
  t.equal(loadConfig({}, path.join(dir, 'missing.env')).server.port, 3000, 'a missing .env is fine')
})

t.test('logs: human-readable through pino-pretty in development, JSON elsewhere', async (t) => {
  const config = (NODE_ENV: string) => loadConfig({ NODE_ENV, SECRET: 's'.repeat(32), DB_HOST: 'db', ...MAIL }, false).server
  const development = serverOptions(config('development')).logger as { transport?: { target: string } }
  t.match(development.transport?.target, /pino-pretty/, 'development: pino-pretty')
  for (const env of ['production', 'test'] as const) {
    t.equal((serverOptions(config(env)).logger as { transport?: unknown }).transport, undefined, `${env}: JSON lines`)
  }
  const toStream = serverOptions(config('development'), process.stderr).logger as { transport?: unknown }
  t.equal(toStream.transport, undefined, 'a given log stream (tests) stays JSON')
})

t.test('every variable of the environment schema is listed in .env.example and the README', async (t) => {
  const example = await readFile(new URL('../.env.example', import.meta.url), 'utf8')
  const readme = await readFile(new URL('../README.md', import.meta.url), 'utf8')
  for (const name of envVariables()) {
    t.match(example, new RegExp(`^${name}=`, 'm'), `${name} in .env.example`)
    t.match(readme, new RegExp(`\`${name}\``), `${name} in the README`)
  }
  for (const name of Object.keys(RETIRED)) {
    t.notMatch(example, new RegExp(`^${name}=`, 'm'), `${name}, not read, is not offered in .env.example`)
  }
})

t.test('the schema in sections: each leaf names its variable once, with a description', async (t) => {
  const seen = new Set<string>()
  for (const leaf of settings()) {
    t.ok(leaf.schema.description.length > 0, `${leaf.env} has a description`)
    t.notOk(seen.has(leaf.env), `${leaf.env} is read once`)
    seen.add(leaf.env)
    t.notOk(leaf.env in RETIRED, `${leaf.env} is not retired`)
  }
  t.same(Object.keys(EnvSchema.properties), ['server', 'database', 'auth', 'limits', 'redis', 'mail', 'telemetry', 'products'])
})

t.test('a retired variable (not read) is ignored and reported, whatever its value', async (t) => {
  const config = loadConfig({ LOAD_SHED_SAMPLE_MS: 'soon', REFRESH_TOKENS_KEPT: '5', ACCOUNT_CHANGES_MAX: '' }, false)
  t.same(config.retired, ['LOAD_SHED_SAMPLE_MS', 'REFRESH_TOKENS_KEPT'], 'set ones only (empty is unset)')
  t.equal(Object.keys(RETIRED).length, 13)
})
