/**
 * The floor of GET /api/user/:id: what the read costs with nothing around it. node:http, no
 * framework, no token check, no logging: the id from the path, one prepared `pg` query for
 * the user's public columns on a pool as large as the service's (DB_POOL_SIZE, default 10),
 * the row as JSON. The service's share of a request is whatever it spends beyond this.
 */
import { createServer } from 'node:http'
import pg from 'pg'

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.DB_POOL_SIZE ?? 10) })
const USER = 'SELECT id, username, email, names, created_at AS "createdAt", updated_at AS "updatedAt" FROM users WHERE id = $1'
const PATH = /^\/api\/user\/(\d+)$/

const server = createServer((request, response) => {
  if (request.url === '/health/live') { response.end('{"status":"ok"}'); return }
  const id = PATH.exec(request.url ?? '')?.[1]
  if (id === undefined) { response.writeHead(404).end(); return }
  pool.query({ name: 'floor-user', text: USER, values: [Number(id)] }).then(({ rows }) => {
    if (rows.length === 0) { response.writeHead(404).end(); return }
    const body = JSON.stringify(rows[0])
    response.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) }).end(body)
  }, (error: Error) => { response.writeHead(500).end(error.message) })
})
server.listen(Number(process.env.PORT ?? 0), process.env.HOST ?? '127.0.0.1')
process.once('SIGTERM', () => { server.close(); pool.end().then(() => process.exit(0), () => process.exit(1)) })
