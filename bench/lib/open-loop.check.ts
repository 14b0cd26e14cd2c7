/**
 * Self-check of the open-loop generator (bench/lib/open-loop.ts); not a tap test.
 *
 *   npx tsx bench/lib/open-loop.check.ts                  5,000 req/s for 3 s
 *   npx tsx bench/lib/open-loop.check.ts --rate 15000 --seconds 5
 *
 * 1. The response parser, fed responses split at every byte (Content-Length, chunked with
 *    extensions and trailers, 100 Continue, 204, Connection: close, HTTP/1.0 up to the close).
 * 2. A trivial node:http server in a child process (this file with --server; on CPU 0 with
 *    taskset), the generator in another (CPU 1): a mix of 200 JSON, 503 chunked, a 50 ms
 *    delay, a chunked 200 in pieces and a Connection: close. Checks the offered rate, the
 *    lag, the counts per status, the delayed latencies; prints the generator's CPU per request.
 * 3. For scale, the generator bench/overload.ts used so far (node:http requests through an
 *    Agent on the same 1 ms schedule) in its own process on the same CPU: its CPU per request.
 * 4. The delayed path alone; timeouts (a path that never answers) and errors (a socket
 *    destroyed mid-request); a socket cap of 4 (the queue, the lag).
 * Exits 1 if a check fails.
 *
 * CPU per request is mostly the kernel's (loopback TCP, waking the other side, and waking
 * this process for each answer; on a VM with an idle CPU a wake-up is dear), so it falls as
 * the rate rises and answers arrive together.
 */
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import http from 'node:http'
import { performance } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'
import { BAD, DONE, MORE, ResponseParser, openLoop, quantile, type OpenLoopResult } from './open-loop.js'

const SELF = fileURLToPath(import.meta.url)
const TASKSET = '/usr/bin/taskset'

function argument (name: string, fallback: number): number {
  const at = process.argv.indexOf(name)
  return at < 0 ? fallback : Number(process.argv[at + 1])
}

/** The server under test: answers by path; prints its port. */
function serve (): void {
  const json = (res: http.ServerResponse, status: number, body: string, headers: http.OutgoingHttpHeaders = {}): void => {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body), ...headers })
    res.end(body)
  }
  const server = http.createServer((req, res) => {
    const url = req.url ?? '/'
    if (url.startsWith('/ok/')) {
      json(res, 200, JSON.stringify({ id: url.slice(4), email: `user${url.slice(4)}@example.com`, name: 'A user' }))
    } else if (url === '/shed') {
      // No Content-Length: chunked, as a 503 from a hook that streams might be.
      res.writeHead(503, { 'content-type': 'application/json; charset=utf-8', 'retry-after': '1' })
      res.write('{"statusCode":503,')
      res.end('"error":"Service Unavailable"}')
    } else if (url === '/delay') {
      setTimeout(() => json(res, 200, '{"delayed":true}'), 50)
    } else if (url === '/pieces') {
      // The head alone, then the body in chunks over several reads.
      res.writeHead(200, { 'content-type': 'text/plain' })
      res.flushHeaders()
      setTimeout(() => {
        res.write('a'.repeat(100))
        setTimeout(() => { res.write('b'.repeat(70_000)); res.end('c') }, 1)
      }, 1)
    } else if (url === '/close') {
      json(res, 200, '{}', { connection: 'close' })
    } else if (url === '/hang') {
      // Never answers.
    } else if (url === '/reset') {
      req.socket.destroy()
    } else {
      json(res, 404, '{"error":"Not Found"}')
    }
  })
  server.keepAliveTimeout = 60_000
  server.listen(0, '127.0.0.1', () => {
    const address = server.address()
    console.log(`PORT ${typeof address === 'object' && address !== null ? address.port : 0}`)
  })
}

/**
 * The node:http generator of bench/overload.ts (an Agent, http.request per request, the
 * same schedule on a 1 ms timer), for comparison; prints its CPU per request as JSON.
 */
