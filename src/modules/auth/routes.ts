/**
 * POST /api/auth/register, /login, /refresh-token, /logout, /password-reset(/confirm) and /verify-email(/resend). Register and login spend the
 * client's one budget of bcrypt-costing requests (src/modules/users/budget.ts, shared with the user routes);
 * login is also limited per account (password guesses per account, src/modules/users/account-limit.ts).
 * Login starts a session (src/modules/sessions/): tokens in the body for API clients, or in
 * HttpOnly cookies for browsers (form posts, or `"mode": "cookie"`).
 */
import fastifyFormbody from '@fastify/formbody'
import type { FastifyPluginAsyncTypebox, TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { OriginCheck } from '../../lib/csrf.js'
import { BadRequest } from '../../lib/problem.js'
import { empty, header, HEADERS, json, problems, sessionAuth } from '../../lib/responses.js'
import { SecondStep } from '../factors/index.js'
import { deliverSession, RefreshBody, SessionResult } from '../sessions/index.js'
import { PasswordResetAccepted, PasswordResetBody, PasswordResetConfirmBody, registrationRoute, VerificationQueued, VerifyEmailBody, type AuthBudget } from '../users/index.js'
import { LoginBody, LogoutBody } from './schemas.js'

export interface AuthRoutesOptions {
  /** The per-client budget of bcrypt-costing requests (shared with the user routes). */
  authBudget: AuthBudget
  /** ACCESS_TOKEN_TTL, as configured (`15m`): login's `expiresIn`. */
  accessTokenTtl: string
  /** The CSRF check of browser requests. */
  originCheck: OriginCheck
}

const FORM = 'application/x-www-form-urlencoded'
const JSON_TYPE = 'application/json'
/** A base to resolve a `redirect` against: whatever it resolves to must keep this origin. */
const LOCAL = 'http://service.invalid'

/** No body at all (a browser's refresh by cookie, a bare logout) is an empty one. */
const noBodyIsEmpty = async (request: FastifyRequest): Promise<void> => {
  if (request.body === undefined || request.body === null) request.body = {}
}

export const authRoutes: FastifyPluginAsyncTypebox<AuthRoutesOptions> = async (app, options) => {
  registrationRoute(app, { url: '/register', operationId: 'register', tag: 'auth', summary: 'Register a user (the same operation as POST /api/user)', authBudget: options.authBudget })

  const routes = app.withTypeProvider<TypeBoxTypeProvider>()
  routes.post('/password-reset', {
    onRequest: options.authBudget,
    schema: {
      operationId: 'requestPasswordReset',
      tags: ['auth'],
      summary: 'E-mail a link to reset the password of the account with this address',
      description: 'Always 202 with the same body, whether or not an account has the address, in the same time either way: the e-mail is sent afterwards, through the outbox. ' +
        'The link (`<PUBLIC_URL>/reset-password#token=...`) works once, for `PASSWORD_RESET_TTL` (30 min by default). ' +
        'At most 3 e-mails per address per hour (further requests are answered the same and send nothing); the client\'s budget of auth requests applies (429).',
      body: PasswordResetBody,
      response: { 202: json(PasswordResetAccepted), ...problems(400, 413, 415) }
    }
  }, async (request, reply) => {
    await app.passwordReset.request(request.body.email, reply)
    return await reply.code(202).send({ detail: 'If an account has this address, a link to reset its password is on its way' })
  })

  routes.post('/password-reset/confirm', {
    onRequest: options.authBudget,
    schema: {
      operationId: 'confirmPasswordReset',
      tags: ['auth'],
      summary: 'Set a new password with the token of a reset link; ends every session of the user',
      description: 'The token is the part of the e-mailed link after `#token=`. The password follows registration\'s rules. ' +
        'Every session of the user ends (access and refresh tokens), and every other reset link of theirs stops working. ' +
        'An unknown, used or expired token: 400 `RESET_TOKEN_INVALID`. Of two confirmations with one token, one succeeds.',
      body: PasswordResetConfirmBody,
      response: { 204: empty('the password is set; log in with it', HEADERS.noStore), ...problems(400, 413, 415) }
    }
  }, async (request, reply) => {
    await app.passwordReset.confirm(request.body.token, request.body.password)
    return await reply.code(204).header('cache-control', 'no-store').send(null)
  })

  routes.post('/verify-email', {
    onRequest: options.authBudget,
    schema: {
      operationId: 'verifyEmail',
      tags: ['auth'],
      summary: 'Verify an e-mail address with the token of its verification link',
      description: 'The token is the part of the e-mailed link after `#token=`; no login is needed (the link may be opened on another device). ' +
        'Sets the user\'s `emailVerifiedAt`; a link sent to the `pendingEmail` of a change makes it the user\'s `email`, verified. ' +
        'An unknown, used or expired token, or one sent to an address the user has since left or no longer asks for: 400 `VERIFICATION_TOKEN_INVALID`. ' +
        'The pending address taken by another account meanwhile: 409 `CONFLICT`, nothing changed.',
      body: VerifyEmailBody,
      response: { 204: empty('the address is verified'), ...problems(400, 409, 413, 415) }
    }
  }, async (request, reply) => {
    await app.emailVerification.verify(request.body.token)
    return await reply.code(204).send(null)
  })

  routes.post('/verify-email/resend', {
    onRequest: app.authenticate,
    schema: {
      operationId: 'resendVerificationEmail',
      tags: ['auth'],
      summary: 'E-mail the verification link of your address again',
      description: 'Authenticated; no body. The link goes to the `pendingEmail` of a change when there is one, else to `email`; nothing is sent when that is verified already. At most 3 per user per hour: 429 with `Retry-After` past it.',
      security: sessionAuth,
      response: { 202: json(VerificationQueued), ...problems(401, 403) }
    }
  }, async (request, reply) => {
    const user = request.currentUser!
    const email = user.pendingEmail ?? user.email
    await app.emailVerification.resend(user.id, email, reply)
    return await reply.code(202).send({ detail: `A verification link is on its way to ${email}, unless it is verified already` })
  })

  // Login alone also reads HTML form bodies: the parser is registered in this scope only,
  // so every other route keeps answering 415 to a form.
  await app.register(async (forms) => {
    await forms.register(fastifyFormbody)
    forms.withTypeProvider<TypeBoxTypeProvider>().post('/login', {
      onRequest: options.authBudget,
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
          ...problems(400, 401, 403, 413, 415, 429)
        }
      }
    }, async (request, reply) => {
      options.originCheck(request, { requireOrigin: false })
      const { username, identity, password } = request.body
      const login = username ?? identity
      if (login === undefined || (username !== undefined && identity !== undefined)) {
        throw new BadRequest('Send exactly one of `username` and `identity`')
      }
      const mode = request.body.mode ?? (request.headers['content-type']?.toLowerCase().startsWith(FORM) === true ? 'cookie' : 'token')
      const redirect = request.body.redirect
      if (redirect !== undefined && mode !== 'cookie') throw new BadRequest('`redirect` goes with cookie mode: in token mode the tokens are in the answer\'s body')
      // Before the password is checked: whatever it is, the browser would not keep the session.
      if (mode === 'cookie') app.sessionCookies.assertBrowserKeeps(request)
      const account = await app.users.login(login, password, reply)
      // An account with a second factor gets no session yet: the ticket of the second step.
      const secondStep = await app.factors.secondStep(account, mode)
      if (secondStep !== null) return await reply.code(202).header('cache-control', 'no-store').send(secondStep)
      const issued = await app.sessions.start(account)
      const session = deliverSession(reply, app.sessionCookies, issued, mode, options.accessTokenTtl)
      if (redirect === undefined) return session
      // 303: the browser follows with a GET, and the cookies set here go with it. The schema's
      // pattern already keeps the path on this host; resolving it is a second lock on that door.
      if (new URL(redirect, LOCAL).origin !== LOCAL) throw new BadRequest('`redirect` must be a path of this service')
      // No body (not even `null`): the browser shows nothing of a 303 but follows it.
      return await (reply.code(303).header('location', redirect) as FastifyReply).send()
    })
  })

  // Refresh and logout carry nothing a browser must type, and clients post them as they post
  // everything else: a form (an HTML logout button), no body, or `Content-Type:
  // application/json` with no body at all (axios and ky send that for a bodiless POST).
  // All of them mean "no fields". A non-empty body that is not JSON stays 400 MALFORMED_JSON,
  // other types 415: the parsers are this scope's only.
  await app.register(async (scope) => {
    await scope.register(fastifyFormbody)
    const bodies = scope.withTypeProvider<TypeBoxTypeProvider>()
    const parseJson = bodies.getDefaultJsonParser('error', 'error')
    bodies.removeContentTypeParser(JSON_TYPE)
    bodies.addContentTypeParser(JSON_TYPE, { parseAs: 'string' }, (request, body, done) => {
      if (body === '') { done(null, undefined); return }
      parseJson(request, body as string, done)
    })

    bodies.post('/refresh-token', {
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
        response: { 200: json(SessionResult, { headers: { ...HEADERS.setCookie, ...HEADERS.noStore } }), ...problems(400, 401, 403, 413, 415, 429) }
      }
    }, async (request, reply) => {
      const cookies = app.sessionCookies
      let token = request.body.refreshToken
      let mode: 'token' | 'cookie' = 'token'
      if (token === undefined) {
        token = cookies.refresh(request)
        mode = 'cookie'
        if (token === undefined) throw new BadRequest('Send the refresh token: `{"refreshToken": ...}` or the refresh cookie')
        options.originCheck(request, { requireOrigin: true })
      }
      try {
        return deliverSession(reply, cookies, await app.sessions.refresh(token), mode, options.accessTokenTtl)
      } catch (error) {
        // A browser whose refresh failed must log in again: drop the dead cookies.
        if (mode === 'cookie' && (error as { statusCode?: number }).statusCode === 401) cookies.clear(reply)
        const retryAfter = (error as { retryAfterSeconds?: number }).retryAfterSeconds
        if (retryAfter !== undefined) reply.header('retry-after', String(retryAfter))
        throw error
      }
    })

    bodies.post('/logout', {
      onRequest: app.authenticate,
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
        response: { 204: empty('logged out', { ...HEADERS.clearCookie, ...HEADERS.noStore }), ...problems(400, 401, 403, 413, 415) }
      }
    }, async (request, reply) => {
      await app.sessions.logout(request.sessionId!)
      app.sessionCookies.clear(reply)
      return reply.code(204).send(null)
    })
  })
}
