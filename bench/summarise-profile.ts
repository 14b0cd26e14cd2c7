/**
 * Summarises a V8 .cpuprofile (from `node --cpu-prof`): self time by package and by
 * component (Prisma, JWT, logging, ...), and the functions with the most self time.
 *
 *   npx tsx bench/summarise-profile.ts bench/results/get-user.cpuprofile [top] [fromUs,toUs]
 */
import { readFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

interface ProfileNode {
  id: number
  callFrame: { functionName: string, url: string, lineNumber: number }
  children?: number[]
}

interface CpuProfile {
  nodes: ProfileNode[]
  samples: number[]
  timeDeltas: number[]
  startTime: number
  endTime: number
}

export interface Share { name: string, ms: number, share: number }

export interface ProfileSummary {
  /** Wall time the profile covers, and the part the process was busy (not idle). */
  wallMs: number
  busyMs: number
  byPackage: Share[]
  byComponent: Share[]
  topFunctions: (Share & { package: string })[]
}

/** The package a script belongs to: the last `node_modules/<name>` of its path, or a label. */
export function packageOf (url: string, functionName: string): string {
  if (url === '') {
    // V8's pseudo-frames: (program) is native code outside JS (libuv, syscalls, the
    // HTTP parser...), (garbage collector), (idle), (root).
    // Frames without a script are V8 builtins and C++ bindings called from JS: socket
    // and file writes (writev, writeString), the microtask queue, hashing.
    return functionName.startsWith('(') ? functionName : '(native)'
  }
  if (url.startsWith('node:')) return 'node core'
  if (url.startsWith('wasm://')) return 'wasm'
  const file = url.startsWith('file://') ? fileURLToPath(url) : url
  const parts = file.split(path.sep)
  const at = parts.lastIndexOf('node_modules')
  if (at !== -1) {
    const first = parts[at + 1] ?? ''
    return first.startsWith('@') ? `${first}/${parts[at + 2] ?? ''}` : first
  }
  const src = parts.lastIndexOf('src')
  if (src !== -1 && parts[src + 1] === 'generated') return 'src/generated (Prisma client)'
  if (src !== -1) return `src/${parts[src + 1] ?? ''}`
  return 'other'
}

/** Packages grouped by what they do for the request. */
const COMPONENTS: [RegExp, string][] = [
  [/^(@prisma\/|prisma$|src\/generated|wasm$)/, 'Prisma (client runtime, query compiler, adapter)'],
  [/^(pg|pg-.*|pgpass|postgres-.*|buffer-writer|packet-reader)$/, 'pg driver'],
  [/^(@fastify\/jwt|fast-jwt|asn1\.js|ecdsa-sig-formatter|mnemonist|@lukeed\/ms)$/, 'JWT (@fastify/jwt, fast-jwt)'],
  [/^(pino|pino-std-serializers|sonic-boom|fast-redact|@pinojs\/redact|thread-stream|quick-format-unescaped|safe-stable-stringify|on-exit-leak-free|atomic-sleep|real-require)$/, 'logging (pino, redaction)'],
  [/^(@fastify\/helmet|helmet)$/, 'helmet'],
  [/^(@fastify\/rate-limit|toad-cache)$/, 'rate limit'],
  [/^(ajv|ajv-formats|fast-uri|@fastify\/ajv-compiler|fast-deep-equal)$/, 'validation (ajv)'],
  [/^(fast-json-stringify|@fastify\/fast-json-stringify-compiler|json-schema-ref-resolver)$/, 'serialization (fast-json-stringify)'],
  [/^(fastify|find-my-way|avvio|light-my-request|@fastify\/error|abstract-logging|rfdc|process-warning|fast-querystring|secure-json-parse|@fastify\/proxy-addr|proxy-addr|forwarded|ipaddr\.js|toad-cache|semver)$/, 'Fastify core and router'],
  [/^node core$/, 'Node core (http, net, streams, crypto)'],
  [/^src\//, 'our code (src)'],
  [/^\(native\)$/, 'native code called from JS (socket and file writes, microtasks)'],
  [/^\(program\)$/, 'native, outside JS (libuv, HTTP parser)'],
  [/^\(garbage collector\)$/, 'garbage collector']
]

function componentOf (pkg: string): string {
  for (const [pattern, name] of COMPONENTS) if (pattern.test(pkg)) return name
  return `other: ${pkg}`
}

function ranked (totals: Map<string, number>, busyMs: number): Share[] {
  return [...totals].map(([name, ms]) => ({ name, ms, share: ms / busyMs })).sort((a, b) => b.ms - a.ms)
}

/**
 * @param window only samples taken in this interval count, in µs of CLOCK_MONOTONIC (the
 *   clock of the profile's timestamps, and of `process.hrtime` in any process): the
 *   bench passes the load period, which leaves out start-up and shutdown.
 */
export function summarise (profile: CpuProfile, top = 25, window?: { fromUs: number, toUs: number }): ProfileSummary {
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]))
  const selfMs = new Map<number, number>()
  // timeDeltas[i] is the time before samples[i]; attribute it to that sample's node.
  let at = profile.startTime
  for (let i = 0; i < profile.samples.length; i++) {
    const delta = profile.timeDeltas[i] ?? 0
    at += delta
    if (window !== undefined && (at < window.fromUs || at > window.toUs)) continue
    const id = profile.samples[i]!
    selfMs.set(id, (selfMs.get(id) ?? 0) + delta / 1000)
  }
  const byPackage = new Map<string, number>()
  const byComponent = new Map<string, number>()
  const byFunction = new Map<string, { ms: number, package: string }>()
  let idleMs = 0
  let wallMs = 0
  for (const [id, ms] of selfMs) {
    wallMs += ms
    const frame = nodes.get(id)!.callFrame
    const pkg = packageOf(frame.url, frame.functionName)
    if (pkg === '(idle)' || pkg === '(root)') { idleMs += ms; continue }
    byPackage.set(pkg, (byPackage.get(pkg) ?? 0) + ms)
    const component = componentOf(pkg)
    byComponent.set(component, (byComponent.get(component) ?? 0) + ms)
    const where = frame.url === '' ? '' : ` ${path.basename(frame.url)}:${frame.lineNumber + 1}`
    const key = `${frame.functionName || '(anonymous)'}${where}`
    const entry = byFunction.get(key) ?? { ms: 0, package: pkg }
    entry.ms += ms
    byFunction.set(key, entry)
  }
  const busyMs = wallMs - idleMs
  return {
    wallMs,
    busyMs,
    byPackage: ranked(byPackage, busyMs),
    byComponent: ranked(byComponent, busyMs),
    topFunctions: [...byFunction]
      .map(([name, { ms, package: pkg }]) => ({ name, package: pkg, ms, share: ms / busyMs }))
      .sort((a, b) => b.ms - a.ms)
      .slice(0, top)
  }
}

