/**
 * Runs in the worker threads of the password-hashing pool (src/plugins/password.ts):
 * bcrypt, synchronously, off the event loop. On Linux each worker first lowers its own
 * thread's scheduling priority (`nice`): a thread's nice value is its own there, so the
 * event loop keeps priority 0 and reads stay fast while logins queue for spare CPU.
 * Elsewhere setpriority(2) would renice the whole process, so it is skipped.
 */
import os from 'node:os'
import { hashSync, verifySync } from '@node-rs/bcrypt'
import { workerData } from 'piscina'

export type PasswordTask =
  | { op: 'hash', password: string, cost: number }
  | { op: 'verify', password: string, hash: string }

const { nice } = workerData as { nice: number }
if (nice > 0 && process.platform === 'linux') {
  try {
    os.setPriority(0, nice)
  } catch {
    // Not allowed (e.g. a seccomp profile): hash at normal priority.
  }
}

/**
 * @node-rs/bcrypt 1.x writes `$2y$`; `$2b$` is the same algorithm under the prefix
 * bcryptjs and OpenBSD write (the versions differ only in bugs of old C code, not in
 * the hash), so the stored format does not depend on the library that made it.
 */
function asTwoB (hash: string): string {
  return hash.startsWith('$2y$') ? `$2b$${hash.slice(4)}` : hash
}

export default function run (task: PasswordTask): string | boolean {
  return task.op === 'hash' ? asTwoB(hashSync(task.password, task.cost)) : verifySync(task.password, task.hash)
}
