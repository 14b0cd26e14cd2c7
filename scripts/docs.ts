/**
 * `npm run docs`: rewrites the generated blocks of README.md and docs/*.md from the code.
 * `npm run docs -- --check` writes nothing and exits 1 naming each stale block
 * (test/docs.test.ts runs it).
 *
 * A block sits between `<!-- generated: <kind> [arguments] -->` and `<!-- end -->`:
 * - `routes`: the route table, from the OpenAPI document of the app as the tests build it;
 * - `request-bodies`: every operation's request body, its examples (one JSON body a line) and its
 *   fields, from the same document (the schemas' `examples`);
 * - `errors [code...]`: the problem codes (CODES, src/lib/problem.ts) with the operations of
 *   the document that list each; with codes, those codes only, and no operations column;
 * - `settings`: the settings table, from the configuration schema (src/config.ts);
 * - `ls <folder>...`: what `ls` shows of those folders (git-ignored entries left out; `folder/*`: its subfolders);
 * - `plugins`: the named plugins of src/ (`fp(fn, { name, dependencies })`) and what each needs;
 * - `imports`: the folder-level import graph of src/ (mermaid), computed from the imports;
 * - `module-edges`: which modules each module may import, from eslint.config.js (`moduleEdges`);
 * - `figures`: the files of each module of src/modules, the decorators of the instance, the
 *   imports between modules and the dependencies, counted from the code and package files.
 */
import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, realpathSync, statSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

// The checkout, also when the tests run this file compiled in their mirror of it
// (scripts/test-build.ts), where package.json is a link back to it.
const ROOT = path.dirname(realpathSync(fileURLToPath(new URL('../package.json', import.meta.url))))
const BLOCK = /(<!-- generated: ([^\n]*?) -->\n)([\s\S]*?)(<!-- end -->)/g

/** The markdown files that may hold generated blocks. */
function documents (): string[] {
  const docs = readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => path.join('docs', f))
  return ['README.md', ...docs.sort()]
}

// ---- routes ----

interface BodySchema { type?: string, description?: string, deprecated?: boolean, format?: string, enum?: unknown[], anyOf?: BodySchema[], items?: BodySchema, properties?: Record<string, BodySchema>, required?: string[] }
interface Media { schema?: BodySchema, example?: unknown, examples?: Record<string, { value: unknown }> }
interface Operation {
  summary?: string
  operationId?: string
  deprecated?: boolean
  security?: Array<Record<string, unknown>>
  requestBody?: { required?: boolean, content: Record<string, Media> }
  responses: Record<string, { content?: Record<string, { examples?: Record<string, { value: { code?: string } }> }> }>
}

const SCHEMES: Record<string, string> = { bearerAuth: 'JWT', cookieAuth: 'session cookie', adminApiKey: 'admin key' }

export async function openapiDocument (): Promise<{ paths: Record<string, Record<string, Operation>> }> {
  const { buildApp } = await import('../src/app.js')
  const { loadConfig } = await import('../src/config.js')
  const config = loadConfig({ NODE_ENV: 'test', LOG_LEVEL: 'silent', SECRET: 'a'.repeat(48) }, false)
  // No query runs: building the app and its document opens no database connection.
  const app = await buildApp({ config, databaseUrl: 'postgresql://docs@127.0.0.1:1/docs' })
  try {
    await app.ready()
    return app.swagger() as unknown as { paths: Record<string, Record<string, Operation>> }
  } finally {
    await app.close()
  }
}

const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\n/g, ' ')

