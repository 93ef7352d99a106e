import { describe, expect, it } from 'vitest';
import {
  DEFAULT_HASH_SEED,
  HASH_MODE_2_TUPLE,
  HASH_MODE_3_TUPLE,
  HASH_MODE_5_TUPLE,
  VXLAN_SOURCE_PORT_MAX,
  VXLAN_SOURCE_PORT_MIN,
  hashFlowV4,
  hashFlowV6,
  murmur3Bytes,
  murmur3Words,
  vxlanSourcePort,
} from '../shared/flow-hash.js';

// ---------------------------------------------------------------------------------------------
// Independent reference: MurmurHash3_x86_32 over bytes, written from the published algorithm with
// BigInt arithmetic modulo 2^32 (no Math.imul, no shared code with shared/flow-hash.ts).
const MASK = 0xffffffffn;
const mul32 = (a: bigint, b: bigint): bigint => (a * b) & MASK;
const rotl32 = (x: bigint, r: bigint): bigint => ((x << r) | (x >> (32n - r))) & MASK;

function refMurmur3(bytes: Uint8Array, seed: number): number {
  const c1 = 0xcc9e2d51n;
  const c2 = 0x1b873593n;
  let h = BigInt(seed >>> 0);
  const nblocks = Math.floor(bytes.length / 4);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let i = 0; i < nblocks; i++) {
    let k = BigInt(view.getUint32(i * 4, true));
    k = mul32(k, c1);
    k = rotl32(k, 15n);
    k = mul32(k, c2);
    h ^= k;
    h = rotl32(h, 13n);
    h = (mul32(h, 5n) + 0xe6546b64n) & MASK;
  }
  const tail = bytes.length & 3;
  if (tail > 0) {
    let k = 0n;
    for (let j = tail - 1; j >= 0; j--) k = (k << 8n) | BigInt(bytes[nblocks * 4 + j]!);
    k = mul32(k, c1);
    k = rotl32(k, 15n);
    k = mul32(k, c2);
    h ^= k;
  }
  h ^= BigInt(bytes.length);
  h ^= h >> 16n;
  h = mul32(h, 0x85ebca6bn);
  h ^= h >> 13n;
  h = mul32(h, 0xc2b2ae35n);
  h ^= h >> 16n;
  return Number(h);
}

/** The byte string the spec says the key words stand for: each word little-endian. */
function wordsToLeBytes(words: readonly number[]): Uint8Array {
  const out = new Uint8Array(words.length * 4);
  const view = new DataView(out.buffer);
  words.forEach((w, i) => view.setUint32(i * 4, w >>> 0, true));
  return out;
}

function refFlowV4(src: number, dst: number, proto: number, sp: number, dp: number, mode: number, seed: number): number {
  const words = [src, dst];
  if (mode !== HASH_MODE_2_TUPLE) words.push(proto);
  if (mode === HASH_MODE_5_TUPLE) words.push(((sp << 16) | dp) >>> 0);
  return refMurmur3(wordsToLeBytes(words), seed);
}

function refFlowV6(
  src: readonly number[],
  dst: readonly number[],
  proto: number,
  sp: number,
  dp: number,
  mode: number,
  seed: number,
): number {
  const words = [...src, ...dst];
  if (mode !== HASH_MODE_2_TUPLE) words.push(proto);
  if (mode === HASH_MODE_5_TUPLE) words.push(((sp << 16) | dp) >>> 0);
  return refMurmur3(wordsToLeBytes(words), seed);
}

const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);
const hex = (n: number): string => `0x${(n >>> 0).toString(16).padStart(8, '0')}`;

// Small deterministic PRNG (xorshift32) so spread tests are reproducible.
function xorshift32(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return x >>> 0;
  };
}

// ---------------------------------------------------------------------------------------------
// Golden vectors (also printed in docs/hashing.md).
// v4 flow: 198.51.100.10:40000 -> 203.0.113.10:80 TCP
const V4_SRC = 0xc633640a; // 198.51.100.10
const V4_DST = 0xcb00710a; // 203.0.113.10
// v6 flow: [2001:db8:c::10]:5353 -> [2001:db8:ff::1]:53 UDP
const V6_SRC = [0x20010db8, 0x000c0000, 0x00000000, 0x00000010]; // 2001:db8:c::10
const V6_DST = [0x20010db8, 0x00ff0000, 0x00000000, 0x00000001]; // 2001:db8:ff::1

