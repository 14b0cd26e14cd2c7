/**
 * scripts/problem-codes.ts, which `npm test` runs after the whole suite: the problem answers
 * the tests received, against the codes the OpenAPI document lists per operation.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { aliases, compare } from '../scripts/problem-codes.js'

t.test('a received code an operation does not list is named; a HEAD is its GET, a query is no part of the path', async (t) => {
  const folder = await mkdtemp(path.join(os.tmpdir(), 'problem-codes-'))
  t.teardown(async () => { await rm(folder, { recursive: true, force: true }) })
  const lines = [
    ['GET', '/api/product/7?x=1', 404, 'NOT_FOUND'],
    ['HEAD', '/api/product/7', 404, 'NOT_FOUND'],
    ['GET', '/api/product/7', 409, 'CONFLICT'],
    ['GET', '/no/such/path', 404, 'NOT_FOUND'],
    ['PUT', '/api/user/1', 405, 'METHOD_NOT_ALLOWED'],
    ['POST', '/api/user', 499, 'CLIENT_CLOSED_REQUEST']
  ]
  await writeFile(path.join(folder, '1.jsonl'), lines.map((line) => JSON.stringify(line)).join('\n') + '\n')
  const one = await compare(folder, false)
  t.same([one.unlisted, one.unproduced, one.answers], [['GET /api/product/{id} 409 CONFLICT'], [], 6], 'only the unlisted code of an operation; codes of no operation are the Problem component\'s')
  const both = await compare(folder, true)
  t.ok(both.unproduced.includes('GET /api/product/{id} 400 VALIDATION_FAILED'), 'both ways: a listed code never received is named')
  t.notOk(both.unproduced.includes('GET /api/product/{id} 404 NOT_FOUND'), 'and a received one is not')
})

t.test('one route under two URLs (an alias keeps its schema) is one route for the codes received', async (t) => {
  const responses = { 404: { description: 'Not Found: `NOT_FOUND`' } }
  const groups = aliases({
    paths: {
      '/api/new/{id}': { delete: { summary: 'Delete it', responses } },
      '/api/old/{id}': { delete: { summary: 'Delete it', responses } },
      '/api/other/{id}': { delete: { summary: 'Delete another thing', responses } }
    }
  })
  t.same(groups.get('DELETE /api/old/{id}'), ['DELETE /api/new/{id}', 'DELETE /api/old/{id}'])
  t.same(groups.get('DELETE /api/other/{id}'), ['DELETE /api/other/{id}'], 'another route with the same answers is not one')
})
