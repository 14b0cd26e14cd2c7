/**
 * Second factors and passkeys, `app.identity.factors` (docs/api.md, "Second factors and
 * passkeys"):
 *
 * - TOTP: enrolment keeps a pending secret until a first valid code turns it on, with ten
 *   recovery codes shown once. With TOTP on, a right password no longer signs in: login
 *   answers a *ticket* (`mfaToken`, 5 min) for the second step, which a TOTP code, a recovery
 *   code or one of the user's passkeys completes. Wrong codes are taken from the account's
 *   budget of guesses (login's), so a code cannot be brute-forced through many tickets.
 * - Passkeys (WebAuthn, @simplewebauthn/server): registered while signed in; used alone
 *   (discoverable credentials: no name typed; user verification required), or in the
 *   second step. Challenges and tickets live in two ChallengeStores (Redis when configured:
 *   a challenge issued by one replica is verified by another), are single use (taken, not
 *   read) and expire. Neither store evicts: a client holding CHALLENGES_PER_CLIENT live
 *   challenges gets 429 until its oldest expires, a full store 503, so no flood of options
 *   requests can void another client's challenge or a pending second step.
 * - Bounds: PASSKEYS_MAX_PER_USER passkeys a user, credential ids of at most 1,023 bytes
 *   (WebAuthn's own limit) and public keys of at most PUBLIC_KEY_MAX_BYTES, read from the
 *   authenticator data, which must name the credential of the response's `id`. Assertions
 *   and registrations made in a cross-origin frame are refused. The API names a passkey by
 *   a short id of the service's (`publicId`); the credential id stays WebAuthn's key.
 * - Each change that adds, removes or replaces a factor writes a notice to the account's
 *   address in its own transaction (`notify`: the outbox).
 * - Sessions record how they were signed in (`methods`); with RECENT_SIGN_IN_MAX_AGE set,
 *   sensitive changes need a session of at most that age that used the account's second
 *   factor, if it has one (`requireRecentSignIn`).
 */
import { createHash, randomBytes } from 'node:crypto'
import createError from '@fastify/error'
import { normalizeIP } from '@fastify/rate-limit'
import {
  generateAuthenticationOptions,
  generateRegistrationOptions,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
  type AuthenticationResponseJSON,
  type AuthenticatorTransport,
  type PublicKeyCredentialCreationOptionsJSON,
  type PublicKeyCredentialRequestOptionsJSON,
  type RegistrationResponseJSON
} from '@simplewebauthn/server'
import type { FastifyReply } from 'fastify'
import type { Transaction } from '../../db/sql.js'
import { newLinkToken, tokenDigest } from '../../lib/link-token.js'
import { BadRequest, NotFound, ServiceUnavailable, Unauthorized } from '../../lib/problem.js'
import type { SessionModeValue } from '../../lib/session-schemas.js'
import type { SecurityEvent } from '../mail/index.js'
import type { SecurityActivity, SecurityEventKind } from './activity.js'
import type { AccountLimiter } from './budgets.js'
import { StoreRefusal, type ChallengeStore } from './challenges.js'
import type { FactorsRepository, PasskeyRow } from './factors-repository.js'
import type { Device } from './repository.js'
import { deviceOf, methodName, type SignInMethod } from './sessions.js'
import { codeStep, enrolment, newRecoveryCodes, newTotpSecret, recoveryDigest } from './totp.js'

