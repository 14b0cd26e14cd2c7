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
