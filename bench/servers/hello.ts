/** The ceiling: bare Fastify (no logger, no plugins) answering `{"hello":"world"}`. */
import Fastify from 'fastify'

const app = Fastify()
app.get('/', async () => ({ hello: 'world' }))
await app.listen({ host: process.env.HOST ?? '127.0.0.1', port: Number(process.env.PORT ?? 0) })
process.once('SIGTERM', () => { app.close().then(() => process.exit(0), () => process.exit(1)) })
