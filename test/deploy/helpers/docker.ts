/**
 * Docker for the compose test (test/deploy/compose.test.ts) and for its image build, which
 * `npm test` starts in the background while the suite runs (test/deploy/helpers/prebuild.ts).
 */
import { execFile, spawn } from 'node:child_process'
import { cp, mkdir, mkdtemp, readFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'
import { PROJECT_ROOT } from '../../../src/db/prisma-cli.js'

const exec = promisify(execFile)

export interface Run { code: number, stdout: string, stderr: string }

/** Runs a command, never throwing: its exit code and output. */
export async function run (command: string, args: string[], options: { cwd?: string, timeoutMs?: number } = {}): Promise<Run> {
  return await new Promise((resolve) => {
    const child = spawn(command, args, { cwd: options.cwd, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk) => { stdout += chunk })
    child.stderr.on('data', (chunk) => { stderr += chunk })
    const timer = options.timeoutMs ? setTimeout(() => child.kill('SIGKILL'), options.timeoutMs) : undefined
    child.on('error', (error) => { clearTimeout(timer); resolve({ code: 127, stdout, stderr: stderr + String(error) }) })
    child.on('close', (code) => { clearTimeout(timer); resolve({ code: code ?? 1, stdout, stderr }) })
  })
}

export async function dockerAnswers (): Promise<boolean> {
  return (await run('docker', ['info'], { timeoutMs: 20_000 })).code === 0
}

/** `docker compose` (v2 plugin) where there is one, else `docker-compose` (v1, Debian's). */
export async function composeCommand (): Promise<string[]> {
  if ((await run('docker', ['compose', 'version'])).code === 0) return ['docker', 'compose']
  return ['docker-compose']
}

function offlineScript (): string[] {
  return [
    process.env.OFFLINE_IMAGES_SCRIPT,
    path.resolve(PROJECT_ROOT, '../shared/tools/offline-base-images.sh'),
    '/work/shared/tools/offline-base-images.sh'
  ].filter((file): file is string => typeof file === 'string' && file !== '')
}

async function firstExisting (files: string[]): Promise<string | undefined> {
  for (const file of files) {
    if (await readFile(file).then(() => true, () => false)) return file
  }
  return undefined
}

/** The base images the Dockerfiles (the HA database's too) and the compose file name, with default build arguments. */
async function baseImages (): Promise<string[]> {
  const fromDockerfile: string[] = []
  for (const file of ['Dockerfile', 'deploy/postgres/Dockerfile', 'deploy/ha/Dockerfile', 'deploy/ha/proxy.Dockerfile']) {
    const dockerfile = await readFile(path.join(PROJECT_ROOT, file), 'utf8')
    const args = Object.fromEntries([...dockerfile.matchAll(/^ARG (\w+)=(\S+)/gm)].map((m) => [m[1], m[2]]))
    fromDockerfile.push(...[...dockerfile.matchAll(/^FROM (\S+)/gm)].map((m) => m[1]!.replace(/\$\{(\w+)\}/g, (_, name: string) => args[name] ?? '')))
  }
  const compose = await readFile(path.join(PROJECT_ROOT, 'docker-compose.yml'), 'utf8')
  const fromCompose = [...compose.matchAll(/^\s+image:\s*(\S+)/gm)].map((m) => m[1]!)
  return [...new Set([...fromDockerfile, ...fromCompose])]
}

/** Docker running and the base images present, or a plain reason why not. */
export async function prepareDocker (): Promise<string | undefined> {
  const images = await baseImages()
  const script = await firstExisting(offlineScript())
  if (!await dockerAnswers() && script === undefined && os.userInfo().uid === 0 && (await run('sh', ['-c', 'command -v dockerd'])).code === 0) {
    // An installed engine that is not running (a fresh boot): start it as the script would.
    spawn('setsid', ['dockerd'], { stdio: 'ignore', detached: true }).unref()
    for (let i = 0; i < 60 && !await dockerAnswers(); i++) await sleep(1000)
  }
  if (!await dockerAnswers()) {
    if (script === undefined) return 'no Docker engine answers (`docker info` failed) and no offline-base-images.sh to start one'
    const started = await run('bash', [script, ...images], { timeoutMs: 900_000 })
    if (started.code !== 0) return `offline-base-images.sh could not start Docker or build ${images.join(', ')}:\n${started.stdout}${started.stderr}`
  }
  const missing: string[] = []
  for (const image of images) {
    if ((await run('docker', ['image', 'inspect', image])).code === 0) continue
    if ((await run('docker', ['pull', image], { timeoutMs: 120_000 })).code === 0) continue
    missing.push(image)
  }
  if (missing.length === 0) return undefined
  if (script === undefined) return `cannot pull ${missing.join(', ')} and no offline-base-images.sh to build stand-ins`
  const built = await run('bash', [script, ...missing], { timeoutMs: 900_000 })
  if (built.code !== 0) return `no registry answers and offline-base-images.sh failed for ${missing.join(', ')}:\n${built.stdout}${built.stderr}`
  return undefined
}

/** A copy of the checkout's files (tracked and new, as in the working tree): compose runs there with its own `.env`. */
export async function copyCheckout (): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'compose-'))
  const { stdout } = await exec('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: PROJECT_ROOT, maxBuffer: 1 << 24 })
  for (const file of stdout.split('\0').filter(Boolean)) {
    const from = path.join(PROJECT_ROOT, file)
    if (!await readFile(from).then(() => true, () => false)) continue // deleted in the working tree
    await mkdir(path.dirname(path.join(dir, file)), { recursive: true })
    await cp(from, path.join(dir, file))
  }
  return dir
}
