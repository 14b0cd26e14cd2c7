/**
 * Content negotiation shared by the request decorators (`accepts*`) and the reply side
 * (`format`). README.md "Content negotiation", the Accepts rules:
 *  1. an extension (`html`, `.html`) or a full type may be offered;
 *  2. higher q wins; `q=0` excludes; `*∕*;q=0` refuses what is not otherwise listed;
 *  3. a more specific Accept entry beats a wildcard one, and among entries of one type the one
 *     with more media-type parameters (RFC 9110 12.5.1);
 *  4. parameters: extra offer parameters are ignored, every Accept parameter must be in the
 *     offer; order, name case and quotes do not matter (values compare case-insensitively);
 *  5. offers of equal rank (same q and specificity): the earlier offer wins.
 * Also: parameters after `q` are accept-extensions (RFC 9110 12.5.1), not matched; a wildcard
 * offer (`text/*`) matches the entries it covers; an extension mime-types does not know is
 * accepted by `*∕*` only (rule 2: `*∕*` accepts anything).
 *
 * Why not `negotiator` alone: it breaks ties on the position of the Accept entry before the
 * position of the offer (rule 5 differs: `Accept: text/html, application/json` with offers
 * `['application/json', 'text/html']` gives `text/html` there, `application/json` here), it
 * throws on a malformed offer, and it takes no extensions. The ranking below is the same as
 * negotiator's otherwise (per offer the most specific matching entry decides its q), which the
 * tests check against negotiator on tie-free headers.
 *
 * Every function returns the chosen offer exactly as given, or '' when none is acceptable.
 * An absent or empty header accepts the first (non-empty) offer.
 */
import { lookup } from 'mime-types'

/** One entry of an Accept-* header. */
interface HeaderEntry {
  value: string
  params: Map<string, string>
  q: number
}

interface Rank {
  q: number
  s: number
}

/** Specificity of `entry` for `offer`, or -1 when the entry does not cover the offer. */
type Matcher<Offer> = (entry: HeaderEntry, offer: Offer) => number

/** Splits `text` on `separator` outside double-quoted strings. */
function splitOutsideQuotes (text: string, separator: string): string[] {
  const parts: string[] = []
  let start = 0
  let quoted = false
  for (let i = 0; i < text.length; i++) {
    const c = text[i]
    if (quoted && c === '\\') i++
    else if (c === '"') quoted = !quoted
    else if (!quoted && c === separator) {
      parts.push(text.slice(start, i))
      start = i + 1
    }
  }
  parts.push(text.slice(start))
  return parts
}

function unquote (value: string): string {
  if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) {
    return value.slice(1, -1).replace(/\\(.)/g, '$1')
  }
  return value
}

