/**
 * An open-loop HTTP/1.1 load generator that costs little CPU (bench/overload.ts).
 *
 * `rate` requests per second for `seconds`: request k is due at start + k / rate, whatever
 * happened to the earlier ones (an open loop, as independent clients arrive). A timer tick
 * every `tickMs` (1 ms) sends every request that has come due, catching up if the loop was
 * late. A request goes out on an idle keep-alive socket; with none idle it waits in a FIFO
 * queue on this side while a new connection opens, up to `maxSockets` (4000); at the cap it
 * waits for a socket to come free. One request in flight per socket (no pipelining).
 *
 * Requests are raw bytes the caller builds (`GET /api/user/7 HTTP/1.1\r\nHost: ...\r\n\r\n`),
 * used round-robin: no header objects, no node:http, no streams on the read side (`onread`
 * fills one shared buffer). The response parser (ResponseParser) reads the status line,
 * the head up to CRLFCRLF, and a body by Content-Length, chunked, or up to the close.
 *
 * Honest figures:
 * - a latency runs from the request's SCHEDULED time (not from when it was written) to the
 *   end of its response, so time spent waiting in this generator or for a socket counts
 *   (no coordinated omission);
 * - lag: when each request was written minus when it was due. Up to one tick of lag is the
 *   timer's granularity; more means the client side held it back: waiting for a connection
 *   to open (a burst of set-ups; see `preconnect`), the socket cap (`queuedAtCap`), or this
 *   generator's CPU (then `eventLoopUtilization` is near 1);
 * - `offeredPerSecond` divides the requests written by the longer of `seconds` and the time
 *   to the last write, so a generator that fell behind shows it;
 * - a timeout (`timeoutMs`, 10 s) also counts from the scheduled time: a request still in the
 *   queue then is dropped, one in flight has its socket destroyed; neither is retried, nor is
 *   a request whose socket closed or failed mid-response (`errors`).
 *
 * openLoop() runs the loop in a child process (`node --import tsx open-loop-child.ts`), so it
 * never shares an event loop with the bench script or a server under test; with `cpu` set
 * and /usr/bin/taskset present the child runs under `taskset -c <cpu>`. runOpenLoop() is the
 * same loop in the calling thread (for tests, or a process of your own).
 *
 * Cost (bench/lib/open-loop.check.ts, 2-vCPU VM): about 16 µs of CPU per request at 15,000/s
 * and 25-30 µs at 5,000/s, against 50-70 µs for node:http requests through an Agent. Most of
 * it is the kernel's: loopback TCP, and a wake-up of this process per answer, which answers
 * arriving together share at higher rates.
 */
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import { performance } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'

export interface OpenLoopOptions {
  /** http://host:port (the path is in the requests). */
  url: string
  /** Raw HTTP/1.1 requests, used round-robin. */
  requests: Buffer[]
  /** Requests per second. */
  rate: number
  seconds: number
  /** Open connections at most (4000). */
  maxSockets?: number
  /** Counted from the scheduled time (10,000 ms). */
  timeoutMs?: number
  /**
   * Connections opened before the schedule starts (0): about the concurrency expected, so
   * that the first moments do not measure a burst of connection set-ups (it shows as lag).
   */
  preconnect?: number
  /** Timer period in ms (1). */
  tickMs?: number
  /** openLoop() only: pin the generator's process to this CPU with taskset, if present. */
  cpu?: number
  /**
   * Local addresses the connections come from, in turn (loopback: any 127.x.y.z), so that the
   * load is several clients to per-address limits; the system's choice when absent.
   */
  localAddresses?: string[]
}

