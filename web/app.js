// The web app: one page whose sections are shown by state (logged in or not). Every form
// reports its errors in its own role=alert paragraph; successes go to the status line.
import { api } from './api.js'
// @simplewebauthn/browser's bundle, served by the service: it sets globalThis.SimpleWebAuthnBrowser.
import '/vendor/simplewebauthn-browser.js'

const { browserSupportsWebAuthn, startAuthentication, startRegistration } = globalThis.SimpleWebAuthnBrowser

const $ = (selector) => document.querySelector(selector)
const PAGE = 10
let me = null
let cursor = null
// The token of a password-reset link, from the address's fragment (never sent to the server).
let resetToken = null
// The login's second step while it is asked for: POST /api/auth/login's 202 (mfaToken, methods).
let mfa = null
// GET /api/security: the second factors of the signed-in account.
let security = null

const forms = {
  login: $('#login'),
  signup: $('#signup'),
  details: $('#details'),
  password: $('#password'),
  deleteAccount: $('#delete-account'),
  create: $('#create'),
  forgot: $('#forgot'),
  reset: $('#reset-password'),
  secondStep: $('#second-step'),
  totpStart: $('#totp-start'),
  totpConfirm: $('#totp-confirm'),
  totpDisable: $('#totp-disable'),
  recoveryNew: $('#recovery-new'),
  passkeyAdd: $('#passkey-add')
}

function say (message) { $('#status').textContent = message }

/** A 401 that means the session is over (not a wrong code or a refused passkey). */
function sessionEnded (failure) {
  return me !== null && failure.status === 401 && !/^(MFA|PASSKEY)_/.test(failure.code ?? '')
}

/** The browser's passkey prompt failed: what the user can do about it. */
function passkeyFailure (error) {
  if (error.name === 'NotAllowedError') return 'No passkey was used: the prompt was closed, timed out, or found no passkey for this site.'
  // The relying party id is PUBLIC_URL's host name: another address of the service (an IP) cannot use it.
  if (error.name === 'SecurityError') return `Passkeys work only at this service's own address (its PUBLIC_URL), not at ${location.host}.`
  return `The browser could not use a passkey: ${error.message}`
}

/** Asks the browser for a passkey's signature over the options `optionsUrl` answers. */
async function passkeyAssertion (optionsUrl, body) {
  const optionsJSON = await api('POST', optionsUrl, body)
  try {
    return await startAuthentication({ optionsJSON })
  } catch (error) {
    throw new Error(passkeyFailure(error))
  }
}

/** Runs `action` for a form's submit: its button disabled meanwhile, its error shown in the form. */
function handle (form, action) {
  form.addEventListener('submit', async (event) => {
    event.preventDefault()
    const error = form.querySelector('.error')
    const button = form.querySelector('button')
    error.textContent = ''
    button.disabled = true
    try {
      await action(new FormData(form))
    } catch (failure) {
      error.textContent = failure.message
      if (sessionEnded(failure)) loggedOut('Your session has ended: log in again.')
    } finally {
      button.disabled = false
    }
  })
}

/** Runs `action` when `button` (of `form`, not its submit) is clicked: its error shown in the form. */
function clicked (button, form, action) {
  button.addEventListener('click', async () => {
    const error = form.querySelector('.error')
    error.textContent = ''
    button.disabled = true
    try {
      await action()
    } catch (failure) {
      error.textContent = failure.message
      if (sessionEnded(failure)) loggedOut('Your session has ended: log in again.')
    } finally {
      button.disabled = false
    }
  })
}

function show () {
  const inside = me !== null
  const resetting = resetToken !== null
  const stepping = mfa !== null
  $('#reset').hidden = !resetting
  $('#auth').hidden = inside || resetting
  forms.login.hidden = stepping
  forms.secondStep.hidden = !stepping
  forms.signup.hidden = inside || stepping
  $('#forgot-open').hidden = stepping
  if (stepping) forms.forgot.hidden = true
  $('#passkey-login').hidden = !browserSupportsWebAuthn()
  $('#profile').hidden = !inside || resetting
  $('#security').hidden = !inside || resetting
  $('#nav').hidden = !inside
  forms.create.hidden = !inside
  $('#products').hidden = resetting
  if (inside) {
    forms.details.names.value = me.names ?? ''
    forms.details.email.value = me.email
    const state = me.emailVerifiedAt === null ? 'Not verified yet: follow the link e-mailed to this address.' : 'Verified.'
    // The field keeps the current address: it stays the account's until the new one confirms.
    $('#email-state').textContent = me.pendingEmail === null
      ? state
      : `${state} Changing to ${me.pendingEmail}: follow the link e-mailed there; until then this address stays.`
    $('#resend').hidden = me.emailVerifiedAt !== null && me.pendingEmail === null
    $('#keep-email').hidden = me.pendingEmail === null
    // Password managers match the password forms to the account by this (hidden) field.
    for (const field of document.querySelectorAll('.account-name')) field.value = me.username
  }
}

