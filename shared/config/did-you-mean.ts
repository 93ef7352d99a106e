// Typo hints: the closest allowed word, when it is close enough to be a likely typo.

/** Optimal string alignment distance (Levenshtein plus adjacent transpositions). */
function editDistance(a: string, b: string): number {
  const d: number[][] = [];
  for (let i = 0; i <= a.length; i++) {
    d.push([i]);
    for (let j = 1; j <= b.length; j++) d[i]!.push(i === 0 ? j : 0);
  }
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  }
  return d[a.length]![b.length]!;
}

/** The closest candidate, when it is close enough to be a likely typo. */
export function didYouMean(word: string, candidates: readonly string[]): string | null {
  if (word.length > 64) return null;
  const norm = (s: string) => s.toLowerCase().replace(/[-_ ]/g, '');
  let best: string | null = null;
  let bestD = Infinity;
  for (const c of candidates) {
    if (c === word) continue;
    const d = norm(c) === norm(word) ? 0 : editDistance(word.toLowerCase(), c.toLowerCase());
    if (d < bestD) {
      bestD = d;
      best = c;
    }
  }
  const limit = Math.max(1, Math.floor(word.length / 3));
  return best !== null && bestD <= limit ? best : null;
}
