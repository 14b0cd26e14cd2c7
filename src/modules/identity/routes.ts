/**
 * Every route under /api/auth, in one place: registration and the recovery of a password
 * (their handlers are the users module's, src/modules/users/account-routes.ts), the password
 * step of a login and its second step (TOTP, recovery code or passkey), the passwordless
 * passkey sign-in, refresh and logout; and the security settings under /api/security
 * (security-routes.ts). The public routes that cost a bcrypt computation or hand out a
 * challenge spend the client's one budget of auth requests (budgets.ts, shared with the user
 * routes); guesses are also limited per account. A signed-in subtree runs `app.authenticate`
 * as its one `onRequest` hook.
 *
 * A sign-in starts a session (sessions.ts): tokens in the body for API clients, or in
 * HttpOnly cookies for browsers (form posts, or `"mode": "cookie"`).
 */
import fastifyFormbody from '@fastify/formbody'
import type { FastifyPluginAsyncTypebox, TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import { BadRequest } from '../../lib/problem.js'
import { BODY, empty, header, HEADERS, json, problems, SESSION_CHANGE, sessionAuth } from '../../lib/responses.js'
import { SessionResult } from '../../lib/session-schemas.js'
import { passwordResetRoutes, registrationRoute, resendVerificationRoute, verifyEmailRoute } from '../users/index.js'
import { CHALLENGE_LIMITS, type SignIn } from './factors.js'
import { CodeStepBody, LoginBody, LogoutBody, MfaTokenBody, PasskeySignInBody, PasskeyStepBody, RefreshBody, RequestOptions, SecondStep } from './schemas.js'
import { securityRoutes } from './security-routes.js'
import { deviceOf } from './sessions.js'

const FORM = 'application/x-www-form-urlencoded'
const JSON_TYPE = 'application/json'
/** A base to resolve a `redirect` against: whatever it resolves to must keep this origin. */
const LOCAL = 'http://service.invalid'

const sessionAnswer = { 200: json(SessionResult, { headers: { ...HEADERS.setCookie, ...HEADERS.noStore } }) }

/** No body at all (a browser's refresh by cookie, a bare logout) is an empty one. */
const noBodyIsEmpty = async (request: FastifyRequest): Promise<void> => {
  if (request.body === undefined || request.body === null) request.body = {}
}

/**
 * The body parsers of refresh and logout, which carry nothing a browser must type: clients
 * post them as they post everything else: a form (an HTML logout button), no body, or
 * `Content-Type: application/json` with no body at all (axios and ky send that for a bodiless
 * POST). All of them mean "no fields". A non-empty body that is not JSON stays 400
 * MALFORMED_JSON, other types 415: the parsers are the scope's only.
 */
async function fieldlessBodies (scope: FastifyInstance): Promise<void> {
  await scope.register(fastifyFormbody)
  const parseJson = scope.getDefaultJsonParser('error', 'error')
  scope.removeContentTypeParser(JSON_TYPE)
  scope.addContentTypeParser(JSON_TYPE, { parseAs: 'string' }, (request, body, done) => {
    if (body === '') { done(null, undefined); return }
    parseJson(request, body as string, done)
  })
}

/** /api/auth and /api/security. */
export const identityRoutes: FastifyPluginAsync = async (app) => {
  await app.register(authRoutes, { prefix: '/api/auth' })
  await app.register(securityRoutes, { prefix: '/api/security' })
}

const authRoutes: FastifyPluginAsyncTypebox = async (app) => {
  const { identity } = app
  const routes = app.withTypeProvider<TypeBoxTypeProvider>()

  registrationRoute(app, { url: '/register', operationId: 'register', tag: 'auth', summary: 'Register a user (the same operation as POST /api/user)' })
  passwordResetRoutes(app)
  verifyEmailRoute(app)

  // Login alone also reads HTML form bodies: the parser is registered in this scope only,
  // so every other route keeps answering 415 to a form.
  await app.register(async (forms) => {
    await forms.register(fastifyFormbody)
    forms.withTypeProvider<TypeBoxTypeProvider>().post('/login', {
      onRequest: identity.authBudget,
      schema: {
        operationId: 'login',
        tags: ['auth'],
        summary: 'Log in with username (or e-mail) and password; starts a session',
        description: 'JSON or an HTML form (`application/x-www-form-urlencoded`). Token mode (JSON\'s default) returns the access and refresh tokens; ' +
          'cookie mode (forms\' default, or `"mode": "cookie"`) sets them as HttpOnly cookies instead; with `redirect` (a path of this service) it answers 303 to that path. ' +
          'An account with a second factor (TOTP) answers 202 with the `mfaToken` of a second step instead, and no session: complete it with `POST /api/auth/mfa/totp` or `/api/auth/mfa/passkey` (from the web app\'s script or an API client: a form posted with scripts off cannot). ' +
          'A wrong password is 401 whatever the body type. A browser request from another origin is refused (403 `CSRF_REJECTED`). ' +
          'Cookie mode over plain HTTP to a host that is not loopback, with `COOKIE_SECURE=true`, is 400 `INSECURE_COOKIE_CONTEXT`: browsers would drop the Secure cookies.',
        consumes: [JSON_TYPE, FORM],
        body: LoginBody,
        response: {
          200: json(SessionResult, { headers: { ...HEADERS.setCookie, ...HEADERS.noStore } }),
          202: json(SecondStep, { headers: HEADERS.noStore }),
          303: empty('cookie mode with `redirect`: the cookies are set, `Location` is that path, and there is no body', { Location: header('the `redirect` path'), ...HEADERS.setCookie, ...HEADERS.noStore }),
          ...problems(...BODY, 'VALIDATION_FAILED', 'BAD_REQUEST', 'INSECURE_COOKIE_CONTEXT', 'UNAUTHORIZED', 'CSRF_REJECTED', 'EMAIL_NOT_VERIFIED', 'RATE_LIMITED')
        }
      }
    }, async (request, reply) => {
      identity.originCheck(request, { requireOrigin: false })
      const { username, identity: name, password } = request.body
      const login = username ?? name
      if (login === undefined || (username !== undefined && name !== undefined)) {
        throw new BadRequest('Send exactly one of `username` and `identity`')
      }
      const mode = request.body.mode ?? (request.headers['content-type']?.toLowerCase().startsWith(FORM) === true ? 'cookie' : 'token')
      const redirect = request.body.redirect
      if (redirect !== undefined && mode !== 'cookie') throw new BadRequest('`redirect` goes with cookie mode: in token mode the tokens are in the answer\'s body')
      // Before the password is checked: whatever it is, the browser would not keep the session.
      if (mode === 'cookie') identity.cookies.assertBrowserKeeps(request)
      const account = await identity.login(login, password, reply)
      // An account with a second factor gets no session yet: the ticket of the second step.
      const secondStep = await identity.factors.secondStep(account, mode)
      if (secondStep !== null) return await reply.code(202).header('cache-control', 'no-store').send(secondStep)
      const session = identity.deliver(reply, await identity.sessions.start(account, ['password'], deviceOf(request)), mode)
      if (redirect === undefined) return session
      // 303: the browser follows with a GET, and the cookies set here go with it. The schema's
      // pattern already keeps the path on this host; resolving it is a second lock on that door.
      if (new URL(redirect, LOCAL).origin !== LOCAL) throw new BadRequest('`redirect` must be a path of this service')
      // No body (not even `null`): the browser shows nothing of a 303 but follows it.
      return await (reply.code(303).header('location', redirect) as FastifyReply).send()
    })
  })

  await app.register(async (scope) => {
    await fieldlessBodies(scope)
    scope.withTypeProvider<TypeBoxTypeProvider>().post('/refresh-token', {
      preValidation: noBodyIsEmpty,
      schema: {
        operationId: 'refreshSession',
        // A browser refreshing by cookie sends no body at all.
        'x-optional-body': true,
        tags: ['auth'],
        summary: 'Trade a refresh token for new access and refresh tokens (rotation)',
        description: 'The refresh token comes from the body (`{"refreshToken": ...}`, token mode) or from the refresh cookie (cookie mode; then the origin is checked). ' +
          'Each refresh token works once: presenting a used one again revokes the whole session (401 `REFRESH_TOKEN_REUSED`), as does a race of two refreshes with one token. ' +
          'An expired or unknown token, or one of a session ended by logout or a password change: 401 `INVALID_REFRESH_TOKEN`. ' +
          'After its first refresh, a session refreshes at most once per `REFRESH_MIN_INTERVAL_MS`: sooner is 429 `RATE_LIMITED` with `Retry-After`, and the token stays valid. ' +
          'JSON or a form; no body, `{}`, an empty form or `application/json` with an empty body all refresh by cookie.',
        consumes: [JSON_TYPE, FORM],
        body: RefreshBody,
        response: { 200: json(SessionResult, { headers: { ...HEADERS.setCookie, ...HEADERS.noStore } }), ...problems(...BODY, 'VALIDATION_FAILED', 'BAD_REQUEST', 'INVALID_REFRESH_TOKEN', 'REFRESH_TOKEN_REUSED', 'CSRF_REJECTED', 'RATE_LIMITED') }
      }
    }, async (request, reply) => {
      const { cookies } = identity
      let token = request.body.refreshToken
      let mode: 'token' | 'cookie' = 'token'
      if (token === undefined) {
        token = cookies.refresh(request)
        mode = 'cookie'
        if (token === undefined) throw new BadRequest('Send the refresh token: `{"refreshToken": ...}` or the refresh cookie')
        identity.originCheck(request, { requireOrigin: true })
      }
      try {
        return identity.deliver(reply, await identity.sessions.refresh(token), mode)
      } catch (error) {
        // A browser whose refresh failed must log in again: drop the dead cookies.
        if (mode === 'cookie' && (error as { statusCode?: number }).statusCode === 401) cookies.clear(reply)
        const retryAfter = (error as { retryAfterSeconds?: number }).retryAfterSeconds
        if (retryAfter !== undefined) reply.header('retry-after', String(retryAfter))
        throw error
      }
    })
  })

  /** A browser's sign-in (cookie mode) must come from a trusted origin and keep its cookies. */
  function checkBrowser (request: FastifyRequest, mode: string): void {
    identity.originCheck(request, { requireOrigin: false })
    if (mode === 'cookie') identity.cookies.assertBrowserKeeps(request)
  }

  async function startSession (reply: FastifyReply, signIn: SignIn) {
    return identity.deliver(reply, await identity.sessions.start(signIn.account, signIn.methods, deviceOf(reply.request)), signIn.mode)
  }

  routes.post('/mfa/totp', {
    onRequest: identity.secondStepBudget,
    schema: {
      operationId: 'completeLoginWithCode',
      tags: ['auth'],
      summary: 'Complete a login\'s second step with a TOTP code or a recovery code; starts the session',
      description: 'After login answered 202. A TOTP code is accepted for its 30 s step and one step either side, once; a recovery code once. ' +
        'The session is delivered as login would have (token or cookie mode, as the login asked). ' +
        'A wrong, expired or used code: 401 `MFA_CODE_INVALID`, counted with the account\'s wrong passwords (`LOGIN_FAILURES_MAX`: 429 past it). ' +
        'An unknown, expired or completed `mfaToken`: 401 `MFA_TOKEN_INVALID`.',
      body: CodeStepBody,
      response: { ...sessionAnswer, ...problems(...BODY, 'VALIDATION_FAILED', 'BAD_REQUEST', 'MFA_TOKEN_INVALID', 'MFA_CODE_INVALID', 'CSRF_REJECTED', 'RATE_LIMITED') }
    }
  }, async (request, reply) => {
    identity.originCheck(request, { requireOrigin: false })
    const { mfaToken, ...proof } = request.body
    return await startSession(reply, await identity.factors.completeWithCode(mfaToken, proof, reply))
  })

  routes.post('/mfa/passkey/options', {
    schema: {
      operationId: 'secondStepPasskeyOptions',
      tags: ['auth'],
      summary: 'The WebAuthn options to complete a login\'s second step with one of the user\'s passkeys',
      description: CHALLENGE_LIMITS,
      body: MfaTokenBody,
      response: { 200: json(RequestOptions), ...problems(...BODY, 'VALIDATION_FAILED', 'MFA_TOKEN_INVALID', 'RATE_LIMITED') }
    }
  }, async (request, reply) => await identity.factors.secondStepPasskeyOptions(request.body.mfaToken, reply))

  routes.post('/mfa/passkey', {
    onRequest: identity.secondStepBudget,
    schema: {
      operationId: 'completeLoginWithPasskey',
      tags: ['auth'],
      summary: 'Complete a login\'s second step with a passkey; starts the session',
      description: 'The body is `{mfaToken, response}`: `response` is the assertion navigator.credentials.get() made from the options of `POST /api/auth/mfa/passkey/options` (single use, 5 min), as `PublicKeyCredential.toJSON()` gives it (what @simplewebauthn/browser\'s `startAuthentication` answers). Refused (as for `POST /api/auth/passkey/login`, a cross-origin frame included): 401 `PASSKEY_REFUSED` with the reason.',
      body: PasskeyStepBody,
      response: { ...sessionAnswer, ...problems(...BODY, 'VALIDATION_FAILED', 'BAD_REQUEST', 'MFA_TOKEN_INVALID', 'PASSKEY_REFUSED', 'CSRF_REJECTED', 'RATE_LIMITED') }
    }
  }, async (request, reply) => {
    identity.originCheck(request, { requireOrigin: false })
    return await startSession(reply, await identity.factors.completeWithPasskey(request.body.mfaToken, request.body.response, deviceOf(request)))
  })

  routes.post('/passkey/options', {
    schema: {
      operationId: 'passkeySignInOptions',
      tags: ['auth'],
      summary: 'The WebAuthn options of a sign-in with a passkey alone (no name typed)',
      description: `No body. The challenge works once, for 5 minutes, on any replica. ${CHALLENGE_LIMITS}`,
      'x-optional-body': true,
      response: { 200: json(RequestOptions), ...problems(...BODY, 'RATE_LIMITED') }
    }
  }, async (_request, reply) => await identity.factors.signInOptions(reply))

  routes.post('/passkey/login', {
    onRequest: identity.secondStepBudget,
    schema: {
      operationId: 'passkeySignIn',
      tags: ['auth'],
      summary: 'Sign in with a passkey alone; starts a session',
      description: 'The body is `{response, mode?}`: `response` is the assertion navigator.credentials.get() made from the options of `POST /api/auth/passkey/options`, as `PublicKeyCredential.toJSON()` gives it (what @simplewebauthn/browser\'s `startAuthentication` answers); the passkey names its user, whose user verification (PIN, biometrics) is required. ' +
        '`mode` as for login (`token` by default). Refused (unknown or deleted passkey, wrong origin, made in a cross-origin frame, a counter that did not go up, a used or expired challenge, no user verification): 401 `PASSKEY_REFUSED` with the reason.',
      body: PasskeySignInBody,
      response: { ...sessionAnswer, ...problems(...BODY, 'VALIDATION_FAILED', 'BAD_REQUEST', 'INSECURE_COOKIE_CONTEXT', 'PASSKEY_REFUSED', 'CSRF_REJECTED', 'RATE_LIMITED') }
    }
  }, async (request, reply) => {
    const mode = request.body.mode ?? 'token'
    checkBrowser(request, mode)
    return await startSession(reply, await identity.factors.signIn(request.body.response, mode, deviceOf(request)))
  })

  // Signed in: the access token (header or cookie) names a live session.
  await app.register(async (signedIn) => {
    signedIn.addHook('onRequest', app.authenticate)
    resendVerificationRoute(signedIn)
    await signedIn.register(async (bodies) => {
      await fieldlessBodies(bodies)
      bodies.withTypeProvider<TypeBoxTypeProvider>().post('/logout', {
        preValidation: noBodyIsEmpty,
        schema: {
          operationId: 'logout',
          // Nothing to send: a bare POST is the usual logout.
          'x-optional-body': true,
          tags: ['auth'],
          summary: 'End the session: its access token and refresh tokens stop working at once',
          description: 'Authenticated by the access token (header or cookie; a cookie-authenticated logout passes the origin check). Clears the session cookies. ' +
            'No body is needed: none, `{}`, an empty form or `application/json` with an empty body all do.',
          security: sessionAuth,
          consumes: [JSON_TYPE, FORM],
          body: LogoutBody,
          response: { 204: empty('logged out', { ...HEADERS.clearCookie, ...HEADERS.noStore }), ...problems(...BODY, ...SESSION_CHANGE, 'VALIDATION_FAILED') }
        }
      }, async (request, reply) => {
        await identity.sessions.logout(request.sessionId!)
        identity.cookies.clear(reply)
        return reply.code(204).send(null)
      })
    })
  })
}
