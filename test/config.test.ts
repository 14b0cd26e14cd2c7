import { mkdtemp, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { ConfigError, configuredDatabaseUrl, loadConfig } from '../src/config.js'

t.test('defaults', async (t) => {
  const config = loadConfig({}, false)
  t.match(config, { NODE_ENV: 'development', HOST: '127.0.0.1', PORT: 3000, JWT_EXPIRES_IN: '72h', BCRYPT_COST: 10, DB_PORT: 5432, BODY_LIMIT: 1048576, MIGRATE_ON_START: true })
  t.equal(config.secretGenerated, true, 'development generates a secret')
  t.ok(config.SECRET.length >= 32)
  t.not(loadConfig({}, false).SECRET, config.SECRET, 'a new one each run')
  t.equal(configuredDatabaseUrl(config), undefined, 'no database configured: embedded')
})

t.test('a wrong value stops the service with a message naming the variable', async (t) => {
  const cases: Record<string, string>[] = [
    { PORT: 'abc' }, { PORT: '70000' }, { DB_PORT: '-1' }, { BCRYPT_COST: '3' }, { BCRYPT_COST: '20' },
    { JWT_EXPIRES_IN: 'forever' }, { LOG_LEVEL: 'loud' }, { NODE_ENV: 'staging' }, { SECRET: 'too-short' },
    { DATABASE_URL: 'mysql://x' }, { DB_NAME: 'bad name;' }, { BODY_LIMIT: '10' }, { MIGRATE_ON_START: 'maybe' }
  ]
  for (const env of cases) {
    const name = Object.keys(env)[0]!
    t.throws(() => loadConfig(env, false), { name: 'ConfigError', message: new RegExp(name) }, `${name}=${env[name]}`)
  }
})

t.test('production refuses to start without SECRET', async (t) => {
  t.throws(() => loadConfig({ NODE_ENV: 'production' }, false), ConfigError)
  t.throws(() => loadConfig({ NODE_ENV: 'production' }, false), /SECRET is required in production/)
  const config = loadConfig({ NODE_ENV: 'production', SECRET: 's'.repeat(32) }, false)
  t.equal(config.secretGenerated, false)
})

t.test('database URL: DATABASE_URL wins, else the DB_* variables of SPEC.md', async (t) => {
  t.equal(configuredDatabaseUrl(loadConfig({ DATABASE_URL: 'postgresql://a@h/db', DB_HOST: 'other' }, false)), 'postgresql://a@h/db')
  t.equal(
    configuredDatabaseUrl(loadConfig({ DB_HOST: 'db', DB_PORT: '6543', DB_USER: 'app user', DB_PASSWORD: 'p@ss:w/rd', DB_NAME: 'shop' }, false)),
    'postgresql://app%20user:p%40ss%3Aw%2Frd@db:6543/shop',
    'credentials are URL-encoded'
  )
})

t.test('empty values mean unset; .env is read and the environment wins over it', async (t) => {
  t.equal(loadConfig({ DATABASE_URL: '', PORT: '' }, false).PORT, 3000)
  const dir = await mkdtemp(path.join(os.tmpdir(), 'config-'))
  const file = path.join(dir, '.env')
  await writeFile(file, '# comment\nPORT=4000\nLOG_LEVEL=warn\nDB_PASSWORD=\n')
  const config = loadConfig({ LOG_LEVEL: 'error' }, file)
  t.equal(config.PORT, 4000, 'from .env')
  t.equal(config.LOG_LEVEL, 'error', 'the environment wins')
  t.equal(config.DB_PASSWORD, 'postgres', 'empty in .env: the default')
  t.equal(loadConfig({}, path.join(dir, 'missing.env')).PORT, 3000, 'a missing .env is fine')
})
