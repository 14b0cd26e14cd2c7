/**
 * Strings PostgreSQL cannot store: NUL (U+0000, SQLSTATE 22021) and unpaired UTF-16
 * surrogates (the driver cannot encode them): reaching the database, each would answer 500.
 * Every string field of every route that takes a body (read from
 * the OpenAPI document, so a new route or field is covered too) is sent each of them in an
 * otherwise valid request, with a valid token where the route needs one: the answer is a
 * 400 from the schema that names the field, and nothing is written.
 */
import t from 'tap'
import { createValidatorCompiler, requireWellFormedText } from '../../src/lib/validation.js'
import { assertProblem } from '../helpers/assertions.js'
import { build, newUser, registerAndLogin } from '../helpers/build.js'
import { sqlClient } from '../helpers/database.js'

export const ILL_FORMED = ['\u0000', 'x\u0000', 'a\u0000b', '\uD800', '\uDC00', 'x\uDFFF', 'a\uD800b', '\uDBFF', '\uDC00\uD800', '\uD83D\uDE00\uD83D', 'ok\uDE00']

interface Operation {
  requestBody?: { content: Record<string, { schema: { properties?: Record<string, { type?: string }>, required?: string[] } }> }
  security?: unknown[]
}

t.test('NUL and unpaired surrogates in any body string: 400 naming the field', async (t) => {
  const app = await build(t)
  const sql = await sqlClient(t, app.databaseUrl)
  const me = await registerAndLogin(app)
  const before = await sql.query('SELECT (SELECT count(*) FROM users) AS users, (SELECT count(*) FROM products) AS products')

  const spec = app.swagger() as { paths: Record<string, Record<string, Operation>> }
  const valid = (field: string): unknown => {
    const fresh = newUser()
    const values: Record<string, unknown> = {
      username: fresh.username,
      identity: me.username,
      email: fresh.email,
      password: me.password,
      currentPassword: me.password,
      title: 'a title',
      description: 'a description',
      amount: 1,
      mfaToken: 'A'.repeat(43),
      code: '123456',
      // Shaped as both an assertion and a registration.
      response: { id: 'AAAA', rawId: 'AAAA', type: 'public-key', response: { clientDataJSON: 'e30', authenticatorData: 'AAAA', signature: 'AAAA', attestationObject: 'AAAA' }, clientExtensionResults: {} }
    }
    return field in values ? values[field] : 'some text'
  }
  let sent = 0
  for (const [path, operations] of Object.entries(spec.paths)) {
    for (const [method, op] of Object.entries(operations)) {
      const schema = op.requestBody?.content['application/json']?.schema
      // A body with no fields at all (logout's) has no string to test.
      if (schema?.properties === undefined || Object.keys(schema.properties).length === 0) continue
      const strings = Object.entries(schema.properties).filter(([, s]) => s.type === 'string').map(([name]) => name)
      // A passkey sign-in's body is an object whose strings are base64url (their pattern
      // refuses any NUL or surrogate) and a mode: no free text at the top.
      if (path === '/api/auth/passkey/login') continue
      t.ok(strings.length > 0, `${method.toUpperCase()} ${path} has string fields: ${strings.join(', ')}`)
      for (const field of strings) {
        for (const bad of ILL_FORMED) {
          // Required fields valid; `username` and `identity` are alternatives on login.
          const names = new Set([...(schema.required ?? []), field])
          if (field === 'identity') names.delete('username')
          const body = Object.fromEntries([...names].map((name) => [name, name === field ? bad : valid(name)]))
          const res = await app.inject({
            method: method.toUpperCase() as 'POST',
            // A passkey is named by a UUID (none such needed: the body is refused first).
            url: path.replace('{id}', path.startsWith('/api/security/passkeys/') ? '00000000-0000-4000-8000-000000000000' : String(me.id)),
            headers: op.security === undefined ? {} : me.auth,
            payload: body
          })
          sent++
          const problem = assertProblem(t, res, 400, 'VALIDATION_FAILED')
          t.same(problem.errors, [{ in: 'body', field: `/${field}`, message: 'must not contain NUL (U+0000) or unpaired surrogates' }],
            `${method.toUpperCase()} ${path} ${field}=${JSON.stringify(bad)}: the field is named`)
        }
      }
    }
  }
  t.ok(sent >= 50, `${sent} requests sent`)
  const after = await sql.query('SELECT (SELECT count(*) FROM users) AS users, (SELECT count(*) FROM products) AS products')
  t.same(after.rows, before.rows, 'nothing was written')
  // The well-formed neighbours still work: a paired surrogate (an emoji) is ordinary text.
  const ok = await app.inject({ method: 'POST', url: '/api/product', headers: me.auth, payload: { title: 'smile \uD83D\uDE00', description: 'İ ß \u202E', amount: 1 } })
  t.equal(ok.statusCode, 201, 'an emoji and other unusual but well-formed text are stored')
  t.equal(ok.json().title, 'smile \uD83D\uDE00', 'and read back unchanged')
})