interface Golden {
  seed: number;
  mode: number;
  v4: number;
  v4Port: number;
  v6: number;
  v6Port: number;
}
const GOLDEN: Golden[] = [
  { seed: DEFAULT_HASH_SEED, mode: 5, v4: 0xf79ebdc6, v4Port: 51800, v6: 0x5cc6b7a0, v6Port: 60262 },
  { seed: DEFAULT_HASH_SEED, mode: 3, v4: 0x1525f244, v4Port: 59233, v6: 0x90537dce, v6Port: 60829 },
  { seed: DEFAULT_HASH_SEED, mode: 2, v4: 0x932cfc29, v4Port: 61189, v6: 0xd1caa85c, v6Port: 63894 },
  { seed: 0, mode: 5, v4: 0xb08c47f7, v4Port: 63355, v6: 0xb885f908, v6Port: 49549 },
  { seed: 0, mode: 3, v4: 0x829392e5, v4Port: 53366, v6: 0xa37f4d8d, v6Port: 61170 },
  { seed: 0, mode: 2, v4: 0x5d36e10f, v4Port: 64569, v6: 0xb72206df, v6Port: 61949 },
];

describe('the byte reference itself', () => {
  // Published MurmurHash3_x86_32 vectors (SMHasher's algorithm; widely reproduced test values).
  const published: [string | Uint8Array, number, number][] = [
    ['', 0, 0],
    ['', 1, 0x514e28b7],
    ['', 0xffffffff, 0x81f16f39],
    [new Uint8Array(4), 0, 0x2362f9de],
    ['test', 0, 0xba6bd213],
    ['Hello, world!', 1234, 0xfaf6cdb3],
    ['Hello, world!', 4321, 0xbf505788],
    ['The quick brown fox jumps over the lazy dog', 0, 0x2e4ff723],
    ['a', 0x9747b28c, 0x7fa09ea6],
    ['ab', 0x9747b28c, 0x74875592],
    ['abc', 0x9747b28c, 0xc84a62dd],
    ['abcd', 0x9747b28c, 0xf0478627],
    ['aaaa', 0x9747b28c, 0x5a97808a],
    ['Hello, world!', 0x9747b28c, 0x24884cba],
  ];
  it.each(published.map(([s, seed, want]) => [typeof s === 'string' ? JSON.stringify(s) : 'zeros(4)', s, seed, want] as const))(
    'murmur3(%s, seed) matches the published value',
    (_name, s, seed, want) => {
      const bytes = typeof s === 'string' ? utf8(s) : s;
      expect(hex(refMurmur3(bytes, seed))).toBe(hex(want));
      expect(hex(murmur3Bytes(bytes, seed))).toBe(hex(want));
    },
  );
});

describe('murmur3Bytes', () => {
  it('equals the reference for every length 0..64 and several seeds', () => {
    const rnd = xorshift32(7);
    for (let len = 0; len <= 64; len++) {
      const b = new Uint8Array(len);
      for (let i = 0; i < len; i++) b[i] = rnd() & 0xff;
      for (const seed of [0, 1, DEFAULT_HASH_SEED, 0xffffffff]) expect(murmur3Bytes(b, seed)).toBe(refMurmur3(b, seed));
    }
  });

  it('reads a subarray at a non-zero offset', () => {
    const big = utf8('xxHello, world!yy');
    expect(murmur3Bytes(big.subarray(2, 15), 1234)).toBe(0xfaf6cdb3);
  });
});

describe('murmur3Words', () => {
  it('equals the byte reference of the words serialized little-endian', () => {
    const rnd = xorshift32(11);
    for (let n = 0; n <= 12; n++) {
      const words: number[] = [];
      for (let i = 0; i < n; i++) words.push(rnd());
      for (const seed of [0, DEFAULT_HASH_SEED, 0xdeadbeef]) {
        expect(murmur3Words(words, 0, n, seed)).toBe(refMurmur3(wordsToLeBytes(words), seed));
        expect(murmur3Words(Uint32Array.from(words), 0, n, seed)).toBe(refMurmur3(wordsToLeBytes(words), seed));
      }
    }
  });

  it('honours the offset', () => {
    const arr = Uint32Array.of(9, 9, 1, 2, 3, 9);
    expect(murmur3Words(arr, 2, 3, 5)).toBe(murmur3Words([1, 2, 3], 0, 3, 5));
  });

  it('zero words hash like the empty string', () => {
    expect(murmur3Words([], 0, 0, 1)).toBe(0x514e28b7);
  });
});

