/**
 * Path patterns of SPEC.md "Routing model": `/literal`, `/:name`, `/:name?`, `/prefix/*`,
 * and several `*` or `+` read by position as `*1`, `*2`, ... (`+` needs one character or
 * more, `*` may be empty; both may span `/`).
 *
 * find-my-way (Fastify's router) routes literal, `:name`, `:name(regex)`, a last `:name?`
 * and a last `*` itself: such patterns stay "native". Everything else (`+`, a `*` that is
 * not last, several `*`, an optional parameter before the end) is "compiled": registered as
 * the wildcard route of its literal head (`/api/+/x` -> `/api/*`) with a constraint that
 * lets the route match only when the whole path matches the pattern's regular expression.
 */
import { RouteParamDecodeError, RouteParamMissingError, RoutePatternError } from './errors.js'

export type Token =
  | { kind: 'literal', text: string }
  | { kind: 'param', name: string, optional: boolean, regex: string | undefined }
  | { kind: 'wildcard', plus: boolean, position: number }

export interface Pattern {
  source: string
  tokens: Token[]
  /** find-my-way can route the pattern as written. */
  native: boolean
  /** Names of the optional parameters (absent ones read as ''). */
  optionalNames: string[]
  /** Names of the required parameters (find-my-way lets them match an empty segment). */
  requiredNames: string[]
  /** Number of `*` and `+`. */
  wildcards: number
}

export interface CompiledPattern extends Pattern {
  /** The find-my-way route that carries the pattern: its literal head plus `*`. */
  routerUrl: string
  regex: RegExp
  /** Parameter key of each capture group, in order. */
  keys: string[]
}

const NAME_CHAR = /[A-Za-z0-9_]/

/** Index of the `)` closing the `(` at `open`, honouring escapes and nesting. */
function closingParen (source: string, open: number): number {
  let depth = 0
  for (let i = open; i < source.length; i++) {
    const c = source[i]
    if (c === '\\') i++
    else if (c === '(') depth++
    else if (c === ')' && --depth === 0) return i
  }
  throw new RoutePatternError(source, 'unclosed "(" in a parameter regular expression')
}

function tokenize (source: string): Token[] {
  const tokens: Token[] = []
  let literal = ''
  let position = 0
  const flush = (): void => {
    if (literal !== '') tokens.push({ kind: 'literal', text: literal })
    literal = ''
  }
  let i = 0
  while (i < source.length) {
    const c = source[i] as string
    if (c === ':') {
      if (source[i + 1] === ':') { // `::` is a literal colon, as in find-my-way
        literal += ':'
        i += 2
        continue
      }
      let j = i + 1
      while (j < source.length && NAME_CHAR.test(source[j] as string)) j++
      const name = source.slice(i + 1, j)
      if (name === '') throw new RoutePatternError(source, '":" must start a parameter name (write "::" for a literal colon)')
      let regex: string | undefined
      if (source[j] === '(') {
        const close = closingParen(source, j)
        regex = source.slice(j + 1, close)
        j = close + 1
      }
      const optional = source[j] === '?'
      if (optional) j++
      flush()
      tokens.push({ kind: 'param', name, optional, regex })
      i = j
      continue
    }
    if (c === '*' || c === '+') {
      flush()
      tokens.push({ kind: 'wildcard', plus: c === '+', position: ++position })
      i++
      continue
    }
    literal += c
    i++
  }
  flush()
  return tokens
}

/** Reads a route pattern; throws RoutePatternError for one that cannot work. */
export function parsePattern (source: string): Pattern {
  const tokens = tokenize(source)
  const names = new Set<string>()
  const optionalNames: string[] = []
  const requiredNames: string[] = []
  let wildcards = 0
  let native = true
  tokens.forEach((token, index) => {
    const last = index === tokens.length - 1
    if (token.kind === 'param') {
      if (names.has(token.name)) throw new RoutePatternError(source, `parameter "${token.name}" appears twice`)
      names.add(token.name)
      if (token.optional) {
        optionalNames.push(token.name)
        if (!last) native = false
      } else {
        requiredNames.push(token.name)
      }
    } else if (token.kind === 'wildcard') {
      wildcards++
      if (token.plus || !last) native = false
    }
  })
  if (!native && tokens.some((t) => t.kind === 'param' && t.regex !== undefined)) {
    throw new RoutePatternError(source, 'a parameter with a regular expression cannot be combined with "+", an inner "*" or an inner optional parameter')
  }
  return { source, tokens, native, optionalNames, requiredNames, wildcards }
}