async function routesTable (): Promise<string> {
  const doc = await openapiDocument()
  const rows = ['| Method | Path | Auth | Does | Success | Errors |', '|---|---|---|---|---|---|']
  for (const [route, operations] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(operations)) {
      const auth = [...new Set((op.security ?? []).flatMap((s) => Object.keys(s).map((k) => SCHEMES[k] ?? k)))].join(' or ') || '–'
      const statuses = Object.entries(op.responses)
      const success = statuses.filter(([s]) => Number(s) < 400)
        .map(([s, r]) => `${s}${r.content ? ' ' + Object.keys(r.content).map((c) => `\`${c}\``).join(', ') : ''}`)
      const errors = statuses.filter(([s]) => Number(s) >= 400).map(([s]) => s)
      rows.push(`| ${method.toUpperCase()} | ${route} | ${auth} | ${cell(op.summary ?? '')} | ${success.join('; ')} | ${errors.join(', ') || '–'} |`)
    }
  }
  return rows.join('\n') + '\n'
}

// ---- request bodies ----

/** A field's type in a word or two: `string`, `"token" or "cookie"`, `object`, `array of string`. */
function typeOf (schema: BodySchema): string {
  if (schema.enum !== undefined) return schema.enum.map((v) => JSON.stringify(v)).join(' or ')
  if (schema.anyOf !== undefined) return [...new Set(schema.anyOf.map(typeOf))].join(' or ')
  if (schema.type === 'array') return `array of ${schema.items === undefined ? 'values' : typeOf(schema.items)}`
  if (schema.format === 'binary') return 'a file'
  return schema.type ?? 'any'
}

async function requestBodies (): Promise<string> {
  const doc = await openapiDocument()
  const out: string[] = []
  const bodiless: string[] = []
  for (const [route, operations] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(operations)) {
      const name = `${method.toUpperCase()} ${route}`
      if (op.requestBody === undefined) {
        if (method === 'post' || method === 'patch') bodiless.push(`\`${name}\``)
        continue
      }
      const types = Object.keys(op.requestBody.content)
      const [type, media] = Object.entries(op.requestBody.content)[0]!
      const notes = [`\`${op.operationId}\``, types.map((t) => `\`${t}\``).join(' or '), ...(op.requestBody.required === false ? ['or no body at all'] : [])]
      out.push(`**${name}** (${notes.join('; ')})${op.deprecated === true ? `: ${op.summary}` : ''}`, '')
      const examples = media.examples === undefined ? [media.example] : Object.values(media.examples).map((e) => e.value)
      if (type === 'application/json') out.push('```json', ...examples.map((e) => JSON.stringify(e)), '```', '')
      const schema = media.schema ?? {}
      if (schema.description !== undefined) out.push(`${cell(schema.description[0]!.toUpperCase() + schema.description.slice(1))}.`, '')
      const fields = Object.entries(schema.properties ?? {})
      for (const [field, property] of fields) {
        const required = schema.required?.includes(field) === true ? 'required' : 'optional'
        const deprecated = property.deprecated === true ? ', deprecated' : ''
        out.push(`- \`${field}\` (${typeOf(property)}, ${required}${deprecated})${property.description === undefined ? '' : `: ${cell(property.description)}`}`)
      }
      if (fields.length > 0) out.push('')
    }
  }
  out.push(`With no body: ${bodiless.join(', ')}.`)
  return out.join('\n') + '\n'
}

// ---- errors ----

/** The problem codes each operation of `doc` lists, as `METHOD /path` -> `status code` entries. */
export function listedCodes (doc: { paths: Record<string, Record<string, Operation>> }): Map<string, Set<string>> {
  const listed = new Map<string, Set<string>>()
  for (const [route, operations] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(operations)) {
      const codes = Object.entries(op.responses).flatMap(([status, response]) =>
        Object.values(response.content?.['application/problem+json']?.examples ?? {}).map((example) => `${status} ${example.value.code}`))
      listed.set(`${method.toUpperCase()} ${route}`, new Set(codes))
    }
  }
  return listed
}

