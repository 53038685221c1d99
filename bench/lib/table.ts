/** Plain-text tables for bench output: first column left-aligned, the rest right-aligned. */

export function fmtInt (n: number): string {
  return Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '-'
}

export function fmtUs (n: number): string {
  if (!Number.isFinite(n)) return '-'
  return n < 100 ? n.toFixed(1) : Math.round(n).toLocaleString('en-US')
}

export function fmtRatio (n: number): string {
  return Number.isFinite(n) ? `${n.toFixed(2)}x` : '-'
}

export function fmtPct (n: number): string {
  return Number.isFinite(n) ? `${n.toFixed(0)}%` : '-'
}

export function renderTable (head: string[], rows: string[][], groups?: Array<[string, number]>): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map(r => (r[i] ?? '').length)))
  const cell = (c: string, i: number): string => i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i])
  const lines: string[] = []
  if (groups !== undefined) {
    // A header line above the column names: [label, number of columns it spans].
    let col = 0
    const parts: string[] = []
    for (const [label, span] of groups) {
      const w = widths.slice(col, col + span).reduce((a, x) => a + x, 0) + (span - 1) * 3
      parts.push(label.length >= w ? label : label + ' '.repeat(w - label.length))
      col += span
    }
    lines.push(parts.join(' | '))
  }
  lines.push(head.map(cell).join(' | '))
  lines.push(widths.map(w => '-'.repeat(w)).join('-+-'))
  for (const r of rows) lines.push(r.map(cell).join(' | '))
  return lines.join('\n') + '\n'
}
