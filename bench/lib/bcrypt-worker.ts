/**
 * Piscina worker for the hashing comparison (bench/bcrypt.ts): bcryptjs or @node-rs/bcrypt,
 * synchronously, on this worker thread. With `nice` > 0 the thread lowers its own
 * scheduling priority first (on Linux a thread's nice value is its own: the event loop
 * thread keeps priority 0).
 */
import os from 'node:os'
import { hashSync, verifySync } from '@node-rs/bcrypt'
import bcryptjs from 'bcryptjs'
import { workerData } from 'piscina'

export interface WorkerSettings {
  library: 'bcryptjs' | 'node-rs'
  nice: number
}

export type Task =
  | { op: 'hash', password: string, cost: number }
  | { op: 'verify', password: string, hash: string }

const settings = workerData as WorkerSettings
if (settings.nice > 0 && process.platform === 'linux') os.setPriority(0, settings.nice)

export default function run (task: Task): string | boolean {
  if (settings.library === 'bcryptjs') {
    return task.op === 'hash' ? bcryptjs.hashSync(task.password, task.cost) : bcryptjs.compareSync(task.password, task.hash)
  }
  return task.op === 'hash' ? hashSync(task.password, task.cost) : verifySync(task.password, task.hash)
}
