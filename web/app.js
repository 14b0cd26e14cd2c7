// The web app: one page per address (History API), each a <section> of index.html shown by
// the router below. Logging in, signing up and the account live here; the catalogue and the
// products in products.js, the security page in security.js. Every form reports its errors
// in its own role=alert paragraph; what an action did goes to the status line.
import { auth, users } from './api.js'
import { newPasswordFields } from './password.js'
import { showCatalogue, showNewProduct, showProduct } from './products.js'
import { $, FieldError, clicked, confirmAction, go, handle, say, sessionEnded, state, webAuthnSupported } from './ui.js'

// The token of a password-reset link, from the address's fragment (never sent to the server).
let resetToken = null
// The login's second step while it is asked for: POST /api/auth/login's 202 (mfaToken, methods).
let mfa = null

// The security page and the passkey library, a third of the app's script, load when first
// needed (that page, a passkey button): the other pages start without them.
let securityModule = null
const security = async () => (securityModule ??= await import('./security.js'))

const forms = {
  login: $('#login'),
  signup: $('#signup'),
  details: $('#details'),
  password: $('#password'),
  deleteAccount: $('#delete-account'),
  forgot: $('#forgot'),
  reset: $('#reset-password'),
  secondStep: $('#second-step')
}

/**
 * The pages: the address they answer, their section, their title, whether they need a
 * session (without one the login form is shown in their place, and the page after it), and
 * what fills them (false when there is nothing at this address).
 */
const PAGES = [
  { path: /^\/(index\.html)?$/, section: 'catalogue', title: 'Products', show: showCatalogue },
  { path: /^\/login$/, section: 'auth', title: 'Log in or sign up', visitor: true },
  { path: /^\/products\/new$/, section: 'new-product', title: 'New product', private: true, show: showNewProduct },
  { path: /^\/products\/(\d+)$/, section: 'product', title: 'Product', show: (match) => showProduct(match[1]) },
  { path: /^\/account$/, section: 'profile', title: 'Profile', private: true, show: () => showProfile() },
  { path: /^\/account\/delete$/, section: 'delete-page', title: 'Delete account', private: true },
  { path: /^\/security$/, section: 'security', title: 'Security', private: true, show: async () => await (await security()).showSecurity() },
  { path: /^\/reset-password$/, section: 'reset', title: 'Choose a new password', show: () => resetToken !== null }
]
const SECTIONS = [...PAGES.map((page) => page.section), 'not-found']

const pageOf = (pathname) => {
  for (const page of PAGES) {
    const match = page.path.exec(pathname)
    if (match !== null) return { page, match }
  }
  return null
}

function showSection (section, title) {
  for (const name of SECTIONS) $(`#${name}`).hidden = name !== section
  document.title = title === 'Products' ? 'Products' : `${title} – Products`
}

function showNav () {
  const inside = state.me !== null
  $('#nav').hidden = false
  for (const link of document.querySelectorAll('#nav .inside')) link.hidden = !inside
  for (const link of document.querySelectorAll('#nav .outside')) link.hidden = inside
  for (const link of document.querySelectorAll('#nav a')) {
    if (link.getAttribute('href') === location.pathname) link.setAttribute('aria-current', 'page')
    else link.removeAttribute('aria-current')
  }
  $('#filters-mine').parentElement.hidden = !inside
}

let routing = 0

/**
 * Shows the page of the address. Then `message` is said and focused, or `focus` is focused,
 * or (after a move between pages, not at the first load) the page's heading: a screen
 * reader hears where it is, and a keyboard starts from the top of the new page. A new page
 * starts at the top; back, forward and a reload return to where the page was scrolled.
 */
async function route ({ message = '', focus = null, moved = true, returning = false } = {}) {
  const run = ++routing
  const found = pageOf(location.pathname)
  if (found?.page.visitor && state.me !== null) {
    history.replaceState(null, '', '/')
    return await route({ message, focus, moved, returning })
  }
  showNav()
  if (moved && !returning) window.scrollTo(0, 0)
  say('', { focus: false })
  let section = found === null ? 'not-found' : found.page.section
  let title = found === null ? 'Not found' : found.page.title
  if (found?.page.private && state.me === null) {
    // The login form in the page's place: once logged in, the same address shows the page.
    section = 'auth'
    title = 'Log in'
  }
  showAuth()
  showSection(section, title)
  $('main').removeAttribute('aria-busy')
  if (section === found?.page.section && found.page.show !== undefined) {
    $('main').setAttribute('aria-busy', 'true')
    const shown = await found.page.show(found.match)
    if (run !== routing) return
    $('main').removeAttribute('aria-busy')
    if (shown === false) showSection('not-found', 'Not found')
  }
  if (returning) window.scrollTo(0, history.state?.scrollY ?? 0)
  if (message !== '') say(message, { focus: focus === null })
  if (focus !== null) focus.focus()
  else if (message === '' && moved) document.querySelector('main > section:not([hidden]) h1')?.focus({ preventScroll: returning })
}

