/**
 * GET /api/product as CSV (docs/api.md, "CSV"), through a listening server: negotiation
 * (Vary, 406), the header row, RFC 4180 quoting, UTF-8, formula cells escaped (OWASP),
 * the same pages as JSON with the next page in Link.
 */
import t from 'tap'
import { assertProblem } from './helpers/assertions.js'
import { build, registerAndLogin } from './helpers/build.js'

/** RFC 4180 records (quoted cells, doubled quotes, CRLF). */
function parseCsv (text: string): string[][] {
  const rows: string[][] = []
  let row: string[] = []
  let cell = ''
  let quoted = false
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') { cell += '"'; i++ } else if (c === '"') quoted = false
      else cell += c
    } else if (c === '"') quoted = true
    else if (c === ',') { row.push(cell); cell = '' } else if (c === '\r' && text[i + 1] === '\n') { row.push(cell); rows.push(row); row = []; cell = ''; i++ } else cell += c
  }
  if (cell !== '' || row.length > 0) { row.push(cell); rows.push(row) }
  return rows
}

const app = await build(t)
const base = await app.listen({ host: '127.0.0.1', port: 0 })
const me = await registerAndLogin(app)
const titles = ['=1+1', '+SUM(A1)', '-2+3', '@cmd', '\tTAB', '\rCR', '＝HYPERLINK("x")', 'Ünïcødé 🚀 日本語', 'a "quoted", comma\nand newline', 'plain']
const ids: number[] = []
for (const title of titles) {
  ids.push((await app.inject({ method: 'POST', url: '/api/product', headers: me.auth, payload: { title, description: title === 'plain' ? '=cmd|\' /C calc\'!A0' : '', amount: 7 } })).json().id)
}

t.test('Accept: text/csv gives the page as CSV; JSON by default; Vary: Accept on both', async (t) => {
  const res = await fetch(`${base}/api/product?limit=100`, { headers: { accept: 'text/csv' } })
  t.equal(res.status, 200)
  t.equal(res.headers.get('content-type'), 'text/csv; charset=utf-8; header=present')
  t.match(res.headers.get('vary'), /Accept/i)
  t.equal(res.headers.get('link'), null, 'one page: no next')
  const text = new TextDecoder('utf-8', { fatal: true }).decode(await res.arrayBuffer())
  t.ok(text.endsWith('\r\n'), 'CRLF records')
  const rows = parseCsv(text)
  t.same(rows[0], ['id', 'title', 'description', 'amount', 'creatorId', 'createdAt', 'updatedAt', 'imageUrl'], 'a header row')
  t.equal(rows.length, titles.length + 1)
  const byId = new Map(rows.slice(1).map((r) => [Number(r[0]), r]))
  const cell = (i: number) => byId.get(ids[i]!)![1]
  t.equal(cell(0), "'=1+1", '= escaped')
  t.equal(cell(1), "'+SUM(A1)", '+ escaped')
  t.equal(cell(2), "'-2+3", '- escaped')
  t.equal(cell(3), "'@cmd", '@ escaped')
  t.equal(cell(4), "'\tTAB", 'TAB escaped')
  t.equal(cell(5), "'\rCR", 'CR escaped')
  t.equal(cell(6), '\'＝HYPERLINK("x")', 'full-width = escaped')
  t.equal(cell(7), 'Ünïcødé 🚀 日本語', 'UTF-8 round trip')
  t.equal(cell(8), 'a "quoted", comma\nand newline', 'quotes, commas and newlines survive')
  t.equal(byId.get(ids[9]!)![2], "'=cmd|' /C calc'!A0", 'a description cell too')
  t.equal(byId.get(ids[9]!)![3], '7', 'numbers as numbers')
  t.equal(byId.get(ids[9]!)![7], '', 'no image: empty imageUrl')

  const json = await fetch(`${base}/api/product`)
  t.match(json.headers.get('content-type'), /^application\/json/)
  t.match(json.headers.get('vary'), /Accept/i)
  for (const [accept, type] of [['*/*', /json/], ['text/*', /csv/], ['application/json, text/csv;q=0.5', /json/], ['text/csv, application/json;q=0.9', /csv/]] as const) {
    t.match((await fetch(`${base}/api/product`, { headers: { accept } })).headers.get('content-type'), type, accept)
  }
})