async function errorsTable (only: string[]): Promise<string> {
  const { CODES } = await import('../src/lib/problem.js')
  const entries = Object.entries(CODES as Record<string, readonly [number, string, string, string?]>)
    .filter(([code]) => only.length === 0 || only.includes(code))
    .sort(([a, x], [b, y]) => x[0] - y[0] || Object.keys(CODES).indexOf(a) - Object.keys(CODES).indexOf(b))
  if (only.length > 0) {
    return ['| Status | `code` | When | `detail` |', '|---|---|---|---|', ...entries.map(([code, [status, when, detail]]) => `| ${status} | \`${code}\` | ${cell(when)} | \`${cell(detail)}\` |`)].join('\n') + '\n'
  }
  const doc = await openapiDocument()
  const ids = new Map<string, string>(Object.entries(doc.paths).flatMap(([route, operations]) => Object.entries(operations).map(([method, op]) => [`${method.toUpperCase()} ${route}`, op.operationId ?? `${method.toUpperCase()} ${route}`] as const)))
  const listed = listedCodes(doc)
  const rows = ['| Status | `code` | When | Operations |', '|---|---|---|---|']
  for (const [code, [status, when, , anywhere]] of entries) {
    const having = [...listed].filter(([, codes]) => codes.has(`${status} ${code}`)).map(([operation]) => ids.get(operation)!)
    const lacking = [...ids.values()].filter((id) => !having.includes(id))
    const names = (list: string[]) => list.map((id) => `\`${id}\``).join(', ')
    const operations = having.length === 0
      ? 'none'
      : lacking.length === 0 ? 'all' : having.length > lacking.length ? `all but ${names(lacking)}` : names(having)
    const outside = 'any request, before or outside an operation'
    const where = anywhere === undefined ? operations : having.length === 0 ? outside : `${operations}; ${outside}`
    rows.push(`| ${status} | \`${code}\` | ${cell(when)} | ${where} |`)
  }
  return rows.join('\n') + '\n'
}

// ---- settings ----

interface SchemaNode { type?: string, properties?: Record<string, SchemaNode>, anyOf?: SchemaNode[], const?: unknown, default?: unknown, description?: string, env?: string, fromFile?: boolean, aliases?: string[], minimum?: number, maximum?: number, pattern?: string }

/**
 * The JSDoc comments of src/config.ts's object properties, by their path of keys
 * (`PORT`, or `server.port` in a nested section): the meaning of a leaf whose schema has no description.
 */
function sourceComments (): Map<string, string> {
  const text = readFileSync(path.join(ROOT, 'src/config.ts'), 'utf8')
  const comments = new Map<string, string>()
  const visit = (node: ts.Node, trail: string[]) => {
    let next = trail
    if (ts.isPropertyAssignment(node) && (ts.isIdentifier(node.name) || ts.isStringLiteral(node.name))) {
      next = [...trail, node.name.text]
      const doc = (ts.getLeadingCommentRanges(text, node.getFullStart()) ?? []).map((r) => text.slice(r.pos, r.end)).filter((c) => c.startsWith('/**')).at(-1)
      if (doc !== undefined) comments.set(next.join('.'), doc.slice(3, -2).split('\n').map((l) => l.replace(/^\s*\*\s?/, '').trim()).join(' ').trim())
    }
    ts.forEachChild(node, (child) => visit(child, next))
  }
  visit(ts.createSourceFile('config.ts', text, ts.ScriptTarget.Latest, true), [])
  return comments
}

function values (node: SchemaNode): string {
  if (node.anyOf?.every((n) => n.const !== undefined)) return node.anyOf.map((n) => String(n.const)).join(', ')
  if (node.anyOf) return node.anyOf.map(values).join(' or ')
  const { minimum: min, maximum: max } = node
  const range = min !== undefined && max !== undefined ? ` ${min}-${max}` : min !== undefined ? ` >= ${min}` : max !== undefined ? ` <= ${max}` : ''
  return `${node.type ?? 'any'}${range}`
}

function shown (value: unknown): string {
  if (value === undefined) return '–'
  if (value === '') return '(empty)'
  return `\`${String(value)}\``
}

interface Setting { section: string, env: string, names: string[], node: SchemaNode, meaning: string }

