/**
 * TRUST_PROXY: whose `X-Forwarded-For` / `-Proto` / `-Host` the service believes (Fastify's
 * `trustProxy`, proxy-addr underneath). Behind a proxy, the per-client limits count the
 * client's address only when the proxy is trusted; trusting more than the proxy lets any
 * client that reaches the service choose its own address. So: `false`, `true` (every peer:
 * only where nothing but the proxy can connect), or exactly the proxy's addresses.
 */
import { BlockList, isIP } from 'node:net'

/** proxy-addr's named ranges, as it defines them. */
const NAMED: Record<string, string[]> = {
  loopback: ['127.0.0.1/8', '::1/128'],
  linklocal: ['169.254.0.0/16', 'fe80::/10'],
  uniquelocal: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7']
}

function validEntry (entry: string): boolean {
  if (Object.hasOwn(NAMED, entry)) return true
  const [address = '', prefix, extra] = entry.split('/')
  const family = isIP(address)
  if (family === 0 || extra !== undefined) return false
  if (prefix === undefined) return true
  if (!/^\d{1,3}$/.test(prefix)) return false
  return Number(prefix) <= (family === 4 ? 32 : 128)
}

/**
 * `false` and `true` as booleans; otherwise the comma-separated addresses, CIDR ranges or
 * proxy-addr names (`loopback`, `linklocal`, `uniquelocal`). Throws on anything else (a
 * hostname, a typo), naming the variable.
 */
export function parseTrustProxy (value: string): boolean | string[] {
  const text = value.trim()
  if (text === 'true') return true
  if (text === 'false') return false
  const entries = text.split(',').map((entry) => entry.trim())
  const wrong = entries.filter((entry) => !validEntry(entry))
  if (wrong.length > 0) {
    throw new Error(`TRUST_PROXY must be true, false, or comma-separated IP addresses / CIDR ranges (the proxy's), not ${wrong.map((w) => JSON.stringify(w)).join(', ')}`)
  }
  return entries
}

/**
 * Whether a socket's peer is a trusted proxy under `trust` (parseTrustProxy's value), by the
 * same rule as Fastify's `trustProxy` for the nearest hop. For what Fastify does not decide:
 * which incoming `X-Request-Id` to keep (src/lib/request-id.ts).
 */
export function trustedPeer (trust: boolean | string[]): (address: string | undefined) => boolean {
  if (typeof trust === 'boolean') return () => trust
  const list = new BlockList()
  for (const entry of trust.flatMap((e) => NAMED[e] ?? [e])) {
    const [address = '', prefix] = entry.split('/')
    const family = isIP(address) === 4 ? 'ipv4' : 'ipv6'
    if (prefix === undefined) list.addAddress(address, family)
    else list.addSubnet(address, Number(prefix), family)
  }
  return (address) => {
    const family = isIP(address ?? '')
    return family !== 0 && list.check(address as string, family === 4 ? 'ipv4' : 'ipv6')
  }
}

/** An IPv4 address written as IPv6 (`::ffff:10.0.0.1`, as a dual-stack socket reports it) as IPv4. */
function plainAddress (address: string): string {
  return address.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address
}

/**
 * The client's address of a raw request, as Fastify's `request.ip` reads it under the same
 * TRUST_PROXY (proxy-addr's rule): the peer, then each `X-Forwarded-For` hop from the right,
 * while the hop is trusted; the first untrusted one is the client (all trusted: the leftmost).
 * Admission (src/plugins/admission.ts) runs before Fastify builds its request, hence its own copy.
 */
export function clientAddressReader (trust: boolean | string[]): (peer: string | undefined, forwardedFor: string | string[] | undefined) => string {
  if (trust === false) return (peer) => plainAddress(peer ?? '')
  const trusted = trustedPeer(trust)
  return (peer, forwardedFor) => {
    let client = plainAddress(peer ?? '')
    if (forwardedFor === undefined || !trusted(client)) return client
    const hops = (Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor).split(',')
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = plainAddress(hops[i]!.trim())
      if (hop === '') continue
      client = hop
      if (!trusted(hop)) break
    }
    return client
  }
}
