/**
 * The Node.js the project is tested on is the one production runs: `npm ci` brings Node 24
 * (the `node` package, a dev dependency) and every npm script runs on it, whatever Node runs
 * npm itself; the image's base is the same major (Dockerfile, NODE_MAJOR), and `engines` says so.
 */
import { readFileSync } from 'node:fs'
import t from 'tap'

const root = new URL('../', import.meta.url)
const major = Number(process.versions.node.split('.')[0])
const image = Number(/^ARG NODE_MAJOR=(\d+)$/m.exec(readFileSync(new URL('Dockerfile', root), 'utf8'))?.[1])
const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8'))

t.equal(major, image, `the tests run on Node ${process.versions.node}, the image's major (${image})`)
t.equal(pkg.devDependencies.node.split('.')[0], String(image), 'the `node` dev dependency is that major, pinned')
t.equal(pkg.engines.node, `>=${image}`, 'engines names it')
t.equal(process.env.TEST_NODE, process.execPath, 'the test files run on the Node the runner runs on')
