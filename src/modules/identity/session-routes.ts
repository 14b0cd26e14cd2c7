/**
 * /api/security/sessions: the account's signed-in devices, as an account security page
 * lists them, and ending them. Registered inside the /api/security subtree, whose hooks
 * (`app.authenticate`, `Cache-Control: no-store`) it keeps. An ended session's tokens stop
 * working at once on every replica: the token check reads the session on each request.
 * Ending sessions needs no recent sign-in: it only ever takes access away.
 */
import type { FastifyPluginAsyncTypebox, TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import Bowser from 'bowser'
import { NotFound } from '../../lib/problem.js'
import { BODY, empty, json, problems, SESSION, SESSION_CHANGE, sessionAuth } from '../../lib/responses.js'
import { Type } from 'typebox'
import { Timestamp } from '../../lib/schemas.js'
import { ATTEMPTS, EVENTS_KEPT, type SecurityEventKind } from './activity.js'
import type { SessionRow } from './repository.js'
import { methodName } from './sessions.js'

const SessionInfo = Type.Object({
  id: Type.String({ format: 'uuid', description: 'the session\'s id: DELETE /api/security/sessions/{id} takes it' }),
  current: Type.Boolean({ description: 'the session of this request' }),
  createdAt: Timestamp,
  lastUsedAt: Type.Union([Timestamp, Type.Null()], { description: 'its last login or refresh' }),
  expiresAt: Timestamp,
  methods: Type.Array(Type.String(), { description: 'how it was signed in: `password`, `totp`, `recoveryCode`, `passkey`' }),
  userAgent: Type.Union([Type.String(), Type.Null()], { description: 'the User-Agent header it signed in with (at most 512 characters)' }),
  browser: Type.Union([Type.String(), Type.Null()], { description: 'read from the User-Agent: `Chrome 156`' }),
  os: Type.Union([Type.String(), Type.Null()], { description: 'read from the User-Agent: `iOS 17.4`' }),
  ip: Type.Union([Type.String(), Type.Null()], { description: 'the address it signed in from' })
})
const SessionList = Type.Object({ items: Type.Array(SessionInfo) }, {
  examples: [{ items: [{ id: '6f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f', current: true, createdAt: '2026-11-28T09:00:00.000Z', lastUsedAt: '2026-11-28T09:45:00.000Z', expiresAt: '2026-12-28T09:45:00.000Z', methods: ['password', 'totp'], userAgent: 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1', browser: 'Safari 17', os: 'iOS 17.4', ip: '203.0.113.7' }] }]
})
const SessionParams = Type.Object({ id: Type.String({ pattern: '^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$', description: 'the session\'s `id` (a UUID), as GET /api/security/sessions lists it' }) }, { additionalProperties: false })
/** What each kind of `GET /api/security/activity` is, as its schema and docs/api.md say. */
export const ACTIVITY_KINDS: Record<SecurityEventKind, string> = {
  'sign-in': 'a sign-in (`detail`: how, `password+totp`)',
  'sign-in-failed': 'a wrong password at login',
  'second-step-failed': 'a wrong code or a refused passkey at a login\'s second step, after the right password (`detail`: `totp`, `recoveryCode` or `passkey`)',
  'passkey-sign-in-failed': 'a passkey of the account refused at a sign-in with a passkey alone',
  'recovery-code-used': 'a recovery code spent on a sign-in (`detail`: how many are left)',
  'password-changed': 'a new password set with the current one',
  'password-reset-requested': 'a reset link e-mailed to the account\'s address (from the address that asked for it)',
  'password-reset-completed': 'a new password set through a reset link (from the address that followed it)',
  'email-changed': 'a new address confirmed by its verification link (`detail`: the address)',
  'totp-enabled': 'TOTP turned on',
  'totp-disabled': 'TOTP turned off',
  'recovery-codes-replaced': 'new recovery codes',
  'passkey-added': 'a passkey registered',
  'passkey-removed': 'a passkey deleted',
  'session-ended': 'a session ended (logout from the sessions list)',
  'other-sessions-ended': 'every other session ended'
}

const Activity = Type.Object({
  items: Type.Array(Type.Object({
    kind: Type.String({ description: Object.entries(ACTIVITY_KINDS).map(([kind, what]) => `\`${kind}\`: ${what}`).join('; ') }),
    detail: Type.Union([Type.String(), Type.Null()], { description: 'what the kind leaves open: a sign-in\'s methods (`password+totp`), the method of a failed second step, the recovery codes left, a new address' }),
    createdAt: Timestamp,
    count: Type.Integer({ minimum: 1, description: `repeated attempts (${ATTEMPTS.map((kind) => `\`${kind}\``).join(', ')}) with nothing of the owner's between them are one item: how many; 1 for everything else` }),
    firstAt: Type.Unsafe<Date>(Type.String({ format: 'date-time', description: 'when the first of `count` attempts was; `createdAt`, `ip` and `userAgent` are the last one\'s' })),
    ip: Type.Union([Type.String(), Type.Null()]),
    userAgent: Type.Union([Type.String(), Type.Null()]),
    browser: Type.Union([Type.String(), Type.Null()]),
    os: Type.Union([Type.String(), Type.Null()])
  }))
}, { examples: [{ items: [{ kind: 'sign-in', detail: 'password+totp', createdAt: '2026-11-28T09:00:00.000Z', count: 1, firstAt: '2026-11-28T09:00:00.000Z', ip: '203.0.113.7', userAgent: 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Safari/537.36', browser: 'Chrome 156', os: 'Linux' }, { kind: 'sign-in-failed', detail: null, createdAt: '2026-11-28T08:59:30.000Z', count: 3, firstAt: '2026-11-28T08:41:02.000Z', ip: '198.51.100.4', userAgent: 'curl/8.5.0', browser: null, os: null }] }] })

/** The changes of the security subtree that are events of the account's activity, by operationId. */
export const ACTIVITY_OF: Record<string, SecurityEventKind> = {
  confirmTotp: 'totp-enabled',
  disableTotp: 'totp-disabled',
  regenerateRecoveryCodes: 'recovery-codes-replaced',
  registerPasskey: 'passkey-added',
  deletePasskey: 'passkey-removed',
  endSession: 'session-ended',
  endOtherSessions: 'other-sessions-ended'
}

const EndedSessions = Type.Object({ ended: Type.Integer({ description: 'how many sessions were ended' }) }, { examples: [{ ended: 2 }] })

/** "Chrome 156" and "iOS 17.4" from a User-Agent header; null where it says nothing known. */
function describe (userAgent: string | null): { browser: string | null, os: string | null } {
  if (userAgent === null) return { browser: null, os: null }
  const { browser, os } = Bowser.parse(userAgent)
  const name = (part: { name?: string, version?: string }, version?: string): string | null =>
    part.name ? [part.name, version].filter(Boolean).join(' ') : null
  return { browser: name(browser, browser.version?.split('.')[0]), os: name(os, os.versionName ?? os.version) }
}

export const sessionRoutes: FastifyPluginAsyncTypebox = async (parent) => {
  const app = parent.withTypeProvider<TypeBoxTypeProvider>()
  const { sessions } = app.identity
  const present = (row: SessionRow, current: string) => ({ ...row, methods: row.methods.map(methodName), ...describe(row.userAgent), current: row.id === current })

  app.get('/sessions', {
    schema: {
      operationId: 'listSessions',
      tags: ['security'],
      summary: 'Your signed-in sessions: when, from which device and address, how; this one marked',
      description: 'The live sessions of the account, the most recently used first (at most `SESSIONS_MAX_PER_USER`). `lastUsedAt` is the last login or refresh of the session; `browser` and `os` are read from its User-Agent.',
      security: sessionAuth,
      response: { 200: json(SessionList), ...problems(...SESSION) }
    }
  }, async (request) => ({ items: (await sessions.list(request.currentUser!.id)).map((row) => present(row, request.sessionId!)) }))

  app.get('/activity', {
    schema: {
      operationId: 'listSecurityActivity',
      tags: ['security'],
      summary: 'Your account\'s recent security activity: sign-ins, wrong passwords and codes, resets, factor, password, address and session changes',
      description: `Newest first, the last ${EVENTS_KEPT} events of the account, each with when, the address and the device it came from. ` +
        'Attempts anyone may repeat against the account (wrong passwords, reset requests) never push your own events out: repeated with nothing of yours between them, they are one item with a `count` (docs/api.md, "Security activity").',
      security: sessionAuth,
      response: { 200: json(Activity), ...problems(...SESSION) }
    }
  }, async (request) => ({ items: (await app.identity.activity.list(request.currentUser!.id)).map((row) => ({ ...row, ...describe(row.userAgent) })) }))

  app.delete('/sessions/:id', {
    schema: {
      operationId: 'endSession',
      tags: ['security'],
      summary: 'End one of your sessions (this one too: that is a logout)',
      description: 'Its access token and refresh token stop working at once. 404 when the account has no live session of that id.',
      security: sessionAuth,
      params: SessionParams,
      response: { 204: empty('ended'), ...problems(...BODY, ...SESSION_CHANGE, 'VALIDATION_FAILED', 'NOT_FOUND') }
    }
  }, async (request, reply) => {
    if (!await sessions.endOwn(request.currentUser!.id, request.params.id)) throw new NotFound('You have no live session of that id')
    return await reply.code(204).send(null)
  })

  // The collection, not a path under it: `/sessions/<word>` would be `/sessions/{id}`'s too.
  app.delete('/sessions', {
    schema: {
      operationId: 'endOtherSessions',
      tags: ['security'],
      summary: 'Sign out everywhere else: end every session of yours but this one (a logout ends this one)',
      description: 'For a lost device, or after turning on a second factor: sessions signed in before it keep refreshing until ended.',
      security: sessionAuth,
      response: { 200: json(EndedSessions), ...problems(...BODY, ...SESSION_CHANGE) }
    }
  }, async (request) => ({ ended: await sessions.endOthers(request.currentUser!.id, request.sessionId!) }))
}