/** The leaves of the configuration schema, section by section (a flat schema is one section). */
export async function settings (): Promise<Setting[]> {
  const { EnvSchema } = await import('../src/config.js') as unknown as { EnvSchema: SchemaNode }
  const comments = sourceComments()
  const found: Setting[] = []
  const walk = (node: SchemaNode, trail: string[]) => {
    const nested: Array<[string, SchemaNode]> = []
    for (const [key, child] of Object.entries(node.properties ?? {})) {
      if (child.type === 'object' && child.properties) { nested.push([key, child]); continue }
      const env = child.env ?? key
      // A leaf read from a file too (`SECRET_FILE`), or under other names.
      const names = [env, ...(child.fromFile ? [`${env}_FILE`] : []), ...(child.aliases ?? [])]
      found.push({ section: trail.join('.'), env, names, node: child, meaning: child.description ?? comments.get([...trail, key].join('.')) ?? '' })
    }
    for (const [key, child] of nested) walk(child, [...trail, key])
  }
  walk(EnvSchema, [])
  return found
}

async function settingsTable (): Promise<string> {
  const head = ['| Variable | Default | Values | Meaning |', '|---|---|---|---|']
  const sections = new Map<string, string[]>()
  for (const s of await settings()) {
    const row = `| ${s.names.map((n) => `\`${n}\``).join(', ')} | ${shown(s.node.default)} | ${cell(values(s.node))} | ${cell(s.meaning)} |`
    sections.set(s.section, [...(sections.get(s.section) ?? []), row])
  }
  return [...sections].map(([title, rows]) => [...(title ? [`**${title}**`, ''] : []), ...head, ...rows].join('\n')).join('\n\n') + '\n'
}

// ---- folder listings ----

const lines = (text: string) => new Set(text.split('\n').filter((l) => l !== ''))

function ignored (paths: string[]): Set<string> {
  if (paths.length === 0) return new Set()
  try {
    return lines(execFileSync('git', ['check-ignore', '--stdin'], { cwd: ROOT, input: paths.join('\n'), encoding: 'utf8' }))
  } catch (error) {
    // Exit 1: nothing is ignored. No git at all: nothing is left out.
    return lines((error as { stdout?: string }).stdout ?? '')
  }
}

function listing (args: string[]): string {
  // `folder/*`: each of its subfolders.
  const folders = args.flatMap((a) => a.endsWith('/*')
    ? readdirSync(path.join(ROOT, a.slice(0, -2))).filter((n) => statSync(path.join(ROOT, a.slice(0, -2), n)).isDirectory()).sort().map((n) => `${a.slice(0, -2)}/${n}`)
    : [a])
  const list = (folder: string) => {
    const names = readdirSync(path.join(ROOT, folder)).filter((n) => !n.startsWith('.')).sort()
    const skip = ignored(names.map((n) => path.join(folder, n)))
    return names.filter((n) => !skip.has(path.join(folder, n))).join('  ')
  }
  const body = folders.length === 1
    ? list(folders[0]!)
    : folders.map((f) => `${f}:\n${list(f)}`).join('\n\n')
  return ['```sh', `$ ls ${args.join(' ')}`, body, '```', ''].join('\n')
}

// ---- plugins ----

/** Every `fp(plugin, { name, dependencies })` of src/: the named plugins and what each needs registered first. */
function pluginTable (): string {
  const rows = ['| plugin | file | needs first |', '|---|---|---|']
  for (const file of sourceFiles(path.join(ROOT, 'src')).sort()) {
    const visit = (node: ts.Node) => {
      const options = ts.isCallExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'fp' ? node.arguments[1] : undefined
      if (options && ts.isObjectLiteralExpression(options)) {
        const field = (key: string) => options.properties.find((p): p is ts.PropertyAssignment => ts.isPropertyAssignment(p) && ts.isIdentifier(p.name) && p.name.text === key)?.initializer
        const name = field('name')
        const needs = field('dependencies')
        const list = needs && ts.isArrayLiteralExpression(needs) ? needs.elements.filter(ts.isStringLiteral).map((e) => `\`${e.text}\``).join(', ') : ''
        if (name && ts.isStringLiteral(name)) rows.push(`| \`${name.text}\` | ${path.relative(ROOT, file)} | ${list || '–'} |`)
      }
      ts.forEachChild(node, visit)
    }
    visit(ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest))
  }
  return rows.join('\n') + '\n'
}

