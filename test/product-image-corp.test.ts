/**
 * IMAGE_CROSS_ORIGIN_RESOURCE_POLICY: the `Cross-Origin-Resource-Policy` of the product
 * image route, so a front-end on another origin (or site) can show product images in an
 * `<img>`; every other answer keeps helmet's `same-origin`. Over real HTTP, where the headers
 * a browser reads are the ones on the wire.
 */
import http from 'node:http'
import t from 'tap'
import { build, registerAndLogin, type TestApp } from './helpers/build.js'

const PNG = Buffer.concat([Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64'), Buffer.alloc(100, 7)])

async function withImage (app: TestApp) {
  await app.listen({ port: 0, host: '127.0.0.1' })
  const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`
  const me = await registerAndLogin(app)
  const product = await (await fetch(`${base}/api/product`, { method: 'POST', headers: { ...me.auth, 'content-type': 'application/json' }, body: JSON.stringify({ title: 'lamp', amount: 1 }) })).json() as { id: number }
  const form = new FormData()
  form.append('image', new Blob([PNG], { type: 'image/png' }), 'lamp.png')
  const uploaded = await fetch(`${base}/api/product/${product.id}/image`, { method: 'POST', headers: me.auth, body: form })
  if (uploaded.status !== 201) throw new Error(`upload: ${uploaded.status} ${await uploaded.text()}`)
  return { base, id: product.id }
}

/** Status and CORP of a GET, through node:http (fetch does not pass If-None-Match through as sent). */
const corp = async (url: string, headers: Record<string, string> = {}) => await new Promise<readonly [number, string | undefined]>((resolve, reject) => {
  http.get(url, { headers }, (res) => {
    res.resume()
    res.on('end', () => { resolve([res.statusCode ?? 0, res.headers['cross-origin-resource-policy'] as string | undefined]) })
  }).on('error', reject)
})

t.test('default: same-origin, as helmet sends everywhere', async (t) => {
  const app = await build(t)
  const { base, id } = await withImage(app)
  t.same(await corp(`${base}/api/product/${id}/image`), [200, 'same-origin'])
})

for (const policy of ['same-site', 'cross-origin'] as const) {
  t.test(`IMAGE_CROSS_ORIGIN_RESOURCE_POLICY=${policy}: the image route only`, async (t) => {
    const app = await build(t, { env: { IMAGE_CROSS_ORIGIN_RESOURCE_POLICY: policy } })
    const { base, id } = await withImage(app)
    const image = `${base}/api/product/${id}/image`
    t.same(await corp(image), [200, policy], 'the image')
    t.same(await corp(image, { range: 'bytes=0-9' }), [206, policy], 'a byte range of it')
    const first = await fetch(image)
    await first.arrayBuffer()
    const etag = first.headers.get('etag')!
    t.same(await corp(image, { 'if-none-match': etag }), [304, policy], 'a 304')
    t.same(await corp(`${base}/api/product/999999/image`), [404, policy], 'a 404 of the route')
    t.same(await corp(`${base}/api/product/${id}`), [200, 'same-origin'], 'the product JSON keeps same-origin')
    t.same(await corp(`${base}/api/product`), [200, 'same-origin'], 'the list too')
  })
}

t.test('an unknown value does not start', async (t) => {
  await t.rejects(build(t, { env: { IMAGE_CROSS_ORIGIN_RESOURCE_POLICY: 'anyone' } }), /IMAGE_CROSS_ORIGIN_RESOURCE_POLICY/)
})
