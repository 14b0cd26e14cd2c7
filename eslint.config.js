import { readdirSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import neostandard from 'neostandard'

const root = path.dirname(fileURLToPath(import.meta.url))

// The plugin packages (packages/<name>/, npm workspaces) can be published as they are, so a
// package imports its own files, node:* and npm packages, never the service around it nor a
// sibling's files. `n/no-restricted-import` matches these patterns against the resolved file,
// so a relative path of any depth is caught. A package's tests may use its siblings by name
// (they are devDependencies there); its sources may not (the context plugin finds the routing
// plugin at run time, through app.getRouteURL).
const packages = ['key-auth', 'context', 'routing']
const packageEdges = packages.flatMap((name) => [{
  files: [`packages/${name}/**/*.ts`],
  rules: {
    'n/no-restricted-import': ['error', [{
      name: [`${root}/**`, `!${root}/packages/${name}/**`, `!${root}/node_modules/**`],
      message: `a plugin package imports only its own files and npm packages (packages/${name}/README.md)`
    }]]
  }
}, {
  files: [`packages/${name}/src/**/*.ts`],
  rules: {
    'no-restricted-imports': ['error', {
      patterns: [{ group: ['@user-product-service/*'], message: 'a plugin package does not depend on its siblings' }]
    }]
  }
}])
// The service, its tests, bench and scripts use a package by its name only (its exports),
// never a file inside it.
const byName = {
  files: ['src/**/*.ts', 'test/**/*.ts', 'bench/**/*.ts', 'scripts/**/*.ts'],
  rules: {
    'no-restricted-imports': ['error', {
      patterns: [
        { group: ['**/packages/**'], message: 'import a plugin package by its name (@user-product-service/<name>)' },
        { group: ['@user-product-service/*/**'], message: 'a plugin package has one entry point: its name' }
      ]
    }]
  }
}

// One way to query each table: SQL through src/db/sql.ts (docs/architecture.md, "Queries").
// Prisma is the schema, the migrations and the row types; its client's query API (the models,
// $queryRaw, $transaction) belongs to src/db/ alone, so no other file reads or writes a table
// through it, and no other file makes a client (types from the generated client are fine).
// The tests, benches and scripts look at tables the same way (test/helpers/database.ts, `query`).
const PRISMA_QUERY = 'query with SQL through src/db/sql.ts; the Prisma client\'s query API is src/db\'s alone (docs/architecture.md, "Queries")'
const sqlOnly = {
  files: ['src/**/*.ts', 'test/**/*.ts', 'bench/**/*.ts', 'scripts/**/*.ts'],
  ignores: ['src/db/**'],
  rules: {
    'no-restricted-syntax': ['error',
      { selector: "MemberExpression[object.type='Identifier'][object.name='prisma']", message: PRISMA_QUERY },
      { selector: "MemberExpression[object.type='MemberExpression'][object.property.name='prisma']", message: PRISMA_QUERY },
      { selector: "ImportDeclaration[importKind='value'][source.value=/generated\\/prisma/] > ImportSpecifier[importKind='value']", message: PRISMA_QUERY }
    ]
  }
}

// Every import names a package listed in the nearest package.json: the service's for src/,
// test/, bench/ and scripts/, a plugin package's own for its files.
const listedImports = {
  files: ['**/*.ts', '**/*.js', '**/*.mjs'],
  rules: { 'n/no-extraneous-import': 'error' }
}

// The layers of docs/architecture.md ("What each folder may import"): each folder of src/
// imports its own files, npm packages and the places listed, nothing else (type-only and
// dynamic imports included). The lists only point down, so no two folders import each other.
const src = path.join(root, 'src')
const at = (place) => path.join(src, place)
const infrastructure = {
  lib: [],
  'config.ts': ['lib'],
  telemetry: ['config.ts', 'lib'],
  db: ['config.ts', 'lib', 'generated'],
  storage: ['lib', 'db'],
  'plugins/*.ts': ['config.ts', 'lib', 'db', 'storage', 'generated']
}
// Modules import each other only through the other's index.ts, and only along these edges
// (docs/architecture.md shows them: `npm run docs`). A new module folder must be listed here
// (this file throws otherwise).
export const moduleEdges = {
  products: [],
  health: [],
  mail: [],
  users: ['products', 'mail'],
  identity: ['users', 'mail'],
  admin: ['users'],
  metrics: ['admin']
}
const modules = moduleEdges
const unlisted = readdirSync(at('modules'), { withFileTypes: true })
  .filter((entry) => entry.isDirectory() && !(entry.name in modules)).map((entry) => entry.name)
if (unlisted.length > 0) throw new Error(`eslint.config.js: say what src/modules/${unlisted.join(', ')} may import (\`modules\`)`)

const WHY = '(docs/architecture.md, "What each folder may import")'
/** The files of a place of src/: one file, a folder, or `plugins/*.ts`. */
const filesOf = (place) => place.endsWith('.ts') ? at(place) : at(`${place}/**`)
/** Everything in src/ but `places`. */
const allBut = (places, message) => ({ name: [`${src}/**`, ...places.map((place) => `!${filesOf(place)}`)], message })
const layerEdges = [
  ...Object.entries(infrastructure).map(([place, allowed]) => ({
    files: [place.endsWith('.ts') ? `src/${place}` : `src/${place}/**/*.ts`],
    rules: {
      'n/no-restricted-import': ['error', [
        allBut([place, ...allowed], `src/${place} imports ${allowed.length === 0 ? 'only its own files' : `only ${allowed.join(', ')}`} ${WHY}`)
      ]]
    }
  })),
  ...Object.entries(modules).map(([name, others]) => ({
    files: [`src/modules/${name}/**/*.ts`],
    rules: {
      'n/no-restricted-import': ['error', [
        {
          name: [at('modules/**'), `!${at(`modules/${name}/**`)}`, ...others.map((other) => `!${at(`modules/${other}/index.ts`)}`)],
          message: `src/modules/${name} imports ${others.length === 0 ? 'no other module' : `other modules only through the index.ts of ${others.join(', ')}`} ${WHY}`
        },
        allBut(['modules', 'config.ts', 'lib', 'db', 'storage', 'plugins', 'generated'], `a module imports config, lib, db, storage, plugins and modules, never app, options or server ${WHY}`)
      ]]
    }
  })),
  {
    files: ['src/*.ts'],
    ignores: ['src/config.ts'],
    rules: {
      'n/no-restricted-import': ['error', [{
        name: [at('modules/**'), `!${at('modules/*/index.ts')}`],
        message: `use a module only through its index.ts ${WHY}`
      }]]
    }
  }
]

export default [
  ...neostandard({ ts: true, ignores: ['**/dist/**', 'src/generated/**', '**/node_modules/**', '.data/**', 'coverage/**', '**/.tap/**', '.test-build/**'] }),
  listedImports,
  ...packageEdges,
  byName,
  sqlOnly,
  ...layerEdges,
  // The web app's modules run in browsers (neostandard already knows document, fetch, ...).
  { files: ['web/**/*.js'], languageOptions: { globals: { FileReader: 'readonly', history: 'readonly', location: 'readonly' } } }
]