function loggedIn (user) {
  me = user
  mfa = null
  localStorage.setItem('userId', String(user.id))
  show()
  loadSecurity()
  reload()
}

function loggedOut (message) {
  me = null
  mfa = null
  security = null
  localStorage.removeItem('userId')
  hideSecrets()
  show()
  reload()
  if (message) say(message)
  forms.login.username.focus()
}

/** A new session (cookie mode): reads the account and shows the app. */
async function signedIn (session) {
  loggedIn(await api('GET', `/api/user/${session.userId}`))
  say(`Logged in as ${me.username}.`)
}

/** Logs in with a password; an account with two-step login answers 202 and the second step is asked for. */
async function logIn (username, password) {
  const answer = await api('POST', '/api/auth/login', { username, password, mode: 'cookie' })
  if (answer.mfaToken !== undefined) secondStep(answer)
  else await signedIn(answer)
}

handle(forms.login, async (data) => {
  await logIn(data.get('username'), data.get('password'))
  forms.login.reset()
})

clicked($('#passkey-login'), forms.login, async () => {
  // A discoverable passkey: the browser offers this site's passkeys, no username needed.
  const response = await passkeyAssertion('/api/auth/passkey/options', {})
  await signedIn(await api('POST', '/api/auth/passkey/login', { response, mode: 'cookie' }))
  forms.login.reset()
})

function secondStep (ticket) {
  mfa = ticket
  recoveryMode(false)
  $('#second-step-passkey').hidden = !ticket.methods.includes('passkey') || !browserSupportsWebAuthn()
  show()
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
    show()
    forms.login.querySelector('.error').textContent = 'The second step took too long or was already used: log in again.'
    forms.login.username.focus()
  }
}

handle(forms.secondStep, async (data) => {
  const recovery = !forms.secondStep.recoveryCode.hidden
  const proof = recovery ? { recoveryCode: data.get('recoveryCode').trim() } : { code: data.get('code').trim() }
  await secondStepDone(async (mfaToken) => await api('POST', '/api/auth/mfa/totp', { mfaToken, ...proof }))
})

$('#second-step-switch').addEventListener('click', () => {
  const on = forms.secondStep.recoveryCode.hidden
  recoveryMode(on)
  ;(on ? forms.secondStep.recoveryCode : forms.secondStep.code).focus()
})

clicked($('#second-step-passkey'), forms.secondStep, async () => {
  await secondStepDone(async (mfaToken) => {
    const response = await passkeyAssertion('/api/auth/mfa/passkey/options', { mfaToken })
    return await api('POST', '/api/auth/mfa/passkey', { mfaToken, response })
  })
})

$('#second-step-cancel').addEventListener('click', () => {
  mfa = null
  show()
  forms.login.username.focus()
})

handle(forms.signup, async (data) => {
  const body = { username: data.get('username'), email: data.get('email'), password: data.get('password') }
  if (data.get('names') !== '') body.names = data.get('names')
  await api('POST', '/api/user', body)
  await logIn(body.username, body.password)
  forms.signup.reset()
  say(`Welcome, ${me.names ?? me.username}: your account is ready.`)
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
  const { detail } = await api('POST', '/api/auth/password-reset', { email: data.get('email') })
  forms.forgot.reset()
  forms.forgot.hidden = true
  $('#forgot-open').setAttribute('aria-expanded', 'false')
  say(`${detail}.`)
})

handle(forms.reset, async (data) => {
  await api('POST', '/api/auth/password-reset/confirm', { token: resetToken, password: data.get('password') })
  resetToken = null
  forms.reset.reset()
  loggedOut('Your new password is set and every session of your account has ended: log in with it.')
})

$('#resend').addEventListener('click', async () => {
  try {
    const { detail } = await api('POST', '/api/auth/verify-email/resend')
    say(`${detail}.`)
  } catch (failure) {
    if (failure.status === 401) loggedOut('Your session has ended: log in again.')
    else say(failure.message)
  }
})

