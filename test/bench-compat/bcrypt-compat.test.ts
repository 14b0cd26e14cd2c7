/**
 * The service's hasher (bcryptjs in worker threads, src/plugins/password.ts) and
 * @node-rs/bcrypt, the native alternative bench/bcrypt.ts measured, read each other's
 * hashes: switching between them needs no migration of stored passwords.
 */
import { hash as nativeHash, verify as nativeVerify } from '@node-rs/bcrypt'
import t from 'tap'
import { createPasswordHasher } from '../../src/plugins/password.js'

const PASSWORD = 'correct horse battery staple'

t.test('a service hash is $2b$ at the configured cost and @node-rs/bcrypt verifies it', async (t) => {
  const hasher = await createPasswordHasher({ cost: 5, threads: 1 })
  t.teardown(hasher.close)
  const hash = await hasher.hash(PASSWORD)
  t.match(hash, /^\$2b\$05\$[./A-Za-z0-9]{53}$/)
  t.equal(await hasher.verify(PASSWORD, hash), true)
  t.equal(await nativeVerify(PASSWORD, hash), true)
  t.equal(await nativeVerify('wrong password', hash), false)
})

t.test('the service verifies a @node-rs/bcrypt hash ($2y$ from version 1.x, and as $2b$)', async (t) => {
  const hasher = await createPasswordHasher({ cost: 5, threads: 1 })
  t.teardown(hasher.close)
  const hash = await nativeHash(PASSWORD, 5)
  t.match(hash, /^\$2[by]\$05\$/)
  const asTwoB = `$2b$${hash.slice(4)}`
  for (const stored of [hash, asTwoB]) {
    t.equal(await hasher.verify(PASSWORD, stored), true, `${stored.slice(0, 4)} verifies`)
    t.equal(await hasher.verify('wrong password', stored), false, `${stored.slice(0, 4)} refuses a wrong password`)
  }
  t.equal(await hasher.verifyDummy(PASSWORD), false)
})
