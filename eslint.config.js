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

// Every import names a package listed in the nearest package.json: the service's for src/,
// test/, bench/ and scripts/, a plugin package's own for its files.
const listedImports = {
  files: ['**/*.ts', '**/*.js', '**/*.mjs'],
  rules: { 'n/no-extraneous-import': 'error' }
}

export default [
  ...neostandard({ ts: true, ignores: ['**/dist/**', 'src/generated/**', '**/node_modules/**', '.data/**', 'coverage/**', '**/.tap/**'] }),
  listedImports,
  ...packageEdges,
  byName
]