$('#keep-email').addEventListener('click', async () => {
  try {
    // The current address again drops the pending change.
    const { user } = await api('PATCH', `/api/user/${me.id}`, { email: me.email })
    me = user
    show()
    say(`The change is cancelled: your address stays ${me.email}.`)
  } catch (failure) {
    if (failure.status === 401) loggedOut('Your session has ended: log in again.')
    else say(failure.message)
  }
})

/** Follows an e-mailed verification link: no login needed, it may be opened anywhere. */
async function verifyEmail (token) {
  try {
    await api('POST', '/api/auth/verify-email', { token })
    if (me !== null) {
      try {
        me = await api('GET', `/api/user/${me.id}`)
      } catch (failure) {
        if (!sessionEnded(failure)) throw failure
        // An address's first verification ends the sessions made before it (docs/api.md).
        loggedOut('Your e-mail address is verified. Log in again: verifying it ended the earlier sessions.')
        return
      }
    }
    show()
    say('Your e-mail address is verified.')
  } catch (failure) {
    say(failure.message)
  }
}

handle(forms.details, async (data) => {
  const names = data.get('names').trim()
  const email = data.get('email').trim()
  const body = { names: names === '' ? null : names }
  // Only a new address is sent: the current one again would cancel a pending change.
  if (email.toLowerCase() !== me.email.toLowerCase()) {
    const currentPassword = data.get('currentPassword')
    if (currentPassword === '') throw new Error('Enter your current password to change your e-mail address.')
    Object.assign(body, { email, currentPassword })
  }
  const { user } = await api('PATCH', `/api/user/${me.id}`, body)
  forms.details.currentPassword.value = ''
  me = user
  show()
  say(body.email !== undefined && user.pendingEmail !== null
    ? `Profile saved. A confirmation link was sent to ${user.pendingEmail}: your address changes once you follow it.`
    : 'Profile saved.')
})

handle(forms.password, async (data) => {
  await api('PATCH', `/api/user/${me.id}`, { currentPassword: data.get('currentPassword'), password: data.get('password') })
  forms.password.reset()
  say('Password changed. Your other sessions have ended.')
})

handle(forms.deleteAccount, async (data) => {
  await api('DELETE', `/api/user/${me.id}`, { password: data.get('password') })
  forms.deleteAccount.reset()
  loggedOut('Your account has been deleted.')
})

/** A date of the API as the reader's locale writes it. */
const day = (iso) => new Date(iso).toLocaleDateString()

/** Reads the account's second factors (GET /api/security) and shows them. */
async function loadSecurity () {
  $('#security-error').textContent = ''
  try {
    security = await api('GET', '/api/security')
    showSecurity()
  } catch (failure) {
    if (sessionEnded(failure)) loggedOut('Your session has ended: log in again.')
    else $('#security-error').textContent = failure.message
  }
}

function showSecurity () {
  if (security === null) return
  const { totp, recoveryCodesLeft, passkeys } = security
  const enrolling = !forms.totpConfirm.hidden
  $('#totp-state').textContent = totp.enabled
    ? `On since ${day(totp.enabledAt)}: after your password, the login asks for a code from the app${passkeys.length > 0 ? ' or a passkey' : ''}.`
    : 'Off: your password alone logs you in.'
  forms.totpStart.hidden = totp.enabled || enrolling
  forms.totpDisable.hidden = !totp.enabled
  forms.recoveryNew.hidden = !totp.enabled
  $('#recovery-left').textContent = `Recovery codes left: ${recoveryCodesLeft} of 10.`
  $('#passkeys-state').textContent = passkeys.length === 0
    ? 'No passkeys yet. A passkey logs you in without a password, with your device\'s screen lock.'
    : `${passkeys.length === 1 ? 'One passkey' : `${passkeys.length} passkeys`}: each logs you in without a password.`
  $('#passkeys').replaceChildren(...passkeys.map(passkeyItem))
}

/** Shows codes that the service will never show again, until the user says they are saved. */
function showRecoveryCodes (codes) {
  $('#recovery-list').replaceChildren(...codes.map((code) => {
    const li = document.createElement('li')
    const text = document.createElement('code')
    text.textContent = code
    li.append(text)
    return li
  }))
  $('#recovery-codes').hidden = false
  $('#recovery-codes-title').focus()
}

