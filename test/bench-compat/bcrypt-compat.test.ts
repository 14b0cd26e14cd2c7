/**
 * The service's hasher (@node-rs/bcrypt in worker threads, src/plugins/password.ts) and
 * bcryptjs, the library the user chose, read each other's hashes: switching between them
 * needs no migration of stored passwords.
 */
import bcryptjs from 'bcryptjs'
import t from 'tap'
import { createPasswordHasher } from '../../src/plugins/password.js'

const PASSWORD = 'correct horse battery staple'

t.test('a service hash is $2b$ at the configured cost and bcryptjs verifies it', async (t) => {
  const hasher = await createPasswordHasher({ cost: 5, threads: 1 })
  t.teardown(hasher.close)
  const hash = await hasher.hash(PASSWORD)
  t.match(hash, /^\$2b\$05\$[./A-Za-z0-9]{53}$/)
  t.equal(await bcryptjs.compare(PASSWORD, hash), true)
  t.equal(await bcryptjs.compare('wrong password', hash), false)
})

t.test('the service verifies a bcryptjs hash', async (t) => {
  const hasher = await createPasswordHasher({ cost: 5, threads: 1 })
  t.teardown(hasher.close)
  const hash = await bcryptjs.hash(PASSWORD, 5)
  t.match(hash, /^\$2b\$05\$/)
  t.equal(await hasher.verify(PASSWORD, hash), true)
  t.equal(await hasher.verify('wrong password', hash), false)
  t.equal(await hasher.verifyDummy(PASSWORD), false)
})
