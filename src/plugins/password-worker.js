/**
 * Runs in the worker threads of the password-hashing pool (src/plugins/password.ts):
 * bcryptjs, synchronously, off the event loop. On Linux each worker first lowers its own
 * thread's scheduling priority (`nice`): a thread's nice value is its own there, so the
 * event loop keeps priority 0 and reads stay fast while logins queue for spare CPU.
 * Elsewhere setpriority(2) would renice the whole process, so it is skipped.
 *
 * Plain JavaScript, the same file from source and from dist/: the pool starts its workers
 * without the parent's loaders (`execArgv: []`), so `npm start` and the tests (run through
 * tsx) do not pay a TypeScript loader in every worker (about 0.3 s of CPU per thread).
 * The task types are PasswordTask in password.ts.
 */
import os from 'node:os'
import bcryptjs from 'bcryptjs'
import { workerData } from 'piscina'

const { nice } = workerData
if (nice > 0 && process.platform === 'linux') {
  try {
    os.setPriority(0, nice)
  } catch {
    // Not allowed (e.g. a seccomp profile): hash at normal priority.
  }
}

/** Writes `$2b$` hashes; reads `$2a$`, `$2b$` and `$2y$` (what other bcrypt libraries write). */
export default function run (task) {
  return task.op === 'hash' ? bcryptjs.hashSync(task.password, task.cost) : bcryptjs.compareSync(task.password, task.hash)
}
