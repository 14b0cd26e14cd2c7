// Calls the service's API with the session cookies (cookie mode) and turns every failure
// into an Error whose message is the problem's `detail` (docs/api.md, "Errors").

export class ApiError extends Error {
  constructor (message, status, code) {
    super(message)
    this.status = status
    this.code = code
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
    throw new ApiError(detail, res.status, data?.code)
  }
  return data
}