describe('hashFlowV4 / hashFlowV6 golden vectors', () => {
  it.each(GOLDEN)('seed $seed mode $mode', (g) => {
    const h4 = hashFlowV4(V4_SRC, V4_DST, 6, 40000, 80, g.mode, g.seed);
    const h6 = hashFlowV6(V6_SRC, 0, V6_DST, 0, 17, 5353, 53, g.mode, g.seed);
    expect(hex(h4)).toBe(hex(g.v4));
    expect(hex(h6)).toBe(hex(g.v6));
    // the same numbers from the independent byte reference
    expect(hex(refFlowV4(V4_SRC, V4_DST, 6, 40000, 80, g.mode, g.seed))).toBe(hex(g.v4));
    expect(hex(refFlowV6(V6_SRC, V6_DST, 17, 5353, 53, g.mode, g.seed))).toBe(hex(g.v6));
    expect(vxlanSourcePort(h4)).toBe(g.v4Port);
    expect(vxlanSourcePort(h6)).toBe(g.v6Port);
  });

  it('equals murmur3Words over the documented key words', () => {
    const words = [V4_SRC, V4_DST, 6, ((40000 << 16) | 80) >>> 0];
    expect(hashFlowV4(V4_SRC, V4_DST, 6, 40000, 80, HASH_MODE_5_TUPLE, 42)).toBe(murmur3Words(words, 0, 4, 42));
    expect(hashFlowV4(V4_SRC, V4_DST, 6, 40000, 80, HASH_MODE_3_TUPLE, 42)).toBe(murmur3Words(words, 0, 3, 42));
    expect(hashFlowV4(V4_SRC, V4_DST, 6, 40000, 80, HASH_MODE_2_TUPLE, 42)).toBe(murmur3Words(words, 0, 2, 42));
    const w6 = [...V6_SRC, ...V6_DST, 17, ((5353 << 16) | 53) >>> 0];
    expect(hashFlowV6(V6_SRC, 0, V6_DST, 0, 17, 5353, 53, HASH_MODE_5_TUPLE, 42)).toBe(murmur3Words(w6, 0, 10, 42));
    expect(hashFlowV6(V6_SRC, 0, V6_DST, 0, 17, 5353, 53, HASH_MODE_3_TUPLE, 42)).toBe(murmur3Words(w6, 0, 9, 42));
    expect(hashFlowV6(V6_SRC, 0, V6_DST, 0, 17, 5353, 53, HASH_MODE_2_TUPLE, 42)).toBe(murmur3Words(w6, 0, 8, 42));
  });

  it('matches the byte reference on random flows, all modes', () => {
    const rnd = xorshift32(23);
    for (let i = 0; i < 2000; i++) {
      const src = rnd();
      const dst = rnd();
      const proto = rnd() & 0xff;
      const sp = rnd() & 0xffff;
      const dp = rnd() & 0xffff;
      const seed = rnd();
      const s6 = [rnd(), rnd(), rnd(), rnd()];
      const d6 = [rnd(), rnd(), rnd(), rnd()];
      for (const mode of [HASH_MODE_5_TUPLE, HASH_MODE_3_TUPLE, HASH_MODE_2_TUPLE]) {
        expect(hashFlowV4(src, dst, proto, sp, dp, mode, seed)).toBe(refFlowV4(src, dst, proto, sp, dp, mode, seed));
        expect(hashFlowV6(s6, 0, d6, 0, proto, sp, dp, mode, seed)).toBe(refFlowV6(s6, d6, proto, sp, dp, mode, seed));
      }
    }
  });

  it('accepts addresses at offsets inside larger word arrays (as the packet context keeps them)', () => {
    const ctx = new Uint32Array(12);
    ctx.set(V6_SRC, 2);
    ctx.set(V6_DST, 7);
    expect(hashFlowV6(ctx, 2, ctx, 7, 17, 5353, 53, HASH_MODE_5_TUPLE, DEFAULT_HASH_SEED)).toBe(0x5cc6b7a0);
  });

  it('returns unsigned 32-bit integers', () => {
    const rnd = xorshift32(3);
    for (let i = 0; i < 1000; i++) {
      const h = hashFlowV4(rnd(), rnd(), 6, rnd() & 0xffff, 80, HASH_MODE_5_TUPLE, rnd());
      expect(Number.isInteger(h) && h >= 0 && h <= 0xffffffff).toBe(true);
    }
  });

  it('an unknown mode hashes the 5-tuple', () => {
    expect(hashFlowV4(V4_SRC, V4_DST, 6, 40000, 80, 4, DEFAULT_HASH_SEED)).toBe(0xf79ebdc6);
  });
});