// The app puts each page back where it was scrolled itself, once the page's data is shown.
history.scrollRestoration = 'manual'
const keepScroll = () => history.replaceState({ ...history.state, scrollY: window.scrollY }, '')
window.addEventListener('pagehide', keepScroll)
window.addEventListener('popstate', () => { route({ returning: true }) })
window.addEventListener('app:navigate', (event) => { route(event.detail) })
window.addEventListener('app:session-ended', () => { loggedOut('Your session has ended: log in again.') })

// Links to the app's own pages open them in place; anything else (the API, a download, a
// new tab, another site) is left to the browser.
document.addEventListener('click', (event) => {
  const link = event.target.closest('a[href]')
  if (link === null || event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return
  const url = new URL(link.href)
  if (url.origin !== location.origin || link.hasAttribute('download') || link.target !== '' || url.pathname.startsWith('/api/') || url.pathname.startsWith('/docs')) return
  event.preventDefault()
  if (url.pathname + url.search !== location.pathname + location.search) go(url.pathname + url.search)
  else route()
})

/** The login page's parts: the password form or the second step; sign-up and the passkey button where they can work. */
function showAuth () {
  const stepping = mfa !== null
  forms.login.hidden = stepping
  forms.secondStep.hidden = !stepping
  forms.signup.hidden = stepping
  $('#forgot-open').hidden = stepping
  if (stepping) forms.forgot.hidden = true
  $('#passkey-login').hidden = !webAuthnSupported()
}

function showProfile () {
  const me = state.me
  forms.details.names.value = me.names ?? ''
  forms.details.email.value = me.email
  const verified = me.emailVerifiedAt === null ? 'Not verified yet: follow the link e-mailed to this address.' : 'Verified.'
  // The field keeps the current address: it stays the account's until the new one confirms.
  $('#email-state').textContent = me.pendingEmail === null
    ? verified
    : `${verified} Changing to ${me.pendingEmail}: follow the link e-mailed there; until then this address stays.`
  $('#resend').hidden = me.emailVerifiedAt !== null && me.pendingEmail === null
  $('#keep-email').hidden = me.pendingEmail === null
}

/** The account's name in the hidden username fields that password managers match the password forms by. */
function fillAccountName () {
  for (const field of document.querySelectorAll('.account-name')) field.value = state.me?.username ?? ''
}

/** Signed in: the login page gives way to the catalogue, or to the page the login stood in for. */
function loggedIn (user, { to = null, message = '' } = {}) {
  state.me = user
  mfa = null
  localStorage.setItem('userId', String(user.id))
  fillAccountName()
  const target = to ?? (location.pathname === '/login' ? '/' : location.pathname + location.search)
  go(target, { replace: true, message })
}

function loggedOut (message, { to = null } = {}) {
  const wasPrivate = pageOf(location.pathname)?.page.private === true
  state.me = null
  mfa = null
  localStorage.removeItem('userId')
  securityModule?.forgetSecurity()
  fillAccountName()
  const focus = forms.login.username
  // A page that needs a session keeps its address: logging in again shows it.
  if (to === null && wasPrivate) route({ message, focus })
  else go(to ?? '/login', { message, focus })
}

/** A new session (cookie mode): reads the account and shows the app. */
async function signedIn (session, options = {}) {
  const user = await users.get(session.userId)
  loggedIn(user, { message: `Logged in as ${user.username}.`, ...options })
}

/** Logs in with a password; an account with two-step login answers 202 and the second step is asked for. */
async function logIn (username, password, options) {
  const answer = await auth.login({ username, password, mode: 'cookie' })
  if (answer.mfaToken !== undefined) secondStep(answer)
  else await signedIn(answer, options)
}

handle(forms.login, async (data) => {
  await logIn(data.get('username'), data.get('password'))
  forms.login.reset()
})

/** Asks the browser for a passkey's signature over the options `options` answers. */
async function passkeyAssertion (options) {
  const [{ passkeyFailure, startAuthentication }, optionsJSON] = await Promise.all([security(), options()])
  try {
    return await startAuthentication({ optionsJSON })
  } catch (error) {
    throw new Error(passkeyFailure(error))
  }
}

clicked($('#passkey-login'), forms.login, async () => {
  // A discoverable passkey: the browser offers this site's passkeys, no username needed.
  const response = await passkeyAssertion(auth.passkeyOptions)
  await signedIn(await auth.passkeyLogin(response))
  forms.login.reset()
})

function secondStep (ticket) {
  mfa = ticket
  recoveryMode(false)
  $('#second-step-passkey').hidden = !ticket.methods.includes('passkey') || !webAuthnSupported()
  showAuth()
  forms.secondStep.code.focus()
}

/** Switches the second step between a code from the app and a recovery code. */
function recoveryMode (on) {
  const form = forms.secondStep
  form.reset()
  form.querySelector('.error').textContent = ''
  for (const [field, shown] of [[form.code, !on], [form.recoveryCode, on]]) {
    field.hidden = !shown
    field.required = shown
    form.querySelector(`label[for="${field.id}"]`).hidden = !shown
  }
  $('#second-step-hint').textContent = on
    ? 'Enter one of the recovery codes you saved when you set up the app. Each works once.'
    : 'Enter the code your authenticator app shows now.'
  $('#second-step-switch').textContent = on ? 'Use a code from the app' : 'Use a recovery code'
}

/** Finishes the second step with the session `finish` answers; an expired ticket goes back to the password. */
async function secondStepDone (finish) {
  try {
    await signedIn(await finish(mfa.mfaToken))
  } catch (failure) {
    if (failure.code !== 'MFA_TOKEN_INVALID') throw failure
    mfa = null
    showAuth()
    forms.login.querySelector('.error').textContent = 'The second step took too long or was already used: log in again.'
    forms.login.username.focus()
  }
}

handle(forms.secondStep, async (data) => {
  const recovery = !forms.secondStep.recoveryCode.hidden
  const proof = recovery ? { recoveryCode: data.get('recoveryCode').trim() } : { code: data.get('code').trim() }
  await secondStepDone(async (mfaToken) => await auth.mfaTotp({ mfaToken, ...proof }))
})

$('#second-step-switch').addEventListener('click', () => {
  const on = forms.secondStep.recoveryCode.hidden
  recoveryMode(on)
  ;(on ? forms.secondStep.recoveryCode : forms.secondStep.code).focus()
})

clicked($('#second-step-passkey'), forms.secondStep, async () => {
  await secondStepDone(async (mfaToken) => {
    const response = await passkeyAssertion(() => auth.mfaPasskeyOptions(mfaToken))
    return await auth.mfaPasskey(mfaToken, response)
  })
})

$('#second-step-cancel').addEventListener('click', () => {
  mfa = null
  showAuth()
  forms.login.username.focus()
})

handle(forms.signup, async (data) => {
  const body = { username: data.get('username'), email: data.get('email'), password: data.get('password') }
  if (data.get('names') !== '') body.names = data.get('names')
  try {
    await users.create(body)
  } catch (failure) {
    // A taken name or address: the detail says which, and the field shows it.
    if (failure.code === 'CONFLICT') throw new FieldError(/username/i.test(failure.message) ? forms.signup.username : forms.signup.email, failure.message)
    throw failure
  }
  // The profile next: the new address waits to be verified there.
  await logIn(body.username, body.password, { to: '/account', message: `Welcome, ${body.names ?? body.username}: your account is ready. Follow the link e-mailed to ${body.email} to verify your address.` })
  forms.signup.reset()
})

$('#forgot-open').addEventListener('click', () => {
  const open = forms.forgot.hidden
  forms.forgot.hidden = !open
  $('#forgot-open').setAttribute('aria-expanded', String(open))
  if (!open) return
  const typed = forms.login.username.value
  if (typed.includes('@')) forms.forgot.email.value = typed
  forms.forgot.email.focus()
})

handle(forms.forgot, async (data) => {
  const { detail } = await auth.passwordReset(data.get('email'))
  forms.forgot.reset()
  forms.forgot.hidden = true
  $('#forgot-open').setAttribute('aria-expanded', 'false')
  say(`${detail}.`)
})

handle(forms.reset, async (data) => {
  await auth.passwordResetConfirm(resetToken, data.get('password'))
  resetToken = null
  forms.reset.reset()
  loggedOut('Your new password is set and every session of your account has ended: log in with it.', { to: '/login' })
})

clicked($('#resend'), $('#details'), async () => {
  const { detail } = await auth.resendVerification()
  say(`${detail}.`)
})

clicked($('#keep-email'), $('#details'), async () => {
  // The current address again drops the pending change.
  const { user } = await users.update(state.me.id, { email: state.me.email })
  state.me = user
  showProfile()
  say(`The change is cancelled: your address stays ${user.email}.`)
})

/** Follows an e-mailed verification link: no login needed, it may be opened anywhere. */
async function verifyEmail (token) {
  try {
    await auth.verifyEmail(token)
  } catch (failure) {
    say(failure.message)
    return
  }
  if (state.me === null) return say('Your e-mail address is verified.')
  try {
    state.me = await users.get(state.me.id)
  } catch (failure) {
    if (!sessionEnded(failure)) return say(failure.message)
    // An address's first verification ends the sessions made before it (docs/api.md).
    return loggedOut('Your e-mail address is verified. Log in again: verifying it ended the earlier sessions.', { to: '/login' })
  }
  go('/account', { replace: true, message: 'Your e-mail address is verified.' })
}

handle(forms.details, async (data) => {
  const me = state.me
  const names = data.get('names').trim()
  const email = data.get('email').trim()
  const body = { names: names === '' ? null : names }
  // Only a new address is sent: the current one again would cancel a pending change.
  if (email.toLowerCase() !== me.email.toLowerCase()) {
    const currentPassword = data.get('currentPassword')
    if (currentPassword === '') throw new FieldError(forms.details.currentPassword, 'Enter your current password to change your e-mail address.')
    Object.assign(body, { email, currentPassword })
  }
  const { user } = await users.update(me.id, body)
  forms.details.currentPassword.value = ''
  state.me = user
  showProfile()
  say(body.email !== undefined && user.pendingEmail !== null
    ? `Profile saved. A confirmation link was sent to ${user.pendingEmail}: your address changes once you follow it.`
    : 'Profile saved.')
})

handle(forms.password, async (data) => {
  try {
    await users.update(state.me.id, { currentPassword: data.get('currentPassword'), password: data.get('password') })
  } catch (failure) {
    // A wrong current password belongs to its field; the rest (a session gone, a weak new one) to the form.
    if (failure.status === 403 || (failure.status === 401 && !sessionEnded(failure))) throw new FieldError(forms.password.currentPassword, failure.message)
    throw failure
  }
  forms.password.reset()
  say('Password changed. Your other sessions have ended.')
})

handle(forms.deleteAccount, async (data) => {
  const ok = await confirmAction({
    title: `Delete the account ${state.me.username}?`,
    text: 'Your profile, your products and their pictures, your passkeys and every session are deleted at once. This cannot be undone.',
    confirm: 'Delete my account'
  })
  if (!ok) return
  try {
    await users.remove(state.me.id, data.get('password'))
  } catch (failure) {
    if (failure.status === 403 || (failure.status === 401 && !sessionEnded(failure))) throw new FieldError(forms.deleteAccount.password, failure.message)
    throw failure
  }
  forms.deleteAccount.reset()
  loggedOut('Your account has been deleted.', { to: '/' })
})

$('#logout').addEventListener('click', async () => {
  try {
    await auth.logout()
  } catch (failure) {
    if (failure.status !== 401) return say(failure.message)
  }
  loggedOut('You are logged out.')
})

async function start () {
  // The e-mailed links open /reset-password#token=... and /verify-email#token=...: the token
  // is taken, then dropped from the address bar and the history.
  const link = location.pathname
  const token = new URLSearchParams(location.hash.slice(1)).get('token')
  if (link === '/reset-password' && token !== null) resetToken = token
  if (link === '/reset-password') history.replaceState(null, '', link)
  const id = localStorage.getItem('userId')
  if (id !== null) {
    try {
      state.me = await users.get(id)
    } catch {
      localStorage.removeItem('userId')
    }
  }
  fillAccountName()
  if (link === '/verify-email') history.replaceState(null, '', state.me === null ? '/' : '/account')
  if (link === '/reset-password' && resetToken === null) {
    history.replaceState(null, '', '/login')
    await route({ moved: false, message: 'A password-reset link opens this page once: ask for a new link below if you still need one.' })
  } else await route({ moved: false, returning: true, focus: resetToken === null ? null : forms.reset.password })
  if (link === '/verify-email' && token !== null) await verifyEmail(token)
}

$('#no-script').hidden = true
newPasswordFields()
for (const heading of document.querySelectorAll('main h1')) heading.tabIndex = -1
start()