t.test('as raw JSON bytes too: a raw NUL is malformed JSON, an escaped one is a validation error', async (t) => {
  const app = await build(t)
  const raw = Buffer.concat([Buffer.from('{"username":"x'), Buffer.from([0]), Buffer.from('","password":"whatever1"}')])
  assertProblem(t, await app.inject({ method: 'POST', url: '/api/auth/login', headers: { 'content-type': 'application/json' }, payload: raw }), 400, 'MALFORMED_JSON')
  const escaped = '{"username":"x\\u0000","password":"whatever1"}'
  assertProblem(t, await app.inject({ method: 'POST', url: '/api/auth/login', headers: { 'content-type': 'application/json' }, payload: escaped }), 400, 'VALIDATION_FAILED')
  const surrogate = '{"identity":"\\udc00","password":"whatever1"}'
  assertProblem(t, await app.inject({ method: 'POST', url: '/api/auth/login', headers: { 'content-type': 'application/json' }, payload: surrogate }), 400, 'VALIDATION_FAILED')
})

t.test('the validator compiler puts the rule on every string subschema, in every part', async (t) => {
  const compile = createValidatorCompiler()
  const schema = {
    type: 'object',
    properties: {
      default: { type: 'string', default: '\u0000 is data here, not a schema' },
      list: { type: 'array', items: { type: 'string' } },
      either: { anyOf: [{ type: 'integer' }, { type: ['string', 'null'] }] },
      nested: { type: 'object', properties: { deep: { type: 'string', enum: ['a', 'b\uD800'] } } },
      free: { type: 'string', wellFormedText: false }
    }
  }
  for (const httpPart of ['body', 'querystring', 'params', 'headers']) {
    const validate = compile({ schema, method: 'POST', url: '/x', httpPart })
    t.ok(validate({ default: 'ok', list: ['a', 'smile \uD83D\uDE00'], either: 'x', nested: { deep: 'a' } }), `${httpPart}: well-formed passes`)
    for (const [what, data] of [
      ['a property named default', { default: 'x\u0000' }],
      ['an array item', { list: ['a', '\uDC00'] }],
      ['a union branch', { either: '\uD800' }],
      ['a nested property', { nested: { deep: 'b\uD800' } }]
    ] as const) {
      t.notOk(validate(data), `${httpPart}: ${what} is refused`)
    }
    t.ok(validate({ default: 'ok', free: '\u0000' }), `${httpPart}: a schema may opt out with wellFormedText: false`)
  }
  t.notOk(requireWellFormedText(schema) === schema, 'the route\'s own schema is not changed (a copy is compiled)')
  t.equal((schema.properties.default as Record<string, unknown>).wellFormedText, undefined, 'nothing added to the original')
})

t.test('the validator compiler takes only plain decimal integers from strings (an Ajv keyword, before coercion)', async (t) => {
  const compile = createValidatorCompiler()
  const schema = {
    type: 'object',
    properties: { id: { type: 'integer' }, ids: { type: 'array', items: { type: 'integer' } }, 'a/b': { type: 'integer' }, name: { type: 'string' } }
  }
  const copy = structuredClone(schema)
  for (const httpPart of ['querystring', 'params', 'headers']) {
    const validate = compile({ schema, method: 'GET', url: '/x', httpPart }) as ((data: unknown) => boolean) & { errors?: { instancePath: string, message?: string }[] }
    for (const good of ['0', '16', '-3', '2147483648']) {
      const data: Record<string, unknown> = { id: good }
      t.ok(validate(data), `${httpPart}: ${good}`)
      t.equal(data.id, Number(good), `${httpPart}: ${good} coerced`)
    }
    for (const bad of ['0x10', '1e3', ' 12', '12 ', '+1', '01', '1.0', '', '0b1']) {
      t.notOk(validate({ id: bad }), `${httpPart}: ${JSON.stringify(bad)} refused`)
      t.same(validate.errors?.map((e) => [e.instancePath, e.message]), [['/id', 'must be a decimal integer']])
    }
    t.ok(validate({ ids: ['1', '2'], name: '0x10' }), `${httpPart}: integer lists of decimals; strings untouched`)
    t.notOk(validate({ ids: ['1', '1e3'] }), `${httpPart}: a list item`)
    t.same(validate.errors?.map((e) => e.instancePath), ['/ids/1'])
    t.notOk(validate({ ids: '0x10' }), `${httpPart}: a lone value the coercion would wrap into a list`)
    t.notOk(validate({ 'a/b': '0x1' }), `${httpPart}: an awkward property name`)
    t.same(validate.errors?.map((e) => e.instancePath), ['/a~1b'], 'JSON Pointer escaped, as Ajv writes paths')
  }
  const body = compile({ schema, method: 'POST', url: '/x', httpPart: 'body' }) as (data: unknown) => boolean
  t.notOk(body({ id: '16' }), 'bodies are not coerced at all: a string is no integer there')
  t.ok(body({ id: 16 }))
  t.same(schema, copy, 'the route\'s own schema (the OpenAPI document\'s) is left as it is')
})
