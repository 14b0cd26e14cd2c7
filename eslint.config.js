import path from 'node:path'
import { fileURLToPath } from 'node:url'
import neostandard from 'neostandard'

const root = path.dirname(fileURLToPath(import.meta.url))
const src = path.join(root, 'src')

// The reusable plugins (src/plugins/<name>/README.md) are packages inside this repository:
// a plugin imports its own files and npm packages, never the service around it, and the
// service (and tests) use a plugin only through its index.ts. `n/no-restricted-import`
// matches absolute patterns against the resolved file, so relative depth does not matter.
const plugins = ['keyauth', 'context', 'routing']
const pluginEdges = plugins.map((name) => ({
  files: [`src/plugins/${name}/**/*.ts`],
  rules: {
    'n/no-restricted-import': ['error', [{
      name: [`${src}/**`, `!${src}/plugins/${name}/**`],
      message: `a plugin package imports nothing from the service (see src/plugins/${name}/README.md)`
    }]]
  }
}))
const publicApis = {
  files: ['src/**/*.ts', 'test/**/*.ts', 'bench/**/*.ts', 'scripts/**/*.ts'],
  ignores: plugins.map((name) => `src/plugins/${name}/**`),
  rules: {
    'n/no-restricted-import': ['error', [{
      name: plugins.flatMap((name) => [`${src}/plugins/${name}/**`, `!${src}/plugins/${name}/index.ts`]),
      message: 'use a plugin only through its index.ts (its public API)'
    }]]
  }
}

export default [
  ...neostandard({ ts: true, ignores: ['dist/**', 'src/generated/**', 'node_modules/**', '.data/**', 'coverage/**', '.tap/**'] }),
  ...pluginEdges,
  publicApis
]
