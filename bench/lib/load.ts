/** One autocannon run, reduced to the figures the report shows. */
import autocannon from 'autocannon'

export interface LoadOptions {
  url: string
  connections: number
  seconds: number
  requests?: autocannon.Request[]
  headers?: Record<string, string>
}

export interface LoadFigures {
  /** Mean requests per second over the run (all answers, any status). */
  rps: number
  /** Latency in ms. */
  p50: number
  p99: number
  /** Socket errors and timeouts. */
  errors: number
  non2xx: number
  total: number
}

export async function load (options: LoadOptions): Promise<LoadFigures> {
  const result = await autocannon({
    url: options.url,
    connections: options.connections,
    duration: options.seconds,
    headers: options.headers,
    requests: options.requests
  })
  return {
    rps: result.requests.total / options.seconds,
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors, // timeouts included
    non2xx: result.non2xx,
    total: result.requests.total
  }
}

/**
 * Waits for the server to drain: when autocannon stops, requests it already sent (slow
 * logins in particular) are still being served, and would weigh on the next case.
 */
export async function settle (ms = 1500): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, ms))
}
