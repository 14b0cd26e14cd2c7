/**
 * Path patterns (README.md "Path patterns"): `/literal`, `/:name`, `/:name?`, `/prefix/*`,
 * and several `*` or `+` read by position as `*1`, `*2`, ... (`+` needs one character or
 * more, `*` may be empty; both may span `/`).
 *
 * find-my-way (Fastify's router) routes literal, `:name`, `:name(regex)`, a last `:name?`
 * and a last `*` itself: such patterns stay "native". Everything else (`+`, a `*` that is
 * not last, several `*`, an optional parameter before the end, several parameters in one
 * segment, a literal colon next to a parameter or written `\:`) is "compiled": registered as
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
    // `::` (find-my-way's escape) and `\:` (the reference's) are a literal colon.
    if ((c === ':' && source[i + 1] === ':') || (c === '\\' && source[i + 1] === ':')) {
      literal += ':'
      i += 2
      continue
    }
    if (c === ':') {
      let j = i + 1
      while (j < source.length && NAME_CHAR.test(source[j] as string)) j++
      const name = source.slice(i + 1, j)
      if (name === '') throw new RoutePatternError(source, '":" must start a parameter name (write "::" or "\\:" for a literal colon)')
      if (source[j] === '<') {
        throw new RoutePatternError(source, `parameter constraints (":${name}<...>") are not supported; use a regular expression (":${name}(^\\d+)") or a params schema`)
      }
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

/**
 * Reads a route pattern; throws RoutePatternError for one that cannot work: a `:` without a
 * name, a repeated name, a parameter followed directly by another parameter, `*` or `+`
 * (no separator says where it ends), constraint syntax (`:id<int>`), a regular-expression
 * parameter in a pattern that must be compiled.
 */
export function parsePattern (source: string): Pattern {
  const tokens = tokenize(source)
  const names = new Set<string>()
  const optionalNames: string[] = []
  const requiredNames: string[] = []
  let wildcards = 0
  let native = true
  let paramsInSegment = 0
  let regexInSegment = false
  tokens.forEach((token, index) => {
    const last = index === tokens.length - 1
    const next = tokens[index + 1]
    const previous = tokens[index - 1]
    if (token.kind === 'param') {
      if (names.has(token.name)) throw new RoutePatternError(source, `parameter "${token.name}" appears twice`)
      names.add(token.name)
      if (token.regex === undefined && (next?.kind === 'param' || next?.kind === 'wildcard')) {
        throw new RoutePatternError(source, `parameter "${token.name}" is followed by another parameter without a separator, so where it ends is undefined`)
      }
      paramsInSegment++
      if (token.regex !== undefined) regexInSegment = true
      // Several parameters in one segment: split at the first separator, as the reference
      // does (find-my-way splits at the last one), unless regular expressions delimit them.
      if (paramsInSegment > 1 && !regexInSegment) native = false
      // find-my-way reads `:name::verb` as one parameter named "name::verb".
      if ((next?.kind === 'literal' && next.text.startsWith(':')) || (previous?.kind === 'literal' && previous.text.endsWith(':'))) native = false
      if (token.optional) {
        optionalNames.push(token.name)
        if (!last) native = false
      } else {
        requiredNames.push(token.name)
      }
    } else if (token.kind === 'wildcard') {
      wildcards++
      if (token.plus || !last) native = false
    } else if (token.text.includes('/')) {
      paramsInSegment = 0
      regexInSegment = false
    }
  })
  // A `\\:` must reach find-my-way as `::`: compile rather than rewrite the URL.
  if (source.includes('\\:')) native = false
  if (!native && tokens.some((t) => t.kind === 'param' && t.regex !== undefined)) {
    throw new RoutePatternError(source, 'a parameter with a regular expression cannot be combined with "+", an inner "*", an inner optional parameter, several parameters in one segment or an escaped colon next to a parameter')
  }
  return { source, tokens, native, optionalNames, requiredNames, wildcards }
}

function escapeRegex (text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

/** The router options that change how a path matches (Fastify's `routerOptions`). */
export interface PathOptions {
  caseSensitive?: boolean
  ignoreTrailingSlash?: boolean
  ignoreDuplicateSlashes?: boolean
}

/** The path as find-my-way matches it: duplicate slashes, then one trailing slash, removed when the options say so. */
export function normalizePath (path: string, options: PathOptions): string {
  let normalized = path
  if (options.ignoreDuplicateSlashes === true) normalized = normalized.replace(/\/{2,}/g, '/')
  if (options.ignoreTrailingSlash === true && normalized.length > 1 && normalized.endsWith('/')) normalized = normalized.slice(0, -1)
  return normalized
}

/**
 * The regular expression and router URL of a pattern that find-my-way cannot route;
 * case-insensitive with `caseSensitive: false` (values keep the request's case).
 */
export function compilePattern (pattern: Pattern, options: PathOptions = {}): CompiledPattern {
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
      // The slash before an optional parameter is optional, and the parameter may be empty
      // after it: `/a/:b?/:c?` matches `/a`, `/a/` and `/a//`.
      else if (previous?.kind === 'literal' && previous.text.endsWith('/')) regex += '(?:/([^/]*?))?'
      else regex += '([^/]*?)'
    } else {
      keys.push(`*${token.position}`)
      // Greedy, except before `/:name?`: then the last segment is left to the parameter.
      const after = next?.kind === 'literal' && next.text === '/' ? tokens[index + 2] : undefined
      const lazy = after?.kind === 'param' && after.optional
      regex += (token.plus ? '(.+' : '(.*') + (lazy ? '?)' : ')')
    }
  })
  regex += '$'

  const head = tokens[0]?.kind === 'literal' ? tokens[0].text : ''
  // find-my-way reads `:` as a parameter: a literal colon in the head is written `::`.
  const routerUrl = head.slice(0, head.lastIndexOf('/') + 1).replaceAll(':', '::') + '*'
  return { ...pattern, routerUrl, regex: new RegExp(regex, options.caseSensitive === false ? 'i' : ''), keys }
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
 * README.md's reading of find-my-way's params for a native pattern: absent optional -> '',
 * `*` also as `*1`. Returns false when a required parameter is empty (`/user/` for
 * `/user/:name`, which find-my-way matches): the route does not match then.
 */
export function normalizeNativeParams (pattern: Pattern, params: Record<string, string | undefined>): boolean {
  for (const name of pattern.requiredNames) {
    if (params[name] === undefined || params[name] === '') return false
  }
  for (const name of pattern.optionalNames) params[name] ??= ''
  if (pattern.wildcards > 0) {
    // `/prefix/*` reached at its bare path `/prefix` (index.ts): no `*` from find-my-way.
    params['*'] ??= ''
    params['*1'] = params['*']
  }
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
