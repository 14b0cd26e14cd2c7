/**
 * Compiles the checkout's TypeScript once, for `npm test`, into a mirror of the checkout:
 * every `.ts` file becomes a `.js` file beside a link to its source, and every other file
 * or folder is a link to the original. The ~100 test processes then load plain JavaScript
 * instead of each going through tsx's loader (about 1 CPU-second a process for ~800
 * modules, the largest single cost of the suite on two cores; docs/architecture.md "Size
 * and speed").
 *
 * Relative paths stay true inside the mirror (`new URL('../../web/', import.meta.url)`
 * finds the linked folder), bare imports resolve through a link to the checkout's
 * node_modules,
 * and the workspace packages are imported from their compiled sources, as tsconfig `paths`
 * does for tsx, never from a possibly stale `dist/`. A test that spawns `tsx src/server.ts`
 * still can: the `.ts` files are there, as links.
 */
import { mkdir, readdir, readFile, symlink, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { transform } from 'esbuild'

/** Not mirrored: installed, built, or written by runs. */
const SKIP = new Set(['.git', 'node_modules', 'dist', '.data', '.tap', '.test-build', 'coverage'])
const PACKAGES = /(["'])@user-product-service\/(context|key-auth|routing)\1/g

interface Tree { files: string[], dirs: Map<string, Tree>, hasTs: boolean }

async function scan (dir: string): Promise<Tree> {
  const tree: Tree = { files: [], dirs: new Map(), hasTs: false }
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    if (SKIP.has(entry.name)) continue
    if (entry.isDirectory()) {
      const sub = await scan(path.join(dir, entry.name))
      tree.dirs.set(entry.name, sub)
      tree.hasTs ||= sub.hasTs
    } else {
      tree.files.push(entry.name)
      tree.hasTs ||= isSource(entry.name)
    }
  }
  return tree
}

function isSource (name: string): boolean {
  return name.endsWith('.ts') && !name.endsWith('.d.ts')
}

/**
 * Builds the mirror of `root` in `out` (which must not exist) and returns the number of
 * files compiled.
 */
export async function buildTestTree (root: string, out: string): Promise<number> {
  const tree = await scan(root)
  const compile: Array<{ from: string, to: string }> = []
  const place = async (t: Tree, rel: string): Promise<void> => {
    await mkdir(path.join(out, rel), { recursive: true })
    for (const name of t.files) {
      await symlink(path.join(root, rel, name), path.join(out, rel, name))
      if (!isSource(name)) continue
      const js = name.slice(0, -3) + '.js'
      if (t.files.includes(js)) throw new Error(`${path.join(rel, name)} and ${js} would compile to the same file`)
      compile.push({ from: path.join(rel, name), to: path.join(rel, js) })
    }
    for (const [name, sub] of t.dirs) {
      if (sub.hasTs) await place(sub, path.join(rel, name))
      else await symlink(path.join(root, rel, name), path.join(out, rel, name))
    }
  }
  await place(tree, '')
  // Found where a test looks for it by path (the Prisma CLI, a copied checkout, tsc).
  await symlink(path.join(root, 'node_modules'), path.join(out, 'node_modules'))

  const tsconfig = JSON.parse(await readFile(path.join(root, 'tsconfig.json'), 'utf8'))
  await Promise.all(compile.map(async ({ from, to }) => {
    const source = await readFile(path.join(root, from), 'utf8')
    const { code } = await transform(source, {
      loader: 'ts',
      format: 'esm',
      target: 'node20',
      sourcemap: 'inline',
      sourcesContent: false,
      sourcefile: path.basename(from),
      tsconfigRaw: { compilerOptions: tsconfig.compilerOptions }
    })
    const fromDir = path.dirname(to)
    const linked = code.replace(PACKAGES, (_, quote: string, name: string) => {
      const target = path.relative(fromDir, path.join('packages', name, 'src', 'index.js'))
      return quote + (target.startsWith('.') ? target : './' + target) + quote
    })
    await writeFile(path.join(out, to), linked)
  }))

  // tap reads its settings from the folder it runs in, a .taprc before package.json: the
  // same ones, pointed at the compiled files and without the TypeScript loader.
  const { tap } = JSON.parse(await readFile(path.join(root, 'package.json'), 'utf8'))
  const toJs = (pattern: string): string => pattern.replace(/\.ts$/, '.js')
  await writeFile(path.join(out, '.taprc'), JSON.stringify({
    ...tap,
    include: tap.include.map(toJs),
    'node-arg': ['--enable-source-maps']
  }, null, 2))
  return compile.length
}
