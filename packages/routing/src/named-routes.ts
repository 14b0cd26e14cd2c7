/** Named routes (README.md "Named routes"): name -> pattern, and URLs built from it. */
import { DuplicateRouteNameError, RouteNameNotFoundError } from './errors.js'
import { buildURL, type Pattern, type URLParamValue } from './pattern.js'

export class NamedRoutes {
  readonly #patterns = new Map<string, Pattern>()

  /** Records `name` for `pattern`; the same name on another pattern is an error (one name, one URL). */
  add (name: string, pattern: Pattern): void {
    const known = this.#patterns.get(name)
    if (known !== undefined && known.source !== pattern.source) {
      throw new DuplicateRouteNameError(name, known.source, pattern.source)
    }
    this.#patterns.set(name, pattern)
  }

  has (name: string): boolean {
    return this.#patterns.has(name)
  }

  /** The pattern (with its prefix) of a named route. */
  pattern (name: string): string | undefined {
    return this.#patterns.get(name)?.source
  }

  url (name: string, params: Readonly<Record<string, URLParamValue | undefined>> = {}): string {
    const pattern = this.#patterns.get(name)
    if (pattern === undefined) throw new RouteNameNotFoundError(name)
    return buildURL(name, pattern, params)
  }
}
