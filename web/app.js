// The web app: one page whose sections are shown by state (logged in or not). Every form
// reports its errors in its own role=alert paragraph; successes go to the status line.
import { api } from './api.js'

const $ = (selector) => document.querySelector(selector)
const PAGE = 10
let me = null
let cursor = null
// The token of a password-reset link, from the address's fragment (never sent to the server).
let resetToken = null

const forms = {
  login: $('#login'),
  signup: $('#signup'),
  details: $('#details'),
  password: $('#password'),
  deleteAccount: $('#delete-account'),
  create: $('#create'),
  forgot: $('#forgot'),
  reset: $('#reset-password')
}

function say (message) { $('#status').textContent = message }

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
      if (failure.status === 401 && form !== forms.login) loggedOut('Your session has ended: log in again.')
    } finally {
      button.disabled = false
    }
  })
}

function show () {
  const inside = me !== null
  const resetting = resetToken !== null
  $('#reset').hidden = !resetting
  $('#auth').hidden = inside || resetting
  forms.signup.hidden = inside
  $('#forgot-open').hidden = false
  $('#profile').hidden = !inside || resetting
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
  localStorage.setItem('userId', String(user.id))
  show()
  reload()
}

function loggedOut (message) {
  me = null
  localStorage.removeItem('userId')
  show()
  reload()
  if (message) say(message)
  forms.login.username.focus()
}

async function logIn (username, password) {
  const session = await api('POST', '/api/auth/login', { username, password, mode: 'cookie' })
  loggedIn(await api('GET', `/api/user/${session.userId}`))
}

handle(forms.login, async (data) => {
  await logIn(data.get('username'), data.get('password'))
  forms.login.reset()
  say(`Logged in as ${me.username}.`)
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
    if (me !== null) me = await api('GET', `/api/user/${me.id}`)
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
  if (email.toLowerCase() !== me.email.toLowerCase()) body.email = email
  const { user } = await api('PATCH', `/api/user/${me.id}`, body)
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
  if (resetToken !== null) forms.reset.password.focus()
  if (link === '/verify-email' && token !== null) await verifyEmail(token)
  await reload()
}

$('#products-title').tabIndex = -1
$('#no-script').hidden = true
start()
