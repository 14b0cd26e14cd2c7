/**
 * The problem codes the tests received, against the codes the OpenAPI document lists per
 * operation. The tests record their answers when TEST_PROBLEM_LOG names a folder
 * (test/helpers/build.ts); `npm test` sets it for the whole suite and runs this after it.
 *
 *   npx tsx scripts/problem-codes.ts <folder>          every code received from an operation is listed for it
 *   npx tsx scripts/problem-codes.ts <folder> --both   and every listed code was received from its operation
 *
 * The second direction means something only after the whole suite: a few files produce a
 * few codes. Exits 1 naming each (operation, status, code) missing either way. A code of no
 * operation (`anywhere` in CODES) is listed on the Problem component, not per operation.
 */
import { readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { CODES } from '../src/lib/problem.js'
import { listedCodes, openapiDocument } from './docs.js'

/** The operation (`METHOD /path/{param}`) a request went to, or undefined when none serves it. */
function operationOf (method: string, url: string, templates: Array<[string, RegExp, number]>, listed: Map<string, Set<string>>): string | undefined {
  // A HEAD is the GET's operation (Fastify serves one with the other; the document has only the GET).
  const asked = method === 'HEAD' ? 'GET' : method
  const match = templates.filter(([route, pattern]) => pattern.test(url) && listed.has(`${asked} ${route}`))
    .sort((a, b) => a[2] - b[2])[0]
  return match === undefined ? undefined : `${asked} ${match[0]}`
}

type Operation = { summary?: string, parameters?: unknown, requestBody?: unknown, responses: unknown }

/**
 * Operations that are one route registered under several URLs (an alias keeps its route's
 * schema: the same method, summary, parameters, body and responses), by operation: the
 * codes received from any of them count for each.
 */
export function aliases (doc: { paths: Record<string, Record<string, Operation>> }): Map<string, string[]> {
  const groups = new Map<string, string[]>()
  const keyOf = new Map<string, string>()
  for (const [route, operations] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(operations)) {
      const key = JSON.stringify([method, op.summary, op.parameters, op.requestBody, op.responses])
      groups.set(key, [...(groups.get(key) ?? []), `${method.toUpperCase()} ${route}`])
      keyOf.set(`${method.toUpperCase()} ${route}`, key)
    }
  }
  return new Map([...keyOf].map(([operation, key]) => [operation, groups.get(key)!]))
}

export async function compare (folder: string, both: boolean): Promise<{ unlisted: string[], unproduced: string[], answers: number }> {
  const doc = await openapiDocument()
  const listed = listedCodes(doc)
  const sameRoute = aliases(doc as { paths: Record<string, Record<string, Operation>> })
  const routes = [...new Set([...listed.keys()].map((operation) => operation.split(' ')[1]!))]
  // A path with fewer parameters wins: `/api/security/passkeys` is not `/api/security/{x}`.
  const templates = routes.map((route) => [route, new RegExp(`^${route.replace(/\{[^}]+\}/g, '[^/]+')}/?$`), (route.match(/\{/g) ?? []).length] as [string, RegExp, number])
  const received = new Map<string, Set<string>>()
  let answers = 0
  for (const file of readdirSync(folder).filter((name) => name.endsWith('.jsonl'))) {
    for (const line of readFileSync(path.join(folder, file), 'utf8').split('\n').filter(Boolean)) {
      const [method, url, status, code] = JSON.parse(line) as [string, string, number, string]
      answers++
      const operation = operationOf(method, url, templates, listed)
      if (operation === undefined) continue
      received.set(operation, (received.get(operation) ?? new Set()).add(`${status} ${code}`))
    }
  }
  // A code of no operation (`anywhere` in CODES) is listed once, on the Problem component.
  const anywhere = (entry: string) => (CODES as Record<string, readonly unknown[]>)[entry.split(' ')[1]!]?.[3] === 'anywhere'
  const unlisted = [...received].flatMap(([operation, codes]) => [...codes].filter((code) => !listed.get(operation)!.has(code) && !anywhere(code)).map((code) => `${operation} ${code}`))
  const unproduced = both
    ? [...listed].flatMap(([operation, codes]) => [...codes].filter((code) => !sameRoute.get(operation)!.some((one) => received.get(one)?.has(code))).map((code) => `${operation} ${code}`))
    : []
  return { unlisted: unlisted.sort(), unproduced: unproduced.sort(), answers }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const folder = process.argv[2]
  if (folder === undefined) {
    console.error('usage: npx tsx scripts/problem-codes.ts <folder of TEST_PROBLEM_LOG> [--both]')
    process.exit(2)
  }
  const { unlisted, unproduced, answers } = await compare(folder, process.argv.includes('--both'))
  for (const entry of unlisted) console.log(`received, not listed: ${entry}`)
  for (const entry of unproduced) console.log(`listed, never received: ${entry}`)
  console.log(`# ${answers} problem answers; ${unlisted.length} codes received but not listed${process.argv.includes('--both') ? `, ${unproduced.length} listed but never received` : ''}`)
  process.exit(unlisted.length + unproduced.length > 0 ? 1 : 0)
}
