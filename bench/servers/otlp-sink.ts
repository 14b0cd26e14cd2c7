/**
 * An OTLP/HTTP receiver that keeps nothing: it accepts `POST /v1/traces` (JSON), counts the
 * spans, answers 200 `{}`, and prints the count every 5 s. The other end of the service's
 * exporter when the bench measures the cost of tracing (bench/README.md, "Tracing on").
 *
 *   npx tsx bench/servers/otlp-sink.ts 4318
 *   OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 ...   the service, exporting to it
 */
import http from 'node:http'

const port = Number(process.argv[2] ?? 4318)
let spans = 0
let batches = 0

interface Export { resourceSpans?: Array<{ scopeSpans?: Array<{ spans?: unknown[] }> }> }

http.createServer((request, response) => {
  const chunks: Buffer[] = []
  request.on('data', (chunk: Buffer) => chunks.push(chunk))
  request.on('end', () => {
    try {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Export
      for (const resource of body.resourceSpans ?? []) for (const scope of resource.scopeSpans ?? []) spans += scope.spans?.length ?? 0
      batches += 1
    } catch { /* not JSON: still accepted, not counted */ }
    response.writeHead(200, { 'content-type': 'application/json' }).end('{}')
  })
}).listen(port, '127.0.0.1', () => { console.log(`otlp-sink on http://127.0.0.1:${port}`) })

setInterval(() => { console.log(`otlp-sink: ${spans} spans in ${batches} batches`) }, 5000).unref()
