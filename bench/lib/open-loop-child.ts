/**
 * The generator's process for openLoop() (bench/lib/open-loop.ts): takes the options from
 * the parent over IPC, runs the loop, sends the result back and exits.
 */
import { runOpenLoop, type ChildMessage, type OpenLoopOptions } from './open-loop.js'

process.once('message', (options: OpenLoopOptions) => {
  runOpenLoop(options).then(
    (result): ChildMessage => ({ ok: true, result }),
    (error: Error): ChildMessage => ({ ok: false, error: error.message })
  ).then((message) => {
    process.send!(message, () => { process.disconnect() })
  }, () => {})
})
