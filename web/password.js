// New passwords: every field with autocomplete="new-password" gets a show-password toggle and a
// hint of the service's rule as it is typed (docs/api.md, "Passwords"): at least 8 characters,
// at most 72 bytes in UTF-8, not one of the most common passwords. The list is the service's
// own file, the one the API checks against, fetched when such a field is first focused: it is
// no part of the first page. The API decides; the hint only says early what it will answer.
import { element } from './ui.js'

const MIN_CHARACTERS = 8
const MAX_BYTES = 72
/** A screen reader hears the hint once typing pauses, not at every key. */
const ANNOUNCE_AFTER_MS = 400
const RULE = `At least ${MIN_CHARACTERS} characters, at most ${MAX_BYTES} bytes, and not one of the most common passwords.`
const utf8 = new TextEncoder()

// The list as a Set once fetched; null while it is not (a failed fetch is tried again at the next focus).
let common = null
let loading = null

function loadCommon () {
  loading ??= fetch(document.querySelector('meta[name="common-passwords"]').content)
    .then((res) => res.ok ? res.text() : Promise.reject(new Error(`${res.status}`)))
    .then((text) => { common = new Set(text.split('\n')) }, () => { loading = null })
  return loading
}

/** The hint for `value`, and its state: empty, short, long, common or fine. */
function hintOf (value) {
  if (value === '') return ['empty', RULE]
  const characters = [...value].length
  const bytes = utf8.encode(value).length
  if (characters < MIN_CHARACTERS) return ['short', `Too short: ${characters} of at least ${MIN_CHARACTERS} characters.`]
  if (bytes > MAX_BYTES) return ['long', `Too long: ${bytes} bytes, at most ${MAX_BYTES} (a letter with an accent takes 2 bytes, many other characters 3 or 4).`]
  if (common?.has(value.toLowerCase())) return ['common', 'This is one of the most common passwords, tried first by anyone guessing: choose another.']
  return ['fine', `Length fine: ${bytes} of at most ${MAX_BYTES} bytes.${common === null ? '' : ' Not one of the most common passwords.'}`]
}

/** Gives a new-password field its toggle and its hint (described by it, a polite live region). */
function enhance (input) {
  const hint = element('p', { id: `${input.id}-hint`, className: 'hint password-hint', 'aria-live': 'polite' }, RULE)
  const toggle = element('button', { type: 'button', className: 'secondary', 'aria-pressed': 'false', 'aria-controls': input.id }, 'Show password')
  const row = element('div', { className: 'password-row' })
  input.replaceWith(row)
  row.append(input, toggle)
  row.after(hint)
  input.setAttribute('aria-describedby', [input.getAttribute('aria-describedby'), hint.id].filter(Boolean).join(' '))

  let timer = 0
  const update = () => {
    const [state, text] = hintOf(input.value)
    hint.dataset.state = state
    hint.textContent = text
  }
  input.addEventListener('input', () => {
    clearTimeout(timer)
    timer = setTimeout(update, ANNOUNCE_AFTER_MS)
  })
  input.addEventListener('focus', () => { loadCommon().then(() => { if (input.value !== '') update() }) })

  // A click keeps the caret in the field; from the keyboard, focus stays on the toggle.
  toggle.addEventListener('mousedown', (event) => { if (document.activeElement === input) event.preventDefault() })
  toggle.addEventListener('click', () => {
    const show = input.type === 'password'
    input.type = show ? 'text' : 'password'
    toggle.setAttribute('aria-pressed', String(show))
  })
  // A form reset (after it was sent) hides the password again and clears the hint.
  input.form?.addEventListener('reset', () => {
    clearTimeout(timer)
    input.type = 'password'
    toggle.setAttribute('aria-pressed', 'false')
    hint.dataset.state = 'empty'
    hint.textContent = RULE
  })
}

export function newPasswordFields () {
  for (const input of document.querySelectorAll('input[autocomplete="new-password"]')) enhance(input)
}
