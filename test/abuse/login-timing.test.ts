/**
 * Login timing must not tell whether a username exists: for an unknown name the service
 * still runs one bcrypt verification (against a dummy hash of the same cost). The test
 * measures the median time of both failures, interleaved, at a cost where one
 * verification is measurable (BCRYPT_COST=8), and requires them within half a
 * verification of each other. A control run, with the dummy verification removed (the
 * leak this guards against), must exceed that tolerance: the test can fail.
 */
import t from 'tap'
import { build, newUser, registerAndLogin, type TestApp } from '../helpers/build.js'

const ROUNDS = 30
const median = (xs: number[]) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]! }

async function timeLogin (app: TestApp, username: string, password: string): Promise<number> {
  const started = process.hrtime.bigint()
  const res = await app.inject({ method: 'POST', url: '/api/auth/login', payload: { username, password } })
  const ms = Number(process.hrtime.bigint() - started) / 1e6
  if (res.statusCode !== 401) throw new Error(`expected 401, got ${res.statusCode}`)
  return ms
}

/** Medians of unknown-user and wrong-password logins, measured alternately. */
async function medians (app: TestApp, username: string): Promise<{ unknown: number, wrong: number }> {
  const unknown: number[] = []
  const wrong: number[] = []
  for (let i = 0; i < ROUNDS; i++) {
    unknown.push(await timeLogin(app, newUser().username, 'not the password'))
    wrong.push(await timeLogin(app, username, 'not the password'))
  }
  return { unknown: median(unknown), wrong: median(wrong) }
}

t.test('an unknown username takes as long as a wrong password', async (t) => {
  const app = await build(t, { env: { BCRYPT_COST: '8', LOGIN_FAILURES_MAX: '100000' } })
  const me = await registerAndLogin(app)
  const stored = await app.passwords.hash('some password')
  const verifications: number[] = []
  for (let i = 0; i < 15; i++) {
    const started = process.hrtime.bigint()
    await app.passwords.verify('another password', stored)
    verifications.push(Number(process.hrtime.bigint() - started) / 1e6)
  }
  const verify = median(verifications)
  const tolerance = verify / 2
  t.ok(verify >= 2, `one verification at cost 8 is measurable: ${verify.toFixed(1)} ms`)

  await medians(app, me.username) // warm-up
  const real = await medians(app, me.username)
  const gap = Math.abs(real.unknown - real.wrong)
  t.comment(`medians over ${ROUNDS} each: unknown user ${real.unknown.toFixed(1)} ms, wrong password ${real.wrong.toFixed(1)} ms, gap ${gap.toFixed(1)} ms, tolerance ${tolerance.toFixed(1)} ms (half of one verification, ${verify.toFixed(1)} ms)`)
  t.ok(gap < tolerance, `the medians differ by ${gap.toFixed(1)} ms, less than ${tolerance.toFixed(1)} ms`)

  // Control: the leak itself (no verification for an unknown user) is caught.
  const original = app.passwords.verifyDummy
  app.passwords.verifyDummy = async () => false
  const leaky = await medians(app, me.username)
  app.passwords.verifyDummy = original
  const leak = Math.abs(leaky.unknown - leaky.wrong)
  t.comment(`control without the dummy verification: unknown ${leaky.unknown.toFixed(1)} ms, wrong ${leaky.wrong.toFixed(1)} ms, gap ${leak.toFixed(1)} ms`)
  t.ok(leak > tolerance, `the same measure flags the leak (${leak.toFixed(1)} ms > ${tolerance.toFixed(1)} ms)`)
})