const QVALUE = /^(?:0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/

/**
 * Parses `value *( ";" name=value )` segments. Parameter names are lower-cased and values
 * unquoted; parameters after `q` are accept-extensions (RFC 9110 12.5.1) and are dropped.
 * Returns undefined for a malformed q (the entry is then ignored).
 */
function parseSegment (segment: string): HeaderEntry | undefined {
  const [head = '', ...rest] = splitOutsideQuotes(segment, ';')
  const value = head.trim()
  if (value === '') return undefined
  const params = new Map<string, string>()
  let q = 1
  for (const raw of rest) {
    const eq = raw.indexOf('=')
    if (eq === -1) continue
    const name = raw.slice(0, eq).trim().toLowerCase()
    const paramValue = unquote(raw.slice(eq + 1).trim())
    if (name === 'q') {
      if (!QVALUE.test(paramValue)) return undefined
      q = Number(paramValue)
      break
    } else if (name !== '') {
      params.set(name, paramValue)
    }
  }
  return { value, params, q }
}

/** Parses an Accept-* header into its entries, in header order. */
export function parseAcceptHeader (header: string): HeaderEntry[] {
  const entries: HeaderEntry[] = []
  for (const segment of splitOutsideQuotes(header, ',')) {
    const entry = parseSegment(segment)
    if (entry !== undefined) entries.push(entry)
  }
  return entries
}

/** Per offer: the most specific matching entry decides (then the higher q). */
function rankOffer<Offer> (entries: readonly HeaderEntry[], offer: Offer, match: Matcher<Offer>): Rank | undefined {
  let best: Rank | undefined
  for (const entry of entries) {
    const s = match(entry, offer)
    if (s < 0) continue
    if (best === undefined || s > best.s || (s === best.s && entry.q > best.q)) best = { q: entry.q, s }
  }
  return best
}

function choose<Offer> (
  header: string | undefined,
  offers: readonly string[],
  prepare: (offer: string) => Offer | undefined,
  match: Matcher<Offer>,
  extraEntries: (entries: HeaderEntry[]) => HeaderEntry[] = (entries) => entries
): string {
  const usable = offers.filter((offer) => typeof offer === 'string' && offer !== '')
  if (usable.length === 0) return ''
  if (header === undefined || header.trim() === '') return usable[0] as string
  const entries = extraEntries(parseAcceptHeader(header))
  let chosen = ''
  let chosenRank: Rank | undefined
  for (const offer of usable) {
    const prepared = prepare(offer)
    if (prepared === undefined) continue
    const rank = rankOffer(entries, prepared, match)
    if (rank === undefined || rank.q <= 0) continue
    // Strictly better only: on equal q and specificity the earlier offer stays (rule 5).
    if (chosenRank === undefined || rank.q > chosenRank.q || (rank.q === chosenRank.q && rank.s > chosenRank.s)) {
      chosen = offer
      chosenRank = rank
    }
  }
  return chosen
}

/** A media type split for matching. */
export interface MediaType {
  type: string
  subtype: string
  params: Map<string, string>
  /** An extension mime-types does not know: only `*∕*` accepts it. */
  unknown?: true
}

/**
 * The media type of an offer: a full type (`text/html; charset=utf-8`) or an extension
 * (`html`, `.html`, looked up with mime-types; unknown ones are marked `unknown`).
 * Undefined when malformed.
 */
export function mediaTypeOf (offer: string): MediaType | undefined {
  const full = offer.includes('/') ? offer : lookup(offer)
  if (full === false) {
    const extension = offer.trim().replace(/^\./, '')
    return /^[\w.+-]+$/.test(extension) ? { type: '', subtype: '', params: new Map(), unknown: true } : undefined
  }
  const entry = parseSegment(full)
  if (entry === undefined) return undefined
  const slash = entry.value.indexOf('/')
  const type = entry.value.slice(0, slash).trim().toLowerCase()
  const subtype = entry.value.slice(slash + 1).trim().toLowerCase()
  if (type === '' || subtype === '' || subtype.includes('/')) return undefined
  return { type, subtype, params: entry.params }
}

// Specificity: an exact type outranks an exact subtype, which outranks parameters (counted).
const TYPE_SPECIFIC = 1 << 20
const SUBTYPE_SPECIFIC = 1 << 19

/**
 * Specificity of an Accept entry for an offer, -1 when it does not cover it. A wildcard in the
 * offer (`text/*`) covers the entries it names, ranked by the entry's own specificity.
 */
function matchMedia (entry: HeaderEntry, offer: MediaType): number {
  const slash = entry.value.indexOf('/')
  if (slash === -1) return -1
  const type = entry.value.slice(0, slash).trim().toLowerCase()
  const subtype = entry.value.slice(slash + 1).trim().toLowerCase()
  if (offer.unknown === true) return type === '*' && subtype === '*' && entry.params.size === 0 ? 0 : -1
  let s = 0
  if (type === offer.type || (offer.type === '*' && type !== '*')) s += TYPE_SPECIFIC
  else if (type !== '*') return -1
  if (subtype === offer.subtype || (offer.subtype === '*' && subtype !== '*')) s += SUBTYPE_SPECIFIC
  else if (subtype !== '*') return -1
  for (const [name, value] of entry.params) {
    if (offer.params.get(name)?.toLowerCase() !== value.toLowerCase()) return -1
  }
  return s + entry.params.size
}

/** Negotiates `offers` (extensions or media types) against an Accept header. */
export function negotiateMedia (accept: string | undefined, offers: readonly string[]): string {
  return choose(accept, offers, mediaTypeOf, matchMedia)
}

function matchToken (entry: HeaderEntry, offer: string): number {
  if (entry.value.toLowerCase() === offer) return 1
  return entry.value === '*' ? 0 : -1
}

const lower = (offer: string): string => offer.trim().toLowerCase()

/** Negotiates charsets against Accept-Charset (case-insensitive, `*` matches any). */
export function negotiateCharset (acceptCharset: string | undefined, offers: readonly string[]): string {
  return choose(acceptCharset, offers, lower, matchToken)
}

/**
 * Negotiates content codings against Accept-Encoding. As RFC 9110 12.5.3 (and negotiator):
 * `identity` is acceptable unless refused by `identity;q=0` or `*;q=0`; when the header does
 * not mention it, it ranks with the lowest q of the header.
 */
export function negotiateEncoding (acceptEncoding: string | undefined, offers: readonly string[]): string {
  return choose(acceptEncoding, offers, lower, matchToken, (entries) => {
    if (entries.some((entry) => entry.value === '*' || entry.value.toLowerCase() === 'identity')) return entries
    const minQ = entries.reduce((min, entry) => Math.min(min, entry.q > 0 ? entry.q : 1), 1)
    return [...entries, { value: 'identity', params: new Map(), q: minQ }]
  })
}

interface LanguageTag {
  full: string
  prefix: string
}

function languageOf (tag: string): LanguageTag {
  const full = tag.trim().toLowerCase()
  return { full, prefix: full.split('-')[0] as string }
}

/**
 * Language ranges as negotiator (and Express) match them: an exact tag (4) beats an Accept
 * entry whose primary subtag is the offer (`en-US` for offer `en`: 2), which beats an entry
 * that is the offer's primary subtag (`en` for offer `en-GB`: 1); `*` matches any (0).
 */
function matchLanguage (entry: HeaderEntry, offer: LanguageTag): number {
  const spec = languageOf(entry.value)
  if (spec.full === offer.full) return 4
  if (spec.prefix === offer.full) return 2
  if (spec.full === offer.prefix) return 1
  return spec.full === '*' ? 0 : -1
}

/** Negotiates language tags against Accept-Language. */
export function negotiateLanguage (acceptLanguage: string | undefined, offers: readonly string[]): string {
  return choose(acceptLanguage, offers, languageOf, matchLanguage)
}
