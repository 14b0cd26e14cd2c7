/**
 * Which database errors answer 503 (retry later), 409 or 404, in the shapes they take:
 * Prisma's, the driver adapter's inside Prisma's, and raw `pg` errors (the token check
 * queries with `pg` directly). The fault tests produce most of these for real; this
 * pins the rarer ones (a shutting-down or starting server, a dropped connection).
 */
import t from 'tap'
import { classifyDatabaseError } from '../../src/db/errors.js'

const pgError = (code: string, message: string) => Object.assign(new Error(message), { code, severity: 'FATAL' })
const adapter = (cause: Record<string, unknown>, code = 'P2010') => Object.assign(new Error('Invalid invocation'), { code, meta: { driverAdapterError: { cause } } })
const errno = (code: string) => Object.assign(new Error(`connect ${code} 127.0.0.1:5432`), { code, errno: -111 })

t.test('unavailable: 503', async (t) => {
  const cases: [string, unknown][] = [
    ['pg: admin shutdown (57P01)', pgError('57P01', 'terminating connection due to administrator command')],
    ['pg: shutting down (57P03)', pgError('57P03', 'the database system is shutting down')],
    ['pg: starting up (57P03)', pgError('57P03', 'the database system is starting up')],
    ['pg: too many connections (53300)', pgError('53300', 'sorry, too many clients already')],
    ['pg: connection failure (08006)', pgError('08006', 'connection failure')],
    ['pg: the database does not exist (3D000)', pgError('3D000', 'database "gone" does not exist')],
    ['pg: the password is refused (28P01)', pgError('28P01', 'password authentication failed for user "api"')],
    ['pg: connection terminated', new Error('Connection terminated unexpectedly')],
    ['pg-pool: connect timeout', new Error('timeout exceeded when trying to connect')],
    ['socket: refused', errno('ECONNREFUSED')],
    ['socket: reset', errno('ECONNRESET')],
    ['prisma: P1001', Object.assign(new Error("Can't reach database server"), { code: 'P1001' })],
    ['adapter: not reachable', adapter({ kind: 'DatabaseNotReachable' })],
    ['adapter: 57P01', adapter({ originalCode: '57P01', kind: 'postgres' })],
    ['pg: read-only transaction (25006, a demoted primary)', pgError('25006', 'cannot execute INSERT in a read-only transaction')],
    ['adapter: 25006', adapter({ originalCode: '25006', kind: 'postgres' })]
  ]
  for (const [what, error] of cases) {
    t.equal(classifyDatabaseError(error)?.status, 503, what)
  }
})

t.test('no answer in time: 503 (frozen-database.test.ts produces them for real)', async (t) => {
  const cases: [string, unknown][] = [
    ['pg: statement timeout (57014)', pgError('57014', 'canceling statement due to statement timeout')],
    ['pg: lock timeout (55P03)', pgError('55P03', 'canceling statement due to lock timeout')],
    ['adapter: 57014', adapter({ originalCode: '57014', kind: 'postgres' })],
    ['pg: client query timeout', new Error('Query read timeout')],
    ['wrapped client query timeout', new Error('Reading the token\'s user failed: Query read timeout', { cause: new Error('Query read timeout') })]
  ]
  for (const [what, error] of cases) {
    t.match(classifyDatabaseError(error), { status: 503, detail: /did not answer in time/ }, what)
  }
})

t.test('schema not migrated yet: 503', async (t) => {
  t.equal(classifyDatabaseError(Object.assign(new Error('table does not exist'), { code: 'P2021' }))?.status, 503, 'prisma P2021')
  t.equal(classifyDatabaseError(adapter({ originalCode: '42P01' }))?.status, 503, 'adapter 42P01')
  t.equal(classifyDatabaseError(pgError('42P01', 'relation "users" does not exist'))?.status, 503, 'pg 42P01')
  t.match(classifyDatabaseError(pgError('42703', 'column does not exist'))?.detail, /migrations pending/, 'pg 42703, and the detail says why')
})

t.test('not the database being away', async (t) => {
  t.equal(classifyDatabaseError(Object.assign(new Error('unique'), { code: 'P2002', meta: { target: ['email'] } }))?.status, 409, 'P2002 is 409')
  t.match(classifyDatabaseError(new Error('Query user-create failed', { cause: Object.assign(pgError('23505', 'duplicate key value violates unique constraint "users_email_key"'), { table: 'users', constraint: 'users_email_key' }) })),
    { status: 409, detail: 'This email is already taken' }, 'a unique violation of a statement of our own (pg 23505) is 409, naming the field')
  t.equal(classifyDatabaseError(Object.assign(new Error('missing'), { code: 'P2025' }))?.status, 404, 'P2025 is 404')
  t.equal(classifyDatabaseError(pgError('22P02', 'invalid input syntax for type integer')), undefined, 'other SQL errors stay 500s')
  t.equal(classifyDatabaseError(new Error('something else')), undefined, 'plain errors stay 500s')
  t.equal(classifyDatabaseError('a string'), undefined, 'non-objects too')
})
