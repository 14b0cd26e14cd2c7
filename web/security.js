// The security page (`/security`): the authenticator app and its recovery codes, passkeys,
// the sessions signed in to the account, each of which can be signed out, and the account's
// recent activity.
import { security as api } from './api.js'
import { $, clicked, confirmAction, day, element, handle, moment, say, sessionEnded, state } from './ui.js'
// @simplewebauthn/browser's bundle, served by the service: it sets globalThis.SimpleWebAuthnBrowser.
import '/vendor/simplewebauthn-browser.js'

export const { startAuthentication, startRegistration } = globalThis.SimpleWebAuthnBrowser

// GET /api/security: the second factors of the signed-in account.
let factors = null
// GET /api/security/sessions: the account's live sessions.
let sessions = []
// The password the enrolment began with, for its confirmation (both need it); dropped when it ends.
let enrolPassword = null
// The secrets on the page now, to copy and download: the enrolment's key and URI, the recovery codes.
let enrolment = null
let recoveryCodes = []

const forms = {
  totpStart: $('#totp-start'),
  totpConfirm: $('#totp-confirm'),
  totpDisable: $('#totp-disable'),
  recoveryNew: $('#recovery-new'),
  passkeyAdd: $('#passkey-add')
}

/** The browser's passkey prompt failed: what the user can do about it. */
export function passkeyFailure (error) {
  if (error.name === 'NotAllowedError') return 'No passkey was used: the prompt was closed, timed out, or found no passkey for this site.'
  // The relying party id is PUBLIC_URL's host name: another address of the service (an IP) cannot use it.
  if (error.name === 'SecurityError') return `Passkeys work only at this service's own address (its PUBLIC_URL), not at ${location.host}.`
  return `The browser could not use a passkey: ${error.message}`
}

const sessionGone = () => window.dispatchEvent(new CustomEvent('app:session-ended'))

/**
 * Reads the account's second factors, sessions and activity, then shows them all at once: each
 * shown as it came would push the parts below it down while the page is read (layout shift).
 */
export async function showSecurity () {
  $('#security-error').textContent = ''
  $('#sessions-error').textContent = ''
  $('#activity-error').textContent = ''
  const shows = await Promise.all([
    api.get().then((answer) => () => { factors = answer; showFactors() }, failed('#security-error')),
    api.sessions().then(({ items }) => () => { sessions = items; showSessions() }, failed('#sessions-error')),
    api.activity().then(({ items }) => () => { $('#activity').replaceChildren(...items.map(activityItem)) }, failed('#activity-error'))
  ])
  for (const show of shows) show()
}

/** What a failed read shows: the message at its part of the page, or the login when the session ended. */
function failed (where) {
  return (failure) => () => {
    if (sessionEnded(failure)) sessionGone()
    else $(where).textContent = failure.message
  }
}

async function loadActivity () {
  try {
    $('#activity').replaceChildren(...(await api.activity()).items.map(activityItem))
  } catch (failure) {
    if (sessionEnded(failure)) sessionGone()
    else $('#activity-error').textContent = failure.message
  }
}

async function loadSessions () {
  try {
    sessions = (await api.sessions()).items
    showSessions()
  } catch (failure) {
    if (sessionEnded(failure)) sessionGone()
    else $('#sessions-error').textContent = failure.message
  }
}

