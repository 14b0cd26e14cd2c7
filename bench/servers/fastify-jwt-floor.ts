/**
 * The floor of GET /api/user/:id with the service's token check: Fastify 5, @fastify/jwt
 * verifying the bearer token (HS256 with SECRET, the algorithm pinned), the owner check
 * (`sub` is the id asked for), one prepared `pg` read and a response schema; nothing else (no
 * session lookup, hooks, logs or headers). What the service does beyond this is its own
 * cost: the target is 85% of this floor's req/s (bench/README.md, "Node and the start command").
 */
import fastifyJwt from '@fastify/jwt'
import Fastify from 'fastify'
import pg from 'pg'

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.DB_POOL_SIZE ?? 10) })
const USER = 'SELECT id, username, email, names, created_at AS "createdAt", updated_at AS "updatedAt" FROM users WHERE id = $1'

const app = Fastify({ logger: false })
await app.register(fastifyJwt, { secret: process.env.SECRET!, verify: { algorithms: ['HS256'] } })
app.get('/health/live', async () => ({ status: 'ok' }))
app.get<{ Params: { id: number } }>('/api/user/:id', {
  onRequest: async (request) => { await request.jwtVerify() },
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
  if ((request.user as { sub?: string }).sub !== String(request.params.id)) return await reply.code(403).send()
  const { rows } = await pool.query({ name: 'floor-user', text: USER, values: [request.params.id] })
  if (rows.length === 0) return await reply.code(404).send()
  return rows[0]
})
await app.listen({ port: Number(process.env.PORT ?? 0), host: process.env.HOST ?? '127.0.0.1' })
process.once('SIGTERM', () => { app.close().then(async () => { await pool.end() }).then(() => process.exit(0), () => process.exit(1)) })
