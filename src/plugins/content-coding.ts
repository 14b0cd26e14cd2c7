/**
 * The service does not decompress request bodies: a body sent with a Content-Encoding
 * other than `identity` answers 415 (RFC 9110 §15.5.16) with `Accept-Encoding: identity`,
 * before a byte of it is read. So no decompression bomb can cost memory or CPU, and a
 * compressed body is never parsed as if it were plain JSON.
 */
import createError from '@fastify/error'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'

const UnsupportedContentEncoding = createError('UNSUPPORTED_MEDIA_TYPE', 'Content-Encoding %s is not supported: send the body uncompressed', 415)

function hasBody (headers: Record<string, string | string[] | undefined>): boolean {
  return headers['transfer-encoding'] !== undefined || (headers['content-length'] !== undefined && headers['content-length'] !== '0')
}

async function contentCoding (app: FastifyInstance): Promise<void> {
  // A callback hook: every request passes here, and an async one costs each a promise.
  app.addHook('onRequest', (request, reply, done) => {
    const coding = request.headers['content-encoding']
    if (coding === undefined || !hasBody(request.headers)) return done()
    const codings = coding.split(',').map((c) => c.trim().toLowerCase()).filter((c) => c !== '' && c !== 'identity')
    if (codings.length === 0) return done()
    reply.header('accept-encoding', 'identity')
    done(new UnsupportedContentEncoding(JSON.stringify(coding.slice(0, 50))))
  })
}

export default fp(contentCoding, { name: 'content-coding', fastify: '5.x' })