/** Takes the key and the recovery codes off the page. */
function hideSecrets () {
  forms.totpConfirm.hidden = true
  forms.totpConfirm.reset()
  $('#totp-qr').removeAttribute('src')
  $('#totp-secret').textContent = ''
  $('#totp-uri').removeAttribute('href')
  $('#recovery-codes').hidden = true
  $('#recovery-list').replaceChildren()
}

$('#recovery-done').addEventListener('click', () => {
  hideSecrets()
  showSecurity()
  $('#security-title').focus()
})

// The password the enrolment began with, for its confirmation (both need it); dropped when it ends.
let enrolPassword = null

handle(forms.totpStart, async (data) => {
  const currentPassword = data.get('currentPassword')
  const { secret, uri, qrCode } = await api('POST', '/api/security/totp', { currentPassword })
  enrolPassword = currentPassword
  forms.totpStart.reset()
  $('#totp-qr').src = qrCode
  $('#totp-secret').textContent = secret
  $('#totp-uri').href = uri
  forms.totpConfirm.hidden = false
  forms.totpStart.hidden = true
  forms.totpConfirm.code.focus()
})

handle(forms.totpConfirm, async (data) => {
  const { recoveryCodes } = await api('POST', '/api/security/totp/confirm', { code: data.get('code').trim(), currentPassword: enrolPassword })
  enrolPassword = null
  hideSecrets()
  await loadSecurity()
  say('Two-step login is on. Save your recovery codes now.')
  showRecoveryCodes(recoveryCodes)
})

$('#totp-cancel').addEventListener('click', () => {
  enrolPassword = null
  hideSecrets()
  showSecurity()
})

handle(forms.totpDisable, async (data) => {
  const password = data.get('password')
  const code = data.get('code').trim()
  if (password === '' && code === '') throw new Error('Enter your password or a code from the app.')
  await api('POST', '/api/security/totp/disable', password !== '' ? { currentPassword: password } : { code })
  forms.totpDisable.reset()
  hideSecrets()
  await loadSecurity()
  say('Two-step login is off, and your recovery codes no longer work.')
})

handle(forms.recoveryNew, async (data) => {
  const { recoveryCodes } = await api('POST', '/api/security/recovery-codes', { currentPassword: data.get('currentPassword') })
  forms.recoveryNew.reset()
  await loadSecurity()
  say('New recovery codes: the old ones no longer work. Save these now.')
  showRecoveryCodes(recoveryCodes)
})

handle(forms.passkeyAdd, async (data) => {
  const currentPassword = data.get('currentPassword')
  const optionsJSON = await api('POST', '/api/security/passkey/options', { currentPassword })
  let response
  try {
    response = await startRegistration({ optionsJSON })
  } catch (error) {
    if (error.name === 'InvalidStateError') throw new Error('This device already holds a passkey of your account.')
    throw new Error(passkeyFailure(error))
  }
  const name = data.get('name').trim()
  const passkey = await api('POST', '/api/security/passkeys', name === '' ? { response, currentPassword } : { response, name, currentPassword })
  forms.passkeyAdd.reset()
  await loadSecurity()
  say(`Passkey "${passkey.name}" added.`)
})

/** One passkey: its name, dates, a rename form and a delete button. */
function passkeyItem (passkey, index) {
  const li = document.createElement('li')
  const title = document.createElement('strong')
  title.textContent = passkey.name
  const dates = document.createElement('p')
  dates.textContent = `Added ${day(passkey.createdAt)}; ${passkey.lastUsedAt === null ? 'never used' : `last used ${day(passkey.lastUsedAt)}`}` +
    (passkey.backedUp ? '; synced by your passkey provider.' : '; kept on one device.')
  const form = document.createElement('form')
  const label = document.createElement('label')
  label.htmlFor = `passkey-name-${index}`
  label.textContent = `New name for ${passkey.name}`
  const input = document.createElement('input')
  input.id = label.htmlFor
  input.name = 'name'
  input.required = true
  input.maxLength = 100
  input.value = passkey.name
  const error = document.createElement('p')
  error.className = 'error'
  error.setAttribute('role', 'alert')
  const rename = document.createElement('button')
  rename.textContent = `Rename ${passkey.name}`
  const remove = document.createElement('button')
  remove.type = 'button'
  remove.className = 'danger'
  remove.textContent = `Delete ${passkey.name}`
  form.append(label, input, error, rename, remove)
  const url = `/api/security/passkeys/${encodeURIComponent(passkey.id)}`
  handle(form, async (data) => {
    const renamed = await api('PATCH', url, { name: data.get('name').trim() })
    await loadSecurity()
    say(`Passkey renamed to "${renamed.name}".`)
  })
  clicked(remove, form, async () => {
    await api('DELETE', url)
    await loadSecurity()
    say(`Passkey "${passkey.name}" deleted: it no longer logs you in. Remove it from your device or passkey provider too.`)
    $('#security-title').focus()
  })
  li.append(title, dates, form)
  return li
}

