/**
 * Traces (src/telemetry): the real server (`src/server.ts`, a child process) exports its
 * spans over OTLP/HTTP JSON to a small receiver in this test; a request carrying a W3C
 * `traceparent` gives a SERVER span of the route under that parent, pg spans under it, and
 * log lines with the same trace id. Without an endpoint no OpenTelemetry module loads.
 */
import { execFile } from 'node:child_process'
import { once } from 'node:events'
import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import t from 'tap'
import { loadConfig } from '../../src/config.js'
import { parseHeaders } from '../../src/telemetry/otel.js'
import { createTestDatabase } from '../helpers/database.js'
import { newUser } from '../helpers/build.js'
import { spawnServer } from '../faults/helpers/server.js'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..')

interface OtlpAttribute { key: string, value: { stringValue?: string, intValue?: number | string } }
interface OtlpSpan {
  traceId: string
  spanId: string
  parentSpanId?: string
  name: string
  kind: number
  attributes: OtlpAttribute[]
}
interface Export { headers: IncomingMessage['headers'], spans: OtlpSpan[], service?: string }

const SPAN_KIND_SERVER = 2
const SPAN_KIND_CLIENT = 3

function attribute (span: OtlpSpan, key: string): string | undefined {
  const value = span.attributes.find((a) => a.key === key)?.value
  return value === undefined ? undefined : String(value.stringValue ?? value.intValue)
}

/** An OTLP/HTTP receiver: accepts `POST /v1/traces` with JSON bodies and keeps the spans. */
async function otlpReceiver (t: { teardown: (fn: () => unknown) => void }): Promise<{ url: string, exports: Export[], paths: string[] }> {
  const exports: Export[] = []
  const paths: string[] = []
  const server = createServer((request, response) => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      paths.push(`${request.method ?? ''} ${request.url ?? ''} ${request.headers['content-type'] ?? ''}`)
      const body = JSON.parse(Buffer.concat(chunks).toString()) as { resourceSpans: Array<{ resource: { attributes: OtlpAttribute[] }, scopeSpans: Array<{ spans: OtlpSpan[] }> }> }
      for (const resourceSpans of body.resourceSpans) {
        const service = resourceSpans.resource.attributes.find((a) => a.key === 'service.name')?.value.stringValue
        exports.push({ headers: request.headers, service, spans: resourceSpans.scopeSpans.flatMap((s) => s.spans) })
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => new Promise((resolve) => server.close(resolve)))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, exports, paths }
}

