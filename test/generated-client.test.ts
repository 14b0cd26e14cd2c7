/**
 * A client generated from the live OpenAPI document works as is: types from `/docs/json` by
 * openapi-typescript, a program on openapi-fetch that calls every operation (checked against
 * the document), type-checked under `strict` with no cast, then run against the listening
 * service. A document that types an
 * answer wrongly (an optional token, a body a route does not need marked required, JSON and
 * CSV under one media type) fails the type check; one that types it rightly but whose route
 * answers otherwise fails the run.
 */
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import type { AddressInfo } from 'node:net'
import openapiTS, { astToString, type OpenAPI3 } from 'openapi-typescript'
import { generateSync } from 'otplib'
import t from 'tap'
import ts from 'typescript'
import { build, markVerified, TEST_ENV } from './helpers/build.js'

const ROOT = path.resolve(import.meta.dirname, '..')
const ADMIN_KEY = TEST_ENV.ADMIN_API_KEYS!.split(',')[0]!

/**
 * The client: what an application would write against the generated `paths`. Responses are
 * read as JSON (answers) and problem+json (errors); the CSV and the image ask for text and
 * bytes. It returns what it saw, for the test to judge.
 */
const PROGRAM = String.raw`
import createClient from 'openapi-fetch'
import type { paths } from './api.js'

type Media = 'application/json' | 'application/problem+json'

export interface Seen {
  statuses: Record<string, number>
  headers: Record<string, string | null>
  values: Record<string, string | number | boolean | null>
}

function fail (what: string, status: number): never {
  throw new Error(what + ' answered ' + String(status))
}

export async function run (baseUrl: string, adminKey: string, png: Uint8Array<ArrayBuffer>, totpCode: (secret: string) => string, verified: (userId: number) => Promise<void>): Promise<Seen> {
  const api = createClient<paths, Media>({ baseUrl })
  const seen: Seen = { statuses: {}, headers: {}, values: {} }
  const note = (name: string, response: Response): void => {
    seen.statuses[name] = response.status
    seen.headers[name + ' x-request-id'] = response.headers.get('x-request-id')
  }
  const stamp = String(Date.now()) + String(Math.floor(Math.random() * 1e6))
  const username = 'gen' + stamp
  const password = 'generated client!'
  const form = (body: Record<string, string | undefined>): URLSearchParams => {
    const fields = new URLSearchParams()
    for (const [key, value] of Object.entries(body)) if (value !== undefined) fields.set(key, value)
    return fields
  }
  const imagePart = (body: { image: Blob }): FormData => {
    const parts = new FormData()
    parts.set('image', body.image, 'lamp.png')
    return parts
  }

  const cookieHeader = (response: Response): string => response.headers.getSetCookie().map((line) => line.split(';')[0]).join('; ')

  const live = await api.GET('/health/live')
  note('healthLive', live.response)
  seen.values.live = live.data?.status ?? null
  const ready = await api.GET('/health/ready')
  note('healthReady', ready.response)

  const registered = await api.POST('/api/auth/register', { body: { username, email: username + '@example.com', password, names: 'Generated Client' } })
  note('register', registered.response)
  if (registered.data === undefined) fail('register', registered.response.status)
  const userId: number = registered.data.id
  // Its address verified, the way its link would do it: a factor needs it.
  await verified(userId)
  const other = await api.POST('/api/user', { body: { username: 'x' + username, email: 'x' + username + '@example.com', password } })
  note('createUser', other.response)
  if (other.data === undefined) fail('createUser', other.response.status)
  const taken = await api.POST('/api/user', { body: { username, email: 'y' + username + '@example.com', password } })
  note('createUser taken', taken.response)
  seen.values.takenCode = taken.error?.code ?? null

  const login = await api.POST('/api/auth/login', { body: { username, password } })
  note('login json', login.response)
  // A login answers a session (200) or, with a second factor on, its second step (202).
  if (login.data === undefined || !('mode' in login.data) || login.data.mode !== 'token') fail('login json', login.response.status)
  let token: string = login.data.token
  let refreshToken: string = login.data.refreshToken
  seen.values.tokenType = login.data.tokenType
  const lifetime: number = login.data.expiresIn
  seen.values.expiresIn = lifetime
  seen.headers['login json cache-control'] = login.response.headers.get('cache-control')
  const bearer = (): { authorization: string } => ({ authorization: 'Bearer ' + token })

  const formLogin = await api.POST('/api/auth/login', {
    body: { username, password },
    bodySerializer: form,
    headers: { 'content-type': 'application/x-www-form-urlencoded' }
  })
  note('login form', formLogin.response)
  if (formLogin.data === undefined || !('mode' in formLogin.data) || formLogin.data.mode !== 'cookie') fail('login form', formLogin.response.status)
  seen.values.formUserId = formLogin.data.userId
  const cookies = cookieHeader(formLogin.response)
  seen.headers['login form set-cookie'] = cookies

  const refreshed = await api.POST('/api/auth/refresh-token', { body: { refreshToken } })
  note('refreshSession body', refreshed.response)
  if (refreshed.data === undefined || refreshed.data.mode !== 'token') fail('refreshSession body', refreshed.response.status)
  token = refreshed.data.token
  refreshToken = refreshed.data.refreshToken
  const reused = await api.POST('/api/auth/refresh-token', { body: { refreshToken: login.data.refreshToken } })
  note('refreshSession reused', reused.response)
  seen.values.reusedCode = reused.error?.code ?? null
  const relogin = await api.POST('/api/auth/login', { body: { identity: username + '@example.com', password, mode: 'token' } })
  if (relogin.data === undefined || !('mode' in relogin.data) || relogin.data.mode !== 'token') fail('login identity', relogin.response.status)
  token = relogin.data.token

  const byCookie = await api.POST('/api/auth/refresh-token', { headers: { cookie: cookies, origin: baseUrl } })
  note('refreshSession no body', byCookie.response)
  if (byCookie.data === undefined || byCookie.data.mode !== 'cookie') fail('refreshSession no body', byCookie.response.status)
  seen.values.cookieRefreshExpires = byCookie.data.refreshTokenExpiresAt
  const freshCookies = cookieHeader(byCookie.response)

  const me = await api.GET('/api/user/{id}', { params: { path: { id: userId } }, headers: bearer() })
  note('getUser', me.response)
  seen.values.username = me.data?.username ?? null
  const meByCookie = await api.GET('/api/user/{id}', { params: { path: { id: userId } }, headers: { cookie: freshCookies } })
  note('getUser cookie', meByCookie.response)
  const notMine = await api.GET('/api/user/{id}', { params: { path: { id: other.data.id } }, headers: bearer() })
  note('getUser other', notMine.response)
  seen.values.notMineCode = notMine.error?.code ?? null

  const renamed = await api.PATCH('/api/user/{id}', { params: { path: { id: userId } }, body: { names: 'Renamed' }, headers: bearer() })
  note('updateUser', renamed.response)
  seen.values.names = renamed.data?.user.names ?? null
  seen.values.renamedHasSession = renamed.data !== undefined && 'mode' in renamed.data
  const created = await api.POST('/api/product', { body: { title: 'Desk lamp', description: 'Warm light', amount: 2599 }, headers: bearer() })
  note('createProduct', created.response)
  if (created.data === undefined) fail('createProduct', created.response.status)
  const productId: number = created.data.id
  seen.values.imageUrlBefore = created.data.imageUrl
  const second = await api.POST('/api/product', { body: { title: 'Chair', amount: 4900 }, headers: { cookie: freshCookies, origin: baseUrl } })
  note('createProduct cookie', second.response)
  seen.values.secondDescription = second.data?.description ?? null
  const forged = await api.POST('/api/product', { body: { title: 'Forged', amount: 1 }, headers: { cookie: freshCookies, origin: 'https://elsewhere.example' } })
  note('createProduct forged', forged.response)
  seen.values.forgedCode = forged.error?.code ?? null

  const product = await api.GET('/api/product/{id}', { params: { path: { id: productId } } })
  note('getProduct', product.response)
  seen.values.title = product.data?.title ?? null
  const page = await api.GET('/api/product', { params: { query: { limit: 100 } } })
  note('listProducts', page.response)
  seen.values.listed = page.data?.items.some((item) => item.id === productId) ?? false
  seen.values.nextCursorType = page.data === undefined ? null : typeof page.data.nextCursor
  const csv = await api.GET('/api/product', { params: { query: { limit: 1 } }, headers: { accept: 'text/csv' }, parseAs: 'text' })
  note('listProducts csv', csv.response)
  seen.values.csvHeader = csv.data?.split('\r\n')[0] ?? null
  seen.headers['listProducts csv link'] = csv.response.headers.get('link')
  seen.headers['listProducts csv content-disposition'] = csv.response.headers.get('content-disposition')
  const tooLarge = await api.GET('/api/product', { params: { query: { limit: 101 } } })
  note('listProducts json past 100', tooLarge.response)

  const image = new Blob([png], { type: 'image/png' })
  const uploaded = await api.POST('/api/product/{id}/image', {
    params: { path: { id: productId } },
    body: { image },
    bodySerializer: imagePart,
    headers: bearer()
  })
  note('uploadProductImage', uploaded.response)
  seen.headers['uploadProductImage location'] = uploaded.response.headers.get('location')
  seen.values.imageUrlAfter = uploaded.data?.imageUrl ?? null
  const replaced = await api.POST('/api/product/{id}/image', {
    params: { path: { id: productId } },
    body: { image },
    bodySerializer: imagePart,
    headers: { cookie: freshCookies, origin: baseUrl }
  })
  note('uploadProductImage cookie', replaced.response)
  const bytes = await api.GET('/api/product/{id}/image', { params: { path: { id: productId } }, parseAs: 'arrayBuffer' })
  note('getProductImage', bytes.response)
  seen.values.imageBytes = bytes.data?.byteLength ?? null
  const etag = bytes.response.headers.get('etag')
  seen.headers['getProductImage etag'] = etag
  // fetch sends a conditional request with Cache-Control: no-cache unless one is set, and
  // no-cache asks for the whole image again.
  const cached = await api.GET('/api/product/{id}/image', { params: { path: { id: productId } }, headers: { 'if-none-match': etag ?? '', 'cache-control': 'max-age=0' }, parseAs: 'stream' })
  note('getProductImage not modified', cached.response)
  const removed = await api.DELETE('/api/product/{id}/image', { params: { path: { id: productId } }, headers: bearer() })
  note('deleteProductImage', removed.response)

  const deleted = await api.DELETE('/api/product/{id}', { params: { path: { id: productId } }, headers: bearer() })
  note('deleteProduct', deleted.response)
  const gone = await api.GET('/api/product/{id}', { params: { path: { id: productId } } })
  note('getProduct gone', gone.response)
  seen.values.goneCode = gone.error?.code ?? null

  // TOTP on, the login's second step, then off again.
  const enrolment = await api.POST('/api/security/totp', { body: { currentPassword: password }, headers: bearer() })
  note('startTotp', enrolment.response)
  if (enrolment.data === undefined) fail('startTotp', enrolment.response.status)
  const confirmed = await api.POST('/api/security/totp/confirm', { body: { code: totpCode(enrolment.data.secret), currentPassword: password }, headers: bearer() })
  note('confirmTotp', confirmed.response)
  if (confirmed.data === undefined) fail('confirmTotp', confirmed.response.status)
  const recoveryCodes: string[] = confirmed.data.recoveryCodes
  const stepOne = await api.POST('/api/auth/login', { body: { username, password } })
  note('login second step', stepOne.response)
  if (stepOne.data === undefined || !('mfaToken' in stepOne.data)) fail('login second step', stepOne.response.status)
  seen.values.methods = stepOne.data.methods.join(',')
  const stepLifetime: number = stepOne.data.expiresIn
  seen.values.stepExpiresIn = stepLifetime
  // The passkey routes' bodies, typed from the document: an assertion to no challenge of
  // this service is refused, and so is a registration.
  const assertion: paths['/api/auth/passkey/login']['post']['requestBody']['content']['application/json']['response'] = {
    id: 'pQ1yX4m2yZk8rT1sW6nB9w',
    rawId: 'pQ1yX4m2yZk8rT1sW6nB9w',
    type: 'public-key',
    response: { clientDataJSON: 'eyJ0eXBlIjoid2ViYXV0aG4uZ2V0IiwiY2hhbGxlbmdlIjoiYzNSeVlYayJ9', authenticatorData: 'SZYN5YgOjGh0NBcPZHZgW4_krrmihjLHmVzzuoMdl2MFAAAAAQ', signature: 'MEUCIQDx7kq2Yb9fR3nU0sLw8ZpV4cT' },
    clientExtensionResults: {}
  }
  const otherStep = await api.POST('/api/auth/login', { body: { username, password } })
  if (otherStep.data === undefined || !('mfaToken' in otherStep.data)) fail('login second step', otherStep.response.status)
  const stepOptions = await api.POST('/api/auth/mfa/passkey/options', { body: { mfaToken: otherStep.data.mfaToken } })
  note('secondStepPasskeyOptions', stepOptions.response)
  seen.values.stepChallenge = typeof stepOptions.data?.challenge
  const stepPasskey = await api.POST('/api/auth/mfa/passkey', { body: { mfaToken: otherStep.data.mfaToken, response: assertion } })
  note('completeLoginWithPasskey', stepPasskey.response)
  seen.values.stepPasskeyCode = stepPasskey.error?.code ?? null
  const passkeyLogin = await api.POST('/api/auth/passkey/login', { body: { response: assertion, mode: 'token' } })
  note('passkeySignIn', passkeyLogin.response)
  seen.values.passkeyLoginCode = passkeyLogin.error?.code ?? null
  const stepTwo = await api.POST('/api/auth/mfa/totp', { body: { mfaToken: stepOne.data.mfaToken, recoveryCode: recoveryCodes[0] ?? '' } })
  note('completeLoginWithCode', stepTwo.response)
  if (stepTwo.data === undefined || stepTwo.data.mode !== 'token') fail('completeLoginWithCode', stepTwo.response.status)
  token = stepTwo.data.token
  const security = await api.GET('/api/security', { headers: bearer() })
  note('getSecurity', security.response)
  seen.values.sessionMethods = security.data?.session.methods.join(',') ?? null
  seen.values.recoveryCodesLeft = security.data?.recoveryCodesLeft ?? null
  const fresh = await api.POST('/api/security/recovery-codes', { body: { currentPassword: password }, headers: bearer() })
  note('regenerateRecoveryCodes', fresh.response)
  seen.values.freshCodes = fresh.data?.recoveryCodes.length ?? null
  const keyOptions = await api.POST('/api/security/passkey/options', { body: { currentPassword: password }, headers: bearer() })
  note('passkeyRegistrationOptions', keyOptions.response)
  seen.values.rpId = keyOptions.data?.rp.id ?? null
  const formerOptions = await api.POST('/api/security/passkey-options', { body: { currentPassword: password }, headers: bearer() })
  note('passkeyRegistrationOptionsDeprecated', formerOptions.response)
  seen.values.formerRpId = formerOptions.data?.rp.id ?? null
  seen.headers['passkeyRegistrationOptionsDeprecated deprecation'] = formerOptions.response.headers.get('deprecation')
  const registration = await api.POST('/api/security/passkeys', {
    body: {
      response: {
        id: 'pQ1yX4m2yZk8rT1sW6nB9w',
        rawId: 'pQ1yX4m2yZk8rT1sW6nB9w',
        type: 'public-key',
        response: { clientDataJSON: 'eyJ0eXBlIjoid2ViYXV0aG4uY3JlYXRlIiwiY2hhbGxlbmdlIjoiYzNSeVlYayJ9', attestationObject: 'o2NmbXRkbm9uZQ', transports: ['internal'] },
        clientExtensionResults: {}
      },
      name: 'Laptop',
      currentPassword: password
    },
    headers: bearer()
  })
  note('registerPasskey', registration.response)
  seen.values.registrationCode = registration.error?.code ?? null
  const signInOptions = await api.POST('/api/auth/passkey/options')
  note('passkeySignInOptions', signInOptions.response)
  seen.values.userVerification = signInOptions.data?.userVerification ?? null
  const off = await api.POST('/api/security/totp/disable', { body: { currentPassword: password }, headers: bearer() })
  note('disableTotp', off.response)
  const noSuchKey = '3f2b8c1e-6d4a-4f7e-9b2c-5a1d0e8f7c6b'
  const renamedKey = await api.PATCH('/api/security/passkeys/{id}', { params: { path: { id: noSuchKey } }, body: { name: 'Phone' }, headers: bearer() })
  note('renamePasskey', renamedKey.response)
  const deletedKey = await api.DELETE('/api/security/passkeys/{id}', { params: { path: { id: noSuchKey } }, headers: bearer() })
  note('deletePasskey', deletedKey.response)
  const sessions = await api.GET('/api/security/sessions', { headers: bearer() })
  note('listSessions', sessions.response)
  seen.values.currentSessions = sessions.data?.items.filter((session) => session.current).length ?? null
  const activity = await api.GET('/api/security/activity', { headers: bearer() })
  note('listSecurityActivity', activity.response)
  seen.values.lastEvent = activity.data?.items[0]?.kind ?? null
  const endedOne = await api.DELETE('/api/security/sessions/{id}', { params: { path: { id: noSuchKey } }, headers: bearer() })
  note('endSession', endedOne.response)
  seen.values.endSessionCode = endedOne.error?.code ?? null
  const resent = await api.POST('/api/auth/verify-email/resend', { headers: bearer() })
  note('resendVerificationEmail', resent.response)
  const verifiedByLink = await api.POST('/api/auth/verify-email', { body: { token: 'q3Yl3Qp0cS7b0n1Z8M2v3hX9wR4t5y6u7i8o9p0aBcD' } })
  note('verifyEmail', verifiedByLink.response)
  seen.values.verifyCode = verifiedByLink.error?.code ?? null
  const resetAsked = await api.POST('/api/auth/password-reset', { body: { email: username + '@example.com' } })
  note('requestPasswordReset', resetAsked.response)
  const resetDone = await api.POST('/api/auth/password-reset/confirm', { body: { token: 'q3Yl3Qp0cS7b0n1Z8M2v3hX9wR4t5y6u7i8o9p0aBcD', password: 'another password' } })
  note('confirmPasswordReset', resetDone.response)
  seen.values.resetCode = resetDone.error?.code ?? null

  const admin = { authorization: 'Bearer ' + adminKey }
  const users = await api.GET('/api/admin/users', { params: { query: { limit: 100 } }, headers: admin })
  note('adminListUsers', users.response)
  const factorsReset = await api.DELETE('/api/admin/users/{id}/factors', { params: { path: { id: userId } }, headers: admin })
  note('adminResetFactors', factorsReset.response)
  seen.values.adminSees = users.data?.items.some((user) => user.id === userId) ?? false
  if (second.data !== undefined) {
    const adminProduct = await api.DELETE('/api/admin/products/{id}', { params: { path: { id: second.data.id } }, headers: admin })
    note('adminDeleteProduct', adminProduct.response)
  }
  const adminUser = await api.DELETE('/api/admin/users/{id}', { params: { path: { id: other.data.id } }, headers: admin })
  note('adminDeleteUser', adminUser.response)

  const cookieLogout = await api.POST('/api/auth/logout', { headers: { cookie: freshCookies, origin: baseUrl } })
  note('logout cookie', cookieLogout.response)
  seen.headers['logout cookie set-cookie'] = cookieLogout.response.headers.get('set-cookie')
  const again = await api.POST('/api/auth/login', { body: { username, password } })
  if (again.data === undefined || !('mode' in again.data) || again.data.mode !== 'token') fail('login again', again.response.status)
  const tokenLogout = await api.POST('/api/auth/logout', { headers: { authorization: 'Bearer ' + again.data.token } })
  note('logout token', tokenLogout.response)
  // A password change ends every session, the cookie one too: last but the deletion.
  const newPassword = 'a newer password'
  const changed = await api.PATCH('/api/user/{id}', { params: { path: { id: userId } }, body: { password: newPassword, currentPassword: password }, headers: bearer() })
  note('updateUser password', changed.response)
  if (changed.data === undefined || !('mode' in changed.data) || changed.data.mode !== 'token') fail('updateUser password', changed.response.status)
  token = changed.data.token
  seen.values.changedUser = changed.data.user.id
  const endedOthers = await api.DELETE('/api/security/sessions', { headers: bearer() })
  note('endOtherSessions', endedOthers.response)
  seen.values.endedOthers = endedOthers.data?.ended ?? null

  const wrong = await api.DELETE('/api/user/{id}', { params: { path: { id: userId } }, body: { password }, headers: bearer() })
  note('deleteUser wrong password', wrong.response)
  seen.values.wrongCode = wrong.error?.code ?? null
  const removedUser = await api.DELETE('/api/user/{id}', { params: { path: { id: userId } }, body: { password: newPassword }, headers: bearer() })
  note('deleteUser', removedUser.response)
  const logout = await api.POST('/api/auth/logout', { headers: bearer() })
  note('logout after delete', logout.response)
  seen.headers['logout after delete www-authenticate'] = logout.response.headers.get('www-authenticate')
  return seen
}
`

