/**
 * `npx tsx scripts/openapi-diff.ts <git rev or project folder>`: the OpenAPI document of the
 * working tree against that version's, compared as clients see it: key order and the text of
 * `description` fields aside, every path, operation, parameter, schema, status and header
 * must be the same. Prints each difference and exits 1; exits 0 when there is none. A
 * refactoring that must change nothing for clients runs it against the tree before.
 *
 * Each document is built in a child process (`--dump <folder>`), from that version's
 * `buildApp` with the same settings as `npm run docs` (no database connection is opened).
 * A revision is extracted as the benchmarks extract one (bench/lib/trees.ts).
 */
import { execFileSync } from 'node:child_process'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { prepareTree, workingTree } from '../bench/lib/trees.js'

type Json = null | boolean | number | string | Json[] | { [key: string]: Json }

/** The document of the project in `dir`, built by its own code. */
async function dump (dir: string): Promise<Json> {
  const { buildApp } = await import(pathToFileURL(path.join(dir, 'src/app.ts')).href) as typeof import('../src/app.js')
  const { loadConfig } = await import(pathToFileURL(path.join(dir, 'src/config.ts')).href) as typeof import('../src/config.js')
  const config = loadConfig({ NODE_ENV: 'test', LOG_LEVEL: 'silent', SECRET: 'a'.repeat(48) }, false)
  const app = await buildApp({ config, databaseUrl: 'postgresql://docs@127.0.0.1:1/docs' })
  try {
    await app.ready()
    return (await app.inject('/docs/json')).json()
  } finally {
    await app.close()
  }
}

/** `value` with sorted keys and no `description` texts (a property named `description` stays). */
function normalise (value: Json): Json {
  if (Array.isArray(value)) return value.map(normalise)
  if (value === null || typeof value !== 'object') return value
  return Object.fromEntries(Object.keys(value).sort()
    .filter((key) => !(key === 'description' && typeof value[key] === 'string'))
    .map((key) => [key, normalise(value[key]!)]))
}

/** Each place where `a` and `b` differ, as `/json/pointer: a != b`. */
export function differences (a: Json, b: Json, at = ''): string[] {
  if (JSON.stringify(a) === JSON.stringify(b)) return []
  if (a !== null && b !== null && typeof a === 'object' && typeof b === 'object' && !Array.isArray(a) && !Array.isArray(b)) {
    return [...new Set([...Object.keys(a), ...Object.keys(b)])].flatMap((key) => differences(a[key] ?? null, b[key] ?? null, `${at}/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`))
  }
  const show = (v: Json) => JSON.stringify(v)?.slice(0, 160) ?? 'absent'
  return [`${at || '/'}: ${show(a)} != ${show(b)}`]
}

function documentOf (dir: string): Json {
  const out = execFileSync(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--dump', dir], { encoding: 'utf8', maxBuffer: 1 << 26 })
  return JSON.parse(out) as Json
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [flag, target] = process.argv.slice(2)
  if (flag === '--dump' && target !== undefined) {
    process.stdout.write(JSON.stringify(await dump(target)))
  } else if (flag !== undefined) {
    const other = prepareTree(flag)
    try {
      const found = differences(normalise(documentOf(other.dir)), normalise(documentOf(workingTree().dir)))
      for (const line of found) console.log(line)
      console.log(found.length === 0 ? `The OpenAPI document of the working tree is ${other.name}'s, descriptions aside.` : `${found.length} differences from ${other.name} (left) to the working tree (right).`)
      process.exitCode = found.length === 0 ? 0 : 1
    } finally {
      other.cleanup()
    }
  } else {
    console.error('usage: npx tsx scripts/openapi-diff.ts <git rev or project folder>')
    process.exitCode = 2
  }
}