// ---- import graph ----

export interface Edge { from: string, to: string, typeOnly: boolean }

function sourceFiles (dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const file = path.join(dir, name)
    if (statSync(file).isDirectory()) return ignored([path.relative(ROOT, file)]).size > 0 ? [] : sourceFiles(file)
    return /\.(ts|mts)$/.test(name) && !name.endsWith('.d.ts') ? [file] : []
  })
}

/** The node a file belongs to: its folder under src/ (two levels at most: `modules/users`), or the file itself at src/'s top. */
function nodeOf (file: string): string {
  const rel = path.relative(path.join(ROOT, 'src'), file)
  const dir = path.dirname(rel)
  return dir === '.' ? rel.replace(/\.ts$/, '') : dir.split(path.sep).slice(0, 2).join('/')
}

/** The workspace packages (packages/<folder>/package.json) by name: an import of one is an edge to `packages/<folder>`. */
function workspaces (): Map<string, string> {
  const dir = path.join(ROOT, 'packages')
  if (!existsSync(dir)) return new Map()
  return new Map(readdirSync(dir).filter((f) => existsSync(path.join(dir, f, 'package.json')))
    .map((f) => [JSON.parse(readFileSync(path.join(dir, f, 'package.json'), 'utf8')).name as string, `packages/${f}`]))
}

/** The folder-level edges of src/: one per (from, to), type-only when every import behind it is. */
export function importEdges (): Edge[] {
  const edges = new Map<string, Edge>()
  const packages = workspaces()
  for (const file of sourceFiles(path.join(ROOT, 'src'))) {
    const tree = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest)
    const add = (specifier: string, typeOnly: boolean) => {
      const from = nodeOf(file)
      let to: string | undefined
      if (specifier.startsWith('.')) {
        const target = path.resolve(path.dirname(file), specifier).replace(/\.js$/, '.ts')
        to = nodeOf(existsSync(target) ? target : path.join(target, 'index.ts'))
      } else {
        to = [...packages].find(([name]) => specifier === name || specifier.startsWith(name + '/'))?.[1]
      }
      if (to === undefined) return
      if (from === to) return
      const key = `${from} ${to}`
      const known = edges.get(key)
      edges.set(key, { from, to, typeOnly: (known?.typeOnly ?? true) && typeOnly })
    }
    const visit = (node: ts.Node) => {
      if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
        const clause = node.importClause
        const named = clause?.namedBindings
        const allTypes = clause !== undefined && (clause.isTypeOnly ||
          (clause.name === undefined && named !== undefined && ts.isNamedImports(named) && named.elements.length > 0 && named.elements.every((e) => e.isTypeOnly)))
        add(node.moduleSpecifier.text, allTypes)
      } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
        add(node.moduleSpecifier.text, node.isTypeOnly)
      } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword && node.arguments[0] && ts.isStringLiteral(node.arguments[0])) {
        add(node.arguments[0].text, false)
      } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
        add(node.argument.literal.text, true)
      }
      ts.forEachChild(node, visit)
    }
    visit(tree)
  }
  return [...edges.values()].sort((a, b) => a.from.localeCompare(b.from) || a.to.localeCompare(b.to))
}

/** Each cycle between folders, as the list of its nodes (empty: none). */
export function cycles (edges: Edge[]): string[][] {
  const next = new Map<string, string[]>()
  for (const e of edges) next.set(e.from, [...(next.get(e.from) ?? []), e.to])
  const found: string[][] = []
  const state = new Map<string, 'open' | 'done'>()
  const stack: string[] = []
  const visit = (node: string) => {
    state.set(node, 'open')
    stack.push(node)
    for (const to of next.get(node) ?? []) {
      if (state.get(to) === 'open') found.push([...stack.slice(stack.indexOf(to)), to])
      else if (!state.has(to)) visit(to)
    }
    stack.pop()
    state.set(node, 'done')
  }
  for (const node of [...next.keys()].sort()) if (!state.has(node)) visit(node)
  return found
}

