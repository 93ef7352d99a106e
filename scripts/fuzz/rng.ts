// Seeded pseudo-random numbers for tests and fuzzing (xorshift32): the same seed gives the same inputs.
export class Rng {
  private s: number;
  constructor(seed: number) {
    this.s = seed >>> 0 || 0x9e3779b9;
  }
  /** Uniform uint32. */
  u32(): number {
    let x = this.s;
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    this.s = x;
    return x;
  }
  /** Uniform integer in [0, n). */
  int(n: number): number {
    return Math.floor((this.u32() / 0x100000000) * n);
  }
  bytes(n: number): Uint8Array {
    const b = new Uint8Array(n);
    for (let i = 0; i < n; i++) b[i] = this.u32() & 0xff;
    return b;
  }
  pick<T>(a: readonly T[]): T {
    return a[this.int(a.length)]!;
  }
}

/** Mutates a copy of `b`: flips, overwrites, truncates or extends, a few times. */
export function mutate(rng: Rng, b: Uint8Array): Uint8Array {
  let out: Uint8Array = Uint8Array.from(b);
  const n = 1 + rng.int(4);
  for (let k = 0; k < n; k++) {
    const op = rng.int(6);
    if (out.length === 0) {
      out = rng.bytes(rng.int(64));
      continue;
    }
    const i = rng.int(out.length);
    if (op === 0) out[i] = out[i]! ^ (1 << rng.int(8));
    else if (op === 1) out[i] = rng.u32() & 0xff;
    else if (op === 2) out = out.slice(0, i);
    else if (op === 3) {
      const e = new Uint8Array(out.length + 1 + rng.int(32));
      e.set(out);
      e.set(rng.bytes(e.length - out.length), out.length);
      out = e;
    } else if (op === 4) out[i] = [0, 0xff, 0x7f, 0x80, 5, 4, 6][rng.int(7)]!;
    else {
      const j = rng.int(out.length);
      const t = out[i]!;
      out[i] = out[j]!;
      out[j] = t;
    }
  }
  return out;
}
