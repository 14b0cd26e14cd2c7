// Calls the service's API with the session cookies (cookie mode) and turns every failure
// into an Error whose message is the problem's `detail` (docs/api.md, "Errors").

export class ApiError extends Error {
  constructor (message, status, code, errors = []) {
    super(message)
    this.status = status
    this.code = code
    // A validation failure's fields: [{ in: 'body', field: '/email', message }].
    this.errors = errors
  }
}

let refreshing = null

/**
 * Trades the refresh cookie for new session cookies once the access cookie has expired.
 * One refresh at a time: a refresh token works once, and a second use ends the session.
 */
function refresh () {
  refreshing ??= fetch('/api/auth/refresh-token', { method: 'POST', credentials: 'same-origin' })
    .then((res) => res.ok, () => false)
    .finally(() => { refreshing = null })
  return refreshing
}

export async function api (method, url, body) {
  const init = { method, headers: { accept: 'application/json' }, credentials: 'same-origin' }
  if (body instanceof FormData) init.body = body
  else if (body !== undefined) {
    init.headers['content-type'] = 'application/json'
    init.body = JSON.stringify(body)
  }
  let res
  try {
    res = await fetch(url, init)
    // An expired access cookie (15 minutes by default): refresh the session, then ask again.
    if (res.status === 401 && !url.startsWith('/api/auth/') && await refresh()) res = await fetch(url, init)
  } catch (error) {
    throw new ApiError(`The service cannot be reached (${error.message}). Check your connection and try again.`, 0)
  }
  if (res.status === 204) return null
  const type = res.headers.get('content-type') ?? ''
  const data = type.includes('json') ? await res.json().catch(() => null) : null
  if (!res.ok) {
    const detail = data?.detail ?? data?.title ?? `The service answered ${res.status} ${res.statusText}.`
    throw new ApiError(detail, res.status, data?.code, Array.isArray(data?.errors) ? data.errors : [])
  }
  return data
}

// Every address the app calls, in one place: a renamed route changes here only.
const id = (value) => encodeURIComponent(String(value))

export const auth = {
  login: (body) => api('POST', '/api/auth/login', body),
  logout: () => api('POST', '/api/auth/logout'),
  passkeyOptions: () => api('POST', '/api/auth/passkey/options', {}),
  passkeyLogin: (response) => api('POST', '/api/auth/passkey/login', { response, mode: 'cookie' }),
  mfaTotp: (body) => api('POST', '/api/auth/mfa/totp', body),
  mfaPasskeyOptions: (mfaToken) => api('POST', '/api/auth/mfa/passkey/options', { mfaToken }),
  mfaPasskey: (mfaToken, response) => api('POST', '/api/auth/mfa/passkey', { mfaToken, response }),
  passwordReset: (email) => api('POST', '/api/auth/password-reset', { email }),
  passwordResetConfirm: (token, password) => api('POST', '/api/auth/password-reset/confirm', { token, password }),
  verifyEmail: (token) => api('POST', '/api/auth/verify-email', { token }),
  resendVerification: () => api('POST', '/api/auth/verify-email/resend')
}

export const users = {
  create: (body) => api('POST', '/api/user', body),
  get: (userId) => api('GET', `/api/user/${id(userId)}`),
  update: (userId, body) => api('PATCH', `/api/user/${id(userId)}`, body),
  remove: (userId, password) => api('DELETE', `/api/user/${id(userId)}`, { password })
}

export const security = {
  get: () => api('GET', '/api/security'),
  totpStart: (currentPassword) => api('POST', '/api/security/totp', { currentPassword }),
  totpConfirm: (code, currentPassword) => api('POST', '/api/security/totp/confirm', { code, currentPassword }),
  totpDisable: (proof) => api('POST', '/api/security/totp/disable', proof),
  recoveryCodes: (currentPassword) => api('POST', '/api/security/recovery-codes', { currentPassword }),
  passkeyOptions: (currentPassword) => api('POST', '/api/security/passkey/options', { currentPassword }),
  passkeyAdd: (body) => api('POST', '/api/security/passkeys', body),
  passkeyRename: (passkeyId, name) => api('PATCH', `/api/security/passkeys/${id(passkeyId)}`, { name }),
  passkeyDelete: (passkeyId) => api('DELETE', `/api/security/passkeys/${id(passkeyId)}`),
  sessions: () => api('GET', '/api/security/sessions'),
  activity: () => api('GET', '/api/security/activity'),
  endSession: (sessionId) => api('DELETE', `/api/security/sessions/${id(sessionId)}`),
  endOtherSessions: () => api('DELETE', '/api/security/sessions')
}

export const products = {
  list: (query) => api('GET', `/api/product?${new URLSearchParams(query)}`),
  get: (productId) => api('GET', `/api/product/${id(productId)}`),
  create: (body) => api('POST', '/api/product', body),
  remove: (productId) => api('DELETE', `/api/product/${id(productId)}`),
  uploadImage: (productId, file) => {
    const upload = new FormData()
    upload.append('image', file)
    return api('POST', `/api/product/${id(productId)}/image`, upload)
  }
}
