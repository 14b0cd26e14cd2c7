/**
 * The floor of GET /api/user/:id on Fastify: the same read as floor.ts (one prepared `pg`
 * query on a pool of the service's size) as one Fastify route with the service's kind of
 * schemas (an integer id, a serialised answer), and nothing else: no token, no hooks, no
 * logs. Between floor.ts and this is what the framework alone costs; the service cannot come
 * closer to floor.ts than this does.
 */
import Fastify from 'fastify'
import pg from 'pg'

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.DB_POOL_SIZE ?? 10) })
const USER = 'SELECT id, username, email, names, created_at AS "createdAt", updated_at AS "updatedAt" FROM users WHERE id = $1'

const app = Fastify({ logger: false })
app.get('/health/live', async () => ({ status: 'ok' }))
app.get<{ Params: { id: number } }>('/api/user/:id', {
  schema: {
    params: { type: 'object', properties: { id: { type: 'integer', minimum: 1 } }, required: ['id'] },
    response: {
      200: {
        type: 'object',
        properties: {
          id: { type: 'integer' },
          username: { type: 'string' },
          email: { type: 'string' },
          names: { type: ['string', 'null'] },
          createdAt: { type: 'string', format: 'date-time' },
          updatedAt: { type: 'string', format: 'date-time' }
        }
      }
    }
  }
}, async (request, reply) => {
  const { rows } = await pool.query({ name: 'floor-user', text: USER, values: [request.params.id] })
  if (rows.length === 0) return await reply.code(404).send()
  return rows[0]
})
await app.listen({ port: Number(process.env.PORT ?? 0), host: process.env.HOST ?? '127.0.0.1' })
process.once('SIGTERM', () => { app.close().then(async () => { await pool.end() }).then(() => process.exit(0), () => process.exit(1)) })
