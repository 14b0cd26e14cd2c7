// The catalogue (`/`: search, order, one seller's products, pages of ten), a product's page
// (`/products/{id}`) and the form for a new one (`/products/new`).
import { products } from './api.js'
import { $, clicked, confirmAction, currency, day, element, fractionDigits, go, handle, money, prepareFormats, sessionEnded, state } from './ui.js'

const PAGE = 10
let cursor = null
let query = null

const filters = $('#filters')
const create = $('#create')

/** The catalogue's filters from the address (`?q=lamp&sort=oldest&seller=3`): back, forward and reload keep them. */
function filtersOf (search) {
  const params = new URLSearchParams(search)
  const seller = /^\d+$/.test(params.get('seller') ?? '') ? params.get('seller') : null
  return { q: (params.get('q') ?? '').trim(), sort: params.get('sort') === 'oldest' ? 'oldest' : 'newest', seller }
}

function thumbnail (product) {
  if (product.imageUrl === null) return element('span', { className: 'thumb none', 'aria-hidden': 'true' })
  // A 256 px rendition in a 128 px box: sharp on a phone's denser screen too.
  return element('img', { className: 'thumb', src: `${product.imageUrl}?w=256&v=${encodeURIComponent(product.updatedAt)}`, alt: '', width: 128, height: 128, loading: 'lazy', decoding: 'async' })
}

function item (product) {
  const href = `/products/${product.id}`
  const mine = state.me !== null && product.creatorId === state.me.id
  return element('li', {},
    element('a', { href, tabIndex: -1, 'aria-hidden': 'true' }, thumbnail(product)),
    element('div', {},
      element('h2', {}, element('a', { href }, product.title)),
      element('p', { className: 'price' }, money(product.amount)),
      element('p', { className: 'meta' }, `${mine ? 'Yours, listed' : 'Listed'} ${day(product.createdAt)}`)))
}

function emptyState ({ q, seller }) {
  const mine = state.me !== null && seller === String(state.me.id)
  const text = q !== ''
    ? [`No product's title contains “${q}”. Try a shorter or another word, or `, element('a', { href: seller === null ? '/' : `/?seller=${seller}` }, 'clear the search'), '.']
    : mine
      ? ['You have no products yet. ', element('a', { href: '/products/new' }, 'Add your first product'), '.']
      : seller !== null
        ? ['This seller has no products. ', element('a', { href: '/' }, 'See the whole catalogue'), '.']
        : state.me === null
          ? ['No products yet. ', element('a', { href: '/login' }, 'Log in or sign up'), ' to add the first one.']
          : ['No products yet. ', element('a', { href: '/products/new' }, 'Add the first one'), '.']
  $('#empty').replaceChildren(element('p', {}, ...text))
}

async function more () {
  $('#list-error').textContent = ''
  try {
    const params = { limit: String(PAGE), sort: query.sort }
    if (query.q !== '') params.q = query.q
    if (query.seller !== null) params.creatorId = query.seller
    if (cursor !== null) params.cursor = String(cursor)
    const first = cursor === null
    const request = products.list(params)
    prepareFormats()
    const page = await request
    $('#list').append(...page.items.map(item))
    cursor = page.nextCursor
    $('#more').hidden = cursor === null
    if (first) {
      $('#empty').hidden = page.items.length > 0
      if (page.items.length === 0) emptyState(query)
      $('#results').textContent = query.q === '' ? '' : page.items.length === 0 ? '' : `Products whose title contains “${query.q}”.`
    }
  } catch (failure) {
    $('#list-error').textContent = failure.message
  }
}

/** Shows the catalogue the address asks for. */
export async function showCatalogue () {
  query = filtersOf(location.search)
  filters.q.value = query.q
  filters.sort.value = query.sort
  filters.mine.checked = state.me !== null && query.seller === String(state.me.id)
  cursor = null
  $('#list').replaceChildren()
  $('#empty').hidden = true
  $('#more').hidden = true
  await more()
}

// The button moves below the new products: focus goes to the first of them, where reading goes on.
$('#more').addEventListener('click', async () => {
  const seen = $('#list').children.length
  await more()
  $('#list').children[seen]?.querySelector('h2 a')?.focus()
})