export function readProfile (file: string): CpuProfile {
  return JSON.parse(readFileSync(file, 'utf8')) as CpuProfile
}

function pct (share: number): string {
  return `${(share * 100).toFixed(1)}%`
}

export function formatSummary (summary: ProfileSummary, packages = 15): string {
  const lines = [
    `profile: ${(summary.wallMs / 1000).toFixed(1)} s, busy ${(summary.busyMs / 1000).toFixed(1)} s (${pct(summary.busyMs / summary.wallMs)}); shares are of busy time`,
    '',
    'self time by component:',
    ...summary.byComponent.map((s) => `  ${pct(s.share).padStart(6)}  ${s.name}`),
    '',
    'self time by package:',
    ...summary.byPackage.slice(0, packages).map((s) => `  ${pct(s.share).padStart(6)}  ${s.name}`),
    '',
    'functions with the most self time:',
    ...summary.topFunctions.map((s) => `  ${pct(s.share).padStart(6)}  ${s.name}  [${s.package}]`)
  ]
  return lines.join('\n')
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const file = process.argv[2]
  if (file === undefined) {
    console.error('usage: npx tsx bench/summarise-profile.ts <file.cpuprofile> [top]')
    process.exit(2)
  }
  // Optional window in µs of CLOCK_MONOTONIC: from,to
  const [fromUs, toUs] = (process.argv[4] ?? '').split(',').map(Number)
  const window = fromUs && toUs ? { fromUs, toUs } : undefined
  console.log(formatSummary(summarise(readProfile(file), Number(process.argv[3] ?? 25), window)))
}
