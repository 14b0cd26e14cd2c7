/** Medians, Markdown tables and the marked sections of bench/README.md the scripts rewrite. */
import { readFileSync, writeFileSync } from 'node:fs'
import type { LoadFigures } from './load.js'

export function median (values: readonly number[]): number {
  if (values.length === 0) return Number.NaN
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

/** Per-metric medians over passes; errors and non-2xx are totals (any is worth seeing). */
export function medianFigures (runs: readonly LoadFigures[]): LoadFigures {
  const sum = (pick: (f: LoadFigures) => number): number => runs.reduce((total, f) => total + pick(f), 0)
  return {
    rps: median(runs.map((f) => f.rps)),
    p50: median(runs.map((f) => f.p50)),
    p99: median(runs.map((f) => f.p99)),
    errors: sum((f) => f.errors),
    non2xx: sum((f) => f.non2xx),
    total: sum((f) => f.total)
  }
}

export function formatRps (rps: number): string {
  return rps >= 100 ? Math.round(rps).toLocaleString('en-US') : rps.toFixed(1)
}

export function formatMs (ms: number): string {
  return ms >= 100 ? String(Math.round(ms)) : ms.toFixed(1)
}

export function percent (ratio: number): string {
  return `${(ratio * 100).toFixed(ratio < 0.1 ? 1 : 0)}%`
}

export function markdownTable (header: readonly string[], rows: readonly (readonly string[])[]): string {
  const line = (cells: readonly string[]): string => `| ${cells.join(' | ')} |`
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n')
}

/**
 * Replaces the text between `<!-- bench:NAME:start -->` and `<!-- bench:NAME:end -->` in
 * the file, read afresh (other helpers append to it). Missing markers are added before a
 * `## Soak` section if there is one, else at the end.
 */
export function writeSection (file: string, name: string, content: string): void {
  const start = `<!-- bench:${name}:start -->`
  const end = `<!-- bench:${name}:end -->`
  const block = `${start}\n${content.trim()}\n${end}`
  let text = readFileSync(file, 'utf8')
  const from = text.indexOf(start)
  const to = text.indexOf(end)
  if (from !== -1 && to > from) {
    text = text.slice(0, from) + block + text.slice(to + end.length)
  } else {
    const soak = text.search(/^## Soak/m)
    text = soak === -1 ? `${text.trimEnd()}\n\n${block}\n` : `${text.slice(0, soak)}${block}\n\n${text.slice(soak)}`
  }
  writeFileSync(file, text)
}