function importGraph (): string {
  const edges = importEdges()
  const id = (node: string) => node.replace(/[^A-Za-z0-9]/g, '_')
  const nodes = [...new Set(edges.flatMap((e) => [e.from, e.to]))].sort()
  return ['```mermaid', 'flowchart TD',
    ...nodes.map((n) => `  ${id(n)}["${n}"]`),
    ...edges.map((e) => `  ${id(e.from)} ${e.typeOnly ? '-. type .->' : '-->'} ${id(e.to)}`),
    '```', ''].join('\n')
}

// ---- module edges and figures ----

/** The edges lint allows between modules: eslint.config.js's `moduleEdges`, read from its source. */
export function moduleEdges (): Record<string, string[]> {
  const file = path.join(ROOT, 'eslint.config.js')
  const tree = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest)
  for (const statement of tree.statements) {
    if (!ts.isVariableStatement(statement)) continue
    for (const declaration of statement.declarationList.declarations) {
      if (!ts.isIdentifier(declaration.name) || declaration.name.text !== 'moduleEdges' || declaration.initializer === undefined || !ts.isObjectLiteralExpression(declaration.initializer)) continue
      return Object.fromEntries(declaration.initializer.properties.filter(ts.isPropertyAssignment).map((p) => [
        (p.name as ts.Identifier).text,
        ts.isArrayLiteralExpression(p.initializer) ? p.initializer.elements.filter(ts.isStringLiteral).map((e) => e.text) : []
      ]))
    }
  }
  throw new Error('eslint.config.js has no `moduleEdges` object')
}

/** `users -> products, mail; ...; health -> none`. */
function moduleEdgesList (): string {
  const edges = Object.entries(moduleEdges())
  const leaves = edges.filter(([, to]) => to.length === 0).map(([from]) => from)
  return [...edges.filter(([, to]) => to.length > 0).map(([from, to]) => `${from} -> ${to.join(', ')}`), `${leaves.join(', ')} -> none`].join('; ') + '\n'
}

/** The import statements (type-only and re-exports included) from one module folder to another: `from -> to` each. */
export function moduleImports (): Array<{ from: string, to: string }> {
  const found: Array<{ from: string, to: string }> = []
  const modules = path.join(ROOT, 'src', 'modules')
  for (const file of sourceFiles(modules)) {
    const from = path.relative(modules, file).split(path.sep)[0]!
    const tree = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest)
    for (const node of tree.statements) {
      const specifier = (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier) ? node.moduleSpecifier.text : undefined
      if (specifier === undefined || !specifier.startsWith('.')) continue
      const target = path.relative(modules, path.resolve(path.dirname(file), specifier))
      const to = target.split(path.sep)[0]!
      if (!target.startsWith('..') && to !== from) found.push({ from, to })
    }
  }
  return found
}

/** The names given to `decorate(...)` in src/: the instance's decorators (request and reply decorators apart). */
export function instanceDecorators (): string[] {
  return sourceFiles(path.join(ROOT, 'src')).flatMap((file) => [...readFileSync(file, 'utf8').matchAll(/\.decorate\('(\w+)'/g)].map((m) => m[1]!))
}

function figuresTable (): string {
  const modules = path.join(ROOT, 'src', 'modules')
  const rows = ['| what | figure |', '|---|---|']
  const sizes = readdirSync(modules).sort().map((name) => `${name} ${sourceFiles(path.join(modules, name)).length}`)
  rows.push(`| files of each module (\`src/modules/*\`) | ${sizes.join(', ')} |`)
  const decorators = [...new Set(instanceDecorators())].sort()
  rows.push(`| decorators of the instance (\`decorate(\` in src/) | ${decorators.length}: ${decorators.map((d) => `\`${d}\``).join(', ')} |`)
  const imports = moduleImports()
  const pairs = new Map<string, number>()
  for (const { from, to } of imports) pairs.set(`${from} -> ${to}`, (pairs.get(`${from} -> ${to}`) ?? 0) + 1)
  rows.push(`| import statements between modules | ${imports.length}: ${[...pairs].sort().map(([pair, n]) => `${pair} ${n}`).join(', ')} |`)
  const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as Record<string, Record<string, string> | undefined>
  const count = (field: string) => Object.keys(pkg[field] ?? {}).length
  rows.push(`| the service's dependencies (runtime + dev + optional, \`package.json\`) | ${count('dependencies')} + ${count('devDependencies')} + ${count('optionalDependencies')} |`)
  const lock = JSON.parse(readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { link?: boolean }> }
  const installed = Object.entries(lock.packages).filter(([key]) => key !== '')
  const links = installed.filter(([, entry]) => entry.link === true).length
  rows.push(`| installed packages (\`package-lock.json\` entries) | ${installed.length} (${installed.length - links} packages + ${links} workspace links) |`)
  return rows.join('\n') + '\n'
}