async function httpBaseline (port: number, rate: number, seconds: number): Promise<void> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 4000 })
  let sent = 0
  let answered = 0
  const pending = new Set<Promise<void>>()
  const one = (i: number): Promise<void> => new Promise<void>((resolve) => {
    const request = http.request({ agent, hostname: '127.0.0.1', port, path: `/ok/${i % 14 + 1}`, headers: { authorization: 'Bearer abc.def.ghi' } }, (response) => {
      response.resume()
      response.on('end', () => { answered += 1; resolve() })
    })
    request.on('error', () => resolve())
    request.end()
  })
  const cpu = process.cpuUsage()
  const start = performance.now()
  const total = Math.round(rate * seconds)
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      const due = Math.min(total, Math.floor((performance.now() - start) * rate / 1000) + 1)
      while (sent < due) {
        const p = one(sent++)
        pending.add(p)
        p.then(() => { pending.delete(p) }, () => {})
      }
      if (sent === total) { clearInterval(timer); resolve() }
    }, 1)
  })
  await Promise.all(pending)
  const used = process.cpuUsage(cpu)
  agent.destroy()
  console.log(JSON.stringify({ sent, answered, cpuMicrosPerRequest: (used.user + used.system) / sent }))
}

async function runBaseline (port: number, rate: number, seconds: number): Promise<{ sent: number, answered: number, cpuMicrosPerRequest: number }> {
  const node = [process.execPath, '--import', 'tsx', SELF, '--http-baseline', String(port), String(rate), String(seconds)]
  const [command, ...args] = existsSync(TASKSET) ? [TASKSET, '-c', '1', ...node] : node
  const child = spawn(command!, args, { stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  child.stdout.on('data', (chunk: Buffer) => { out += chunk.toString() })
  await new Promise((resolve) => child.once('exit', resolve))
  return JSON.parse(out.trim().split('\n').at(-1)!)
}

const failures: string[] = []
function check (ok: boolean, what: string): void {
  console.log(`  ${ok ? 'ok  ' : 'FAIL'} ${what}`)
  if (!ok) failures.push(what)
}

/** Feeds `raw` in the given pieces; the result of the last push and the parser. */
function parse (pieces: Buffer[], headRequest = false): { result: number, parser: ResponseParser, early: boolean } {
  const parser = new ResponseParser()
  parser.reset(headRequest)
  let result = MORE
  let early = false
  for (let i = 0; i < pieces.length; i++) {
    // A copy that is scribbled over afterwards, as the shared read buffer is.
    const piece = Buffer.from(pieces[i]!)
    result = parser.push(piece)
    piece.fill(0x58)
    if (result !== MORE && i < pieces.length - 1 && pieces.slice(i + 1).some((p) => p.length > 0)) early = true
    if (result !== MORE) break
  }
  return { result, parser, early }
}

function checkParser (): void {
  console.log('parser:')
  const cases: Array<{ name: string, raw: string, status: number, keepAlive: boolean, head?: boolean, untilClose?: boolean }> = [
    { name: 'Content-Length', raw: 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n{"id":"7","x":1}', status: 200, keepAlive: true },
    { name: 'chunked, extension and trailer', raw: 'HTTP/1.1 503 Service Unavailable\r\ntransfer-encoding: chunked\r\nRetry-After: 1\r\n\r\n5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-Trailer: yes\r\n\r\n', status: 503, keepAlive: true },
    { name: 'chunked, no trailer', raw: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n3\r\nabc\r\n0\r\n\r\n', status: 200, keepAlive: true },
    { name: '100 Continue then 201', raw: 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}', status: 201, keepAlive: true },
    { name: '204 without length', raw: 'HTTP/1.1 204 No Content\r\nX-A: b\r\n\r\n', status: 204, keepAlive: true },
    { name: 'Connection: close', raw: 'HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n', status: 404, keepAlive: false },
    { name: 'HEAD with a Content-Length', raw: 'HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n', status: 200, keepAlive: true, head: true },
    { name: 'HTTP/1.0 up to the close', raw: 'HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it', status: 200, keepAlive: false, untilClose: true }
  ]
  for (const c of cases) {
    const raw = Buffer.from(c.raw, 'latin1')
    const splits: Buffer[][] = [[raw], Array.from(raw, (byte) => Buffer.from([byte]))]
    for (let at = 1; at < raw.length; at++) splits.push([raw.subarray(0, at), raw.subarray(at)])
    let good = 0
    for (const pieces of splits) {
      const { result, parser, early } = parse(pieces, c.head)
      const ended = c.untilClose === true ? result === MORE && parser.close() : result === DONE
      if (ended && !early && parser.status === c.status && parser.keepAlive === c.keepAlive) good += 1
    }
    check(good === splits.length, `${c.name}: ${good}/${splits.length} splits`)
  }
  check(parse([Buffer.from('garbage\r\n\r\n')]).result === BAD, 'not HTTP: BAD')
  check(parse([Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n')]).result === BAD, 'bad chunk size: BAD')
}

async function startServer (): Promise<{ port: number, stop: () => void }> {
  const node = [process.execPath, '--import', 'tsx', SELF, '--server']
  const [command, ...args] = existsSync(TASKSET) ? [TASKSET, '-c', '0', ...node] : node
  const child = spawn(command!, args, { stdio: ['ignore', 'pipe', 'inherit'] })
  process.once('exit', () => child.kill('SIGKILL'))
  const port = await new Promise<number>((resolve, reject) => {
    let out = ''
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString()
      const match = /PORT (\d+)/.exec(out)
      if (match !== null) resolve(Number(match[1]))
    })
    child.once('exit', (code) => reject(new Error(`the check server exited (${code})`)))
  })
  return { port, stop: () => { child.kill('SIGTERM') } }
}

function ms (value: number): string {
  return Number.isNaN(value) ? '-' : value.toFixed(2)
}

function describe (r: OpenLoopResult): string {
  return [
    `  offered ${r.offeredPerSecond.toFixed(0)}/s of ${r.rate}/s (sent ${r.sent} of ${r.scheduled}), answered ${r.answeredPerSecond.toFixed(0)}/s, drained in ${r.drainedSeconds.toFixed(2)} s`,
    `  by status ${JSON.stringify(r.byStatus)}, other ${r.otherStatus}, errors ${r.errors}, timeouts ${r.timeouts} (queued ${r.queuedTimeouts}), connect errors ${r.connectErrors}`,
    `  2xx latency p50 ${ms(quantile(r.okLatencies, 0.5))} p99 ${ms(quantile(r.okLatencies, 0.99))} max ${ms(r.okLatencies.at(-1) ?? Number.NaN)} ms; 503 p50 ${ms(quantile(r.shedLatencies, 0.5))} p99 ${ms(quantile(r.shedLatencies, 0.99))} ms`,
    `  lag p50 ${ms(r.lagP50Ms)} p99 ${ms(r.lagP99Ms)} max ${ms(r.lagMaxMs)} ms; connections opened ${r.connectionsOpened}, max open ${r.maxOpenSockets}, max queued ${r.maxQueued}, queued at cap ${r.queuedAtCap}`,
    `  generator CPU ${r.cpuMicrosPerRequest.toFixed(1)} µs/request (user ${r.cpuUserMs.toFixed(0)} ms, system ${r.cpuSystemMs.toFixed(0)} ms), event loop utilization ${(r.eventLoopUtilization * 100).toFixed(0)}%, pinned to CPU ${r.pinnedCpu ?? 'none'}`
  ].join('\n')
}

async function main (): Promise<void> {
  checkParser()
  const rate = argument('--rate', 5000)
  const seconds = argument('--seconds', 3)
  const server = await startServer()
  const url = `http://127.0.0.1:${server.port}`
  const request = (path: string): Buffer => Buffer.from(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${server.port}\r\nAuthorization: Bearer abc.def.ghi\r\n\r\n`, 'latin1')
  try {
    // 20 requests, round-robin: 14 JSON 200s, 3 chunked 503s, a 50 ms delay, a 200 in pieces, a close.
    const mix = [
      ...Array.from({ length: 14 }, (_, i) => request(`/ok/${i + 1}`)),
      request('/shed'), request('/shed'), request('/shed'),
      request('/delay'), request('/pieces'), request('/close')
    ]
    const cycles = Math.round(rate * seconds) / mix.length
    console.log(`mix at ${rate} req/s for ${seconds} s (generator on CPU 1, server on CPU 0):`)
    const r = await openLoop({ url, requests: mix, rate, seconds, cpu: 1 })
    console.log(describe(r))
    check(Math.abs(r.offeredPerSecond / rate - 1) < 0.01, `offered within 1% of ${rate}/s`)
    check(r.sent === r.scheduled, 'every scheduled request sent')
    check(r.lagP99Ms < 5, 'lag p99 under 5 ms')
    if (Number.isInteger(cycles)) {
      check(r.byStatus[200] === 17 * cycles, `200s: ${r.byStatus[200]} = ${17 * cycles}`)
      check(r.byStatus[503] === 3 * cycles, `503s: ${r.byStatus[503]} = ${3 * cycles}`)
      // A node timer may fire up to ~1 ms early against performance.now() (libuv's cached loop time).
      check(r.okLatencies.filter((v) => v >= 49).length >= cycles, `at least ${cycles} 2xx latencies of 49 ms or more (the delayed path)`)
      check(r.connectionsOpened >= cycles, `a connection per Connection: close at least (${r.connectionsOpened} opened)`)
    }
    check(r.errors === 0 && r.timeouts === 0 && r.otherStatus === 0, 'no errors, timeouts or other statuses')

    console.log(`for scale, the node:http generator (bench/overload.ts so far) at ${rate} req/s for ${seconds} s on CPU 1, 200s only:`)
    const baseline = await runBaseline(server.port, rate, seconds)
    const okOnly = await openLoop({ url, requests: mix.slice(0, 14), rate, seconds, cpu: 1 })
    console.log(`  node:http ${baseline.cpuMicrosPerRequest.toFixed(1)} µs/request (${baseline.answered} of ${baseline.sent} answered); this generator, the same 200s: ${okOnly.cpuMicrosPerRequest.toFixed(1)} µs/request, lag p99 ${ms(okOnly.lagP99Ms)} ms, 2xx p99 ${ms(quantile(okOnly.okLatencies, 0.99))} ms`)
    check(okOnly.cpuMicrosPerRequest < baseline.cpuMicrosPerRequest * 0.75, 'at most 3/4 of the node:http generator\'s CPU per request')

    console.log('the delayed path alone, 200 req/s for 1 s:')
    const delayed = await openLoop({ url, requests: [request('/delay')], rate: 200, seconds: 1 })
    console.log(describe(delayed))
    check(delayed.okLatencies.length === 200 && delayed.okLatencies[0]! >= 49, `all 200 answered, the fastest in ${ms(delayed.okLatencies[0] ?? Number.NaN)} ms (>= 49)`)

    console.log('a path that never answers and one that drops the socket, 100 req/s for 1 s, timeout 300 ms:')
    const broken = await openLoop({ url, requests: [request('/hang'), request('/reset')], rate: 100, seconds: 1, timeoutMs: 300 })
    console.log(describe(broken))
    check(broken.timeouts === 50 && broken.errors === 50 && broken.answered === 0, `50 timeouts (${broken.timeouts}), 50 errors (${broken.errors})`)
    check(broken.drainedSeconds < 1.5, 'drained within the schedule plus the timeout')

    console.log('at most 4 sockets for 50 ms answers at 200 req/s: the queue and the lag show it')
    const capped = await openLoop({ url, requests: [request('/delay')], rate: 200, seconds: 1, maxSockets: 4 })
    console.log(describe(capped))
    check(capped.maxOpenSockets === 4 && capped.queuedAtCap > 0 && capped.lagMaxMs > 100, 'capped at 4 sockets, requests queued, the lag shows it')
    check(capped.okLatencies.at(-1)! > 500, 'latency from the scheduled time includes the wait for a socket')
  } finally {
    server.stop()
  }
  console.log(failures.length === 0 ? 'open-loop check: all good' : `open-loop check: ${failures.length} failed`)
  process.exitCode = failures.length === 0 ? 0 : 1
}

if (process.argv.includes('--server')) serve()
else if (process.argv.includes('--http-baseline')) await httpBaseline(argument('--http-baseline', 0), Number(process.argv.at(-2)), Number(process.argv.at(-1)))
else await main()
