// Bounds for counts that follow from statistics, for verdicts such as "each backend got its quarter":
// n independent flows, each landing somewhere with probability p (a hash spread), give a binomial
// count. A bound at 6 standard deviations (normal approximation) is broken by chance about twice in
// a billion runs, so a verdict outside it is a fault, not bad luck; and it tightens as n grows.

/** Standard deviations of a binomial bound: a chance failure about 2e-9 a check. */
export const BINOMIAL_BOUND_SIGMAS = 6;

export interface BinomialBounds {
  n: number;
  p: number;
  mean: number;
  sd: number;
  lo: number;
  hi: number;
}

/** The counts a Binomial(n, p) falls between except with negligible probability: mean -/+ z sd, in [0, n]. */
export function binomialBounds(n: number, p: number, z = BINOMIAL_BOUND_SIGMAS): BinomialBounds {
  if (!(n >= 0) || !(p >= 0 && p <= 1)) throw new Error(`binomialBounds: n ${n}, p ${p}`);
  const mean = n * p;
  const sd = Math.sqrt(n * p * (1 - p));
  return { n, p, mean, sd, lo: Math.max(0, Math.floor(mean - z * sd)), hi: Math.min(n, Math.ceil(mean + z * sd)) };
}

/** Whether k is within the bounds. */
export function withinBinomial(k: number, b: BinomialBounds): boolean {
  return k >= b.lo && k <= b.hi;
}

/** "k of n, expected 100 (p 0.25), 6-sigma bounds 48-152". */
export function fmtBinomial(k: number, b: BinomialBounds): string {
  return `${k} of ${b.n}, expected ${b.mean.toFixed(0)} (p ${b.p.toFixed(4)}), ${BINOMIAL_BOUND_SIGMAS}-sigma bounds ${b.lo}-${b.hi}`;
}
