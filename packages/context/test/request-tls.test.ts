/**
 * ClientHelloInfo, Protocol, Secure, BaseURL over a real TLS connection, and the request
 * context (a signal that fires when the client goes away) over a real socket.
 */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { request as httpsRequest, type RequestOptions } from 'node:https'
import { connect } from 'node:net'
import os from 'node:os'
import path from 'node:path'
import Fastify from 'fastify'
import t from 'tap'
import context from '@user-product-service/context'
import { contextApp } from './request-app.js'

function selfSigned (): { key: Buffer, cert: Buffer } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'context-tls-'))
  try {
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
      '-subj', '/CN=localhost', '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem')], { stdio: 'ignore' })
    return { key: readFileSync(path.join(dir, 'key.pem')), cert: readFileSync(path.join(dir, 'cert.pem')) }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

t.test('over TLS: clientHelloInfo, protocol https, secure, baseURL', async (t) => {
  const { key, cert } = selfSigned()
  const app = Fastify({ https: { key, cert, ALPNProtocols: ['h2x', 'http/1.1'] } })
  t.teardown(() => app.close())
  await app.register(context)
  app.get('/tls', async (request) => ({
    hello: request.clientHelloInfo(),
    protocol: request.protocol,
    secure: request.secure(),
    baseURL: request.baseURL()
  }))
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as { port: number }
  const body = await new Promise<string>((resolve, reject) => {
    const options: RequestOptions & { ALPNProtocols: string[] } = {
      host: '127.0.0.1', port, path: '/tls', servername: 'localhost', ca: cert, ALPNProtocols: ['http/1.1'], minVersion: 'TLSv1.3'
    }
    const req = httpsRequest(options, (res) => {
      let text = ''
      res.on('data', (chunk) => { text += chunk })
      res.on('end', () => { resolve(text) })
    })
    req.on('error', reject)
    req.end()
  })
  const result = JSON.parse(body)
  t.equal(result.protocol, 'https')
  t.equal(result.secure, true)
  t.equal(result.baseURL, `https://127.0.0.1:${port}`)
  t.equal(result.hello.serverName, 'localhost', 'SNI server name')
  t.equal(result.hello.protocol, 'TLSv1.3')
  t.equal(result.hello.alpnProtocol, 'http/1.1')
  t.match(result.hello.cipher, { name: /^TLS_/, version: 'TLSv1.3' })
  t.ok(Array.isArray(result.hello.signatureAlgorithms) && result.hello.signatureAlgorithms.length > 0, 'shared signature algorithms')
})

t.test('plain HTTP: clientHelloInfo is null', async (t) => {
  const app = await contextApp(t, (app) => { app.get('/', async (request) => ({ hello: request.clientHelloInfo() })) })
  t.same((await app.inject('/')).json(), { hello: null })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as { port: number }
  t.same(await (await fetch(`http://127.0.0.1:${port}/`)).json(), { hello: null })
})

t.test('context(): aborts when the client goes away, not when the body has been read', async (t) => {
  let resolveSeen: (value: { abortedAfterBody: boolean, nativeAbortedAfterBody: boolean, reason: string }) => void
  const seen = new Promise<{ abortedAfterBody: boolean, nativeAbortedAfterBody: boolean, reason: string }>((resolve) => { resolveSeen = resolve })
  const app = await contextApp(t, (app) => {
    app.post('/slow', async (request) => {
      const signal = request.context()
      const native = request.signal
      await new Promise((resolve) => setTimeout(resolve, 50))
      const abortedAfterBody = signal.aborted
      const nativeAbortedAfterBody = native.aborted
      await new Promise<void>((resolve) => {
        if (signal.aborted) resolve()
        else signal.addEventListener('abort', () => { resolve() }, { once: true })
      })
      resolveSeen({ abortedAfterBody, nativeAbortedAfterBody, reason: (signal.reason as { code: string }).code })
      return 'late'
    })
    app.post('/fast', async (request) => {
      const signal = request.context()
      return { aborted: signal.aborted }
    })
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const { port } = app.server.address() as { port: number }

  const fast = await fetch(`http://127.0.0.1:${port}/fast`, { method: 'POST', body: '{"a":1}', headers: { 'content-type': 'application/json' } })
  t.same(await fast.json(), { aborted: false }, 'a normal request is not aborted')

  const socket = connect(port, '127.0.0.1')
  await new Promise((resolve) => socket.once('connect', resolve))
  const body = '{"a":1}'
  socket.write(`POST /slow HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`)
  setTimeout(() => { socket.destroy() }, 200)
  const result = await seen
  t.equal(result.abortedAfterBody, false, 'still running after the body was read')
  t.equal(result.nativeAbortedAfterBody, true, 'Fastify\'s request.signal has already fired there (why context() exists)')
  t.equal(result.reason, 'FST_CONTEXT_CLIENT_GONE', 'aborted with ClientGoneError once the client left')
})