function escapeRegex (text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

/** The regular expression and router URL of a pattern that find-my-way cannot route. */
export function compilePattern (pattern: Pattern): CompiledPattern {
  const { tokens } = pattern
  let regex = '^'
  const keys: string[] = []
  tokens.forEach((token, index) => {
    const next = tokens[index + 1]
    const previous = tokens[index - 1]
    if (token.kind === 'literal') {
      // An optional parameter after `/` takes that slash with it: `/a/:b?/c` matches `/a/c`.
      const slashGoesWithParam = next?.kind === 'param' && next.optional && token.text.endsWith('/')
      regex += escapeRegex(slashGoesWithParam ? token.text.slice(0, -1) : token.text)
    } else if (token.kind === 'param') {
      keys.push(token.name)
      if (!token.optional) regex += '([^/]+?)'
      else if (previous?.kind === 'literal' && previous.text.endsWith('/')) regex += '(?:/([^/]+?))?'
      else regex += '([^/]*?)'
    } else {
      keys.push(`*${token.position}`)
      regex += token.plus ? '(.+)' : '(.*)'
    }
  })
  regex += '$'

  const head = tokens[0]?.kind === 'literal' ? tokens[0].text : ''
  const routerUrl = head.slice(0, head.lastIndexOf('/') + 1) + '*'
  return { ...pattern, routerUrl, regex: new RegExp(regex), keys }
}

function decode (value: string, key: string): string {
  try {
    return decodeURIComponent(value)
  } catch {
    throw new RouteParamDecodeError(key)
  }
}

/**
 * The parameters of `path` (the URL path, still percent-encoded) under a compiled pattern,
 * or undefined when it does not match. Positional ones as `*1`, `*2`..., the first also as `*`.
 */
export function matchCompiled (pattern: CompiledPattern, path: string): Record<string, string> | undefined {
  const found = pattern.regex.exec(path)
  if (found === null) return undefined
  const params: Record<string, string> = {}
  pattern.keys.forEach((key, index) => {
    const raw = found[index + 1]
    params[key] = raw === undefined ? '' : decode(raw, key)
  })
  if (pattern.wildcards > 0) params['*'] = params['*1'] as string
  return params
}

/**
 * SPEC.md reading of find-my-way's params for a native pattern: absent optional -> '',
 * `*` also as `*1`. Returns false when a required parameter is empty (`/user/` for
 * `/user/:name`, which find-my-way matches): the route does not match then.
 */
export function normalizeNativeParams (pattern: Pattern, params: Record<string, string | undefined>): boolean {
  for (const name of pattern.requiredNames) {
    if (params[name] === undefined || params[name] === '') return false
  }
  for (const name of pattern.optionalNames) params[name] ??= ''
  if (pattern.wildcards > 0) params['*1'] = params['*'] ?? ''
  return true
}

/** Path part of a request URL, as find-my-way cuts it (at `?`, `;` or `#`). */
export function pathOf (url: string): string {
  const end = url.search(/[?;#]/)
  return end === -1 ? url : url.slice(0, end)
}

export type URLParamValue = string | number | boolean

/**
 * The relative URL of `pattern` with `params` filled in, each value percent-encoded (a
 * wildcard's `/` kept). A missing required parameter (or empty `+`) throws; a missing
 * optional one is left out with its slash; a missing `*` is empty.
 */
export function buildURL (routeName: string, pattern: Pattern, params: Readonly<Record<string, URLParamValue | undefined>>): string {
  let url = ''
  const { tokens } = pattern
  tokens.forEach((token, index) => {
    if (token.kind === 'literal') {
      url += token.text
      return
    }
    if (token.kind === 'param') {
      const value = params[token.name]
      if (value === undefined || value === '') {
        if (!token.optional) throw new RouteParamMissingError(routeName, token.name)
        const next = tokens[index + 1]
        if (url.endsWith('/') && (next === undefined || (next.kind === 'literal' && next.text.startsWith('/')))) url = url.slice(0, -1)
        return
      }
      url += encodeURIComponent(String(value))
      return
    }
    const key = `*${token.position}`
    const value = params[key] ?? (token.position === 1 ? params['*'] : undefined)
    if (value === undefined || value === '') {
      if (token.plus) throw new RouteParamMissingError(routeName, key)
      return
    }
    url += String(value).split('/').map(encodeURIComponent).join('/')
  })
  return url === '' ? '/' : url
}
