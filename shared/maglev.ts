// Maglev lookup tables (Eisenbud et al., "Maglev: A Fast and Reliable Software Network Load Balancer",
// NSDI 2016, section 3.4), with weights by population share and an availability phase that moves only
// the slots of members that become unavailable. Specified in docs/hashing.md, "Maglev tables".
// Pure: the table is a function of the members (ids, weights, availability) and the size only.
import { murmur3Bytes } from './flow-hash.js';

export const MAGLEV_EMPTY = 0xffffffff;
export const DEFAULT_MAGLEV_SIZE = 65537;
/** Seed of the hash that gives a member's permutation offset ('mgl1'). */
export const MAGLEV_OFFSET_SEED = 0x6d676c31;
/** Seed of the hash that gives a member's permutation skip ('mgl2'). */
export const MAGLEV_SKIP_SEED = 0x6d676c32;
export const MAGLEV_MIN_WEIGHT = 1;
export const MAGLEV_MAX_WEIGHT = 1000;

export interface MaglevMember {
  readonly id: string;
  readonly weight: number;
  /** Defaults to true. */
  readonly available?: boolean;
}

export interface MaglevTable {
  readonly size: number;
  /** slot -> index into the input members array, or MAGLEV_EMPTY when no member is available. */
  readonly slots: Uint32Array;
  /** Member ids, in input order. */
  readonly members: readonly string[];
  /** Slots owned per input member. */
  readonly counts: Uint32Array;
}

export function isPrime(n: number): boolean {
  if (!Number.isSafeInteger(n) || n < 2) return false;
  if (n % 2 === 0) return n === 2;
  if (n % 3 === 0) return n === 3;
  for (let d = 5; d * d <= n; d += 6) {
    if (n % d === 0 || n % (d + 2) === 0) return false;
  }
  return true;
}

const encoder = new TextEncoder();

/**
 * Builds the lookup table. Throws RangeError on API misuse (size not a prime >= 3, weight not an
 * integer in 1..1000, duplicate ids); config validation is expected to have caught these already.
 */
export function buildMaglevTable(members: readonly MaglevMember[], size: number = DEFAULT_MAGLEV_SIZE): MaglevTable {
  if (!Number.isSafeInteger(size) || size < 3 || size > 0xfffffffe) {
    throw new RangeError(`maglev table size must be a prime integer >= 3, got ${String(size)}`);
  }
  if (!isPrime(size)) throw new RangeError(`maglev table size must be prime, got ${size}`);
  const n = members.length;
  const ids: string[] = new Array<string>(n);
  for (let i = 0; i < n; i++) {
    const m = members[i]!;
    if (typeof m.id !== 'string') throw new RangeError(`maglev member ${i}: id must be a string`);
    const w = m.weight;
    if (!Number.isInteger(w) || w < MAGLEV_MIN_WEIGHT || w > MAGLEV_MAX_WEIGHT) {
      throw new RangeError(
        `maglev member ${JSON.stringify(m.id)}: weight must be an integer in ${MAGLEV_MIN_WEIGHT}..${MAGLEV_MAX_WEIGHT}, got ${String(w)}`,
      );
    }
    ids[i] = m.id;
  }

  // Work in id order so the result does not depend on the input order; map back at the end.
  const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => (ids[a]! < ids[b]! ? -1 : ids[a]! > ids[b]! ? 1 : 0));
  for (let r = 1; r < n; r++) {
    if (ids[order[r]!] === ids[order[r - 1]!]) throw new RangeError(`maglev member id ${JSON.stringify(ids[order[r]!])} appears twice`);
  }

  const offset = new Uint32Array(n); // by rank (position in id order)
  const skip = new Uint32Array(n);
  const weight = new Uint32Array(n);
  const avail = new Uint8Array(n);
  let nAvail = 0;
  for (let r = 0; r < n; r++) {
    const m = members[order[r]!]!;
    const key = encoder.encode(m.id);
    offset[r] = murmur3Bytes(key, MAGLEV_OFFSET_SEED) % size;
    skip[r] = (murmur3Bytes(key, MAGLEV_SKIP_SEED) % (size - 1)) + 1;
    weight[r] = m.weight;
    if (m.available !== false) {
      avail[r] = 1;
      nAvail++;
    }
  }

  const slots = new Uint32Array(size).fill(MAGLEV_EMPTY); // holds ranks until the final mapping
  const counts = new Uint32Array(n);
  if (nAvail > 0) {
    // Phase 1: plain weighted Maglev over all members, available or not.
    const taken = new Uint8Array(size); // 1 = slot owned; a byte map stays in cache better than `slots`
    const all = new Uint32Array(n);
    for (let r = 0; r < n; r++) all[r] = r;
    populate(slots, taken, size, all, offset, skip, weight);

    // Phase 2: free the slots of unavailable members; the available members refill them, each walking
    // its own permutation from the start. Slots of available members never change.
    if (nAvail < n) {
      let freed = 0;
      for (let s = 0; s < size; s++) {
        if (avail[slots[s]!] === 0) {
          taken[s] = 0;
          freed++;
        }
      }
      const live = new Uint32Array(nAvail);
      for (let r = 0, k = 0; r < n; r++) if (avail[r] === 1) live[k++] = r;
      populate(slots, taken, freed, live, offset, skip, weight);
    }

    // Ranks -> input indices.
    const rankToInput = Uint32Array.from(order);
    for (let s = 0; s < size; s++) {
      const i = rankToInput[slots[s]!]!;
      slots[s] = i;
      counts[i]!++;
    }
  }

  return { size, slots, members: ids, counts };
}

/**
 * Weighted Maglev population: fills `toFill` free slots (taken[s] === 0). Each round, in rank order,
 * every member of `ranks` adds its weight to an accumulator; when that reaches the largest weight the
 * member takes the next free slot of its permutation offset, offset+skip, offset+2*skip, ... (mod
 * size), starting from j = 0. The permutation visits every slot (size is prime, 1 <= skip < size), so
 * a member always finds one while slots remain to fill.
 */
function populate(
  slots: Uint32Array,
  taken: Uint8Array,
  toFill: number,
  ranks: Uint32Array,
  offset: Uint32Array,
  skip: Uint32Array,
  weight: Uint32Array,
): void {
  const size = taken.length;
  const k = ranks.length;
  const pos = new Uint32Array(k); // current permutation position (slot index) per member
  const acc = new Uint32Array(k);
  const w = new Uint32Array(k);
  const sk = new Uint32Array(k);
  let maxWeight = 0;
  for (let i = 0; i < k; i++) {
    const r = ranks[i]!;
    pos[i] = offset[r]!;
    sk[i] = skip[r]!;
    w[i] = weight[r]!;
    if (w[i]! > maxWeight) maxWeight = w[i]!;
  }
  let filled = 0;
  while (filled < toFill) {
    for (let i = 0; i < k; i++) {
      const a = acc[i]! + w[i]!;
      if (a < maxWeight) {
        acc[i] = a;
        continue;
      }
      acc[i] = a - maxWeight;
      let p = pos[i]!;
      const step = sk[i]!;
      while (taken[p] !== 0) {
        p += step;
        if (p >= size) p -= size;
      }
      taken[p] = 1;
      slots[p] = ranks[i]!;
      p += step;
      if (p >= size) p -= size;
      pos[i] = p;
      if (++filled === toFill) return;
    }
  }
}
