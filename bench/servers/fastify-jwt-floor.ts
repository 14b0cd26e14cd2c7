/**
 * The floor of GET /api/user/:id with the service's token check: Fastify 5, @fastify/jwt
 * verifying the bearer token (HS256 with SECRET, the algorithm pinned), the owner check
 * (`sub` is the id asked for), one prepared `pg` read and a response schema; nothing else (no
 * session lookup, hooks, logs or headers). What the service does beyond this is its own
 * cost: the target is 85% of this floor's req/s (bench/README.md, "Node and the start command").
 *
 * FLOOR_ADD (comma-separated) adds, one by one, what the service must do on every request, each
 * written the plainest way, so that each guarantee's own price can be read off in one run
 * (`AB_TREES='jwt-floor,jwt-floor#session' AB_ENV_jwt_floor_session=FLOOR_ADD=session`):
 * - `session`: the read is the service's: the user joined to the token's live session (`sid`)
 *   and the token version compared (what makes a logout or a password change end a token);
 * - `headers`: helmet's headers (built once, as src/plugins/security-headers.ts does), a
 *   request id and `cache-control: no-store`;
 * - `log`: one pino line per answered request with the request, status and time, redacted as
 *   the service redacts.
 */
import { randomUUID } from 'node:crypto'
import fastifyJwt from '@fastify/jwt'
import Fastify from 'fastify'
import helmet from 'helmet'
import pg from 'pg'

const ADD = new Set((process.env.FLOOR_ADD ?? '').split(',').filter((s) => s !== ''))
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.DB_POOL_SIZE ?? 10) })
const COLUMNS = 'u.id, u.username, u.email, u.names, u.created_at AS "createdAt", u.updated_at AS "updatedAt"'
const USER = `SELECT ${COLUMNS} FROM users u WHERE u.id = $1`
const SESSION_USER = `SELECT ${COLUMNS}, u.token_version AS "tokenVersion" FROM users u JOIN sessions s ON s.user_id = u.id
  WHERE u.id = $1 AND s.id = $2 AND s.revoked_at IS NULL`

const app = Fastify({
  logger: ADD.has('log') ? { level: 'info', redact: { paths: ['req.headers.authorization', 'req.headers.cookie', 'password', '*.password'], censor: '[redacted]' } } : false,
  disableRequestLogging: true,
  ...(ADD.has('headers') ? { genReqId: () => randomUUID() } : {})
})
await app.register(fastifyJwt, { secret: process.env.SECRET!, verify: { algorithms: ['HS256'] } })
if (ADD.has('headers')) {
  const headers = helmet({ referrerPolicy: { policy: 'strict-origin-when-cross-origin' }, strictTransportSecurity: false })
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id).header('cache-control', 'no-store')
    headers(request.raw, reply.raw, (error?: unknown) => { done(error as Error | undefined) })
  })
}
if (ADD.has('log')) {
  app.addHook('onResponse', (request, reply, done) => {
    reply.log.info({ req: request, res: reply, responseTime: reply.elapsedTime }, 'request completed')
    done()
  })
}
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
  const claims = request.user as { sub?: string, sid?: string, ver?: number }
  if (claims.sub !== String(request.params.id)) return await reply.code(403).send()
  const { rows } = ADD.has('session')
    ? await pool.query({ name: 'floor-session-user', text: SESSION_USER, values: [request.params.id, claims.sid] })
    : await pool.query({ name: 'floor-user', text: USER, values: [request.params.id] })
  if (rows.length === 0 || (ADD.has('session') && rows[0].tokenVersion !== claims.ver)) return await reply.code(401).send()
  return rows[0]
})
await app.listen({ port: Number(process.env.PORT ?? 0), host: process.env.HOST ?? '127.0.0.1' })
process.once('SIGTERM', () => { app.close().then(async () => { await pool.end() }).then(() => process.exit(0), () => process.exit(1)) })
