/** SaveFile and SaveFileToStorage: request decorators (the file is an upload, not part of the reply). */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import fastifyMultipart, { type FastifyMultipartAttachFieldsToBodyOptions, type FastifyMultipartOptions } from '@fastify/multipart'
import type { FastifyInstance } from 'fastify'
import t from 'tap'
import { ContextArgumentError, FileSystemStorage, MemoryStorage, UnsafeUploadPathError, type ContextOptions, type Storage } from '@user-product-service/context'
import { replyApp } from './reply-app.js'

const BOUNDARY = '----context-uploads-boundary'

/** A multipart/form-data body with one file part (and optional fields). */
function multipart (field: string, filename: string, content: Buffer | string, fields: Record<string, string> = {}): { payload: Buffer, headers: Record<string, string> } {
  const parts: Buffer[] = []
  for (const [name, value] of Object.entries(fields)) {
    parts.push(Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`))
  }
  parts.push(Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="${field}"; filename="${filename}"\r\nContent-Type: application/octet-stream\r\n\r\n`))
  parts.push(Buffer.isBuffer(content) ? content : Buffer.from(content))
  parts.push(Buffer.from(`\r\n--${BOUNDARY}--\r\n`))
  return { payload: Buffer.concat(parts), headers: { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` } }
}

function tempDir (t: { teardown: (fn: () => void) => void }): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'context-uploads-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

async function uploadApp (
  t: Parameters<typeof replyApp>[0],
  options: FastifyMultipartOptions | FastifyMultipartAttachFieldsToBodyOptions,
  setup: (app: FastifyInstance) => void,
  contextOptions: ContextOptions = {}
): Promise<FastifyInstance> {
  return replyApp(t, async (app) => {
    await app.register(fastifyMultipart, options)
    setup(app)
  }, contextOptions)
}

t.test('saveFile: streams an uploaded part (request.file()) to disk', async (t) => {
  const dir = tempDir(t)
  const content = Buffer.alloc(300_000, 'x')
  content.write('head', 0)
  const app = await uploadApp(t, {}, (app) => {
    app.post('/upload', async (request, reply) => {
      const file = await request.file()
      if (file === undefined) return reply.code(400).send('no file')
      await request.saveFile(file, `${dir}/${file.filename}`)
      return { saved: file.filename }
    })
  })
  const response = await app.inject({ method: 'POST', url: '/upload', ...multipart('doc', 'report.bin', content) })
  t.equal(response.statusCode, 200)
  t.same(response.json(), { saved: 'report.bin' })
  t.same(readFileSync(path.join(dir, 'report.bin')), content)
})

t.test('saveFile: a file from request.formFile() (attachFieldsToBody), a Buffer', async (t) => {
  const dir = tempDir(t)
  const app = await uploadApp(t, { attachFieldsToBody: true }, (app) => {
    app.post('/upload', async (request, reply) => {
      const file = await request.formFile('doc')
      await request.saveFile(file, `${dir}/form-${file.filename}`)
      await request.saveFile(Buffer.from('plain buffer'), `${dir}/buffer.txt`)
      return { ok: true }
    })
  })
  const response = await app.inject({ method: 'POST', url: '/upload', ...multipart('doc', 'notes.txt', 'form file body', { title: 't' }) })
  t.equal(response.statusCode, 200)
  t.equal(readFileSync(path.join(dir, 'form-notes.txt'), 'utf8'), 'form file body')
  t.equal(readFileSync(path.join(dir, 'buffer.txt'), 'utf8'), 'plain buffer')
})

t.test('saveFile: a request.formFile() spooled to a temp file (past formFiles.memoryThreshold) is copied file to file', async (t) => {
  const dir = tempDir(t)
  const spooled: Array<string | undefined> = []
  const big = Buffer.alloc(64 * 1024, 'x')
  const app = await uploadApp(t, {}, (app) => {
    app.post('/upload', async (request) => {
      const file = await request.formFile('doc')
      spooled.push(file.data === undefined ? file.path : undefined)
      await request.saveFile(file, `${dir}/${file.filename}`)
      return { size: file.size }
    })
  }, { formFiles: { memoryThreshold: 1024 } })
  const response = await app.inject({ method: 'POST', url: '/upload', ...multipart('doc', 'big.bin', big) })
  t.same(response.json(), { size: big.length })
  t.type(spooled[0], 'string', 'the file was on disk, not in memory')
  t.ok(readFileSync(path.join(dir, 'big.bin')).equals(big), 'saved whole')
})

t.test('saveFile: an upload name that climbs out of the folder is refused (400), nothing written', async (t) => {
  const root = tempDir(t)
  const dir = path.join(root, 'uploads')
  mkdirSync(dir)
  const route = (app: FastifyInstance): void => {
    app.post('/upload', async (request, reply) => {
      const file = await request.file()
      if (file === undefined) return reply.code(400).send('no file')
      await request.saveFile(file, `${dir}/${file.filename}`)
      return { saved: file.filename }
    })
  }
  // busboy keeps only the base name by default; with preservePath the raw name reaches saveFile.
  const raw = await uploadApp(t, { preservePath: true } as FastifyMultipartOptions, route)
  for (const filename of ['../escaped.txt', '..\\escaped.txt', 'a/../../escaped.txt', '..']) {
    const response = await raw.inject({ method: 'POST', url: '/upload', ...multipart('doc', filename, 'evil') })
    t.equal(response.statusCode, 400, filename)
    t.equal(response.json().code, new UnsafeUploadPathError('x').code, filename)
  }
  t.same(readdirSync(root), ['uploads'], 'nothing written next to the folder')
  t.same(readdirSync(dir), [], 'nor in it')

  const basenames = await uploadApp(t, {}, route)
  const response = await basenames.inject({ method: 'POST', url: '/upload', ...multipart('doc', '../escaped.txt', 'kept inside') })
  t.same(response.json(), { saved: 'escaped.txt' }, 'by default the name arrives without its path')
  t.equal(readFileSync(path.join(dir, 'escaped.txt'), 'utf8'), 'kept inside')
})

t.test('saveFile: a part cut at the multipart size limit gives 413 and leaves no file', async (t) => {
  const dir = tempDir(t)
  const app = await uploadApp(t, { limits: { fileSize: 1000 } }, (app) => {
    app.post('/upload', async (request, reply) => {
      const file = await request.file({ throwFileSizeLimit: false })
      if (file === undefined) return reply.code(400).send('no file')
      await request.saveFile(file, `${dir}/big.bin`)
      return { saved: true }
    })
  })
  const response = await app.inject({ method: 'POST', url: '/upload', ...multipart('doc', 'big.bin', Buffer.alloc(5000, 'y')) })
  t.equal(response.statusCode, 413)
  t.equal(response.json().code, 'FST_CONTEXT_UPLOAD_TOO_LARGE')
  t.notOk(existsSync(path.join(dir, 'big.bin')))
})

t.test('saveFileToStorage: memory and filesystem storages', async (t) => {
  const dir = tempDir(t)
  const memory = new MemoryStorage()
  const disk = new FileSystemStorage(dir)
  const app = await uploadApp(t, { preservePath: true } as FastifyMultipartOptions, (app) => {
    app.post('/upload/:storage', async (request, reply) => {
      const storage: Storage = (request.params as { storage: string }).storage === 'memory' ? memory : disk
      const file = await request.file()
      if (file === undefined) return reply.code(400).send('no file')
      await request.saveFileToStorage(file, `avatars/${file.filename}`, storage)
      return { saved: true }
    })
  })
  const toMemory = await app.inject({ method: 'POST', url: '/upload/memory', ...multipart('f', 'me.png', 'png bytes') })
  t.equal(toMemory.statusCode, 200)
  t.equal((await memory.get('avatars/me.png'))?.toString(), 'png bytes')
  t.equal(memory.size, 1)

  const toDisk = await app.inject({ method: 'POST', url: '/upload/disk', ...multipart('f', 'you.png', 'disk bytes') })
  t.equal(toDisk.statusCode, 200)
  t.equal(readFileSync(path.join(dir, 'avatars', 'you.png'), 'utf8'), 'disk bytes')
  t.equal((await disk.get('avatars/you.png'))?.toString(), 'disk bytes')

  const escaping = await app.inject({ method: 'POST', url: '/upload/disk', ...multipart('f', '../../../x.png', 'evil') })
  t.equal(escaping.statusCode, 400)
  t.equal(escaping.json().code, 'FST_CONTEXT_UNSAFE_UPLOAD_PATH')
})

t.test('storages: get/set/delete, keys that climb out refused', async (t) => {
  const dir = tempDir(t)
  for (const storage of [new MemoryStorage(), new FileSystemStorage(dir)]) {
    const label = storage.constructor.name
    t.equal(await storage.get('missing'), undefined, `${label}: missing key`)
    await storage.set('a/b.txt', Buffer.from('one'))
    await storage.set('a/b.txt', Buffer.from('two'))
    t.equal((await storage.get('a/b.txt'))?.toString(), 'two', `${label}: set replaces`)
    await storage.delete('a/b.txt')
    await storage.delete('a/b.txt')
    t.equal(await storage.get('a/b.txt'), undefined, `${label}: deleted (twice is fine)`)
    for (const key of ['../x', 'a/../../x', '..\\x', '', 'a\0b']) {
      await t.rejects(storage.set(key, Buffer.from('x')), UnsafeUploadPathError, `${label}: ${JSON.stringify(key)}`)
    }
  }
  t.same(readdirSync(dir), ['a'], 'the filesystem storage wrote only under its root')
  t.throws(() => new FileSystemStorage(''), { code: 'FST_CONTEXT_INVALID_ARGUMENT', message: 'FileSystemStorage needs a root folder' })
  t.ok(ContextArgumentError.prototype instanceof TypeError, 'still a TypeError (the constant extends it)')
})