const TotpEnabled = createError('TOTP_ENABLED', 'TOTP is on already: turn it off first to enrol a new authenticator', 409)
const TotpNotPending = createError('TOTP_NOT_PENDING', 'No TOTP enrolment is pending: start one first (POST /api/security/totp)', 409)
const TotpNotEnabled = createError('TOTP_NOT_ENABLED', 'TOTP is off', 409)
const TotpCodeInvalid = createError('TOTP_CODE_INVALID', 'The code is wrong or expired: use the code your app shows now', 400)
const MfaTokenInvalid = createError('MFA_TOKEN_INVALID', 'The second step has expired or was completed already: log in again', 401)
const MfaCodeInvalid = createError('MFA_CODE_INVALID', 'The code is wrong, expired or used already', 401)
const PasskeyRefused = createError('PASSKEY_REFUSED', 'The passkey was refused: %s', 401)
const PasskeyNotRegistered = createError('PASSKEY_NOT_REGISTERED', 'The passkey could not be registered: %s', 400)
const RecentSignInRequired = createError('RECENT_SIGN_IN_REQUIRED', '%s', 403)
const PasskeyQuotaExceeded = createError<[number]>('PASSKEY_QUOTA_EXCEEDED', 'You hold %d passkeys, as many as one user may: delete one to add another', 409)
const TooManyChallenges = createError<[number]>('RATE_LIMITED', 'This client has as many passkey challenges pending as one client may; retry in %d s', 429)

/** How long a login's second step (its ticket) and a WebAuthn challenge last, ms. */
export const SECOND_STEP_TTL_MS = 300_000
export const CHALLENGE_TTL_MS = 300_000
/** Passkeys one user may hold: each is listed in GET /api/security and in every registration's options. */
export const PASSKEYS_MAX_PER_USER = 20
/** WebAuthn's limit on a credential id's length (Web Authentication, credentialIdLength). */
export const CREDENTIAL_ID_MAX_BYTES = 1023
/** The largest COSE public key kept: an RSA-4096 key takes about 550 bytes, an EC2 P-256 key 77. */
export const PUBLIC_KEY_MAX_BYTES = 1024
/** Live (unexpired) WebAuthn challenges one client address may hold, used or not (the stores count them). */
export const CHALLENGES_PER_CLIENT = 50
/** What the routes that hand out a challenge say of these limits. */
export const CHALLENGE_LIMITS = `A client address holds at most ${CHALLENGES_PER_CLIENT} live challenges (used ones count until they expire): past it, 429 \`RATE_LIMITED\`; ` +
  'a full store (memory mode), 503; both with `Retry-After`. No request ever voids another client\'s challenge or a pending second step.'

/**
 * Sign-in methods as the API names them. Sessions store `recovery-code` (rows already do, and
 * so do replicas of the release before), which is also the former API name: it is listed
 * right after `recoveryCode` until its removal (docs/api.md, "Names").
 */
export function apiMethods (methods: readonly string[]): string[] {
  return methods.flatMap((method) => method === 'recovery-code' ? ['recoveryCode', method] : [method])
}

export interface Passkey { id: string, name: string, createdAt: Date, lastUsedAt: Date | null, backedUp: boolean }

/** A signed-in account, to start a session for, and the methods its sign-in used. */
export interface SignIn { account: { id: number, tokenVersion: number }, methods: SignInMethod[], mode: SessionModeValue }

interface Ticket { u: number, v: number, m: SessionModeValue }
interface Challenge { purpose: 'register' | 'sign-in' | 'second-step', userId?: number, ticket?: string }

export interface FactorsOptions {
  /** WEBAUTHN_RP_ID, WEBAUTHN_RP_NAME, WEBAUTHN_ORIGINS. */
  rpId: string
  rpName: string
  origins: string[]
  /** RECENT_SIGN_IN_MAX_AGE in ms; 0 = off. */
  recentSignInMaxAgeMs: number
  /** WebAuthn challenges, each counted against its client's share. */
  challenges: ChallengeStore
  /** The second step's tickets. */
  tickets: ChallengeStore
  /** The clock of TOTP (tests set it). */
  now?: () => number
}

interface Dependencies extends FactorsOptions {
  factors: FactorsRepository
  /** The account's budget of guesses (login's), by user id: reserve before a check, release when right. */
  guesses: AccountLimiter
  /** The current password check (sign-in.ts). */
  checkPassword: (userId: number, password: string, reply: FastifyReply) => Promise<void>
  /** The token version of a user, or null when there is no such user. */
  tokenVersion: (userId: number) => Promise<number | null>
  /** Writes the notice of `event` to the account's address in `tx` (the outbox); `wake` sends it once that commits. */
  notify: (tx: Transaction, account: Account, event: SecurityEvent, name?: string) => Promise<void>
  wake: () => void
  /** The account's security activity: wrong codes, refused passkeys, recovery codes spent. */
  activity: Pick<SecurityActivity, 'record'>
}

