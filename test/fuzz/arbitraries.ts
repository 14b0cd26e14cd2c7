/**
 * fast-check generators of hostile requests: bodies (schema-shaped with hostile values,
 * arbitrary JSON, prototype-pollution keys, huge numbers, deep nesting, invalid UTF-8,
 * NUL bytes, very long strings, raw bytes), params, query strings, headers (tokens good
 * and bad, content types, content codings) and methods.
 */
import fc from 'fast-check'

/** encodeURIComponent that does not throw on lone surrogates (they become U+FFFD). */
export const percentEncode = (s: string) => Array.from(s, (c) => /^[A-Za-z0-9\-_.!~*'()]$/.test(c)
  ? c
  : [...Buffer.from(c)].map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join('')).join('')

/** What a generated request is made of; `body` is the exact bytes sent. */
export interface FuzzRequest {
  method: string
  route: string
  url: string
  headers: Record<string, string>
  body?: Buffer
  /** How the body was made, for reports. */
  kind: string
  /** For `ill-formed` bodies: the one field that holds a NUL or an unpaired surrogate. */
  target?: string
}

export interface RouteInfo {
  method: string
  /** OpenAPI path, `{id}` for a parameter. */
  path: string
  /** Property names of the JSON body schema, when the route takes a body. */
  bodyFields?: string[]
  /** The body fields of type string, and the required ones. */
  bodyStringFields?: string[]
  bodyRequired?: string[]
  queryFields?: string[]
}

const ODD_STRINGS = [
  '', ' ', '\u0000', 'a\u0000b', '\uD800', 'x\uDFFF', '\u202Eevil', '\uFEFF', 'İ', 'ß', 'ｕｓｅｒ', '\r\nX-Injected: 1',
  "' OR 1=1 --", '"; DROP TABLE users; --', '../../../etc/passwd', '$' + '{7*7}', '{{7*7}}', '<script>alert(1)</script>',
  '%s%s%n', 'null', 'undefined', 'NaN', 'true', '[]', '{}', '__proto__', 'constructor', 'toString', 'hasOwnProperty',
  'admin@example.com', 'a@b', '@', 'user@', 'correct horse battery', 'ab', 'abc', 'user.name-1_x'
]

/** A code unit PostgreSQL text cannot hold: NUL, or a surrogate without its other half. */
const badUnit: fc.Arbitrary<string> = fc.oneof(
  fc.constant('\u0000'),
  fc.integer({ min: 0xD800, max: 0xDBFF }).map((c) => String.fromCharCode(c)),
  fc.integer({ min: 0xDC00, max: 0xDFFF }).map((c) => String.fromCharCode(c)),
  fc.constantFrom('\uDC00\uD800', '\uD83D\uDE00\uD83D')
)
const plain = fc.stringMatching(/^[a-z0-9._-]{0,8}$/)

/**
 * NUL bytes and unpaired surrogates anywhere in otherwise plain text (start, middle, end,
 * several). Written into the JSON body with JSON.stringify, which keeps them as `\u0000`
 * and `\ud800` escapes: the server's JSON parser turns them back into exactly these code
 * units (a raw byte 0x00 would be malformed JSON; a raw surrogate is not valid UTF-8 and
 * would decode as U+FFFD, both refused or harmless before any database work).
 */
export const illFormedString: fc.Arbitrary<string> = fc.tuple(plain, fc.array(fc.tuple(badUnit, plain), { minLength: 1, maxLength: 3 }))
  .map(([head, rest]) => head + rest.map(([bad, text]) => bad + text).join(''))
  // Two lone halves side by side can make a pair (an emoji): that one is well-formed.
  // eslint-disable-next-line no-control-regex -- NUL is what this looks for
  .filter((s) => /\u0000|\p{Cs}/u.test(s))

export const hostileString: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.constantFrom(...ODD_STRINGS), weight: 4 },
  { arbitrary: illFormedString, weight: 2 },
  { arbitrary: fc.string({ maxLength: 40 }), weight: 3 },
  { arbitrary: fc.string({ unit: 'binary', maxLength: 40 }), weight: 2 },
  { arbitrary: fc.emailAddress(), weight: 2 },
  { arbitrary: fc.stringMatching(/^[A-Za-z0-9._-]{3,32}$/), weight: 2 },
  { arbitrary: fc.integer({ min: 73, max: 300_000 }).map((n) => 'a'.repeat(n)), weight: 1 },
  { arbitrary: fc.integer({ min: 1, max: 100 }).map((n) => '€'.repeat(n)), weight: 1 }
)

