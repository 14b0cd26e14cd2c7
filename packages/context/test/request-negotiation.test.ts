/** Content negotiation: accepts, acceptsCharsets, acceptsEncodings, acceptsLanguages. */
import fc from 'fast-check'
import Negotiator from 'negotiator'
import t from 'tap'
import { negotiateMedia } from '@user-product-service/context'
import { contextApp } from './request-app.js'

const app = await contextApp(t, (app) => {
  app.get('/accepts', async (request) => {
    const offers = (request.headers['x-offers'] as string ?? '').split('|')
    const kind = request.headers['x-kind'] ?? 'media'
    if (kind === 'charset') return { chosen: request.acceptsCharsets(...offers) }
    if (kind === 'encoding') return { chosen: request.acceptsEncodings(...offers) }
    if (kind === 'language') return { chosen: request.acceptsLanguages(...offers) }
    return { chosen: request.accepts(...offers) }
  })
})

async function choose (header: Record<string, string>, offers: string[], kind = 'media'): Promise<string> {
  const response = await app.inject({ url: '/accepts', headers: { ...header, 'x-offers': offers.join('|'), 'x-kind': kind } })
  return response.json().chosen
}

const accept = (value: string): Record<string, string> => ({ accept: value })

t.test('no Accept header (or an empty one) accepts the first offer', async (t) => {
  t.equal(await choose({}, ['json', 'html']), 'json')
  t.equal(await choose(accept(''), ['text/html', 'json']), 'text/html')
  t.equal(await choose({}, ['', 'xml']), 'xml', 'empty offers are skipped')
  t.equal(await choose({}, ['gzip', 'br'], 'encoding'), 'gzip')
  t.equal(await choose({}, ['fr', 'en'], 'language'), 'fr')
  t.equal(await choose({}, ['latin1'], 'charset'), 'latin1')
})

t.test('rule 1: extensions and full types are offered, returned exactly as given', async (t) => {
  t.equal(await choose(accept('text/html'), ['json', 'html']), 'html')
  t.equal(await choose(accept('text/html'), ['json', '.html']), '.html')
  t.equal(await choose(accept('application/json'), ['text/html', 'Application/JSON']), 'Application/JSON')
  t.equal(await choose(accept('application/json'), ['text/html; charset=utf-8', 'application/json; charset=utf-8']), 'application/json; charset=utf-8')
  t.equal(await choose(accept('text/html'), ['john', 'not/a/type', 'json']), '', 'unknown extensions and malformed offers never match')
  t.equal(await choose(accept('image/png'), ['json', 'html']), '', 'nothing acceptable gives an empty string')
})

t.test('rule 2: q-values, q=0 exclusion, */* with and without q=0', async (t) => {
  t.equal(await choose(accept('application/json;q=0.5, text/html'), ['json', 'html']), 'html')
  t.equal(await choose(accept('application/json;q=0.9, text/html;q=0.1'), ['html', 'json']), 'json')
  t.equal(await choose(accept('text/html;q=0, */*'), ['html']), '', 'q=0 excludes even under */*')
  t.equal(await choose(accept('text/html;q=0, */*'), ['html', 'json']), 'json')
  t.equal(await choose(accept('*/*'), ['image/webp']), 'image/webp', '*/* accepts anything')
  t.equal(await choose(accept('text/html, */*;q=0'), ['json']), '', '*/*;q=0 refuses types not listed')
  t.equal(await choose(accept('text/html, */*;q=0'), ['json', 'html']), 'html')
  t.equal(await choose(accept('*/*;q=0'), ['json', 'html']), '')
  t.equal(await choose(accept('text/html;q=2, application/json;q=0.5'), ['html', 'json']), 'json', 'a malformed q drops the entry')
})

t.test('rule 3: a more specific entry beats a wildcard one', async (t) => {
  t.equal(await choose(accept('text/*, text/html'), ['text/plain', 'text/html']), 'text/html')
  t.equal(await choose(accept('text/*;q=0.9, text/html;q=0.1'), ['html']), 'html', 'the specific entry decides the q of its type')
  t.equal(await choose(accept('text/*;q=0.9, text/html;q=0.1'), ['html', 'text/plain']), 'text/plain')
  t.equal(await choose(accept('*/*, application/json;q=0.2'), ['json', 'html']), 'html')
  t.equal(await choose(accept('text/html;level=1, text/html'), ['text/html', 'text/html;level=1']), 'text/html;level=1', 'a matching parameter is more specific')
})