t.test('a client generated from /docs/json type-checks under strict and runs every route', async (t) => {
  const app = await build(t)
  await app.listen({ host: '127.0.0.1', port: 0 })
  const baseUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
  const document = await (await fetch(`${baseUrl}/docs/json`)).json() as OpenAPI3

  // `format: binary` as Blob: openapi-typescript's documented mapping for file uploads.
  const types = astToString(await openapiTS(document, {
    transform: (schema) => schema.format === 'binary' ? ts.factory.createTypeReferenceNode('Blob') : undefined
  }))
  t.notMatch(PROGRAM, /\bas\s+(?!const\b)[A-Za-z{[(]/, 'the program casts nothing')

  const dir = mkdtempSync(path.join(tmpdir(), 'generated-client-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'), 'dir')
  writeFileSync(path.join(dir, 'package.json'), '{"type":"module"}')
  writeFileSync(path.join(dir, 'api.ts'), types)
  writeFileSync(path.join(dir, 'client.ts'), PROGRAM)

  const program = ts.createProgram([path.join(dir, 'client.ts')], {
    strict: true,
    noUncheckedIndexedAccess: true,
    exactOptionalPropertyTypes: true,
    // The libraries' own declarations are not what is tested (and checking the DOM lib's
    // takes seconds); the generated api.ts and the program are.
    skipLibCheck: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    lib: ['lib.es2023.d.ts', 'lib.dom.d.ts', 'lib.dom.iterable.d.ts'],
    types: []
  })
  const diagnostics = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n') + (d.file === undefined ? '' : ` (${path.basename(d.file.fileName)}:${d.file.getLineAndCharacterOfPosition(d.start ?? 0).line + 1})`))
  t.same(diagnostics, [], 'no diagnostics under strict')
  if (diagnostics.length > 0) return
  // Run what tsc emits, as the client's user would (and with no TypeScript loader needed).
  t.equal(program.emit().emitSkipped, false, 'tsc emits the program')

  const png = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(100, 1)])
  const client = await import(path.join(dir, 'client.js')) as { run: (baseUrl: string, adminKey: string, png: Uint8Array, totpCode: (secret: string) => string, verified: (userId: number) => Promise<void>) => Promise<{ statuses: Record<string, number>, headers: Record<string, string | null>, values: Record<string, unknown> }> }
  const seen = await client.run(baseUrl, ADMIN_KEY, png, (secret) => generateSync({ secret, epoch: Math.floor(Date.now() / 1000) }), async (userId) => { await markVerified(app, userId) })

  t.same(seen.statuses, {
    healthLive: 200,
    healthReady: 200,
    register: 201,
    createUser: 201,
    'createUser taken': 409,
    'login json': 200,
    'login form': 200,
    'refreshSession body': 200,
    'refreshSession reused': 401,
    'refreshSession no body': 200,
    getUser: 200,
    'getUser cookie': 200,
    'getUser other': 403,
    updateUser: 200,
    'updateUser password': 200,
    createProduct: 201,
    'createProduct cookie': 201,
    'createProduct forged': 403,
    getProduct: 200,
    listProducts: 200,
    'listProducts csv': 200,
    'listProducts json past 100': 400,
    uploadProductImage: 201,
    'uploadProductImage cookie': 200,
    getProductImage: 200,
    'getProductImage not modified': 304,
    deleteProductImage: 204,
    deleteProduct: 204,
    'getProduct gone': 404,
    startTotp: 200,
    confirmTotp: 200,
    'login second step': 202,
    completeLoginWithCode: 200,
    getSecurity: 200,
    regenerateRecoveryCodes: 200,
    passkeyRegistrationOptions: 200,
    passkeyRegistrationOptionsDeprecated: 200,
    registerPasskey: 400,
    secondStepPasskeyOptions: 200,
    completeLoginWithPasskey: 401,
    passkeySignIn: 401,
    passkeySignInOptions: 200,
    disableTotp: 204,
    renamePasskey: 404,
    deletePasskey: 404,
    listSessions: 200,
    listSecurityActivity: 200,
    endSession: 404,
    endOtherSessions: 200,
    resendVerificationEmail: 202,
    verifyEmail: 400,
    requestPasswordReset: 202,
    confirmPasswordReset: 400,
    adminResetFactors: 204,
    adminListUsers: 200,
    adminDeleteProduct: 204,
    adminDeleteUser: 204,
    'logout cookie': 204,
    'logout token': 204,
    'deleteUser wrong password': 403,
    deleteUser: 204,
    'logout after delete': 401
  }, 'every route answered as documented')
  t.match(seen.values, {
    live: 'ok',
    takenCode: 'CONFLICT',
    tokenType: 'Bearer',
    formUserId: Number,
    reusedCode: 'REFRESH_TOKEN_REUSED',
    cookieRefreshExpires: /^\d{4}-\d\d-\d\dT/,
    username: /^gen/,
    notMineCode: 'FORBIDDEN',
    names: 'Renamed',
    renamedHasSession: false,
    changedUser: Number,
    imageUrlBefore: null,
    secondDescription: '',
    forgedCode: 'CSRF_REJECTED',
    title: 'Desk lamp',
    listed: true,
    nextCursorType: /^(number|object)$/,
    csvHeader: '"id","title","description","amount","creatorId","createdAt","updatedAt","imageUrl"',
    imageUrlAfter: /^\/api\/product\/\d+\/image$/,
    imageBytes: png.length,
    goneCode: 'NOT_FOUND',
    adminSees: true,
    wrongCode: 'WRONG_PASSWORD',
    expiresIn: 900,
    stepExpiresIn: 300,
    methods: 'totp,recoveryCode,recovery-code',
    sessionMethods: 'password,recoveryCode,recovery-code',
    stepChallenge: 'string',
    stepPasskeyCode: 'PASSKEY_REFUSED',
    passkeyLoginCode: 'PASSKEY_REFUSED',
    formerRpId: 'localhost',
    registrationCode: 'PASSKEY_NOT_REGISTERED',
    verifyCode: 'VERIFICATION_TOKEN_INVALID',
    resetCode: 'RESET_TOKEN_INVALID',
    recoveryCodesLeft: 9,
    freshCodes: 10,
    rpId: 'localhost',
    userVerification: 'required',
    currentSessions: 1,
    lastEvent: 'totp-disabled',
    endSessionCode: 'NOT_FOUND',
    endedOthers: 0
  })
  const called = new Set(Object.keys(seen.statuses).map((name) => name.split(' ')[0]))
  const operations = Object.values(document.paths ?? {}).flatMap((item) => Object.values(item ?? {}).flatMap((operation) => typeof operation === 'object' && operation !== null && 'operationId' in operation ? [String(operation.operationId)] : []))
  t.same(operations.filter((id) => !called.has(id)), [], 'the program calls every operation of the document')
  const idHeaders = Object.entries(seen.headers).filter(([name]) => name.endsWith(' x-request-id'))
  t.equal(idHeaders.length, Object.keys(seen.statuses).length, 'every answer seen')
  for (const [name, value] of idHeaders) t.ok(value, `${name}`)
  t.equal(seen.headers['login json cache-control'], 'no-store')
  t.match(seen.headers['login form set-cookie'], /access_token=.+; .*refresh_token=/)
  t.match(seen.headers['listProducts csv link'], /rel="next"/)
  t.equal(seen.headers['listProducts csv content-disposition'], 'attachment; filename="products.csv"')
  t.equal(seen.headers['uploadProductImage location'], seen.values.imageUrlAfter)
  t.match(seen.headers['getProductImage etag'], /^"/)
  t.match(seen.headers['logout cookie set-cookie'], /Max-Age=0/i)
  t.equal(seen.headers['logout after delete www-authenticate'], 'Bearer')
  t.equal(seen.headers['passkeyRegistrationOptionsDeprecated deprecation'], '@1795824000', 'the former URL says it is deprecated')

  // Outside the document: a known path with a method it lacks.
  const put = await fetch(`${baseUrl}/api/user/1`, { method: 'PUT' })
  t.equal(put.status, 405)
  t.equal(put.headers.get('allow'), 'DELETE, GET, HEAD, PATCH')
})