/** As JSON text: numbers JSON.stringify cannot write (1e999, -0) come as raw text. */
const hostileNumberText: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom('0', '-1', '1', '-0', '0.5', '1e3', '2147483647', '2147483648', '-2147483649', '9007199254740993',
    '1e308', '1e999', '-1e999', '5e-324', '123456789012345678901234567890', '1.0', '0x10'),
  fc.integer().map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((d) => JSON.stringify(d))
)

const POLLUTION_KEYS = ['__proto__', 'constructor', 'prototype', 'id', 'creatorId', 'ownerId', 'createdAt', 'passwordHash', 'tokenVersion', 'isAdmin', 'role']
const pollutionValue = fc.constantFrom('{"polluted":true}', '{"prototype":{"polluted":true}}', '{"__proto__":{"polluted":true}}', 'true', '1', '"x"', 'null')

/** A JSON value as text, hostile at any depth (shallow). */
const hostileValueText: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: hostileString.map((s) => JSON.stringify(s)), weight: 6 },
  { arbitrary: hostileNumberText, weight: 3 },
  { arbitrary: fc.constantFrom('true', 'false', 'null', '[]', '{}', '[""]', '{"a":{"b":{"c":1}}}'), weight: 2 },
  { arbitrary: fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v) ?? 'null'), weight: 2 },
  { arbitrary: pollutionValue, weight: 1 }
)

const object = (entries: [string, string][]) => `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',')}}`

/** Valid values of the service's body fields, as JSON text. */
const VALID: Record<string, fc.Arbitrary<string>> = {
  username: fc.stringMatching(/^[a-z0-9]{6,12}$/).map((s) => JSON.stringify(`fz_${s}`)),
  identity: fc.stringMatching(/^[a-z0-9]{6,12}$/).map((s) => JSON.stringify(`fz_${s}`)),
  email: fc.stringMatching(/^[a-z0-9]{6,12}$/).map((s) => JSON.stringify(`fz_${s}@example.com`)),
  password: fc.constant(JSON.stringify('correct horse battery')),
  currentPassword: fc.constant(JSON.stringify('correct horse battery')),
  // Any well-formed text, emoji and other astral characters included (paired surrogates).
  title: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 30 }).map((s) => JSON.stringify(s)),
  description: fc.string({ unit: 'grapheme', maxLength: 30 }).map((s) => JSON.stringify(s)),
  amount: fc.integer({ min: 0, max: 1_000_000 }).map(String),
  // The second step and passkeys: well-formed values that name nothing live.
  mfaToken: fc.stringMatching(/^[A-Za-z0-9_-]{43}$/).map((s) => JSON.stringify(s)),
  code: fc.stringMatching(/^[0-9]{6}$/).map((s) => JSON.stringify(s)),
  name: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 30 }).map((s) => JSON.stringify(s)),
  // Shaped as both an assertion and a registration (the schemas allow the other's fields).
  response: fc.constant(JSON.stringify({ id: 'AAAA', rawId: 'AAAA', type: 'public-key', response: { clientDataJSON: 'e30', authenticatorData: 'AAAA', signature: 'AAAA', attestationObject: 'AAAA' }, clientExtensionResults: {} }))
}