describe('field coverage per mode', () => {
  const seed = DEFAULT_HASH_SEED;
  it('5-tuple depends on every field', () => {
    const base = hashFlowV4(V4_SRC, V4_DST, 6, 40000, 80, HASH_MODE_5_TUPLE, seed);
    expect(hashFlowV4(V4_SRC + 1, V4_DST, 6, 40000, 80, HASH_MODE_5_TUPLE, seed)).not.toBe(base);
    expect(hashFlowV4(V4_SRC, V4_DST + 1, 6, 40000, 80, HASH_MODE_5_TUPLE, seed)).not.toBe(base);
    expect(hashFlowV4(V4_SRC, V4_DST, 17, 40000, 80, HASH_MODE_5_TUPLE, seed)).not.toBe(base);
    expect(hashFlowV4(V4_SRC, V4_DST, 6, 40001, 80, HASH_MODE_5_TUPLE, seed)).not.toBe(base);
    expect(hashFlowV4(V4_SRC, V4_DST, 6, 40000, 81, HASH_MODE_5_TUPLE, seed)).not.toBe(base);
    expect(hashFlowV4(V4_SRC, V4_DST, 6, 40000, 80, HASH_MODE_5_TUPLE, seed + 1)).not.toBe(base);
    // swapping the ports is a different flow
    expect(hashFlowV4(V4_SRC, V4_DST, 6, 80, 40000, HASH_MODE_5_TUPLE, seed)).not.toBe(base);
  });

  it('3-tuple ignores ports but not protocol', () => {
    const base = hashFlowV4(V4_SRC, V4_DST, 6, 40000, 80, HASH_MODE_3_TUPLE, seed);
    for (const [sp, dp] of [
      [0, 0],
      [1, 2],
      [65535, 65535],
      [40001, 443],
    ] as const) {
      expect(hashFlowV4(V4_SRC, V4_DST, 6, sp, dp, HASH_MODE_3_TUPLE, seed)).toBe(base);
    }
    expect(hashFlowV4(V4_SRC, V4_DST, 17, 40000, 80, HASH_MODE_3_TUPLE, seed)).not.toBe(base);
    const b6 = hashFlowV6(V6_SRC, 0, V6_DST, 0, 17, 5353, 53, HASH_MODE_3_TUPLE, seed);
    expect(hashFlowV6(V6_SRC, 0, V6_DST, 0, 17, 1, 2, HASH_MODE_3_TUPLE, seed)).toBe(b6);
    expect(hashFlowV6(V6_SRC, 0, V6_DST, 0, 6, 5353, 53, HASH_MODE_3_TUPLE, seed)).not.toBe(b6);
  });

  it('2-tuple ignores protocol and ports but not addresses', () => {
    const base = hashFlowV4(V4_SRC, V4_DST, 6, 40000, 80, HASH_MODE_2_TUPLE, seed);
    expect(hashFlowV4(V4_SRC, V4_DST, 1, 0, 0, HASH_MODE_2_TUPLE, seed)).toBe(base);
    expect(hashFlowV4(V4_SRC, V4_DST, 17, 9, 9, HASH_MODE_2_TUPLE, seed)).toBe(base);
    expect(hashFlowV4(V4_SRC ^ 1, V4_DST, 6, 40000, 80, HASH_MODE_2_TUPLE, seed)).not.toBe(base);
    const b6 = hashFlowV6(V6_SRC, 0, V6_DST, 0, 17, 5353, 53, HASH_MODE_2_TUPLE, seed);
    expect(hashFlowV6(V6_SRC, 0, V6_DST, 0, 58, 0, 0, HASH_MODE_2_TUPLE, seed)).toBe(b6);
    for (let w = 0; w < 4; w++) {
      const s = [...V6_SRC];
      s[w] = (s[w]! ^ 0x100) >>> 0;
      expect(hashFlowV6(s, 0, V6_DST, 0, 17, 5353, 53, HASH_MODE_2_TUPLE, seed)).not.toBe(b6);
      const d = [...V6_DST];
      d[w] = (d[w]! ^ 0x100) >>> 0;
      expect(hashFlowV6(V6_SRC, 0, d, 0, 17, 5353, 53, HASH_MODE_2_TUPLE, seed)).not.toBe(b6);
    }
  });

  it('ports and protocol are masked to their field widths', () => {
    const base = hashFlowV4(V4_SRC, V4_DST, 6, 40000, 80, HASH_MODE_5_TUPLE, seed);
    expect(hashFlowV4(V4_SRC, V4_DST, 6 + 256, 40000 + 65536, 80 + 65536, HASH_MODE_5_TUPLE, seed)).toBe(base);
  });
});