export interface OpenLoopResult {
  rate: number
  seconds: number
  /** Requests the schedule called for: round(rate * seconds). */
  scheduled: number
  /** Requests written to a socket. */
  sent: number
  /** sent / the longer of `seconds` and the time from the start to the last write. */
  offeredPerSecond: number
  /** Answers of any status. */
  answered: number
  /** answered / time from the first write to the last answer. */
  answeredPerSecond: number
  byStatus: Record<number, number>
  /** ms from the scheduled time, 2xx answers, sorted. */
  okLatencies: Float64Array
  /**
   * By second of the schedule (the second each request was due in): the 2xx answers and
   * their p99 latency (ms; NaN with none). Shows whether latency stays put or grows with the
   * length of the run, and the warm-up apart from the steady state.
   */
  okBySecond: Array<{ count: number, p99: number }>
  /** The slowest 2xx answers (at most 20): when each was due (ms into the run), and its latency. */
  okSlowest: Array<{ dueMs: number, ms: number }>
  /** ms from the scheduled time, 503 answers, sorted. */
  shedLatencies: Float64Array
  /** Answers neither 2xx nor 503. */
  otherStatus: number
  /** Sockets closed or failed mid-request, unparseable responses; not retried. */
  errors: number
  /** Requests unanswered `timeoutMs` after their scheduled time (queued ones included). */
  timeouts: number
  /** Of those, requests that timed out still waiting for a socket (never written). */
  queuedTimeouts: number
  /** Connections that failed before they connected (after the first one succeeded). */
  connectErrors: number
  connectionsOpened: number
  maxOpenSockets: number
  /** Most requests waiting for a socket at once (while connections open, or at the cap). */
  maxQueued: number
  /** Requests that came due with `maxSockets` sockets open and none idle. */
  queuedAtCap: number
  /** Written time minus scheduled time, ms. */
  lagP50Ms: number
  lagP99Ms: number
  lagMaxMs: number
  /** From the start of the schedule until the last request was answered or given up. */
  drainedSeconds: number
  /** CPU of the generator's process over the run (user + system), per request sent. */
  cpuMicrosPerRequest: number
  cpuUserMs: number
  cpuSystemMs: number
  /** The generator's event loop utilization over the run (0-1); near 1: it was saturated. */
  eventLoopUtilization: number
  /** The CPU the generator was pinned to, or null. */
  pinnedCpu: number | null
}

/** The q-quantile of sorted values (NaN if none). */
export function quantile (sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return Number.NaN
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
}

// ResponseParser.push results.
export const MORE = 0
export const DONE = 1
export const BAD = 2

// Parser states.
const HEAD = 0
const BODY = 1
const CHUNK_SIZE = 2
const CHUNK_DATA = 3
const TRAILERS = 4
const UNTIL_CLOSE = 5
const IDLE = 6

const CRLFCRLF = Buffer.from('\r\n\r\n')
/** A head or a chunk-size/trailer line longer than this is not an answer we expect. */
const MAX_HEAD = 64 * 1024

/** The value of a header in a lower-cased head (without its name), or undefined. */
function headerValue (head: string, name: string): string | undefined {
  const at = head.indexOf(name)
  if (at < 0) return undefined
  const end = head.indexOf('\r\n', at + name.length)
  return head.slice(at + name.length, end < 0 ? undefined : end)
}

/**
 * One HTTP/1.1 response, fed as it arrives in pieces. Bytes after the end of the response
 * are ignored (nothing is pipelined). Data passed to push() may be overwritten after it
 * returns: whatever the parser keeps, it copies.
 */
export class ResponseParser {
  status = 0
  /** False when the server will close (Connection: close, HTTP/1.0, body up to the close). */
  keepAlive = true
  private state = IDLE
  private remaining = 0
  private noBody = false
  private head: Buffer | null = null
  private line = ''

  /** Expects a new response; `headRequest`: the request was HEAD (a response without body). */
  reset (headRequest = false): void {
    this.status = 0
    this.keepAlive = true
    this.state = HEAD
    this.remaining = 0
    this.noBody = headRequest
    this.head = null
    this.line = ''
  }

