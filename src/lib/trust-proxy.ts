/**
 * TRUST_PROXY: whose `X-Forwarded-For` / `-Proto` / `-Host` the service believes (Fastify's
 * `trustProxy`, proxy-addr underneath). Behind a proxy, the per-client limits count the
 * client's address only when the proxy is trusted; trusting more than the proxy lets any
 * client that reaches the service choose its own address. So: `false`, `true` (every peer:
 * only where nothing but the proxy can connect), or exactly the proxy's addresses.
 */
import { isIP } from 'node:net'

/** proxy-addr's named ranges. */
const NAMED = new Set(['loopback', 'linklocal', 'uniquelocal'])

function validEntry (entry: string): boolean {
  if (NAMED.has(entry)) return true
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