t.test('the same pages as JSON, the next one in Link', async (t) => {
  const json = await (await fetch(`${base}/api/product?limit=3`)).json() as { items: { id: number }[], nextCursor: number }
  const res = await fetch(`${base}/api/product?limit=3`, { headers: { accept: 'text/csv' } })
  const rows = parseCsv(await res.text()).slice(1)
  t.same(rows.map((r) => Number(r[0])), json.items.map((p) => p.id), 'the same rows')
  t.equal(res.headers.get('link'), `</api/product?limit=3&cursor=${json.nextCursor}>; rel="next"`)
  const seen: number[] = []
  let url: string | undefined = `${base}/api/product?limit=3`
  while (url !== undefined) {
    const page: Response = await fetch(url, { headers: { accept: 'text/csv' } })
    seen.push(...parseCsv(await page.text()).slice(1).map((r) => Number(r[0])))
    const next = /<([^>]+)>; rel="next"/.exec(page.headers.get('link') ?? '')
    url = next === null ? undefined : `${base}${next[1]}`
  }
  t.same(seen, ids, 'following Link visits every product once, in order')
  const big = await fetch(`${base}/api/product?limit=5000`, { headers: { accept: 'text/csv' } })
  t.equal(big.status, 200, 'a CSV page may be larger than 100')
  await big.text()
})

t.test('406 when neither representation is acceptable; 400 for a JSON page over 100', async (t) => {
  for (const accept of ['application/xml', 'text/html', 'application/json;q=0, text/csv;q=0']) {
    const res = await app.inject({ url: '/api/product', headers: { accept } })
    assertProblem(t, res, 406, 'NOT_ACCEPTABLE')
  }
  const res = assertProblem(t, await app.inject('/api/product?limit=101'), 400, 'VALIDATION_FAILED')
  t.same(res.errors, [{ in: 'querystring', field: '/limit', message: 'must be <= 100' }], 'the same 400 as any out-of-range value')
  assertProblem(t, await app.inject({ url: '/api/product?limit=10001', headers: { accept: 'text/csv' } }), 400, 'VALIDATION_FAILED')
})

t.test('media-type parameters: the ones the CSV or JSON answer satisfies are fine; others and q=0 refuse (RFC 9110 12.5.1)', async (t) => {
  const csv = /^text\/csv; charset=utf-8; header=present$/
  const json = /^application\/json/
  const cases: Array<[string, RegExp | 406]> = [
    // The service's own type, in part or whole, in any case, quoted or not.
    ['text/csv; charset=utf-8', csv],
    ['text/csv;header=present', csv],
    ['text/csv; charset=utf-8; header=present', csv],
    ['TEXT/CSV; CHARSET="UTF-8"; Header=Present', csv],
    ['text/csv;charset=utf-8;q=0.5, application/xml', csv],
    ['text/*; charset=utf-8', csv],
    // Parameters after q are accept-extensions, not conditions on the type.
    ['text/csv;q=1;charset=iso-8859-1', csv],
    // A more specific range overrides a less specific one for the same type.
    ['text/csv;q=0, text/csv;charset=utf-8', csv],
    ['application/json; charset=utf-8', json],
    ['application/json;charset=UTF-8, text/csv;q=0.1', json],
    // q=0 still refuses, whatever its parameters.
    ['text/csv;charset=utf-8;q=0', 406],
    ['text/csv;charset=utf-8;header=present;q=0, application/json;charset=utf-8;q=0', 406],
    ['text/csv;charset=utf-8;q=0, */*', json],
    // Parameters the answer does not satisfy: not this representation.
    ['text/csv; charset=iso-8859-1', 406],
    ['text/csv; header=absent', 406],
    ['text/csv; charset=utf-8; version=2', 406],
    ['application/json; charset=latin1', 406],
    // Hostile or malformed values: a 406 or a representation, never a 500.
    ['text/csv;q=2', 406],
    ['text/csv;charset="utf-8', 406],
    ['text/csv;;;charset=utf-8;;', csv],
    ['text/csv;charset', csv],
    ['text/csv;=utf-8', csv],
    [';;;,,,', 406],
    ['text/csv;charset=utf-8,'.repeat(500), csv],
    [`text/csv;${'a=b;'.repeat(800)}`, 406],
    ['"text/csv"', 406]
  ]
  for (const [accept, expected] of cases) {
    const res = await fetch(`${base}/api/product?limit=2`, { headers: { accept } })
    const body = await res.text()
    const shown = accept.length > 60 ? `${accept.slice(0, 60)}... (${accept.length} chars)` : accept
    if (expected === 406) {
      t.equal(res.status, 406, `${shown}: 406`)
      t.equal(JSON.parse(body).code, 'NOT_ACCEPTABLE', `${shown}: the problem`)
    } else {
      t.equal(res.status, 200, `${shown}: 200`)
      t.match(res.headers.get('content-type'), expected, `${shown}: ${String(expected)}`)
      if (expected === csv) t.ok(body.startsWith('"id","title"'), `${shown}: the CSV`)
    }
  }
})
