/**
 * Configuration from the environment (and an optional `.env` file), validated once at
 * start. A wrong value stops the service with a message that names the variable.
 * Every variable is listed, with a comment, in `.env.example`.
 */
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { parseEnv } from 'node:util'
import envSchema from 'env-schema'
import { Type, type Static } from 'typebox'

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
  /** Data folder of the embedded PostgreSQL (kept between runs, git-ignored). */
  EMBEDDED_DB_DIR: Type.String({ default: '.data/postgres' }),
  /** Port of the embedded PostgreSQL; 0 picks a free one. */
  EMBEDDED_DB_PORT: Type.Integer({ default: 0, minimum: 0, maximum: 65535 }),
  /** Apply pending migrations before listening. */
  MIGRATE_ON_START: Type.Boolean({ default: true }),

  // Tokens and passwords.
  SECRET: Type.Optional(Type.String({ minLength: 32 })),
  JWT_EXPIRES_IN: Type.String({ default: '72h', pattern: '^[0-9]+(ms|s|m|h|d)?$' }),
  BCRYPT_COST: Type.Integer({ default: 10, minimum: 4, maximum: 15 }),

  // Limits.
  BODY_LIMIT: Type.Integer({ default: 1_048_576, minimum: 1024 }),
  RATE_LIMIT_AUTH_MAX: Type.Integer({ default: 20, minimum: 1 }),
  RATE_LIMIT_AUTH_WINDOW_MS: Type.Integer({ default: 60_000, minimum: 1000 }),
  /** Failed logins per account (login name) per window before 429 (src/modules/auth/account-limit.ts). */
  LOGIN_FAILURES_MAX: Type.Integer({ default: 10, minimum: 1 }),
  LOGIN_FAILURES_WINDOW_MS: Type.Integer({ default: 900_000, minimum: 1000 }),
  TRUST_PROXY: Type.Boolean({ default: false }),

  // Admin routes (key-auth): comma-separated keys; the first is current, all verify.
  ADMIN_API_KEYS: Type.String({ default: '' })
})

export type Env = Static<typeof EnvSchema>

export interface Config extends Env {
  /** The signing secret, generated for development when SECRET is unset. */
  SECRET: string
  /** True when SECRET was generated rather than configured. */
  secretGenerated: boolean
}

export class ConfigError extends Error {
  override name = 'ConfigError'
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

/**
 * Reads and validates the configuration.
 * @param data the variables (defaults to process.env)
 * @param dotenvFile a `.env` file read first, whose values the variables override;
 *   by default `.env` when reading process.env, none otherwise
 */
export function loadConfig (data: Record<string, string | undefined> = process.env, dotenvFile: string | false = data === process.env ? '.env' : false): Config {
  const merged = { ...(dotenvFile ? readDotenv(dotenvFile) : {}), ...data }
  let env: Env
  try {
    env = envSchema<Env>({
      schema: structuredClone(EnvSchema),
      // An empty value (`DATABASE_URL=`) means "unset", so the default applies.
      data: Object.fromEntries(Object.entries(merged).filter(([name, value]) => value !== undefined && value !== '' && name in EnvSchema.properties)),
      env: false
    })
  } catch (error) {
    // Ajv's message names the variable: "env/PORT must be <= 65535".
    throw new ConfigError(`Invalid configuration: ${(error as Error).message}`)
  }
  if (env.SECRET === undefined) {
    if (env.NODE_ENV === 'production') {
      throw new ConfigError('Invalid configuration: SECRET is required in production (at least 32 characters, e.g. `openssl rand -base64 48`)')
    }
    return { ...env, SECRET: randomBytes(48).toString('base64url'), secretGenerated: true }
  }
  return { ...env, SECRET: env.SECRET, secretGenerated: false }
}

/** The database URL the configuration names, or undefined when the embedded database should run. */
export function configuredDatabaseUrl (config: Env): string | undefined {
  if (config.DATABASE_URL) return config.DATABASE_URL
  if (!config.DB_HOST) return undefined
  const user = encodeURIComponent(config.DB_USER)
  const password = encodeURIComponent(config.DB_PASSWORD)
  return `postgresql://${user}:${password}@${config.DB_HOST}:${config.DB_PORT}/${config.DB_NAME}`
}