// ---- blocks ----

async function render (kind: string): Promise<string> {
  const [name, ...args] = kind.split(/\s+/)
  if (name === 'routes') return await routesTable()
  if (name === 'request-bodies') return await requestBodies()
  if (name === 'errors') return await errorsTable(args)
  if (name === 'settings') return await settingsTable()
  if (name === 'imports') return importGraph()
  if (name === 'plugins') return pluginTable()
  if (name === 'module-edges') return moduleEdgesList()
  if (name === 'figures') return figuresTable()
  if (name === 'ls' && args.length > 0) return listing(args)
  throw new Error(`unknown generated block: ${kind}`)
}

/** Paths of the repository named in README.md and docs/*.md (`src/db/client.ts`) that do not exist, as `file: path`. */
export function missingPaths (): string[] {
  const named = /\b((?:src|test|bench|scripts|deploy|prisma|docs|packages)\/[\w./-]*\w\.(?:ts|mjs|md|cfg|prisma|sql|json|yml|sh))\b/g
  return documents().flatMap((file) => [...new Set([...readFileSync(path.join(ROOT, file), 'utf8').matchAll(named)].map((m) => m[1]!))]
    .filter((p) => !existsSync(path.join(ROOT, p))).map((p) => `${file}: ${p}`))
}

/** `text` with its generated blocks rewritten, and the kinds of those that changed. */
export async function refresh (text: string, cache = new Map<string, string>()): Promise<{ text: string, stale: string[] }> {
  const stale: string[] = []
  let out = text
  for (const match of text.matchAll(BLOCK)) {
    const kind = match[2]!.trim()
    if (!cache.has(kind)) cache.set(kind, await render(kind))
    const fresh = cache.get(kind)!
    if (match[3] === fresh) continue
    stale.push(kind)
    out = out.replace(match[0], () => `${match[1]}${fresh}${match[4]}`)
  }
  return { text: out, stale }
}

/** Each stale block as `file: kind`; the files are rewritten unless `check`. */
export async function run (check: boolean): Promise<string[]> {
  const stale: string[] = []
  const cache = new Map<string, string>()
  for (const file of documents()) {
    const text = readFileSync(path.join(ROOT, file), 'utf8')
    const fresh = await refresh(text, cache)
    stale.push(...fresh.stale.map((kind) => `${file}: ${kind}`))
    if (!check && fresh.text !== text) writeFileSync(path.join(ROOT, file), fresh.text)
  }
  return stale
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const check = process.argv.includes('--check')
  const stale = await run(check)
  for (const block of stale) console.log(`${check ? 'stale' : 'rewrote'}: ${block}`)
  const missing = missingPaths()
  for (const file of missing) console.log(`no such file: ${file}`)
  const loops = cycles(importEdges())
  for (const loop of loops) console.log(`cycle between src folders: ${loop.join(' -> ')}`)
  process.exit(check && (stale.length > 0 || missing.length > 0 || loops.length > 0) ? 1 : 0)
}