  push (data: Buffer): number {
    const end = data.length
    let pos = 0
    while (pos < end) {
      switch (this.state) {
        case HEAD: {
          // Usually the whole head is in one read; otherwise keep a copy and search again.
          let buf = data
          let from = pos
          if (this.head !== null) {
            buf = Buffer.concat([this.head, data.subarray(pos)])
            from = 0
          }
          const at = buf.indexOf(CRLFCRLF, from)
          if (at < 0) {
            if (buf.length - from > MAX_HEAD) return BAD
            this.head = buf === data ? Buffer.from(data.subarray(pos)) : buf
            return MORE
          }
          pos = end - (buf.length - (at + 4))
          this.head = null
          // 'HTTP/1.x NNN ...'
          if (at - from < 12 || buf[from] !== 0x48 || buf[from + 4] !== 0x2f || buf[from + 8] !== 0x20) return BAD
          const d1 = buf[from + 9]! - 48
          const d2 = buf[from + 10]! - 48
          const d3 = buf[from + 11]! - 48
          if (d1 < 1 || d1 > 9 || d2 < 0 || d2 > 9 || d3 < 0 || d3 > 9) return BAD
          const status = d1 * 100 + d2 * 10 + d3
          if (status < 200 && status !== 101) break // an interim answer (100 Continue): the real head follows
          this.status = status
          const head = buf.toString('latin1', from, at).toLowerCase()
          const connection = headerValue(head, '\r\nconnection:')
          this.keepAlive = buf[from + 7] === 0x31 // HTTP/1.1
            ? connection === undefined || !connection.includes('close')
            : connection !== undefined && connection.includes('keep-alive')
          if (this.noBody || status === 204 || status === 304 || status === 101) {
            if (status === 101) this.keepAlive = false
            this.state = IDLE
            return DONE
          }
          const encoding = headerValue(head, '\r\ntransfer-encoding:')
          if (encoding !== undefined && encoding.includes('chunked')) {
            this.state = CHUNK_SIZE
            break
          }
          const length = headerValue(head, '\r\ncontent-length:')
          if (length !== undefined) {
            this.remaining = Number(length.trim())
            if (!Number.isSafeInteger(this.remaining) || this.remaining < 0) return BAD
            if (this.remaining === 0) { this.state = IDLE; return DONE }
            this.state = BODY
            break
          }
          this.state = UNTIL_CLOSE
          this.keepAlive = false
          return MORE
        }
        case BODY:
        case CHUNK_DATA: {
          const n = Math.min(this.remaining, end - pos)
          this.remaining -= n
          pos += n
          if (this.remaining === 0) {
            if (this.state === BODY) { this.state = IDLE; return DONE }
            this.state = CHUNK_SIZE
          }
          break
        }
        case CHUNK_SIZE:
        case TRAILERS: {
          const newline = data.indexOf(10, pos)
          if (newline < 0) {
            this.line += data.toString('latin1', pos, end)
            return this.line.length > MAX_HEAD ? BAD : MORE
          }
          const line = this.line + data.toString('latin1', pos, newline)
          this.line = ''
          pos = newline + 1
          if (this.state === TRAILERS) {
            // Trailer fields until an empty line.
            if (line === '' || line === '\r') { this.state = IDLE; return DONE }
            break
          }
          const size = parseInt(line, 16) // stops at ';extension' and '\r'
          if (!(size >= 0)) return BAD
          if (size === 0) this.state = TRAILERS
          else { this.remaining = size + 2; this.state = CHUNK_DATA } // data, then its CRLF
          break
        }
        case UNTIL_CLOSE:
          return MORE
        default:
          return MORE // not expecting an answer: ignore
      }
    }
    return MORE
  }

  /** The connection closed: true if that ends the response (a body up to the close). */
  close (): boolean {
    return this.state === UNTIL_CLOSE
  }
}

interface Connection {
  socket: net.Socket
  parser: ResponseParser
  /** The request in flight, or -1. */
  k: number
  connected: boolean
  /** Closed, or about to be: never reuse. */
  dead: boolean
  openedAt: number
}

