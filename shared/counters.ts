// Named counters over one Float64Array: the data plane bumps `values[index]`, status endpoints and
// tests read them by name. Drop reasons are counters named `drop_<reason>`.
import { CODEC_ERROR_NAMES, codecErrorName, type CodecErrorName } from './codec-error.js';

export type CounterIndex<N extends string> = { readonly [K in N]: number };

export class Counters<N extends string> {
  readonly names: readonly N[];
  readonly values: Float64Array;
  readonly index: CounterIndex<N>;

  constructor(names: readonly N[]) {
    if (new Set(names).size !== names.length) throw new Error('duplicate counter names');
    this.names = names;
    this.values = new Float64Array(names.length);
    // Built in one go from entries: V8 keeps such an object in fast mode (a hidden class with the names
    // as fields), so `index.rx_packets` is a field load. Adding the names one by one in a loop (`idx[n] =
    // i`) turns an object of ~90 names or more into a dictionary, and every lookup into a hash probe.
    this.index = Object.freeze(Object.fromEntries(names.map((n, i) => [n, i]))) as CounterIndex<N>;
  }

  get(name: N): number {
    return this.values[this.index[name]]!;
  }

  /** Every counter by name (zeros included when `all`). */
  snapshot(all = false): Record<string, number> {
    const out: Record<string, number> = {};
    for (let i = 0; i < this.names.length; i++) {
      const v = this.values[i]!;
      if (all || v !== 0) out[this.names[i]!] = v;
    }
    return out;
  }

  /** Just the drop counters, reason -> count, without the `drop_` prefix. */
  drops(): Record<string, number> {
    const out: Record<string, number> = {};
    for (let i = 0; i < this.names.length; i++) {
      const n = this.names[i]!;
      if (n.startsWith('drop_') && this.values[i] !== 0) out[n.slice(5)] = this.values[i]!;
    }
    return out;
  }

  totalDrops(): number {
    let s = 0;
    for (let i = 0; i < this.names.length; i++) if (this.names[i]!.startsWith('drop_')) s += this.values[i]!;
    return s;
  }

  reset(): void {
    this.values.fill(0);
  }
}

/** Names `drop_<layer>_<codec error>` for every codec error, so a parse failure maps to a named drop. */
export function codecDropNames<L extends string>(layer: L): `drop_${L}_${CodecErrorName}`[] {
  return CODEC_ERROR_NAMES.map((e) => `drop_${layer}_${e}` as const);
}

/**
 * Builds a lookup from a negative codec result to the counter index of `drop_<layer>_<error>`;
 * the array is indexed by -code.
 */
export function codecDropIndex<N extends string>(counters: Counters<N>, layer: string): Int32Array {
  const map = new Int32Array(64).fill(-1);
  for (let code = -1; code > -64; code--) {
    const name = `drop_${layer}_${codecErrorName(code)}` as N;
    const i = counters.index[name];
    if (i !== undefined) map[-code] = i;
  }
  return map;
}
