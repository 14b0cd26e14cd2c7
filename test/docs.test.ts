/**
 * The generated blocks of README.md and docs/*.md (scripts/docs.ts) say what the code says:
 * the route table, the settings table, the folder listings and the import graph (docs/keyauth.md
 * checks its admin routes and their refusals against the OpenAPI document). A stale
 * block fails here by file and kind; `npm run docs` rewrites it. Every file of the
 * repository the docs name exists, every setting is in .env.example, and no two folders of
 * src/ import each other, directly or around a loop.
 */
import { readFileSync } from 'node:fs'
import t from 'tap'
import { cycles, importEdges, missingPaths, openapiDocument, refresh, run, settings } from '../scripts/docs.js'

t.test('every generated block matches the code (npm run docs rewrites them)', async (t) => {
  const stale = await run(true)
  t.same(stale, [], stale.map((block) => `stale: ${block}`).join('; ') || 'none stale')
})

t.test('a block that differs from the code is named', async (t) => {
  const { text, stale } = await refresh('<!-- generated: ls scripts -->\n```sh\n$ ls scripts\nnothing\n```\n<!-- end -->\n')
  t.same(stale, ['ls scripts'])
  t.match(text, /docs\.ts/, 'the rewritten block lists the folder as it is')
  t.same((await refresh(text)).stale, [], 'a fresh block is left alone')
})

t.test('every file of the repository that README.md and docs/*.md name exists', async (t) => {
  const missing = missingPaths()
  t.same(missing, [], missing.map((file) => `no such file: ${file}`).join('; ') || 'all exist')
})

t.test('the flags docs/database.md says src/db/embedded.ts passes are the ones it passes', async (t) => {
  const doc = readFileSync(new URL('../docs/database.md', import.meta.url), 'utf8')
  const code = readFileSync(new URL('../src/db/embedded.ts', import.meta.url), 'utf8')
  const items = doc.split(/\n(?=- )/).filter((item) => item.includes('src/db/embedded.ts'))
  const flags = items.flatMap((item) => [...item.matchAll(/`(--[a-z-]+(?:=[^`\s]+)?)`/g)].map((m) => m[1]!))
  t.ok(flags.length > 0, 'the list names some')
  const absent = flags.filter((flag) => !code.includes(`'${flag}'`))
  t.same(absent, [], absent.map((flag) => `not passed by src/db/embedded.ts: ${flag}`).join('; ') || 'all passed')
})

t.test('every setting of the schema is described in .env.example', async (t) => {
  const example = readFileSync(new URL('../.env.example', import.meta.url), 'utf8')
  const absent = (await settings()).map((s) => s.env).filter((name) => !new RegExp(`^#? ?${name}=`, 'm').test(example))
  t.same(absent, [], absent.map((name) => `not in .env.example: ${name}`).join('; ') || 'all there')
})

t.test('no cycle between the folders of src/ (type-only imports included)', async (t) => {
  const loops = cycles(importEdges())
  t.same(loops, [], loops.map((loop) => `cycle: ${loop.join(' -> ')}`).join('; ') || 'none')
  t.same(cycles([{ from: 'a', to: 'b', typeOnly: false }, { from: 'b', to: 'a', typeOnly: true }]), [['a', 'b', 'a']], 'a type-only edge closes a cycle too')
})

t.test('docs/keyauth.md: its route table is the admin routes of the OpenAPI document, its refusals their 401 codes', async (t) => {
  const page = readFileSync(new URL('../docs/keyauth.md', import.meta.url), 'utf8')
  const doc = await openapiDocument()
  const admin = Object.entries(doc.paths).filter(([route]) => route.startsWith('/api/admin/'))
  const routes = admin.flatMap(([route, operations]) => Object.keys(operations).map((method) => `${method.toUpperCase()} ${route}`))
  // `/api/admin/users/:id` and `/api/admin/users?limit=&cursor=` in the page, `/api/admin/users/{id}` in the document.
  const listed = [...page.matchAll(/^\| (GET|POST|PATCH|PUT|DELETE) \| `([^`?]+)[^`]*` \|/gm)].map((m) => `${m[1]} ${m[2]!.replace(/:(\w+)/g, '{$1}')}`)
  t.same([...listed].sort(), [...routes].sort(), 'the same routes')
  const codes = new Set(admin.flatMap(([, operations]) => Object.values(operations).flatMap((op) =>
    Object.values(op.responses['401']?.content?.['application/problem+json']?.examples ?? {}).map((example) => example.value.code))))
  t.same([...codes], ['API_KEY_MISSING', 'API_KEY_INVALID'], 'every admin route documents the two refusals')
  const refusals = [...page.matchAll(/^\| 401 \| `([A-Z_]+)` \|/gm)].map((m) => m[1])
  t.same(refusals, [...codes], 'the refusals table lists them')
})