/** Bodies shaped like the route's schema: its own fields, some valid, some hostile, plus extra keys. */
function shapedBody (fields: string[]): fc.Arbitrary<string> {
  const valid = VALID
  const field = (name: string): fc.Arbitrary<[string, string] | null> => fc.oneof(
    { arbitrary: (valid[name] ?? hostileValueText).map((v): [string, string] => [name, v]), weight: 6 },
    { arbitrary: hostileValueText.map((v): [string, string] => [name, v]), weight: 3 },
    { arbitrary: fc.constant(null), weight: 1 }
  )
  const extra = fc.array(fc.tuple(fc.oneof(fc.constantFrom(...POLLUTION_KEYS), fc.string({ maxLength: 10 })), hostileValueText), { maxLength: 2 })
  return fc.tuple(fc.tuple(...fields.map(field)), fc.oneof({ arbitrary: fc.constant([] as [string, string][]), weight: 3 }, { arbitrary: extra, weight: 1 }))
    .map(([own, more]) => object([...own.filter((e): e is [string, string] => e !== null), ...more]))
}

/**
 * A body that is valid in every field but one string field, which holds a NUL or an
 * unpaired surrogate: the request gets past everything else (required fields present,
 * `username` or `identity` but not both, no extra keys), so only that field can stop it.
 * A generator of its own because hostile values mixed into every field almost always come
 * with another invalid field, which stops the request before such a string reaches the database.
 */
function illFormedBody (route: RouteInfo): fc.Arbitrary<{ body: string, target: string }> | undefined {
  const targets = route.bodyStringFields ?? []
  if (targets.length === 0) return undefined
  return fc.constantFrom(...targets).chain((target) => {
    const names = new Set([...(route.bodyRequired ?? []), target])
    if (target === 'identity') names.delete('username')
    const entries = [...names].map((name) => (name === target ? illFormedString.map((s) => JSON.stringify(s)) : (VALID[name] ?? fc.constant('"text"')))
      .map((v): [string, string] => [name, v]))
    return fc.tuple(...entries).map((pairs) => ({ body: object(pairs), target }))
  })
}

const deepNesting = fc.tuple(fc.integer({ min: 50, max: 100_000 }), fc.boolean())
  .map(([depth, arrays]) => arrays ? '['.repeat(depth) + ']'.repeat(depth) : '{"a":'.repeat(depth) + '1' + '}'.repeat(depth))

const RAW_TEXTS = ['', ' ', 'null', '[]', '"x"', '1', '1e999', '{', '{"a":', '{"a":1,"a":2}', '{"__proto__":{"polluted":true}}',
  '{"constructor":{"prototype":{"polluted":true}}}', '\uFEFF{}', '{}\u0000', '{"username":"a\u0000b"}', 'a=b&c=d', '<xml/>', '{"a":1}{"b":2}']

/** Bytes that are not valid UTF-8, inside otherwise plausible JSON. */
const invalidUtf8 = fc.constantFrom(
  Buffer.from([0xff, 0xfe, 0xfd]),
  Buffer.concat([Buffer.from('{"username":"'), Buffer.from([0xc3, 0x28]), Buffer.from('","password":"correct horse battery"}')]),
  Buffer.concat([Buffer.from('{"title":"'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('","amount":1}')]),
  Buffer.concat([Buffer.from('{"'), Buffer.from([0xf8, 0x88, 0x80, 0x80, 0x80]), Buffer.from('":1}')])
)

export function bodyArb (route: RouteInfo): fc.Arbitrary<{ kind: string, body: Buffer, target?: string }> {
  const text = (kind: string) => (s: string) => ({ kind, body: Buffer.from(s) })
  const illFormed = illFormedBody(route)
  return fc.oneof(
    { arbitrary: shapedBody(route.bodyFields ?? ['username', 'password']).map(text('shaped')), weight: 12 },
    ...(illFormed === undefined ? [] : [{ arbitrary: illFormed.map(({ body, target }) => ({ kind: 'ill-formed', body: Buffer.from(body), target })), weight: 6 }]),
    { arbitrary: fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v) ?? 'null').map(text('json')), weight: 2 },
    { arbitrary: deepNesting.map(text('deep')), weight: 1 },
    { arbitrary: fc.constantFrom(...RAW_TEXTS).map(text('raw')), weight: 2 },
    { arbitrary: invalidUtf8.map((body) => ({ kind: 'invalid-utf8', body })), weight: 1 },
    { arbitrary: fc.uint8Array({ maxLength: 300 }).map((bytes) => ({ kind: 'bytes', body: Buffer.from(bytes) })), weight: 1 },
    { arbitrary: fc.integer({ min: 1_048_000, max: 1_100_000 }).map((n) => ({ kind: 'huge', body: Buffer.from(`{"title":"${'x'.repeat(n)}","amount":1}`) })), weight: 1 }
  )
}