describe('vxlanSourcePort', () => {
  it('stays within 49152..65535 and reaches both ends', () => {
    expect(VXLAN_SOURCE_PORT_MIN).toBe(49152);
    expect(VXLAN_SOURCE_PORT_MAX).toBe(65535);
    const rnd = xorshift32(99);
    let min = Infinity;
    let max = -Infinity;
    for (let i = 0; i < 200_000; i++) {
      const p = vxlanSourcePort(rnd());
      min = Math.min(min, p);
      max = Math.max(max, p);
    }
    for (const h of [0, 1, 0xffff, 0x3fff, 0xffff0000, 0xffffffff, 0x80000000, -1]) {
      const p = vxlanSourcePort(h);
      expect(p).toBeGreaterThanOrEqual(49152);
      expect(p).toBeLessThanOrEqual(65535);
    }
    expect(min).toBe(49152);
    expect(max).toBe(65535);
  });

  it('follows the formula', () => {
    expect(vxlanSourcePort(0)).toBe(49152);
    expect(vxlanSourcePort(0x00003fff)).toBe(65535);
    expect(vxlanSourcePort(0x3fff0000)).toBe(65535);
    expect(vxlanSourcePort(0x12345678)).toBe(49152 + ((0x1234 ^ 0x5678) & 0x3fff));
  });
});

describe('spread', () => {
  // Pearson chi-square over 1024 equiprobable buckets: 1023 degrees of freedom, mean 1023, standard
  // deviation sqrt(2 * 1023) = 45.2. 1023 + 6 sd = 1294; a good hash fails this about once in 10^9.
  const BUCKETS = 1024;
  const N = 100_000;
  const CHI2_BOUND = 1294;

  function chiSquare(counts: Uint32Array, n: number): number {
    const expected = n / counts.length;
    let chi = 0;
    for (const c of counts) chi += ((c - expected) * (c - expected)) / expected;
    return chi;
  }

  it('100k random 5-tuples into 1024 buckets', () => {
    const rnd = xorshift32(12345);
    const counts = new Uint32Array(BUCKETS);
    for (let i = 0; i < N; i++) {
      const h = hashFlowV4(rnd(), rnd(), 6, rnd() & 0xffff, rnd() & 0xffff, HASH_MODE_5_TUPLE, DEFAULT_HASH_SEED);
      counts[h % BUCKETS]!++;
    }
    expect(chiSquare(counts, N)).toBeLessThan(CHI2_BOUND);
  });

  it('100k flows from few clients to one VIP:port, sequential source ports (real traffic shape)', () => {
    const counts = new Uint32Array(BUCKETS);
    for (let i = 0; i < N; i++) {
      const client = 0xc6336400 + (i % 4); // 198.51.100.0..3
      const sport = 1024 + Math.floor(i / 4);
      const h = hashFlowV4(client, V4_DST, 6, sport, 443, HASH_MODE_5_TUPLE, DEFAULT_HASH_SEED);
      counts[h % BUCKETS]!++;
    }
    expect(chiSquare(counts, N)).toBeLessThan(CHI2_BOUND);
  });

  it('100k IPv6 3-tuples from sequential client addresses', () => {
    const counts = new Uint32Array(BUCKETS);
    const s = Uint32Array.from(V6_SRC);
    for (let i = 0; i < N; i++) {
      s[3] = i;
      counts[hashFlowV6(s, 0, V6_DST, 0, 58, 0, 0, HASH_MODE_3_TUPLE, DEFAULT_HASH_SEED) % BUCKETS]!++;
    }
    expect(chiSquare(counts, N)).toBeLessThan(CHI2_BOUND);
  });

  it('VXLAN source ports of 100k flows spread over the 16384 ports', () => {
    const rnd = xorshift32(777);
    const counts = new Uint32Array(BUCKETS);
    for (let i = 0; i < N; i++) {
      const p = vxlanSourcePort(hashFlowV4(rnd(), V4_DST, 17, rnd() & 0xffff, 4789, HASH_MODE_5_TUPLE, DEFAULT_HASH_SEED));
      counts[(p - 49152) % BUCKETS]!++;
    }
    expect(chiSquare(counts, N)).toBeLessThan(CHI2_BOUND);
  });
});
