/** The constant-time key-set helper: results, rotation, and how it compares. */
import crypto from 'node:crypto'
import { syncBuiltinESMExports } from 'node:module'
import t from 'tap'
import { createKeySet, KeyAuthOptionError } from '@user-product-service/key-auth'

const CURRENT = 'key-current-0123456789abcdef'
const PREVIOUS = 'key-previous-0123456789abcdef'

t.test('right key, wrong keys of the same and of other lengths', async (t) => {
  const set = createKeySet([CURRENT])
  t.equal(set.size, 1)
  t.equal(set.has(CURRENT), true)
  t.equal(set.has(Buffer.from(CURRENT)), true, 'a Buffer with the same bytes')
  t.equal(set.has(CURRENT.replace(/.$/, 'X')), false, 'same length, last character differs')
  t.equal(set.has(CURRENT.toUpperCase()), false, 'case matters')
  t.equal(set.has(CURRENT.slice(0, -1)), false, 'a prefix')
  t.equal(set.has(`${CURRENT}0`), false, 'longer')
  t.equal(set.has(''), false, 'empty')
  t.equal(set.has('x'.repeat(10_000)), false, 'very long')
  t.equal(set.has(undefined as never), false, 'not a string')
})

t.test('rotation: every key of the set is valid', async (t) => {
  const set = createKeySet(new Set([CURRENT, PREVIOUS]))
  t.equal(set.size, 2)
  t.equal(set.has(CURRENT), true)
  t.equal(set.has(PREVIOUS), true)
  t.equal(set.has('key-retired-0123456789abcdef'), false)
  t.equal(createKeySet([CURRENT]).has(PREVIOUS), false, 'a dropped key stops working')
})

t.test('non-ASCII keys are compared by their UTF-8 bytes', async (t) => {
  const set = createKeySet(['clé-secrète-ünïcode'])
  t.equal(set.has('clé-secrète-ünïcode'), true)
  t.equal(set.has('cle-secrete-unicode'), false)
})

t.test('a bad key list fails at once', async (t) => {
  t.throws(() => createKeySet([]), new KeyAuthOptionError('createKeySet: at least one key is needed'))
  t.throws(() => createKeySet([CURRENT, '']), { code: 'FST_KEYAUTH_INVALID_OPTION', message: /every key must be a non-empty string or Buffer/ })
  t.throws(() => createKeySet([42 as never]), { code: 'FST_KEYAUTH_INVALID_OPTION' })
})

t.test('the keys are not kept, only their digests', async (t) => {
  const set = createKeySet([CURRENT])
  t.notMatch(JSON.stringify(set), CURRENT)
  t.notMatch(JSON.stringify(Object.values(set)), CURRENT)
})

t.test('every check compares 32-byte SHA-256 digests against every key, with no early return', async (t) => {
  const calls: [Buffer, Buffer][] = []
  const hashed: string[] = []
  // The module's named imports of node:crypto follow the builtin's properties once synced:
  // Node's own way to watch a builtin, with no loader hooks.
  const { createHash, timingSafeEqual } = crypto
  crypto.createHash = ((algorithm: string) => { hashed.push(algorithm); return createHash(algorithm) }) as typeof createHash
  crypto.timingSafeEqual = (a, b) => { calls.push([a as Buffer, b as Buffer]); return timingSafeEqual(a, b) }
  syncBuiltinESMExports()
  t.teardown(() => {
    Object.assign(crypto, { createHash, timingSafeEqual })
    syncBuiltinESMExports()
  })
  const set = createKeySet(['first-key', 'second-key-longer', 'third'])
  t.same(hashed, ['sha256', 'sha256', 'sha256'], 'the configured keys are hashed once, when the set is made')

  for (const candidate of ['first-key', 'third', 'nope', 'a-much-longer-candidate-than-any-key']) {
    calls.length = 0
    hashed.length = 0
    set.has(candidate)
    t.equal(hashed.length, 1, `${candidate}: hashed once`)
    t.equal(calls.length, 3, `${candidate}: compared with all three keys, even after a match`)
    t.ok(calls.every(([a, b]) => a.length === 32 && b.length === 32), `${candidate}: always 32 bytes against 32 bytes`)
  }
})