/** Runs the open loop in this thread (see the file header); openLoop() runs it in a child process. */
export async function runOpenLoop (options: OpenLoopOptions): Promise<OpenLoopResult> {
  const { rate, seconds } = options
  const requests = options.requests.map((r) => Buffer.isBuffer(r) ? r : Buffer.from(r)) // Uint8Array after IPC
  const maxSockets = options.maxSockets ?? 4000
  const timeoutMs = options.timeoutMs ?? 10_000
  const tickMs = options.tickMs ?? 1
  if (!(rate > 0) || !(seconds > 0)) throw new Error('openLoop: rate and seconds must be positive')
  if (requests.length === 0) throw new Error('openLoop: no requests')
  if (!(maxSockets >= 1)) throw new Error('openLoop: maxSockets must be at least 1')
  const target = new URL(options.url)
  if (target.protocol !== 'http:') throw new Error('openLoop: http: only')
  const host = target.hostname.replace(/^\[|\]$/g, '')
  const port = Number(target.port || 80)
  const localAddresses = options.localAddresses ?? []
  let localTurn = 0

  const total = Math.round(rate * seconds)
  const interval = 1000 / rate
  const count = requests.length
  const headRequest = requests.map((r) => r.toString('latin1', 0, 5) === 'HEAD ')
  const okLatencies = new Float64Array(total)
  const okDueMs = new Float64Array(total)
  const shedLatencies = new Float64Array(total)
  const lags = new Float64Array(total)
  const statuses = new Uint32Array(1000)
  let okCount = 0
  let shedCount = 0
  let sent = 0
  let answered = 0
  let other = 0
  let errors = 0
  let timeouts = 0
  let queuedTimeouts = 0
  let connectErrors = 0
  // Requests [queueHead, scheduled) are due and wait for a socket, in order.
  let scheduled = 0
  let queueHead = 0
  let inFlight = 0
  let open = 0
  let connecting = 0
  let opened = 0
  let established = 0
  let maxOpen = 0
  let maxQueued = 0
  let queuedAtCap = 0
  let start = 0
  let lastWrite = 0
  let lastAnswer = 0
  let lastScan = 0
  let finished = false
  const idle: Connection[] = []
  const connections = new Set<Connection>()
  // All sockets read into this buffer: a read is parsed before the next one lands.
  const readBuffer = Buffer.allocUnsafe(64 * 1024)
  const scanMs = Math.max(tickMs, Math.min(50, timeoutMs / 4))

  let resolveRun!: () => void
  let rejectRun!: (error: Error) => void
  const done = new Promise<void>((resolve, reject) => { resolveRun = resolve; rejectRun = reject })
  let timer: NodeJS.Timeout | null = null
  let cpuAtStart = process.cpuUsage()
  let eluAtStart = performance.eventLoopUtilization()

  const send = (c: Connection, k: number): void => {
    const i = k % count
    c.k = k
    c.parser.reset(headRequest[i])
    inFlight += 1
    const now = performance.now()
    lags[sent++] = now - (start + k * interval)
    lastWrite = now
    c.socket.write(requests[i]!)
  }

  /** A connection with nothing in flight takes the oldest queued request, or waits. */
  const ready = (c: Connection): void => {
    if (queueHead < scheduled) send(c, queueHead++)
    else idle.push(c)
  }

  const answer = (c: Connection): void => {
    const now = performance.now()
    const status = c.parser.status
    const ms = now - (start + c.k * interval)
    statuses[status] = statuses[status]! + 1
    if (status >= 200 && status < 300) {
      okDueMs[okCount] = c.k * interval
      okLatencies[okCount++] = ms
    } else if (status === 503) shedLatencies[shedCount++] = ms
    else other += 1
    answered += 1
    lastAnswer = now
    inFlight -= 1
    c.k = -1
  }

  const fail = (c: Connection): void => {
    errors += 1
    inFlight -= 1
    c.k = -1
    c.dead = true
    c.socket.destroy()
  }

  const connect = (): void => {
    const c: Connection = { socket: undefined as unknown as net.Socket, parser: new ResponseParser(), k: -1, connected: false, dead: false, openedAt: performance.now() }
    c.socket = net.connect({
      host,
      port,
      ...(localAddresses.length > 0 ? { localAddress: localAddresses[localTurn++ % localAddresses.length] } : {}),
      onread: {
        buffer: readBuffer,
        callback: (nread: number, buffer: Uint8Array): boolean => {
          if (c.k < 0) return true // nothing asked: ignore
          const result = c.parser.push((buffer as Buffer).subarray(0, nread))
          if (result === DONE) {
            answer(c)
            if (c.parser.keepAlive) ready(c)
            else { c.dead = true; c.socket.destroy() }
            maybeFinish()
          } else if (result === BAD) {
            fail(c)
            maybeFinish()
          }
          return true
        }
      }
    })
    opened += 1
    open += 1
    connecting += 1
    if (open > maxOpen) maxOpen = open
    connections.add(c)
    c.socket.once('connect', () => {
      connecting -= 1
      established += 1
      c.connected = true
      c.socket.setNoDelay(true)
      if (!finished) ready(c)
    })
    c.socket.on('error', (error) => {
      if (c.connected || finished) return // the close that follows tells
      if (established === 0) stop(new Error(`openLoop: cannot connect to ${options.url}: ${error.message}`))
      else connectErrors += 1
    })
    c.socket.once('close', () => {
      open -= 1
      if (!c.connected) connecting -= 1
      c.dead = true
      connections.delete(c)
      if (finished) return
      if (c.k >= 0) {
        if (c.parser.close()) answer(c)
        else { errors += 1; inFlight -= 1; c.k = -1 }
      }
      maybeFinish()
    })
  }

  const takeIdle = (): Connection | undefined => {
    let c = idle.pop()
    while (c !== undefined && c.dead) c = idle.pop()
    return c
  }

  const tick = (): void => {
    const now = performance.now()
    const due = Math.min(total, Math.floor((now - start) / interval) + 1)
    while (scheduled < due) {
      const k = scheduled++
      if (queueHead === k) {
        // Nothing waits before it: an idle socket takes it now.
        const c = takeIdle()
        if (c !== undefined) { queueHead += 1; send(c, k); continue }
      }
      if (open >= maxSockets) queuedAtCap += 1
    }
    const queued = scheduled - queueHead
    if (queued > maxQueued) maxQueued = queued
    // One new connection per queued request that no connection in progress will take.
    for (let n = Math.min(queued - connecting, maxSockets - open); n > 0; n--) connect()
    if (now - lastScan >= scanMs) {
      lastScan = now
      const deadline = now - timeoutMs
      while (queueHead < scheduled && start + queueHead * interval < deadline) {
        queueHead += 1
        timeouts += 1
        queuedTimeouts += 1
      }
      for (const c of connections) {
        if (c.k >= 0 && start + c.k * interval < deadline) {
          timeouts += 1
          inFlight -= 1
          c.k = -1
          c.dead = true
          c.socket.destroy()
        } else if (!c.connected && c.openedAt < deadline) {
          c.dead = true
          c.socket.destroy()
        }
      }
    }
    maybeFinish()
  }

  function maybeFinish (): void {
    if (!finished && scheduled === total && queueHead === total && inFlight === 0) stop()
  }

  function stop (error?: Error): void {
    if (finished) return
    finished = true
    if (timer !== null) clearInterval(timer)
    for (const c of connections) c.socket.destroy()
    if (error === undefined) resolveRun()
    else rejectRun(error)
  }

  // Preconnected sockets go idle (nothing is due yet).
  const preconnect = Math.min(options.preconnect ?? 0, maxSockets)
  if (preconnect > 0) {
    for (let i = 0; i < preconnect; i++) connect()
    await new Promise<void>((resolve, reject) => {
      const wait = setInterval(() => {
        if (connecting === 0 || finished) { clearInterval(wait); resolve() }
      }, 5)
      done.catch((error: Error) => { clearInterval(wait); reject(error) })
    })
  }

  cpuAtStart = process.cpuUsage()
  eluAtStart = performance.eventLoopUtilization()
  start = performance.now()
  lastScan = start
  timer = setInterval(tick, tickMs)
  tick()
  await done
  const end = performance.now()
  const cpu = process.cpuUsage(cpuAtStart)
  const elu = performance.eventLoopUtilization(eluAtStart)

  const byStatus: Record<number, number> = {}
  statuses.forEach((n, status) => { if (n > 0) byStatus[status] = n })
  const lagsSorted = lags.slice(0, sent).sort()
  const perSecond: number[][] = Array.from({ length: Math.ceil(seconds) }, () => [])
  for (let i = 0; i < okCount; i++) perSecond[Math.min(perSecond.length - 1, Math.floor(okDueMs[i]! / 1000))]!.push(okLatencies[i]!)
  const okSlowest = Array.from({ length: okCount }, (_, i) => ({ dueMs: okDueMs[i]!, ms: okLatencies[i]! }))
    .sort((a, b) => b.ms - a.ms).slice(0, 20)
  const okBySecond = perSecond.map((values) => ({ count: values.length, p99: quantile(Float64Array.from(values).sort(), 0.99) }))
  return {
    rate,
    seconds,
    scheduled: total,
    sent,
    offeredPerSecond: sent / Math.max(seconds, (lastWrite - start) / 1000),
    answered,
    answeredPerSecond: answered === 0 ? 0 : answered / ((lastAnswer - start) / 1000),
    byStatus,
    okLatencies: okLatencies.slice(0, okCount).sort(),
    okBySecond,
    okSlowest,
    shedLatencies: shedLatencies.slice(0, shedCount).sort(),
    otherStatus: other,
    errors,
    timeouts,
    queuedTimeouts,
    connectErrors,
    connectionsOpened: opened,
    maxOpenSockets: maxOpen,
    maxQueued,
    queuedAtCap,
    lagP50Ms: quantile(lagsSorted, 0.5),
    lagP99Ms: quantile(lagsSorted, 0.99),
    lagMaxMs: lagsSorted.at(-1) ?? Number.NaN,
    drainedSeconds: (end - start) / 1000,
    cpuMicrosPerRequest: sent === 0 ? Number.NaN : (cpu.user + cpu.system) / sent,
    cpuUserMs: cpu.user / 1000,
    cpuSystemMs: cpu.system / 1000,
    eventLoopUtilization: elu.utilization,
    pinnedCpu: null
  }
}

