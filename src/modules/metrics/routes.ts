/**
 * `GET /metrics`: the Prometheus text format of src/plugins/metrics.ts, behind the admin
 * key (ADMIN_API_KEYS, `Authorization: Bearer <key>`, as /api/admin, sharing its per-client
 * budget of wrong keys): not public.
 * Never shed, never rate-limited, and left out of the OpenAPI document.
 */
import type { FastifyPluginAsync } from 'fastify'
import keyAuth from '@user-product-service/key-auth'
import { adminKeyAuthOptions, type KeyFailureLimit } from '../admin/index.js'

export interface MetricsRoutesOptions {
  /** ADMIN_API_KEYS: comma-separated keys; empty refuses every request. */
  adminApiKeys: string
  /** Wrong keys per client: pass the admin routes' limit (its store too), so both share one budget. */
  keyFailures: KeyFailureLimit
}

export const metricsRoutes: FastifyPluginAsync<MetricsRoutesOptions> = async (app, options) => {
  await app.register(keyAuth, adminKeyAuthOptions(options.adminApiKeys, options.keyFailures))
  const { registry } = app.metrics

  app.get('/metrics', {
    config: { rateLimit: false, loadShedding: false },
    schema: { hide: true }
  }, async (_request, reply) => {
    const text = await registry.metrics()
    return reply.type(registry.contentType).send(text)
  })
}