export const contentTypeArb: fc.Arbitrary<string | undefined> = fc.oneof(
  { arbitrary: fc.constant('application/json'), weight: 14 },
  {
    arbitrary: fc.constantFrom(undefined, 'application/json; charset=utf-8', 'application/json; charset=latin1', 'application/json; charset=utf-16',
      'APPLICATION/JSON', 'application/json;;', 'application/jsonx', 'text/plain', 'text/json', 'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x', 'multipart/form-data', 'application/xml', 'application/octet-stream', '', ';', 'a/b/c',
      'application/problem+json', 'application/vnd.api+json', `application/json; x=${'y'.repeat(500)}`),
    weight: 6
  }
)

export const contentEncodingArb: fc.Arbitrary<string | undefined> = fc.oneof(
  { arbitrary: fc.constant(undefined), weight: 20 },
  { arbitrary: fc.constantFrom('gzip', 'deflate', 'br', 'identity', 'gzip, identity', 'x-unknown', ''), weight: 1 }
)

/** In a generated URL: the id of the user whose token the request carries, filled in when it is sent. */
export const SELF = '~self~'

/** Path parameter values: the caller's own id or other real ids some of the time, hostile text the rest. */
export function idArb (known: () => number[]): fc.Arbitrary<string> {
  return fc.oneof(
    { arbitrary: fc.constant(SELF), weight: 4 },
    { arbitrary: fc.nat().map((i) => { const ids = known(); return ids.length > 0 ? String(ids[i % ids.length]) : '1' }), weight: 6 },
    { arbitrary: fc.integer({ min: -5, max: 5000 }).map(String), weight: 2 },
    {
      arbitrary: fc.constantFrom('0', '-1', '1.5', '1e3', '0x10', '+1', '01', '2147483647', '2147483648', '99999999999999999999999', '%00', '%ff', '%2e%2e',
        '%2F', 'abc', '%201', '1%20', 'null', '__proto__', 'constructor', '%F0%9F%98%80', 'a'.repeat(250), '1;DROP', '%E0%A4%A'),
      weight: 3
    },
    { arbitrary: fc.string({ maxLength: 20 }).map(percentEncode), weight: 1 }
  )
}

/** A query string: the route's own keys and others, values hostile, encoded or raw. */
export function queryArb (fields: string[]): fc.Arbitrary<string> {
  const key = fc.oneof(fc.constantFrom(...fields, '__proto__', 'constructor', '__proto__[polluted]', 'limit[]', 'a[b]', ''), fc.string({ maxLength: 8 }))
  const value = fc.oneof(hostileNumberText, hostileString, fc.constantFrom('%zz', '%', '%E0%A4%A', '%00', '1&limit=2'))
  const pair = fc.tuple(key, value, fc.boolean()).map(([k, v, raw]) => raw ? `${k}=${v}` : `${percentEncode(k)}=${percentEncode(v)}`)
  return fc.oneof({ arbitrary: fc.constant(''), weight: 2 }, { arbitrary: fc.array(pair, { minLength: 1, maxLength: 4 }).map((p) => `?${p.join('&')}`), weight: 5 })
}