/** The signed-in account a change is made to, as its notice needs it. */
export interface Account { id: number, username: string, email: string }

/** A ticket's key in the store: the SHA-256 of its token, as the e-mailed links' tokens are kept. */
const ticketKey = (token: string): string => tokenDigest(token).toString('base64url')
const publicPasskey = ({ publicId, name, createdAt, lastUsedAt, backedUp }: PasskeyRow): Passkey => ({ id: publicId, name, createdAt, lastUsedAt, backedUp })

/** The WebAuthn user handle of a user: stable, opaque, not their id. */
function userHandle (userId: number): Uint8Array<ArrayBuffer> {
  return new Uint8Array(createHash('sha256').update(`user-product-service:user:${userId}`).digest().subarray(0, 16))
}

/**
 * The challenge a response's client data names, before anything else is believed of it. A
 * ceremony run in a frame of another site (`crossOrigin`, `topOrigin`) is refused: no other
 * site may frame this service's pages (CSP frame-ancestors 'self'), so such a response is
 * another site's doing.
 */
function challengeOf (response: { response: { clientDataJSON: string } }): string {
  let data: { challenge?: unknown, crossOrigin?: unknown, topOrigin?: unknown }
  try {
    data = JSON.parse(Buffer.from(response.response.clientDataJSON, 'base64url').toString('utf8')) as typeof data
  } catch {
    data = {}
  }
  if (typeof data.challenge !== 'string' || data.challenge.length === 0 || data.challenge.length > 128) {
    throw new BadRequest('`response.response.clientDataJSON` is not the client data of a WebAuthn ceremony')
  }
  if (data.crossOrigin === true || data.topOrigin !== undefined) throw new PasskeyRefused('it was made in a frame of another site (crossOrigin)')
  return data.challenge
}

