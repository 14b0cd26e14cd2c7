/**
 * The service as src/server.ts builds it (configuration from the environment, buildApp,
 * production settings), with its password hasher replaced by the variant named in
 * BENCH_HASHER, for bench/bcrypt.ts. The routes read `app.passwords` on every call, so
 * replacing the root decorator before listening swaps the hashing everywhere.
 */
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { createHasher, isVariant } from '../lib/hashers.js'

const variant = process.env.BENCH_HASHER ?? ''
if (!isVariant(variant)) throw new Error(`BENCH_HASHER must name a variant of bench/lib/hashers.ts, not "${variant}"`)
const config = loadConfig()
const databaseUrl = process.env.DATABASE_URL
if (!databaseUrl) throw new Error('DATABASE_URL is required')

const app = await buildApp({ config, databaseUrl })
const hasher = await createHasher(variant, config.auth.bcryptCost)
app.passwords = hasher
app.addHook('onClose', async () => { await hasher.close() })
await app.listen({ host: config.server.host, port: config.server.port })
process.once('SIGTERM', () => { app.close().then(() => process.exit(0), () => process.exit(1)) })
