/**
 * The database reference: bare Fastify (no logger, no plugins) and one raw `pg` query per
 * request, reading the same row GET /api/user/:id reads, on a pool as large as the
 * service's (DB_POOL_SIZE, default 10).
 */
import Fastify from 'fastify'
import pg from 'pg'

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.DB_POOL_SIZE ?? 10) })
const app = Fastify()
app.get('/', async () => ({ ok: true }))
app.get<{ Params: { id: string } }>('/user/:id', async (request, reply) => {
  const { rows } = await pool.query(
    'SELECT id, username, email, created_at AS "createdAt", updated_at AS "updatedAt", token_version AS "tokenVersion" FROM users WHERE id = $1',
    [Number(request.params.id)]
  )
  if (rows.length === 0) return reply.code(404).send({ error: 'not found' })
  return rows[0]
})
app.addHook('onClose', async () => { await pool.end() })
await app.listen({ host: process.env.HOST ?? '127.0.0.1', port: Number(process.env.PORT ?? 0) })
process.once('SIGTERM', () => { app.close().then(() => process.exit(0), () => process.exit(1)) })