$('#logout').addEventListener('click', async () => {
  try {
    await api('POST', '/api/auth/logout')
    loggedOut('You are logged out.')
  } catch (failure) {
    if (failure.status === 401) loggedOut('You are logged out.')
    else say(failure.message)
  }
})

forms.create.image.addEventListener('change', () => {
  const file = forms.create.image.files[0]
  const preview = $('#preview')
  preview.hidden = file === undefined
  if (file === undefined) return
  // A data: URL, which the Content-Security-Policy allows for images (blob: it does not).
  const reader = new FileReader()
  reader.addEventListener('load', () => { preview.src = reader.result })
  reader.readAsDataURL(file)
})

handle(forms.create, async (data) => {
  const product = await api('POST', '/api/product', { title: data.get('title'), description: data.get('description'), amount: Number(data.get('amount')) })
  const file = forms.create.image.files[0]
  if (file !== undefined) {
    const upload = new FormData()
    upload.append('image', file)
    try {
      await api('POST', `/api/product/${product.id}/image`, upload)
    } catch (failure) {
      reload()
      throw new Error(`The product was created, but its image was refused: ${failure.message}`)
    }
  }
  forms.create.reset()
  $('#preview').hidden = true
  say(`Product "${product.title}" created.`)
  reload()
})

function item (product) {
  const li = document.createElement('li')
  if (product.imageUrl !== null) {
    const img = document.createElement('img')
    img.src = `${product.imageUrl}?v=${encodeURIComponent(product.updatedAt)}`
    img.alt = ''
    li.append(img)
  }
  const text = document.createElement('div')
  const title = document.createElement('h3')
  title.textContent = product.title
  const amount = document.createElement('p')
  amount.textContent = `Amount: ${product.amount}`
  const description = document.createElement('p')
  description.textContent = product.description
  text.append(title, amount, description)
  li.append(text)
  if (me !== null && product.creatorId === me.id) {
    const remove = document.createElement('button')
    remove.type = 'button'
    remove.textContent = `Delete ${product.title}`
    remove.className = 'danger'
    remove.addEventListener('click', async () => {
      try {
        await api('DELETE', `/api/product/${product.id}`)
        li.remove()
        say(`Product "${product.title}" deleted.`)
        $('#products-title').focus()
      } catch (failure) {
        if (failure.status === 401) loggedOut('Your session has ended: log in again.')
        else $('#list-error').textContent = failure.message
      }
    })
    li.append(remove)
  }
  return li
}

async function more () {
  $('#list-error').textContent = ''
  try {
    const query = new URLSearchParams({ limit: String(PAGE) })
    if (cursor !== null) query.set('cursor', String(cursor))
    const page = await api('GET', `/api/product?${query}`)
    $('#list').append(...page.items.map(item))
    cursor = page.nextCursor
    $('#more').hidden = cursor === null
  } catch (failure) {
    $('#list-error').textContent = failure.message
  }
}

function reload () {
  cursor = null
  $('#list').replaceChildren()
  return more()
}

$('#more').addEventListener('click', more)

async function start () {
  // The e-mailed links open /reset-password#token=... and /verify-email#token=...: the token
  // is taken, then dropped from the address bar and the history.
  const link = location.pathname
  const token = new URLSearchParams(location.hash.slice(1)).get('token')
  if (link !== '/') history.replaceState(null, '', '/')
  if (link === '/reset-password' && token !== null) resetToken = token
  const id = localStorage.getItem('userId')
  if (id !== null) {
    try {
      me = await api('GET', `/api/user/${id}`)
    } catch {
      localStorage.removeItem('userId')
    }
  }
  show()
  if (me !== null) loadSecurity()
  if (resetToken !== null) forms.reset.password.focus()
  if (link === '/verify-email' && token !== null) await verifyEmail(token)
  await reload()
}

$('#products-title').tabIndex = -1
$('#security-title').tabIndex = -1
$('#no-script').hidden = true
start()
