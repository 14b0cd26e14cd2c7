/**
 * Which forwarded headers to believe, by Fastify's own `trustProxy` setting (one source of
 * truth: the context plugin has no trust option of its own).
 *
 * Fastify keeps its trust function private, but with `trustProxy` set it defines
 * `request.ips` as `proxyAddr.all(this.raw, trust)`: the socket address, then the
 * X-Forwarded-For addresses right to left, cut after the first address the function refuses.
 * Calling that getter on a synthetic request whose chain ends in a sentinel address tests
 * every address of a chain with Fastify's function, hop numbers included.
 *
 * Each trusted proxy appends its view to X-Forwarded-Host / -Proto / -For (the nearest proxy's
 * entry is the last). The client-facing value is the entry written by the outermost trusted
 * proxy: the first entry when the whole chain is trusted (`trustProxy: true`), the last when only
 * the socket's peer is. Without `trustProxy`, or from an untrusted peer, no forwarded header counts.
 */
import type { FastifyRequest } from 'fastify'

type IpsGetter = (this: { raw: unknown }) => string[]

// Two sentinels: proxyAddr.all never tests the last address, and a trust function that also
// accepts the first sentinel accepts any address (the whole chain is trusted).
const SENTINELS = ['0.0.0.0', '0.0.0.0']

function ipsGetterOf (request: FastifyRequest): IpsGetter | undefined {
  for (let proto: object | null = Object.getPrototypeOf(request); proto !== null; proto = Object.getPrototypeOf(proto)) {
    const descriptor = Object.getOwnPropertyDescriptor(proto, 'ips')
    if (descriptor !== undefined) return descriptor.get as IpsGetter | undefined
  }
  return undefined
}

/**
 * How many leading addresses of `chain` (socket first, then X-Forwarded-For right to left)
 * Fastify trusts; more than `chain.length` when its function trusts any address.
 */
function trustedCount (request: FastifyRequest, chain: readonly string[]): number {
  const getter = ipsGetterOf(request)
  if (getter === undefined || chain.length === 0) return 0
  const forwardedFor = [...SENTINELS, ...chain.slice(1).reverse()].join(', ')
  const raw = { socket: { remoteAddress: chain[0] }, headers: { 'x-forwarded-for': forwardedFor } }
  return getter.call({ raw }).length - 1
}

/** The request's address chain: the socket's peer, then X-Forwarded-For from right to left. */
function addressChain (request: FastifyRequest): string[] {
  const header = request.headers['x-forwarded-for']
  const text = Array.isArray(header) ? header.join(',') : header ?? ''
  const forwarded = text.split(',').map((entry) => entry.trim()).filter((entry) => entry !== '')
  return [request.raw.socket?.remoteAddress ?? '', ...forwarded.reverse()]
}

/**
 * How many proxies in front of this server are trusted: 0 when the socket's peer is not
 * (or trustProxy is unset), Infinity when the whole chain is.
 */
export function trustedHops (request: FastifyRequest): number {
  const chain = addressChain(request)
  if (chain[0] === '') return 0
  const count = trustedCount(request, chain)
  return count > chain.length ? Number.POSITIVE_INFINITY : count
}

/**
 * The client-facing entry of a forwarded header (comma-separated, one entry per proxy), or
 * undefined when the header is absent or not from a trusted proxy.
 */
export function forwardedEntry (request: FastifyRequest, name: string): string | undefined {
  const header = request.headers[name]
  if (header === undefined) return undefined
  const entries = (Array.isArray(header) ? header.join(',') : header).split(',').map((entry) => entry.trim()).filter((entry) => entry !== '')
  if (entries.length === 0) return undefined
  const hops = trustedHops(request)
  if (hops === 0) return undefined
  return entries[Math.max(0, entries.length - hops)]
}
