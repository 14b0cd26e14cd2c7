// What every page of the app shares: the signed-in account, moving between pages, the status
// line, forms that report their errors at their place, the confirmation dialog, and how
// dates and prices are written.

export const $ = (selector) => document.querySelector(selector)

/** The signed-in account (GET /api/user/{id}), or null. */
export const state = { me: null }

/**
 * Opens the app's page at `url` without reloading: the router in app.js shows it, then says
 * `message` (what brought the user there, focused unless `focus` names another element) or
 * else focuses the page's heading.
 */
export function go (url, { replace = false, message = '', focus = null } = {}) {
  // Where the page being left is scrolled, for back to return there.
  if (!replace) history.replaceState({ ...history.state, scrollY: window.scrollY }, '')
  history[replace ? 'replaceState' : 'pushState'](null, '', url)
  window.dispatchEvent(new CustomEvent('app:navigate', { detail: { message, focus } }))
}

/** Says what an action did in the status line (a live region), and moves focus there unless told not to. */
export function say (message, { focus = true } = {}) {
  const status = $('#status')
  status.textContent = message
  if (focus && message !== '') status.focus()
}

/** A failure that belongs to one field: shown beside it and announced with it. */
export class FieldError extends Error {
  constructor (field, message) {
    super(message)
    this.field = field
  }
}

/** A 401 that means the session is over (not a wrong code or a refused passkey). */
export function sessionEnded (failure) {
  return state.me !== null && failure.status === 401 && !/^(MFA|PASSKEY)_/.test(failure.code ?? '')
}

function clearErrors (form) {
  const error = form.querySelector('.error')
  error.textContent = ''
  for (const field of form.querySelectorAll('[aria-invalid]')) {
    field.removeAttribute('aria-invalid')
    const described = (field.getAttribute('aria-describedby') ?? '').split(' ').filter((id) => id !== '' && id !== error.id)
    if (described.length > 0) field.setAttribute('aria-describedby', described.join(' '))
    else field.removeAttribute('aria-describedby')
  }
  return error
}

/** A body property the API names whose field in the form has another name. */
const FIELD_NAMES = { amount: 'price' }

/** The fields of `form` a failure is about: a FieldError's, or those a validation problem names. */
function fieldsOf (form, failure) {
  if (failure instanceof FieldError) return [failure.field]
  if (form.elements === undefined) return []
  return (failure.errors ?? [])
    .filter((problem) => problem.in === 'body' && typeof problem.field === 'string')
    .map((problem) => {
      const name = problem.field.split('/')[1] ?? ''
      return form.elements.namedItem(FIELD_NAMES[name] ?? name)
    })
    .filter((field, index, all) => field instanceof window.HTMLElement && !field.hidden && all.indexOf(field) === index)
}

/** Shows a failure in `form`'s alert; the fields it is about are marked, described by it, and the first focused. */
function fail (form, error, failure) {
  error.textContent = failure.message
  const fields = fieldsOf(form, failure)
  error.id ||= `${form.id || 'form'}-error`
  for (const field of fields) {
    field.setAttribute('aria-invalid', 'true')
    field.setAttribute('aria-describedby', [field.getAttribute('aria-describedby'), error.id].filter(Boolean).join(' '))
  }
  fields[0]?.focus()
  if (sessionEnded(failure)) window.dispatchEvent(new CustomEvent('app:session-ended'))
}

/**
 * Runs `action` for a form's submit: its button disabled meanwhile, the last message cleared
 * (no old success beside a new error), a failure shown in the form.
 */
export function handle (form, action) {
  form.addEventListener('submit', async (event) => {
    event.preventDefault()
    const error = clearErrors(form)
    // The submit button: a form may hold other buttons (a show-password toggle) before it.
    const button = form.querySelector('button:not([type="button"])')
    say('', { focus: false })
    button.disabled = true
    try {
      await action(new FormData(form))
    } catch (failure) {
      fail(form, error, failure)
    } finally {
      button.disabled = false
      // Disabled, the button lost the focus (to the page's body): give it back, unless the action moved it.
      if (document.activeElement === document.body || document.activeElement?.closest('dialog:not([open])')) button.focus()
    }
  })
}

/** Runs `action` when `button` (of `box`, not a submit) is clicked: its failure shown in `box`'s alert. */
export function clicked (button, box, action) {
  button.addEventListener('click', async () => {
    const error = clearErrors(box)
    say('', { focus: false })
    button.disabled = true
    try {
      await action()
    } catch (failure) {
      fail(box, error, failure)
    } finally {
      button.disabled = false
      // Disabled, the button lost the focus (to the page's body): give it back, unless the action moved it.
      if (document.activeElement === document.body || document.activeElement?.closest('dialog:not([open])')) button.focus()
    }
  })
}

/**
 * Asks before something is lost for good: a modal dialog naming it, Cancel focused first.
 * Resolves true when the user confirms.
 */
export function confirmAction ({ title, text, confirm }) {
  const dialog = $('#confirm')
  $('#confirm-title').textContent = title
  $('#confirm-text').textContent = text
  $('#confirm-ok').textContent = confirm
  dialog.returnValue = ''
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => resolve(dialog.returnValue === 'confirm'), { once: true })
    dialog.showModal()
  })
}

// One formatter each, made once: toLocaleString with options builds a new one on every call,
// and the lists of a page (products, sessions, activity) call these once a row. A page's first
// Intl number or date formatter costs 20-90 ms of main thread in Chromium on these machines
// (Intl.PluralRules, under 1 ms), four times that on a slow phone: never while the modules
// load (the app's start would be one long task). The catalogue, the first page of most
// visits, prepares them (prepareFormats) in the task that asks for its list, while the answer
// is on its way, not in the one that shows it; other pages make them at their first use.
let days, moments, prices, digits
const dayFormat = () => (days ??= new Intl.DateTimeFormat(navigator.language, { dateStyle: 'medium' }))
/** A date of the API as the reader's locale writes it. */
export const day = (iso) => dayFormat().format(new Date(iso))
/** A date and time of the API as the reader's locale writes them. */
export const moment = (iso) => (moments ??= new Intl.DateTimeFormat(navigator.language, { dateStyle: 'medium', timeStyle: 'short' })).format(new Date(iso))

/** The products' currency (CURRENCY, put into the page by the service). */
export const currency = document.querySelector('meta[name="currency"]')?.content ?? 'EUR'
const priceFormat = () => (prices ??= new Intl.NumberFormat(navigator.language, { style: 'currency', currency }))
/** How many decimals the currency has: amounts are in its minor units (2 for EUR, 0 for JPY). */
export const fractionDigits = () => (digits ??= priceFormat().resolvedOptions().maximumFractionDigits)
/** An amount of the API (minor units: 2599) as a price (€25.99). */
export const money = (amount) => priceFormat().format(amount / 10 ** fractionDigits())
/** Makes the formatters of the product lists while their data is on its way: not in the task that shows them. */
export const prepareFormats = () => { priceFormat(); dayFormat() }

/** Whether the browser can use passkeys: @simplewebauthn/browser's own test, without loading the library. */
export const webAuthnSupported = () => typeof globalThis.PublicKeyCredential === 'function'

/** An element with properties and children: `element('a', { href: '/' }, 'Home')`. */
export function element (tag, properties = {}, ...children) {
  const node = document.createElement(tag)
  for (const [name, value] of Object.entries(properties)) {
    if (name === 'role' || name.startsWith('data-') || name.startsWith('aria-')) node.setAttribute(name, value)
    else node[name] = value
  }
  node.append(...children)
  return node
}
