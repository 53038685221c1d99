/**
 * "Did you mean": the candidates nearest to a mistyped word, by edit
 * distance (Levenshtein: insertions, deletions, substitutions). Used on
 * error paths only (an unknown flag, a key no rule matches); both inputs are
 * cut to MAX_CHARS first, so a long key costs a bounded amount of work.
 */

/** Characters of each side compared (keys may be 256 bytes; the start tells them apart). */
const MAX_CHARS = 64

/** Edit distance between a and b (each cut to MAX_CHARS). */
export function editDistance (a: string, b: string): number {
  a = a.slice(0, MAX_CHARS)
  b = b.slice(0, MAX_CHARS)
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const cur = [i]
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
    prev = cur
  }
  return prev[b.length]
}

/**
 * Up to `max` candidates nearest to `word`, nearest first (ties keep the
 * candidates' order), and only those within `within` edits (default: a
 * third of the longer word, at least 2), so unrelated names are not offered.
 */
export function closest (word: string, candidates: readonly string[], max = 3, within?: number): string[] {
  return candidates
    .map((c, i) => ({ c, i, d: editDistance(word, c) }))
    .filter(x => x.d <= (within ?? Math.max(2, Math.ceil(Math.max(word.length, x.c.length) / 3))))
    .sort((x, y) => x.d - y.d || x.i - y.i)
    .slice(0, max)
    .map(x => x.c)
}