t.test('rule 4: media-type parameters', async (t) => {
  t.equal(await choose(accept('application/json'), ['application/json; version=2; extra=1']), 'application/json; version=2; extra=1', 'extra offer parameters are ignored')
  t.equal(await choose(accept('application/json; version=2'), ['application/json']), '', 'the offer must carry every Accept parameter')
  t.equal(await choose(accept('application/json; version=2'), ['application/json; version=1']), '')
  t.equal(await choose(accept('text/html; level=1; charset=utf-8'), ['text/html;charset=utf-8;level=1']), 'text/html;charset=utf-8;level=1', 'order does not matter')
  t.equal(await choose(accept('text/html; LEVEL=1'), ['text/html; level=1']), 'text/html; level=1', 'name case does not matter')
  t.equal(await choose(accept('text/html; level="1"'), ['text/html; level=1']), 'text/html; level=1', 'quotes do not matter')
  t.equal(await choose(accept('text/html; level=1'), ['text/html; level="1"']), 'text/html; level="1"')
  t.equal(await choose(accept('text/html; foo="a,b", application/json;q=0.1'), ['json', 'text/html; foo="a,b"']), 'text/html; foo="a,b"', 'a comma inside quotes does not split entries')
  t.equal(await choose(accept('text/plain; charset=UTF-8'), ['text/plain; charset=utf-8']), 'text/plain; charset=utf-8', 'values compare case-insensitively')
})

t.test('rule 5: on equal rank the earlier offer wins', async (t) => {
  t.equal(await choose(accept('*/*'), ['json', 'html']), 'json')
  t.equal(await choose(accept('*/*'), ['html', 'json']), 'html')
  t.equal(await choose(accept('text/html, application/json'), ['application/json', 'text/html']), 'application/json',
    'entries of equal q and specificity: offer order, not header order (negotiator differs)')
  t.equal(await choose(accept('application/json;q=0.8, text/html;q=0.8'), ['html', 'json']), 'html')
})

t.test('wildcard offers, accept-extensions, parameter counts, unknown extensions under */*', async (t) => {
  t.equal(await choose(accept('text/html'), ['application/json', 'text/*']), 'text/*', 'a wildcard offer (text/*) matches a type it covers')
  t.equal(await choose(accept('text/html;q=0.5, text/plain;q=0.9'), ['text/*']), 'text/*')
  t.equal(await choose(accept('image/png'), ['text/*']), '', '... and nothing else')
  t.equal(await choose(accept('text/html;q=0.4, application/json;q=0.6'), ['text/*', 'json']), 'json', 'its q is that of the entries it covers')
  t.equal(await choose(accept('text/html;q=0.5;level=1'), ['text/html']), 'text/html', 'parameters after q are accept-extensions, not media-type parameters')
  t.equal(await choose(accept('text/html;level=2;q=0.5;ext=x, application/json;q=0.4'), ['text/html;level=1', 'text/html;level=2', 'json']), 'text/html;level=2',
    'parameters before q still must match')
  t.equal(await choose(accept('text/plain;format=flowed;q=0.9, text/plain;format=flowed;charset=utf-8;q=0'), ['text/plain;format=flowed;charset=utf-8']), '',
    'RFC 9110 12.5.1: the entry with more media-type parameters is more specific, so it sets the q (0), not the other (0.9)')
  t.equal(await choose(accept('text/plain;format=flowed;charset=utf-8;q=0.2, text/plain;format=flowed;q=0.9'), ['text/plain;format=flowed;charset=utf-8', 'text/plain;format=flowed']),
    'text/plain;format=flowed', '... whatever the header order')
  t.equal(await choose(accept('text/plain;format=flowed, text/plain;format=flowed;charset=utf-8'), ['text/plain;format=flowed', 'text/plain;format=flowed;charset=utf-8']),
    'text/plain;format=flowed;charset=utf-8', 'equal q: the offer matched by the more specific entry wins')
  t.equal(await choose(accept('*/*'), ['unknownext']), 'unknownext', 'rule 2: */* accepts anything, an unknown extension too')
  t.equal(await choose(accept('text/html, */*;q=0.1'), ['unknownext', 'html']), 'html')
  t.equal(await choose(accept('text/*'), ['unknownext']), '', 'an unknown extension matches */* only')
  t.equal(await choose(accept('*/*;q=0'), ['unknownext']), '')
})

