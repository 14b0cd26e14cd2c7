/** What the figures were measured on: cores, CPU model, Node version, load average. */
import { readFileSync } from 'node:fs'
import os from 'node:os'

export interface Machine {
  cores: number
  cpu: string
  node: string
  /** 1, 5 and 15 minute load averages. */
  load: [number, number, number]
}

function cpuModel (): string {
  try {
    const match = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))
    if (match?.[1]) return match[1].trim()
  } catch {}
  return os.cpus()[0]?.model ?? 'unknown'
}

export function machine (): Machine {
  const [one = 0, five = 0, fifteen = 0] = os.loadavg()
  return { cores: os.availableParallelism(), cpu: cpuModel(), node: process.version, load: [one, five, fifteen] }
}

export function formatLoad (load: readonly number[]): string {
  return load.map((value) => value.toFixed(2)).join(' / ')
}

export function describeMachine (m: Machine): string {
  return `${m.cores} cores (nproc), ${m.cpu}, Node ${m.node}`
}