export function factorsService (deps: Dependencies) {
  const { factors, challenges, tickets, rpId, rpName, origins, guesses, notify, wake, activity } = deps
  const now = deps.now ?? Date.now

  /** Runs `check`; a refusal it throws (401) is first recorded as `kind` of user `userId`'s account. */
  async function recordingRefusal<T> (userId: number, kind: SecurityEventKind, device: Device, detail: string | null, check: () => Promise<T>): Promise<T> {
    try {
      return await check()
    } catch (error) {
      if ((error as { statusCode?: number }).statusCode === 401) await activity.record(userId, kind, device, detail)
      throw error
    }
  }

  /** A store failure (Redis down) is a 503, never a 500 or a pass. */
  async function stored<T> (operation: Promise<T>): Promise<T> {
    try {
      return await operation
    } catch (error) {
      if (error instanceof StoreRefusal) throw error
      throw new ServiceUnavailable('The challenge store is unavailable; retry later')
    }
  }

  /**
   * A new challenge's bytes (for the options) once it is stored under its base64url (what the
   * client data names), counted against the client address's share: past it 429, a full
   * store 503, both with Retry-After.
   */
  async function newChallenge (challenge: Challenge, reply: FastifyReply): Promise<Uint8Array<ArrayBuffer>> {
    const bytes = new Uint8Array(randomBytes(32))
    try {
      await stored(challenges.put(`webauthn:${Buffer.from(bytes).toString('base64url')}`, JSON.stringify(challenge), CHALLENGE_TTL_MS, normalizeIP(reply.request.ip)))
    } catch (error) {
      if (!(error instanceof StoreRefusal)) throw error
      const seconds = Math.max(1, Math.ceil(error.retryAfterMs / 1000))
      reply.header('retry-after', String(seconds))
      if (error.reason === 'owner') throw new TooManyChallenges(seconds)
      throw new ServiceUnavailable(`Too many passkey challenges are pending; retry in ${seconds} s`)
    }
    return bytes
  }

  /** The stored challenge a response answers, taken (single use), or the refusal. */
  async function takeChallenge (response: { response: { clientDataJSON: string } }, purpose: Challenge['purpose']): Promise<{ value: string, challenge: Challenge }> {
    const value = challengeOf(response)
    const raw = await stored(challenges.take(`webauthn:${value}`))
    const challenge = raw === null ? null : JSON.parse(raw) as Challenge
    if (challenge?.purpose !== purpose) throw new PasskeyRefused('its challenge is unknown, used or expired: start again')
    return { value, challenge }
  }

  /** A live ticket; a password changed since the login (a reset) voids it, before any code is spent on it. */
  async function readTicket (token: string): Promise<Ticket> {
    const raw = await stored(tickets.peek(`mfa:${ticketKey(token)}`))
    const ticket = raw === null ? null : JSON.parse(raw) as Ticket
    if (ticket === null || await deps.tokenVersion(ticket.u) !== ticket.v) throw new MfaTokenInvalid()
    return ticket
  }

  /** The ticket taken once its factor is checked: of two completions, one signs in. */
  async function finish (token: string, ticket: Ticket, method: SignInMethod): Promise<SignIn> {
    if (await stored(tickets.take(`mfa:${ticketKey(token)}`)) === null) throw new MfaTokenInvalid()
    return { account: { id: ticket.u, tokenVersion: ticket.v }, methods: ['password', method], mode: ticket.m }
  }

  /** Verifies an assertion against the stored passkey and moves its counter on. */
  async function assertPasskey (response: AuthenticationResponseJSON, expectedChallenge: string, passkey: PasskeyRow | null, requireUserVerification: boolean): Promise<PasskeyRow> {
    if (passkey === null) throw new PasskeyRefused('it is not registered here (deleted, or never added)')
    let verified
    try {
      verified = await verifyAuthenticationResponse({
        response,
        expectedChallenge,
        expectedOrigin: origins,
        expectedRPID: rpId,
        credential: { id: passkey.id, publicKey: new Uint8Array(passkey.publicKey), counter: passkey.counter, transports: passkey.transports as AuthenticatorTransport[] },
        requireUserVerification
      })
    } catch (error) {
      throw new PasskeyRefused((error as Error).message)
    }
    if (!verified.verified) throw new PasskeyRefused('its signature does not verify')
    if (!await factors.usePasskey(passkey.id, verified.authenticationInfo.newCounter)) {
      throw new PasskeyRefused('its signature counter did not go up: a copy of the authenticator, or the same assertion twice')
    }
    return passkey
  }

  return {
    /** What the security settings page shows. */
    async overview (userId: number, sessionId: string) {
      const [state, passkeys, session] = await Promise.all([factors.state(userId), factors.passkeys(userId), factors.sessionStrength(sessionId)])
      return {
        totp: { enabled: state.totpEnabledAt !== null, enabledAt: state.totpEnabledAt },
        recoveryCodesLeft: state.recoveryCodesLeft,
        passkeys: passkeys.map(publicPasskey),
        session: { methods: apiMethods(session?.methods ?? ['password']), signedInAt: session?.signedInAt ?? new Date(0) }
      }
    },

    /** Starts (or restarts) a TOTP enrolment: the secret is shown here only. */
    async startTotp (user: { id: number, username: string }) {
      const secret = newTotpSecret()
      if (!await factors.startTotp(user.id, secret)) throw new TotpEnabled()
      return await enrolment(secret, user.username)
    },

    /** Turns the pending TOTP on with its first code; the recovery codes are shown here only. */
    async confirmTotp (account: Account, code: string): Promise<{ recoveryCodes: string[] }> {
      const secret = await factors.totpSecret(account.id, false)
      if (secret === null) throw new TotpNotPending()
      const step = codeStep(secret, code, now())
      if (step === null) throw new TotpCodeInvalid()
      const { codes, digests } = newRecoveryCodes()
      if (!await factors.enableTotp(account.id, secret, step, digests, async (tx) => { await notify(tx, account, 'totp-enabled') })) throw new TotpNotPending()
      wake()
      return { recoveryCodes: codes }
    },

    /** Turns TOTP off after the password or a current code. */
    async disableTotp (account: Account, proof: { password?: string, code?: string }, reply: FastifyReply): Promise<void> {
      const userId = account.id
      if ((proof.password === undefined) === (proof.code === undefined)) throw new BadRequest('Send exactly one of `currentPassword` and `code`')
      if (proof.password !== undefined) {
        await deps.checkPassword(userId, proof.password, reply)
      } else {
        const secret = await factors.totpSecret(userId, true)
        if (secret === null) throw new TotpNotEnabled()
        const reservation = await guesses.reserve(`user:${userId}`, reply)
        const step = codeStep(secret, proof.code!, now())
        if (step === null || !await factors.takeStep(userId, step)) throw new TotpCodeInvalid()
        await guesses.release(reservation)
      }
      await factors.disableTotp(userId, async (tx) => { await notify(tx, account, 'totp-disabled') })
      wake()
    },

    async regenerateRecoveryCodes (account: Account): Promise<{ recoveryCodes: string[] }> {
      const { codes, digests } = newRecoveryCodes()
      if (!await factors.replaceRecoveryCodes(account.id, digests, async (tx) => { await notify(tx, account, 'recovery-codes-replaced') })) throw new TotpNotEnabled()
      wake()
      return { recoveryCodes: codes }
    },

    /**
     * After a right password: null when the account has no second factor (sign in now), else
     * the second step's ticket and the methods that complete it.
     */
    async secondStep (account: { id: number, tokenVersion: number }, mode: SessionModeValue): Promise<{ mfaToken: string, methods: string[], expiresIn: number } | null> {
      if (!await factors.totpEnabled(account.id)) return null
      const { token } = newLinkToken()
      const ticket: Ticket = { u: account.id, v: account.tokenVersion, m: mode }
      try {
        await stored(tickets.put(`mfa:${ticketKey(token)}`, JSON.stringify(ticket), SECOND_STEP_TTL_MS))
      } catch (error) {
        if (!(error instanceof StoreRefusal)) throw error
        throw new ServiceUnavailable('Too many second steps are pending; retry in a minute')
      }
      const methods = ['totp', 'recovery-code']
      if ((await factors.passkeys(account.id)).length > 0) methods.push('passkey')
      return { mfaToken: token, methods: apiMethods(methods), expiresIn: SECOND_STEP_TTL_MS / 1000 }
    },

    /** Completes the second step with a TOTP code or a recovery code. */
    async completeWithCode (token: string, proof: { code?: string, recoveryCode?: string }, reply: FastifyReply): Promise<SignIn> {
      if ((proof.code === undefined) === (proof.recoveryCode === undefined)) throw new BadRequest('Send exactly one of `code` and `recoveryCode`')
      const ticket = await readTicket(token)
      const reservation = await guesses.reserve(`user:${ticket.u}`, reply)
      const device = deviceOf(reply.request)
      const method: SignInMethod = proof.code !== undefined ? 'totp' : 'recovery-code'
      const wrong = async (): Promise<never> => {
        await activity.record(ticket.u, 'second-step-failed', device, methodName(method))
        throw new MfaCodeInvalid()
      }
      if (proof.code !== undefined) {
        const secret = await factors.totpSecret(ticket.u, true)
        const step = secret === null ? null : codeStep(secret, proof.code, now())
        if (step === null || !await factors.takeStep(ticket.u, step)) await wrong()
      } else {
        const left = await factors.takeRecoveryCode(ticket.u, recoveryDigest(proof.recoveryCode!))
        if (left === null) await wrong()
        // Spent even if the ticket is then found completed: the code is gone either way.
        await activity.record(ticket.u, 'recovery-code-used', device, String(left))
      }
      await guesses.release(reservation)
      return await finish(token, ticket, method)
    },

    /** The options of a passkey in the second step: the user's passkeys are allowed. */
    async secondStepPasskeyOptions (token: string, reply: FastifyReply): Promise<PublicKeyCredentialRequestOptionsJSON> {
      const ticket = await readTicket(token)
      const passkeys = await factors.passkeys(ticket.u)
      const challenge = await newChallenge({ purpose: 'second-step', userId: ticket.u, ticket: ticketKey(token) }, reply)
      return await generateAuthenticationOptions({
        rpID: rpId,
        challenge,
        userVerification: 'preferred',
        timeout: CHALLENGE_TTL_MS,
        allowCredentials: passkeys.map((p) => ({ id: p.id, transports: p.transports as AuthenticatorTransport[] }))
      })
    },

    /** Completes the second step with one of the user's passkeys, from `device`. */
    async completeWithPasskey (token: string, response: AuthenticationResponseJSON, device: Device): Promise<SignIn> {
      const ticket = await readTicket(token)
      await recordingRefusal(ticket.u, 'second-step-failed', device, 'passkey', async () => {
        const { value, challenge } = await takeChallenge(response, 'second-step')
        if (challenge.ticket !== ticketKey(token)) throw new PasskeyRefused('its challenge belongs to another sign-in')
        const passkey = await factors.passkey(response.id)
        // Another user's passkey is refused exactly like an unknown one.
        await assertPasskey(response, value, passkey?.userId === ticket.u ? passkey : null, false)
      })
      return await finish(token, ticket, 'passkey')
    },

    /** The options of a passwordless sign-in: any passkey of this site, user verification required. */
    async signInOptions (reply: FastifyReply): Promise<PublicKeyCredentialRequestOptionsJSON> {
      const challenge = await newChallenge({ purpose: 'sign-in' }, reply)
      return await generateAuthenticationOptions({ rpID: rpId, challenge, userVerification: 'required', timeout: CHALLENGE_TTL_MS })
    },

    /** A passwordless sign-in from `device`: the passkey names its user, whose activity records a refusal. */
    async signIn (response: AuthenticationResponseJSON, mode: SessionModeValue, device: Device): Promise<SignIn> {
      const { value } = await takeChallenge(response, 'sign-in')
      const passkey = await factors.passkey(response.id)
      const check = async (): Promise<PasskeyRow> => {
        if (passkey !== null && response.response.userHandle !== undefined &&
            response.response.userHandle !== Buffer.from(userHandle(passkey.userId)).toString('base64url')) {
          throw new PasskeyRefused('its user handle is not the one it was registered with')
        }
        return await assertPasskey(response, value, passkey, true)
      }
      // A passkey unknown here names no account: there is no activity to record its refusal in.
      const used = passkey === null ? await check() : await recordingRefusal(passkey.userId, 'passkey-sign-in-failed', device, null, check)
      const tokenVersion = await deps.tokenVersion(used.userId)
      if (tokenVersion === null) throw new Unauthorized('The user no longer exists')
      return { account: { id: used.userId, tokenVersion }, methods: ['passkey'], mode }
    },

    /** The options of a new passkey; none (409) when the user holds PASSKEYS_MAX_PER_USER already. */
    async registrationOptions (user: { id: number, username: string, names?: string | null }, reply: FastifyReply): Promise<PublicKeyCredentialCreationOptionsJSON> {
      const passkeys = await factors.passkeys(user.id)
      if (passkeys.length >= PASSKEYS_MAX_PER_USER) throw new PasskeyQuotaExceeded(passkeys.length)
      const challenge = await newChallenge({ purpose: 'register', userId: user.id }, reply)
      return await generateRegistrationOptions({
        rpName,
        rpID: rpId,
        userName: user.username,
        userDisplayName: user.names ?? user.username,
        userID: userHandle(user.id),
        challenge,
        timeout: CHALLENGE_TTL_MS,
        attestationType: 'none',
        excludeCredentials: passkeys.map((p) => ({ id: p.id, transports: p.transports })),
        authenticatorSelection: { residentKey: 'required', userVerification: 'required' },
        // The same algorithms on every Node: Ed25519, ES256, RS256. Where Node has post-quantum
        // keys (24), the library would put ML-DSA-44 first, an experimental API of Node's whose
        // 1,312-byte public keys exceed PUBLIC_KEY_MAX_BYTES, so an authenticator taking it could
        // not register at all.
        supportedAlgorithmIDs: [-8, -7, -257]
      })
    },

    async register (account: Account, response: RegistrationResponseJSON, name: string | undefined): Promise<Passkey> {
      const userId = account.id
      const { value, challenge } = await takeChallenge(response, 'register').catch((error: Error) => { throw new PasskeyNotRegistered(error.message.replace(/^The passkey was refused: /, '')) })
      if (challenge.userId !== userId) throw new PasskeyNotRegistered('its challenge was issued to another user')
      let verified
      try {
        verified = await verifyRegistrationResponse({ response, expectedChallenge: value, expectedOrigin: origins, expectedRPID: rpId, requireUserVerification: true })
      } catch (error) {
        throw new PasskeyNotRegistered((error as Error).message)
      }
      if (!verified.verified) throw new PasskeyNotRegistered('its attestation does not verify')
      // What is kept is the credential of the authenticator data, so that is what is bounded.
      const { credential, credentialBackedUp } = verified.registrationInfo
      if (Buffer.from(credential.id, 'base64url').length > CREDENTIAL_ID_MAX_BYTES) throw new PasskeyNotRegistered(`its credential id is longer than ${CREDENTIAL_ID_MAX_BYTES} bytes`)
      if (credential.id !== response.id) throw new PasskeyNotRegistered('the credential id of its authenticator data is not its `id`')
      if (credential.publicKey.length > PUBLIC_KEY_MAX_BYTES) throw new PasskeyNotRegistered(`its public key is longer than ${PUBLIC_KEY_MAX_BYTES} bytes`)
      const row = await factors.addPasskey({
        id: credential.id,
        userId,
        publicKey: Buffer.from(credential.publicKey),
        counter: credential.counter,
        transports: credential.transports ?? response.response.transports ?? [],
        name,
        backedUp: credentialBackedUp
      }, PASSKEYS_MAX_PER_USER, async (tx, added) => { await notify(tx, account, 'passkey-added', added.name) })
      if (row === null) throw new Unauthorized('The user no longer exists')
      if ('quota' in row) throw new PasskeyQuotaExceeded(row.quota)
      wake()
      return publicPasskey(row)
    },

    async passkeys (userId: number): Promise<Passkey[]> {
      return (await factors.passkeys(userId)).map(publicPasskey)
    },

    /** Renames the user's passkey of this `id` (its publicId). */
    async renamePasskey (userId: number, id: string, name: string): Promise<Passkey> {
      const row = await factors.renamePasskey(userId, id, name)
      if (row === null) throw new NotFound('You have no passkey with this id')
      return publicPasskey(row)
    },

    async deletePasskey (userId: number, id: string): Promise<void> {
      if (!await factors.deletePasskey(userId, id)) throw new NotFound('You have no passkey with this id')
    },

    /** How a session was signed in (a password change's new session keeps them). */
    async sessionMethods (sessionId: string): Promise<SignInMethod[]> {
      return ((await factors.sessionStrength(sessionId))?.methods ?? ['password']) as SignInMethod[]
    },

    /**
     * With RECENT_SIGN_IN_MAX_AGE set: the session must be at most that old, and have used a
     * second factor or a passkey when the account has TOTP on; else 403 RECENT_SIGN_IN_REQUIRED.
     */
    async requireRecentSignIn (sessionId: string): Promise<void> {
      if (deps.recentSignInMaxAgeMs === 0) return
      const session = await factors.sessionStrength(sessionId)
      if (session === null) throw new Unauthorized('The token has been revoked')
      const minutes = Math.max(1, Math.round(deps.recentSignInMaxAgeMs / 60_000))
      if (session.signedInAt.getTime() < now() - deps.recentSignInMaxAgeMs) {
        throw new RecentSignInRequired(`This change needs a sign-in of the last ${minutes} min: log in again, then retry`)
      }
      if (session.totpOn && !session.methods.some((m) => m !== 'password')) {
        throw new RecentSignInRequired('This change needs a sign-in with your second factor: log in again with your code or passkey, then retry')
      }
    },

    /** Removes every factor of a user (admin); false when they had none. */
    async reset (userId: number): Promise<boolean> {
      return await factors.reset(userId)
    }
  }
}

export type FactorsService = ReturnType<typeof factorsService>