t.test('a request with a traceparent: server span of the route, pg spans under it, logs with its trace id', async (t) => {
  const receiver = await otlpReceiver(t)
  const server = await spawnServer(t, {
    DATABASE_URL: await createTestDatabase(t),
    OTEL_EXPORTER_OTLP_ENDPOINT: `${receiver.url}/`,
    OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer collector-token,x-tenant=ops%20team',
    OTEL_SERVICE_NAME: 'ups-under-test',
    // This test plays the proxy in front (its X-Request-Id is kept).
    TRUST_PROXY: 'loopback'
  })

  const body = newUser()
  const created = await fetch(`${server.url}/api/user`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
  t.equal(created.status, 201)
  const { id } = await created.json() as { id: number }
  const login = await fetch(`${server.url}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: body.username, password: body.password }) })
  const { token } = await login.json() as { token: string }

  const traceId = '4bf92f3577b34da6a3ce929d0e0e4736'
  const parentId = '00f067aa0ba902b7'
  const read = await fetch(`${server.url}/api/user/${id}`, {
    headers: { authorization: `Bearer ${token}`, traceparent: `00-${traceId}-${parentId}-01`, 'x-request-id': 'edge-7f3a9c' }
  })
  t.equal(read.status, 200)
  // A valid X-Request-Id from a trusted proxy is the request id (src/lib/request-id.ts): in the answer,
  // the log lines and the server span, beside the trace id.
  const requestId = read.headers.get('x-request-id')
  t.equal(requestId, 'edge-7f3a9c', 'the incoming X-Request-Id is kept')
  // A request without traceparent starts a trace of its own.
  t.equal((await fetch(`${server.url}/api/product`)).status, 200)
  // Probes are not traced.
  t.equal((await fetch(`${server.url}/health/live`)).status, 200)

  // SIGTERM: the server exports what it still buffers before it exits.
  server.child.kill('SIGTERM')
  t.equal((await server.exited).code, 0, 'clean exit')

  t.ok(receiver.paths.length > 0 && receiver.paths.every((p) => p === 'POST /v1/traces application/json'), `OTLP/HTTP JSON to /v1/traces: ${receiver.paths.join('; ')}`)
  t.ok(receiver.exports.every((e) => e.headers.authorization === 'Bearer collector-token' && e.headers['x-tenant'] === 'ops team'), 'OTEL_EXPORTER_OTLP_HEADERS sent')
  t.ok(receiver.exports.every((e) => e.service === 'ups-under-test'), 'service.name')
  const spans = receiver.exports.flatMap((e) => e.spans)

  const serverSpans = spans.filter((s) => s.kind === SPAN_KIND_SERVER)
  const span = serverSpans.find((s) => s.traceId === traceId)
  if (span === undefined) throw new Error(`no server span in trace ${traceId}: ${JSON.stringify(serverSpans.map((s) => [s.name, s.traceId]))}`)
  t.equal(span.parentSpanId, parentId, 'the incoming traceparent is the server span\'s parent')
  t.equal(span.name, 'GET /api/user/:id')
  t.equal(attribute(span, 'http.route'), '/api/user/:id')
  t.equal(attribute(span, 'http.request.method'), 'GET')
  t.equal(attribute(span, 'http.response.status_code'), '200')
  t.equal(attribute(span, 'http.request.id'), 'edge-7f3a9c')

  // Every span of the trace descends from the server span; the token check is a pg query.
  const trace = spans.filter((s) => s.traceId === traceId)
  const byId = new Map(trace.map((s) => [s.spanId, s]))
  const descends = (s: OtlpSpan): boolean => {
    for (let at: OtlpSpan | undefined = s; at !== undefined; at = at.parentSpanId ? byId.get(at.parentSpanId) : undefined) {
      if (at === span) return true
    }
    return false
  }
  const queries = trace.filter((s) => s.kind === SPAN_KIND_CLIENT && attribute(s, 'db.system.name') === 'postgresql')
  t.ok(queries.length >= 1, `pg spans in the trace: ${trace.map((s) => s.name).join(', ')}`)
  t.ok(queries.every(descends), 'every pg span is under the server span')
  t.ok(queries.some((s) => attribute(s, 'db.postgresql.plan') === 'token-user-session' && /FROM users u JOIN sessions s .* WHERE u\.id = \$1/s.test(attribute(s, 'db.query.text') ?? '')), 'the token\'s user read (a prepared statement) is one of them')
  t.ok(trace.every(descends), 'nothing else in the trace hangs elsewhere')

  const others = serverSpans.filter((s) => s.traceId !== traceId)
  const list = others.find((s) => s.name === 'GET /api/product')
  t.ok(list && list.parentSpanId === undefined, 'a request without traceparent is a root span')
  // The page's statement (src/modules/products/repository.ts, through src/db/sql.ts) is a pg span of that trace.
  t.ok(spans.some((s) => s.traceId === list?.traceId && attribute(s, 'db.system.name') === 'postgresql' && /\bFROM products\b/.test(attribute(s, 'db.query.text') ?? '')), 'the page\'s query is a pg span')
  t.notOk(serverSpans.some((s) => s.name.includes('/health')), 'probes are not traced')

  // Logs: the lines of the traced request carry its trace id and a span id.
  const lines = server.logs.filter((l) => l.reqId === requestId)
  const completed = lines.find((l) => l.msg === 'request completed')
  t.ok(completed, 'the request\'s completion was logged')
  t.equal(completed?.trace_id, traceId, 'the log line\'s trace_id is the trace\'s')
  t.match(completed?.span_id, /^[0-9a-f]{16}$/)
  // Every traced request's completion line has a trace id; the probe's (not traced) none.
  const completions = server.logs.filter((l) => l.msg === 'request completed').map((l) => [(l.req as { url: string }).url, l.trace_id])
  t.same(completions.map(([url, id]) => [url, typeof id]), [['/api/user', 'string'], ['/api/auth/login', 'string'], [`/api/user/${id}`, 'string'], ['/api/product', 'string'], ['/health/live', 'undefined']])
  t.notOk(server.logs.some((l) => (l.msg ?? '').startsWith('listening on') && 'trace_id' in l), 'no trace id outside a request')
})

t.test('tracing off: no OpenTelemetry SDK, exporter or instrumentation module is loaded', async (t) => {
  const run = async (endpoint: string | undefined): Promise<{ status: number, tracing: boolean, loaded: string[] }> => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'test/operations/fixtures/loaded-modules.ts'], {
      cwd: root,
      env: { PATH: process.env.PATH ?? '', ...(endpoint ? { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint } : {}) }
    })
    const result = JSON.parse(stdout.trim().split('\n').at(-1)!) as { status: number, tracing: boolean, esm: string[], cjs: string[] }
    // @opentelemetry/api alone is prom-client's dependency (a no-op API without an SDK).
    const telemetry = /node_modules\/(@fastify\/otel|@opentelemetry\/(?!api\/)|import-in-the-middle|require-in-the-middle)/
    return { status: result.status, tracing: result.tracing, loaded: [...result.esm, ...result.cjs].filter((m) => telemetry.test(m)) }
  }
  const off = await run(undefined)
  t.equal(off.status, 400, 'the app served a request')
  t.equal(off.tracing, false)
  t.same(off.loaded, [], 'nothing of OpenTelemetry but the API prom-client loads')
  // The same check sees the SDK when tracing is on (so it can fail).
  const on = await run('http://127.0.0.1:9')
  t.equal(on.tracing, true)
  for (const name of ['@fastify/otel', '@opentelemetry/sdk-trace-node', '@opentelemetry/exporter-trace-otlp-http', '@opentelemetry/instrumentation-pg']) {
    t.ok(on.loaded.some((m) => m.includes(`node_modules/${name}/`)), `${name} loaded with tracing on`)
  }
})

t.test('configuration: the endpoint, headers and sampling ratio are validated', async (t) => {
  const base = { NODE_ENV: 'test', SECRET: 'x'.repeat(40) }
  const config = loadConfig(base, false)
  t.equal(config.telemetry.endpoint, undefined, 'off by default')
  t.equal(config.telemetry.sampleRatio, 1)
  t.equal(config.telemetry.serviceName, 'user-product-service')
  t.equal(loadConfig({ ...base, OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }, false).telemetry.endpoint, 'http://collector:4318')
  t.equal(loadConfig({ ...base, OTEL_EXPORTER_OTLP_ENDPOINT: '' }, false).telemetry.endpoint, undefined, 'empty is unset')
  t.throws(() => loadConfig({ ...base, OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, false), /OTEL_EXPORTER_OTLP_ENDPOINT/)
  t.throws(() => loadConfig({ ...base, OTEL_EXPORTER_OTLP_ENDPOINT: 'grpc://collector:4317' }, false), /OTEL_EXPORTER_OTLP_ENDPOINT/)
  t.throws(() => loadConfig({ ...base, OTEL_TRACES_SAMPLER_ARG: '1.5' }, false), /OTEL_TRACES_SAMPLER_ARG/)
  t.throws(() => loadConfig({ ...base, OTEL_TRACES_SAMPLER_ARG: 'half' }, false), /OTEL_TRACES_SAMPLER_ARG/)
  t.throws(() => loadConfig({ ...base, OTEL_EXPORTER_OTLP_HEADERS: 'no-equals-sign' }, false), /OTEL_EXPORTER_OTLP_HEADERS/)
  t.equal(loadConfig({ ...base, OTEL_TRACES_SAMPLER_ARG: '0.25' }, false).telemetry.sampleRatio, 0.25)
  t.same(parseHeaders('a=1, b = two%20words ,c=x=y'), { a: '1', b: 'two words', c: 'x=y' })
})
