/**
 * Public types of the response side, checked by `npx tsc -p tsconfig.json` (each
 * `@ts-expect-error` fails the check when the misuse stops being an error), and its runtime
 * exports, checked by tap.
 */
import type { FastifyReply, FastifyRequest } from 'fastify'
import t from 'tap'
import * as contextModule from '@user-product-service/context'
import type { CookieRecord, RedirectToRouteParams, Storage } from '@user-product-service/context'

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true : false
function expectType<A, B> (_proof: Equal<A, B>): void {}

function typeErrors (request: FastifyRequest, reply: FastifyReply, storage: Storage) {
  // @ts-expect-error a cookie record needs a value
  const record: CookieRecord = { name: 'a' }
  // @ts-expect-error write takes bytes or text
  reply.write(42)
  // @ts-expect-error links takes strings
  reply.links('http://x.example', 1)
  // @ts-expect-error only `queries` may hold an object
  const params: RedirectToRouteParams = { id: { a: 1 } as unknown as Record<string, string>, queries: 'x' }
  // @ts-expect-error saveFileToStorage needs a storage
  const unsaved = request.saveFileToStorage(Buffer.from('x'), 'a.txt')
  const stored = storage.set('k', Buffer.from('v'))
  return [record, params, unsaved, stored]
}

t.test('decorator types', async (t) => {
  expectType<ReturnType<FastifyReply['write']>, number>(true)
  expectType<ReturnType<FastifyReply['writef']>, number>(true)
  // The context body's setters return nothing: returning the reply (a thenable that waits for
  // the response) from an async handler would wait for a reply that is only sent afterwards.
  expectType<ReturnType<FastifyReply['sendStatus']>, void>(true)
  expectType<ReturnType<FastifyReply['setBody']>, void>(true)
  expectType<ReturnType<FastifyReply['sendString']>, void>(true)
  expectType<ReturnType<FastifyReply['json']>, void>(true)
  expectType<ReturnType<FastifyReply['xml']>, void>(true)
  expectType<ReturnType<FastifyReply['sendStream']>, FastifyReply>(true)
  expectType<ReturnType<FastifyReply['setCookieRecord']>, FastifyReply>(true)
  expectType<ReturnType<FastifyReply['getRespHeaders']>, Record<string, string[]>>(true)
  // Uploads are request decorators; files go out with serveFile (sendFile is @fastify/static's).
  expectType<ReturnType<FastifyRequest['saveFile']>, Promise<void>>(true)
  expectType<'saveFile' extends keyof FastifyReply ? true : false, false>(true)
  expectType<ReturnType<FastifyReply['serveFile']>, FastifyReply>(true)
  expectType<ReturnType<FastifyReply['render']>, FastifyReply>(true)
  t.type(typeErrors, 'function')
})

t.test('the response side\'s runtime exports', async (t) => {
  const names = Object.keys(contextModule)
  for (const name of [
    'ContextArgumentError', 'ContextOptionError', 'FileForbiddenError', 'FileNotFoundError', 'FileRootMissingError',
    'FileSendError', 'FileSystemStorage', 'JsonpCallbackError', 'MemoryStorage', 'ReplyAlreadySentError',
    'RoutingPluginMissingError', 'UnsafeUploadPathError', 'UploadTooLargeError', 'ViewsNotConfiguredError', 'XmlNameError'
  ]) {
    t.ok(names.includes(name), name)
  }
  t.type(contextModule.default, 'function')
})
