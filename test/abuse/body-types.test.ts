/**
 * Which body types each route reads, three ways that must agree: what the routes do (each
 * type sent to every route of the OpenAPI document: 415 or not), what the OpenAPI document
 * says (its requestBody content types) and what docs/reliability.md says ("Bodies").
 */
import { readFile } from 'node:fs/promises'
import t from 'tap'
import { build, registerAndLogin } from '../helpers/build.js'

const JSON_TYPE = 'application/json'
const FORM = 'application/x-www-form-urlencoded'
const MULTIPART = 'multipart/form-data'
const BOUNDARY = 'xyzBOUNDARY'

/** A small body of each type: accepted or refused, never one that changes anything. */
const BODIES: Record<string, { contentType: string, payload: string }> = {
  [JSON_TYPE]: { contentType: JSON_TYPE, payload: '{"unexpected":true}' },
  [FORM]: { contentType: FORM, payload: 'unexpected=true' },
  [MULTIPART]: { contentType: `${MULTIPART}; boundary=${BOUNDARY}`, payload: `--${BOUNDARY}\r\nContent-Disposition: form-data; name="unexpected"\r\n\r\ntrue\r\n--${BOUNDARY}--\r\n` },
  'text/plain': { contentType: 'text/plain', payload: 'unexpected' },
  'application/xml': { contentType: 'application/xml', payload: '<unexpected/>' },
  'application/octet-stream': { contentType: 'application/octet-stream', payload: 'unexpected' }
}

type Routes = Map<string, Set<string>>

/** The "Bodies" paragraph of docs/reliability.md as routes and types: JSON unless it says otherwise. */
async function documented (bodyRoutes: Iterable<string>): Promise<Routes> {
  const text = await readFile(new URL('../../docs/reliability.md', import.meta.url), 'utf8')
  const paragraph = /\*\*Bodies\*\*[\s\S]*?\n\n/.exec(text)?.[0].replace(/\s+/g, ' ') ?? ''
  const routes: Routes = new Map([...bodyRoutes].map((route) => [route, new Set([JSON_TYPE])]))
  for (const [, route = '', verb, type = '', only] of paragraph.matchAll(/`((?:POST|PATCH|PUT|DELETE) \/[^`]+)` (also takes|takes) `([^`]+)`( only)?/g)) {
    const types = routes.get(route) ?? new Set()
    if (verb === 'takes' && only !== undefined) types.clear()
    types.add(type)
    routes.set(route, types)
  }
  return routes
}

t.test('each body type is read by exactly the routes the OpenAPI document and docs/reliability.md name; 415 everywhere else', async (t) => {
  const app = await build(t)
  const me = await registerAndLogin(app)
  const product = (await app.inject({ method: 'POST', url: '/api/product', headers: me.auth, payload: { title: 'lamp', amount: 1 } })).json().id as number

  const openapi = (await app.inject({ url: '/docs/json' })).json() as { paths: Record<string, Record<string, { requestBody?: { content: Record<string, unknown> } }>> }
  const described: Routes = new Map()
  for (const [path, operations] of Object.entries(openapi.paths)) {
    for (const [method, operation] of Object.entries(operations)) {
      if (operation.requestBody !== undefined) described.set(`${method.toUpperCase()} ${path}`, new Set(Object.keys(operation.requestBody.content)))
    }
  }
  t.ok(described.size >= 8, `${described.size} routes take a body`)
  const docs = await documented(described.keys())
  const sorted = (routes: Routes) => [...routes].map(([route, types]) => [route, [...types].sort()]).sort()
  t.same(sorted(docs), sorted(described), 'docs/reliability.md names the same types per route as the OpenAPI document')

  for (const [route, types] of described) {
    const [method = '', path = ''] = route.split(' ')
    const url = path.replace('{id}', String(path.startsWith('/api/product') ? product : me.id))
    for (const [type, body] of Object.entries(BODIES)) {
      const res = await app.inject({ method: method as 'POST', url, headers: { ...me.auth, 'content-type': body.contentType }, payload: body.payload })
      if (types.has(type)) t.not(res.statusCode, 415, `${route} reads ${type} (${res.statusCode})`)
      else t.equal(res.statusCode, 415, `${route} refuses ${type}`)
    }
  }
  t.equal((await app.inject({ method: 'GET', url: `/api/user/${me.id}`, headers: me.auth })).statusCode, 200, 'nothing sent changed the account')
})
