import neostandard from 'neostandard'

export default [
  ...neostandard({ ts: true, ignores: ['dist/**', 'src/generated/**', 'node_modules/**', '.data/**', 'coverage/**', '.tap/**'] })
]
