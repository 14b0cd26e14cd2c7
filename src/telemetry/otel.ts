/**
 * The OpenTelemetry SDK, loaded only when tracing is on (./index.ts): a Node tracer
 * provider (AsyncLocalStorage context, W3C trace-context and baggage propagation),
 * parent-based ratio sampling, batched OTLP/HTTP JSON export, and two instrumentations:
 *
 * - @fastify/otel: a SERVER span per request, named `METHOD /route/pattern`, its parent
 *   taken from an incoming `traceparent`; a child span for the route handler. Lifecycle
 *   hook spans are off (a dozen per request with helmet, rate limits and auth; the pg spans
 *   already show where a hook's time goes). /health and /metrics are not traced.
 * - @opentelemetry/instrumentation-pg: a span per query (and pool connect) under the
 *   request's span. Prisma's pg driver adapter sends its queries through `pg`, so Prisma's
 *   queries are covered too; queries outside a request (migrations) are not recorded.
 */
import { createRequire } from 'node:module'
import { FastifyOtelInstrumentation } from '@fastify/otel'
import { context, trace, type Span } from '@opentelemetry/api'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { registerInstrumentations } from '@opentelemetry/instrumentation'
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg'
import { resourceFromAttributes } from '@opentelemetry/resources'
import { BatchSpanProcessor, NodeTracerProvider, ParentBasedSampler, TraceIdRatioBasedSampler } from '@opentelemetry/sdk-trace-node'
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions'
import type { FastifyRequest } from 'fastify'
import type { TelemetrySettings } from '../config.js'
import type { Tracing } from './index.js'

/** Routes left out of traces: probes and scrapes, many a minute, nothing to learn. */
function untraced (url: string): boolean {
  return url.startsWith('/health') || url === '/metrics' || url.startsWith('/metrics?')
}

/** `a=1, b = 2` -> { a: '1', b: '2' } (the format of OTEL_EXPORTER_OTLP_HEADERS). */
export function parseHeaders (text: string): Record<string, string> {
  const headers: Record<string, string> = {}
  for (const pair of text.split(',')) {
    const at = pair.indexOf('=')
    if (at <= 0) continue
    headers[pair.slice(0, at).trim()] = decodeURIComponent(pair.slice(at + 1).trim())
  }
  return headers
}

export function startOtel (telemetry: TelemetrySettings & { endpoint: string }): Tracing {
  const exporter = new OTLPTraceExporter({
    url: `${telemetry.endpoint.replace(/\/+$/, '')}/v1/traces`,
    headers: parseHeaders(telemetry.headers)
  })
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: telemetry.serviceName }),
    sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(telemetry.sampleRatio) }),
    spanProcessors: [new BatchSpanProcessor(exporter)]
  })
  // The global provider, AsyncLocalStorage context manager and W3C propagators.
  provider.register()

  const fastifyOtel = new FastifyOtelInstrumentation({
    instrumentHooks: false,
    ignorePaths: (route: { url?: string }) => untraced(route.url ?? ''),
    requestHook: (span: Span, request: FastifyRequest) => {
      span.updateName(`${request.method} ${request.routeOptions.url ?? ''}`.trimEnd())
      span.setAttribute('http.request.id', request.id)
    }
  })
  registerInstrumentations({
    tracerProvider: provider,
    instrumentations: [fastifyOtel, new PgInstrumentation({ requireParentSpan: true })]
  })
  // The instrumentations patch CommonJS modules as they are required (require-in-the-
  // middle). The service imports `pg` as ESM, which does not pass there; requiring it
  // here first patches the one module instance that the later ESM imports share
  // (pg's ESM entry re-exports its CommonJS build, and pg requires pg-pool).
  createRequire(import.meta.url)('pg')

  return {
    plugin: fastifyOtel.plugin(),
    logMixin: () => {
      const span = trace.getSpan(context.active())
      // A new object every time: pino assigns the log call's fields into it.
      if (span === undefined) return {} as Record<string, string>
      const { traceId, spanId, traceFlags } = span.spanContext()
      return { trace_id: traceId, span_id: spanId, trace_flags: `0${traceFlags.toString(16)}` }
    },
    shutdown: () => provider.shutdown()
  }
}