// A new search is a new address, so back returns to the one before.
filters.addEventListener('submit', (event) => {
  event.preventDefault()
  const params = new URLSearchParams()
  const q = filters.q.value.trim()
  if (q !== '') params.set('q', q)
  if (filters.sort.value !== 'newest') params.set('sort', filters.sort.value)
  const current = filtersOf(location.search).seller
  const seller = filters.mine.checked && state.me !== null ? String(state.me.id) : (current !== null && state.me !== null && current === String(state.me.id) ? null : current)
  if (seller !== null) params.set('seller', seller)
  go(params.size === 0 ? '/' : `/?${params}`)
})
filters.sort.addEventListener('change', () => filters.requestSubmit())
filters.mine.addEventListener('change', () => filters.requestSubmit())

let shown = null

/** A product's page: its picture at display size, price, description, seller and date; delete for its owner. */
export async function showProduct (id) {
  shown = null
  $('#product-error').textContent = ''
  for (const selector of ['#product-title', '#product-price', '#product-description', '#product-meta']) $(selector).textContent = ''
  $('#product-image').hidden = true
  $('#product-delete').hidden = true
  let product
  try {
    product = await products.get(id)
  } catch (failure) {
    if (failure.status === 404) return false
    $('#product-title').textContent = 'This product cannot be shown'
    $('#product-error').textContent = failure.message
    return true
  }
  shown = product
  document.title = `${product.title} – Products`
  $('#product-title').textContent = product.title
  $('#product-price').textContent = money(product.amount)
  $('#product-description').textContent = product.description
  const mine = state.me !== null && product.creatorId === state.me.id
  $('#product-meta').replaceChildren(
    mine ? 'Sold by you' : 'Sold by ', ...(mine ? [] : [element('a', { href: `/?seller=${product.creatorId}` }, `seller no. ${product.creatorId}`)]),
    `, listed ${day(product.createdAt)}.`)
  const image = $('#product-image')
  if (product.imageUrl !== null) {
    image.width = 512
    image.height = 512
    image.hidden = false
    // The rendition as wide as the picture is drawn here, in device pixels: 512, or 1024 on a denser or wider screen.
    const width = image.getBoundingClientRect().width * window.devicePixelRatio > 512 ? 1024 : 512
    image.src = `${product.imageUrl}?v=${encodeURIComponent(product.updatedAt)}&w=${width}`
    image.alt = `Picture of ${product.title}`
  } else image.removeAttribute('src')
  const remove = $('#product-delete')
  remove.textContent = `Delete ${product.title}`
  remove.hidden = !mine
  return true
}

// Drawn at most as wide as the picture is, in its own proportions (the box before it loads is a 512 px square).
$('#product-image').addEventListener('load', (event) => {
  const image = event.target
  const scale = Math.min(1, 512 / image.naturalWidth)
  image.width = Math.max(1, Math.round(image.naturalWidth * scale))
  image.height = Math.max(1, Math.round(image.naturalHeight * scale))
})

clicked($('#product-delete'), $('#product'), async () => {
  const product = shown
  const ok = await confirmAction({
    title: `Delete “${product.title}”?`,
    text: `Its page, its picture and its price of ${money(product.amount)} are removed for everyone, for good.`,
    confirm: `Delete ${product.title}`
  })
  if (!ok) return
  await products.remove(product.id)
  go('/', { message: `Product "${product.title}" deleted.` })
})

/** The new-product form, its price in the currency's major units. */
export function showNewProduct () {
  $('#create-price-label').textContent = `Price (${currency})`
  const digits = fractionDigits()
  create.price.step = digits === 0 ? '1' : String(10 ** -digits)
  $('#create-price-hint').textContent = `For instance ${money(2599)}: write ${(25.99).toFixed(digits)}.`
}

create.image.addEventListener('change', () => {
  const file = create.image.files[0]
  const preview = $('#preview')
  preview.hidden = file === undefined
  if (file === undefined) return
  // A data: URL, which the Content-Security-Policy allows for images (blob: it does not).
  const reader = new FileReader()
  reader.addEventListener('load', () => { preview.src = reader.result })
  reader.readAsDataURL(file)
})

handle(create, async (data) => {
  const amount = Math.round(Number(data.get('price')) * 10 ** fractionDigits())
  const product = await products.create({ title: data.get('title'), description: data.get('description'), amount })
  const file = create.image.files[0]
  if (file !== undefined) {
    try {
      await products.uploadImage(product.id, file)
    } catch (failure) {
      if (sessionEnded(failure)) throw failure
      throw new Error(`The product was created, but its image was refused: ${failure.message}`)
    }
  }
  create.reset()
  $('#preview').hidden = true
  go(`/products/${product.id}`, { message: `Product "${product.title}" created.` })
})
