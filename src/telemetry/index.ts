/**
 * Traces, opt-in: `startTracing(config.telemetry)` returns undefined when OTEL_EXPORTER_OTLP_ENDPOINT
 * is unset, and no OpenTelemetry module is loaded at all (this file imports none; the SDK
 * is behind a dynamic import). Set, it starts the SDK (./otel.ts) and returns what the app
 * needs: the Fastify plugin to register first, the log mixin and a flush for shutdown.
 *
 * Call it before anything imports `pg` (src/server.ts imports the app afterwards): the pg
 * instrumentation patches the module when it is first required.
 */
import type { FastifyPluginCallback } from 'fastify'
import type { TelemetrySettings } from '../config.js'

export interface Tracing {
  /** @fastify/otel's plugin: one SERVER span per request, parented on an incoming `traceparent`. */
  plugin: FastifyPluginCallback
  /** pino `mixin`: `trace_id`, `span_id` and `trace_flags` of the active span, if any. */
  logMixin: () => Record<string, string>
  /** Exports the spans still buffered and stops the SDK. */
  shutdown: () => Promise<void>
}

export async function startTracing (telemetry: TelemetrySettings): Promise<Tracing | undefined> {
  const endpoint = telemetry.endpoint
  if (endpoint === undefined || endpoint === '') return undefined
  const { startOtel } = await import('./otel.js')
  return startOtel({ ...telemetry, endpoint })
}