t.test('acceptsCharsets', async (t) => {
  t.equal(await choose({ 'accept-charset': 'utf-8, iso-8859-1;q=0.5' }, ['ISO-8859-1', 'UTF-8'], 'charset'), 'UTF-8')
  t.equal(await choose({ 'accept-charset': 'utf-8;q=0, *' }, ['utf-8', 'latin1'], 'charset'), 'latin1')
  t.equal(await choose({ 'accept-charset': 'utf-16' }, ['utf-8'], 'charset'), '')
  t.equal(await choose({ 'accept-charset': '*' }, ['b', 'a'], 'charset'), 'b')
})

t.test('acceptsEncodings', async (t) => {
  t.equal(await choose({ 'accept-encoding': 'gzip, br;q=0.5' }, ['br', 'gzip'], 'encoding'), 'gzip')
  t.equal(await choose({ 'accept-encoding': 'gzip' }, ['br', 'identity'], 'encoding'), 'identity', 'identity is acceptable unless refused')
  t.equal(await choose({ 'accept-encoding': 'gzip, identity;q=0' }, ['identity'], 'encoding'), '')
  t.equal(await choose({ 'accept-encoding': '*;q=0' }, ['identity', 'gzip'], 'encoding'), '')
  t.equal(await choose({ 'accept-encoding': 'GZIP' }, ['gzip'], 'encoding'), 'gzip', 'case-insensitive')
  t.equal(await choose({ 'accept-encoding': 'br;q=0.2, *;q=0.5' }, ['br', 'zstd'], 'encoding'), 'zstd')
})

t.test('acceptsLanguages', async (t) => {
  t.equal(await choose({ 'accept-language': 'en' }, ['fr', 'en-GB'], 'language'), 'en-GB', 'a primary tag covers its subtags')
  t.equal(await choose({ 'accept-language': 'en-US' }, ['en'], 'language'), 'en', 'as negotiator: a subtag entry covers its primary tag')
  t.equal(await choose({ 'accept-language': 'fr;q=0.5, en-US' }, ['fr', 'en', 'en-US'], 'language'), 'en-US', 'the exact tag ranks first')
  t.equal(await choose({ 'accept-language': 'de' }, ['fr', 'en'], 'language'), '')
  t.equal(await choose({ 'accept-language': 'EN-us' }, ['en-US'], 'language'), 'en-US', 'case-insensitive')
  t.equal(await choose({ 'accept-language': '*' }, ['es', 'en'], 'language'), 'es')
  t.equal(await choose({ 'accept-language': 'fr, *;q=0' }, ['de', 'fr-CA'], 'language'), 'fr-CA')
})

t.test('agrees with negotiator wherever its Accept-order tie-break cannot apply', async (t) => {
  const types = ['text/html', 'text/plain', 'application/json', 'application/xml', 'image/png']
  const entry = fc.record({
    type: fc.constantFrom(...types, 'text/*', '*/*'),
    q: fc.integer({ min: 0, max: 1000 })
  })
  fc.assert(fc.property(fc.uniqueArray(entry, { minLength: 1, maxLength: 5, selector: (e) => e.q }), fc.uniqueArray(fc.constantFrom(...types), { minLength: 1 }), (entries, offers) => {
    const header = entries.map((e) => `${e.type};q=${(e.q / 1000).toFixed(3)}`).join(', ')
    // Distinct q for every entry: no tie between entries, so both must pick the same offer.
    const expected = new Negotiator({ headers: { accept: header } }).mediaType(offers) ?? ''
    return negotiateMedia(header, offers) === expected
  }), { numRuns: 500 })
  t.pass('500 random headers agree')
})
