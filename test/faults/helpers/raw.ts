/** Raw TCP clients for what fetch cannot do: stall mid-request, send bytes slowly. */
import net from 'node:net'

export interface RawConnection {
  socket: net.Socket
  /** Everything the server sent so far. */
  received: () => string
  /** Resolves with the ms since connect when the server closes the connection. */
  closed: Promise<number>
  write: (data: string | Buffer) => void
}

export async function connect (url: string): Promise<RawConnection> {
  const { hostname, port } = new URL(url)
  const socket = net.connect({ host: hostname, port: Number(port) })
  await new Promise<void>((resolve, reject) => { socket.once('connect', resolve); socket.once('error', reject) })
  const started = Date.now()
  let data = ''
  socket.on('data', (chunk) => { data += chunk.toString('latin1') })
  socket.on('error', () => {}) // a reset is a close here
  const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now() - started)))
  return { socket, received: () => data, closed, write: (d) => { if (!socket.destroyed) socket.write(d) } }
}

/** A POST whose body stops after `sent` of `declared` bytes: the request stays in flight. */
export async function stalledPost (url: string, path: string, declared = 100, sent = 10): Promise<RawConnection> {
  const c = await connect(url)
  c.write(`POST ${path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${declared}\r\n\r\n${'{'.padEnd(sent, ' ')}`)
  return c
}

/** A connection from `from` (a loopback address, to stand for a client of its own) that keeps only the first chunks received, for answers of any size. */
export interface SourcedConnection {
  socket: net.Socket
  /** The first chunks received (the head of the answer), as latin1 text. */
  text: () => string
  /** How many bytes were received in all. */
  bytes: () => number
  /** Resolves with the ms since connect once the connection is closed (either side). */
  closed: Promise<number>
  started: number
}

export async function connectFrom (port: number, from: string, options: { paused?: boolean } = {}): Promise<SourcedConnection> {
  const socket = net.connect({ host: '127.0.0.1', port, localAddress: from })
  await new Promise<void>((resolve, reject) => { socket.once('connect', resolve); socket.once('error', reject) })
  const started = Date.now()
  const chunks: Buffer[] = []
  let count = 0
  socket.on('data', (chunk: Buffer) => { count += chunk.length; if (chunks.length < 4) chunks.push(chunk) })
  socket.on('error', () => {})
  if (options.paused === true) socket.pause()
  const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now() - started)))
  return { socket, text: () => Buffer.concat(chunks).toString('latin1'), bytes: () => count, closed, started }
}

/** Status, head and JSON body (undefined when not JSON) of the first answer in `text`. */
export function parseAnswer (text: string): { status: number, head: string, body: any } {
  const end = text.indexOf('\r\n\r\n')
  const head = end === -1 ? text : text.slice(0, end)
  let body: unknown
  try { body = JSON.parse(text.slice(end + 4)) } catch { body = undefined }
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]), head, body }
}
