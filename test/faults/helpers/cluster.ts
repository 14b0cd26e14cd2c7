/**
 * A PostgreSQL cluster of a test's own, which the test may stop and start again (same
 * data folder, same port), removed at teardown. Its schema comes from test/helpers/migrations.ts.
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../../../src/db/embedded.js'

interface Teardown { teardown: (fn: () => unknown) => void }

export interface Cluster {
  /** URL of the application database `app`. */
  url: string
  port: number
  running: () => boolean
  stop: () => Promise<void>
  start: () => Promise<void>
}

export async function startCluster (t: Teardown): Promise<Cluster> {
  const parent = await mkdtemp(path.join(os.tmpdir(), 'ups-fault-'))
  await chmod(parent, 0o755) // as root, PostgreSQL runs as `postgres`, which must reach the folder
  const dataDir = path.join(parent, 'pg')
  // Not ephemeral: an ephemeral cluster deletes its folder on stop, and this one restarts.
  let current: EmbeddedDatabase | undefined = await startEmbeddedPostgres({ dataDir, database: 'app' })
  const { url, port } = current
  t.teardown(async () => {
    await current?.stop()
    await rm(parent, { recursive: true, force: true })
  })
  return {
    url,
    port,
    running: () => current !== undefined,
    async stop () {
      await current?.stop()
      current = undefined
    },
    async start () {
      if (current) return
      current = await startEmbeddedPostgres({ dataDir, port, database: 'app' })
    }
  }
}