function showFactors () {
  if (factors === null) return
  const { totp, recoveryCodesLeft, passkeys } = factors
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

const METHODS = { password: 'password', totp: 'authenticator code', recoveryCode: 'recovery code', passkey: 'passkey' }

/** "Chrome 131 on Linux", or what is known of it. */
const device = (session) => [session.browser ?? 'An unknown browser', session.os].filter(Boolean).join(' on ')

function sessionItem (session) {
  const li = element('li', { 'data-session': session.id },
    element('strong', {}, device(session), session.current ? ' (this device)' : ''),
    element('p', { id: `session-${session.id}` }, `Signed in ${moment(session.createdAt)} with ${session.methods.map((m) => METHODS[m] ?? m).join(' and ')}` +
      (session.ip === null ? '' : ` from ${session.ip}`) +
      (session.lastUsedAt === null ? '.' : `; last active ${moment(session.lastUsedAt)}.`)))
  if (!session.current) {
    // Two sessions of one browser read alike: the button is described by when and where its session began.
    const end = element('button', { type: 'button', className: 'secondary', 'aria-describedby': `session-${session.id}` }, `Sign out ${device(session)}`)
    const error = element('p', { className: 'error', role: 'alert' })
    li.append(error, end)
    clicked(end, li, async () => {
      await api.endSession(session.id)
      await Promise.all([loadSessions(), loadActivity()])
      say(`${device(session)} is signed out.`)
    })
  }
  return li
}

const SECOND_STEP = { totp: 'A wrong authenticator code', recoveryCode: 'A wrong recovery code', passkey: 'A refused passkey' }

/** What an event of GET /api/security/activity was, in words; an unknown kind as it is named. */
const ACTIVITY = {
  'sign-in': (e) => `Signed in with ${(e.detail ?? 'password').split('+').map((m) => METHODS[m] ?? m).join(' and ')}`,
  'sign-in-failed': () => 'A wrong password',
  'second-step-failed': (e) => `${SECOND_STEP[e.detail] ?? 'A failed second step'} after the right password`,
  'passkey-sign-in-failed': () => 'One of your passkeys was refused at a sign-in',
  'recovery-code-used': (e) => `A recovery code was used to sign in (${e.detail === '1' ? 'one' : e.detail} left)`,
  'password-changed': () => 'Your password was changed',
  'password-reset-requested': () => 'A password reset link was asked for',
  'password-reset-completed': () => 'Your password was reset with an e-mailed link',
  'email-changed': (e) => `Your e-mail address became ${e.detail}`,
  'totp-enabled': () => 'The authenticator app was turned on',
  'totp-disabled': () => 'The authenticator app was turned off',
  'recovery-codes-replaced': () => 'New recovery codes were made',
  'passkey-added': () => 'A passkey was added',
  'passkey-removed': () => 'A passkey was removed',
  'session-ended': () => 'A session was signed out',
  'other-sessions-ended': () => 'Every other session was signed out'
}

function activityItem (event) {
  const what = ACTIVITY[event.kind]?.(event) ?? event.kind
  const from = `${device(event)}${event.ip === null ? '' : ` from ${event.ip}`}`
  return element('li', {},
    element('strong', {}, event.count > 1 ? `${what}, ${event.count} times since ${moment(event.firstAt)}` : what),
    element('p', {}, `${event.count > 1 ? 'The last: ' : ''}${moment(event.createdAt)}, ${from}.`))
}

function showSessions () {
  $('#sessions').replaceChildren(...sessions.map(sessionItem))
  const others = sessions.filter((session) => !session.current).length
  $('#end-others').hidden = others === 0
  $('#end-others').textContent = others === 1 ? 'Sign out the other session' : `Sign out everywhere else (${others} sessions)`
}

async function endOthers () {
  const { ended } = await api.endOtherSessions()
  await Promise.all([loadSessions(), loadActivity()])
  $('#totp-others').hidden = true
  $('#totp-end-others').hidden = true
  say(ended === 0 ? 'No other session was signed in.' : `Signed out everywhere else: ${ended === 1 ? 'one session' : `${ended} sessions`} ended. This device stays signed in.`)
}

clicked($('#end-others'), $('#security'), endOthers)
clicked($('#totp-end-others'), $('#security'), endOthers)

/** Shows codes that the service will never show again, until the user says they are saved. */
function showRecoveryCodes (codes) {
  recoveryCodes = codes
  $('#recovery-list').replaceChildren(...codes.map((code) => element('li', {}, element('code', {}, code))))
  $('#recovery-codes').hidden = false
  $('#recovery-codes-title').focus()
}

/** Takes the key and the recovery codes off the page. */
export function hideSecrets () {
  forms.totpConfirm.hidden = true
  forms.totpConfirm.reset()
  $('#totp-qr').removeAttribute('src')
  $('#totp-secret').textContent = ''
  $('#totp-uri').removeAttribute('href')
  $('#recovery-codes').hidden = true
  $('#recovery-list').replaceChildren()
  enrolment = null
  recoveryCodes = []
  $('#totp-others').hidden = true
  $('#totp-end-others').hidden = true
  enrolPassword = null
}

/** Forgets what was read of the account (at log out). */
export function forgetSecurity () {
  factors = null
  sessions = []
  hideSecrets()
  $('#passkeys').replaceChildren()
  $('#sessions').replaceChildren()
  $('#activity').replaceChildren()
}

$('#recovery-done').addEventListener('click', () => {
  hideSecrets()
  showFactors()
  $('#security-title').focus()
})

handle(forms.totpStart, async (data) => {
  const currentPassword = data.get('currentPassword')
  const { secret, uri, qrCode } = await api.totpStart(currentPassword)
  enrolPassword = currentPassword
  forms.totpStart.reset()
  $('#totp-qr').src = qrCode
  enrolment = { secret, uri }
  // In groups of four, as authenticator apps ask for it; copied and saved without the spaces.
  $('#totp-secret').textContent = secret.replace(/(.{4})(?=.)/g, '$1 ')
  $('#totp-uri').href = uri
  forms.totpConfirm.hidden = false
  forms.totpStart.hidden = true
  forms.totpConfirm.code.focus()
})

/** Puts `text` on the clipboard; `what` names it in the confirmation. */
async function copy (text, what) {
  if (navigator.clipboard === undefined) throw new Error(`This browser does not let the page copy: select the ${what} on the page and copy by hand.`)
  try {
    await navigator.clipboard.writeText(text)
  } catch {
    throw new Error(`The browser refused to copy the ${what}: select them on the page and copy by hand.`)
  }
  say(`Copied the ${what} to the clipboard.`, { focus: false })
}

/** Saves `text` as a file named for this site and account, e.g. shop.example.com-alice-recovery-codes.txt. */
function download (kind, text, what) {
  const name = `${location.hostname}-${state.me?.username ?? 'account'}-${kind}.txt`
  const url = URL.createObjectURL(new Blob([text], { type: 'text/plain;charset=utf-8' }))
  element('a', { href: url, download: name }).click()
  // The download has its own copy once it has started.
  setTimeout(() => URL.revokeObjectURL(url), 10_000)
  say(`Saved the ${what} as ${name} in your downloads.`, { focus: false })
}

const account = () => `${state.me?.username ?? 'your account'} at ${location.host}`

clicked($('#totp-copy'), forms.totpConfirm, async () => { await copy(enrolment.secret, 'authenticator key') })
clicked($('#totp-download'), forms.totpConfirm, async () => {
  download('authenticator-key', `Authenticator key of ${account()}\n\nType it into your authenticator app (time-based codes, 6 digits, every 30 seconds):\n${enrolment.secret}\n\nOr open this link on a device with the app:\n${enrolment.uri}\n`, 'authenticator key')
})
clicked($('#recovery-copy'), $('#recovery-codes'), async () => { await copy(recoveryCodes.join('\n'), 'recovery codes') })
clicked($('#recovery-download'), $('#recovery-codes'), async () => {
  download('recovery-codes', `Recovery codes of ${account()}, made ${new Date().toISOString().slice(0, 10)}\n\nEach one signs you in once in place of a code from your authenticator app.\n\n${recoveryCodes.join('\n')}\n`, 'recovery codes')
})

handle(forms.totpConfirm, async (data) => {
  const { recoveryCodes } = await api.totpConfirm(data.get('code').trim(), enrolPassword)
  hideSecrets()
  await showSecurity()
  say('Two-step login is on. Save your recovery codes now.', { focus: false })
  showRecoveryCodes(recoveryCodes)
  // Sessions signed in before it keep going on the password alone until they are ended.
  const others = sessions.filter((session) => !session.current).length
  if (others > 0) {
    $('#totp-others').textContent = `${others === 1 ? 'One other session was signed in with your password alone and stays' : `${others} other sessions were signed in with your password alone and stay`} signed in. If someone else may know your password, sign them out.`
    $('#totp-others').hidden = false
    $('#totp-end-others').hidden = false
  }
})

$('#totp-cancel').addEventListener('click', () => {
  hideSecrets()
  showFactors()
})

handle(forms.totpDisable, async (data) => {
  const password = data.get('password')
  const code = data.get('code').trim()
  if (password === '' && code === '') throw new Error('Enter your password or a code from the app.')
  const ok = await confirmAction({
    title: 'Turn off two-step login?',
    text: `Your password alone will log you in again, and your ${factors?.recoveryCodesLeft ?? ''} recovery codes stop working for good.`.replace('  ', ' '),
    confirm: 'Turn off two-step login'
  })
  if (!ok) return
  await api.totpDisable(password !== '' ? { currentPassword: password } : { code })
  forms.totpDisable.reset()
  hideSecrets()
  await showSecurity()
  say('Two-step login is off, and your recovery codes no longer work.')
})

handle(forms.recoveryNew, async (data) => {
  const ok = await confirmAction({
    title: 'Make new recovery codes?',
    text: `The ${factors?.recoveryCodesLeft ?? ''} codes you have now stop working at once; only the ten new ones will.`.replace('  ', ' '),
    confirm: 'Make new recovery codes'
  })
  if (!ok) return
  const { recoveryCodes } = await api.recoveryCodes(data.get('currentPassword'))
  forms.recoveryNew.reset()
  await showSecurity()
  say('New recovery codes: the old ones no longer work. Save these now.', { focus: false })
  showRecoveryCodes(recoveryCodes)
})

handle(forms.passkeyAdd, async (data) => {
  const currentPassword = data.get('currentPassword')
  const optionsJSON = await api.passkeyOptions(currentPassword)
  let response
  try {
    response = await startRegistration({ optionsJSON })
  } catch (error) {
    if (error.name === 'InvalidStateError') throw new Error('This device already holds a passkey of your account.')
    throw new Error(passkeyFailure(error))
  }
  const name = data.get('name').trim()
  const first = factors !== null && !factors.totp.enabled && factors.passkeys.length === 0
  const passkey = await api.passkeyAdd(name === '' ? { response, currentPassword } : { response, name, currentPassword })
  forms.passkeyAdd.reset()
  await showSecurity()
  // The first second factor: sessions signed in before it keep going on the password alone.
  const others = sessions.filter((session) => !session.current).length
  say(`Passkey "${passkey.name}" added.` + (first && others > 0
    ? ` ${others === 1 ? 'One other session was signed in with your password alone and stays' : `${others} other sessions were signed in with your password alone and stay`} signed in: "Sign out everywhere else", under Sessions, ends them.`
    : ''))
})

/** One passkey: its name, dates, a rename form and a delete button. */
function passkeyItem (passkey, index) {
  const dates = `Added ${day(passkey.createdAt)}; ${passkey.lastUsedAt === null ? 'never used' : `last used ${day(passkey.lastUsedAt)}`}` +
    (passkey.backedUp ? '; synced by your passkey provider.' : '; kept on one device.')
  const input = element('input', { id: `passkey-name-${index}`, name: 'name', required: true, maxLength: 100, value: passkey.name })
  const remove = element('button', { type: 'button', className: 'danger' }, `Delete ${passkey.name}`)
  const form = element('form', { id: `passkey-form-${index}` },
    element('label', { htmlFor: input.id }, `New name for ${passkey.name}`),
    input,
    element('p', { className: 'error', role: 'alert' }),
    element('button', {}, `Rename ${passkey.name}`),
    remove)
  handle(form, async (data) => {
    const renamed = await api.passkeyRename(passkey.id, data.get('name').trim())
    await showSecurity()
    say(`Passkey renamed to "${renamed.name}".`)
  })
  clicked(remove, form, async () => {
    const others = factors.passkeys.length - 1
    const ok = await confirmAction({
      title: `Delete the passkey “${passkey.name}”?`,
      text: `It will no longer log you in${others === 0 ? ', and you will have no passkey left' : ''}. Your password still does.`,
      confirm: `Delete ${passkey.name}`
    })
    if (!ok) return
    await api.passkeyDelete(passkey.id)
    await showSecurity()
    say(`Passkey "${passkey.name}" deleted: it no longer logs you in. Remove it from your device or passkey provider too.`)
  })
  return element('li', {}, element('strong', {}, passkey.name), element('p', {}, dates), form)
}