const HERE = path.dirname(fileURLToPath(import.meta.url))
const ROOT = path.resolve(HERE, '../..')
const TASKSET = '/usr/bin/taskset'

export type ChildMessage = { ok: true, result: OpenLoopResult } | { ok: false, error: string }

/**
 * Runs the open loop in a child process (bench/lib/open-loop-child.ts), pinned to
 * `options.cpu` when that is set and taskset is present; resolves with its result.
 */
export async function openLoop (options: OpenLoopOptions): Promise<OpenLoopResult> {
  const { cpu, ...loop } = options
  const node = [process.execPath, '--import', 'tsx', path.join(HERE, 'open-loop-child.ts')]
  const pinned = typeof cpu === 'number' && existsSync(TASKSET) ? cpu : null
  const [command, ...args] = pinned === null ? node : [TASKSET, '-c', String(pinned), ...node]
  // 'advanced' serialization: Buffers and Float64Arrays cross as binary, not JSON.
  const child = spawn(command!, args, { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit', 'ipc'], serialization: 'advanced' })
  const killOnExit = (): void => { child.kill('SIGKILL') }
  process.once('exit', killOnExit)
  try {
    return await new Promise<OpenLoopResult>((resolve, reject) => {
      let settled = false
      child.once('message', (message: ChildMessage) => {
        settled = true
        if (message.ok) resolve({ ...message.result, pinnedCpu: pinned })
        else reject(new Error(message.error))
      })
      child.once('error', (error) => { settled = true; reject(error) })
      child.once('exit', (code, signal) => {
        if (!settled) reject(new Error(`openLoop: the generator exited without a result (exit code ${code}, signal ${signal})`))
      })
      child.send(loop)
    })
  } finally {
    process.removeListener('exit', killOnExit)
  }
}
