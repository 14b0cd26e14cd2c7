/**
 * The compose test's images (the service's, the mail catcher's that .env.example turns
 * on: deploy/mail-catcher, tagged `<tag>-mail-catcher`, and the database's with pgBackRest:
 * deploy/postgres, `<tag>-db`), built ahead of it: `npm test` (scripts/test.ts) runs this in the
 * background while the suite runs and waits for it before the deployment tests. The test's
 * own `up --build` then finds every layer in Docker's build cache (the same Dockerfile on the
 * same files) and only starts containers; the build, and on a fresh machine the Docker
 * engine and base images (prepareDocker), stay off the suite's critical path.
 * `docker build` uses the builder compose uses (the engine's classic builder, or BuildKit
 * where buildx is installed), so both share one cache. Never fails: the compose test does
 * everything again itself and reports what it cannot do.
 * Usage: `tsx test/deploy/helpers/prebuild.ts <image tag>`; remove the three tags afterwards.
 */
import { rm } from 'node:fs/promises'
import path from 'node:path'
import { copyCheckout, prepareDocker, run } from './docker.js'

const tag = process.argv[2] ?? 'upsci-prebuild'
const started = Date.now()
const problem = await prepareDocker()
if (problem !== undefined) {
  console.log(`# compose image not prebuilt: ${problem}`)
} else {
  const dir = await copyCheckout()
  const built = await run('docker', ['build', '-q', '-t', tag, dir], { timeoutMs: 900_000 })
  // Small (one npm ci of MailDev): after the service's image, not beside it, on shared cores.
  const catcher = await run('docker', ['build', '-q', '-t', `${tag}-mail-catcher`, path.join(dir, 'deploy', 'mail-catcher')], { timeoutMs: 600_000 })
  // The database's (db, backup, db-restore: PostgreSQL with pgBackRest, deploy/postgres).
  const db = await run('docker', ['build', '-q', '-t', `${tag}-db`, '-f', path.join(dir, 'deploy', 'postgres', 'Dockerfile'), path.join(dir, 'deploy')], { timeoutMs: 600_000 })
  await rm(dir, { recursive: true, force: true })
  const failed = [built.code === 0 ? '' : `the service's image:\n${built.stderr.slice(-2000)}`, catcher.code === 0 ? '' : `the mail catcher's image:\n${catcher.stderr.slice(-2000)}`, db.code === 0 ? '' : `the database's image:\n${db.stderr.slice(-2000)}`].filter(Boolean)
  console.log(failed.length === 0
    ? `# compose images prebuilt in ${Math.round((Date.now() - started) / 1000)} s`
    : `# compose image prebuild failed (the compose test builds it itself): ${failed.join('\n')}`)
}
