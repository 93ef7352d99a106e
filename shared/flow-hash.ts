// The flow hash: MurmurHash3_x86_32 over 32-bit key words. Specified, with golden vectors, in
// docs/hashing.md; every MUX must compute exactly this, or flows that ECMP moves between MUXes change
// backend. Pure integer math, no allocation per call.

export const HASH_MODE_5_TUPLE = 5;
export const HASH_MODE_3_TUPLE = 3;
export const HASH_MODE_2_TUPLE = 2;

/** 'slbx' as a big-endian uint32; the default of config `hashSeed`. */
export const DEFAULT_HASH_SEED = 0x736c6278;

/** RFC 7348 5: the outer UDP source port should come from 49152-65535. */
export const VXLAN_SOURCE_PORT_MIN = 49152;
export const VXLAN_SOURCE_PORT_MAX = 65535;

const C1 = 0xcc9e2d51;
const C2 = 0x1b873593;

// One MurmurHash3_x86_32 body round for the block k. Small enough that V8 inlines it into the
// callers below (the hash functions measure the same with it written out by hand); it returns a
// number, so nothing is allocated.
function mixRound(h: number, k: number): number {
  k = Math.imul(k, C1);
  k = (k << 15) | (k >>> 17);
  k = Math.imul(k, C2);
  h ^= k;
  h = (h << 13) | (h >>> 19);
  return (Math.imul(h, 5) + 0xe6546b64) | 0;
}

// The same round for a zero block: k stays 0 through its multiplications and rotation, so only the
// rotation and multiply-add of h are left (a key's padding words hash for a third of a full round).
function mixZero(h: number): number {
  h = (h << 13) | (h >>> 19);
  return (Math.imul(h, 5) + 0xe6546b64) | 0;
}

/** One MurmurHash3_x86_32 body round of the 32-bit block `k` into the state `h` (signed 32-bit in and out). */
export const murmur3Round = mixRound;
/** murmur3Round(h, 0), in fewer steps. */
export const murmur3RoundZero = mixZero;

// Length mix-in and the fmix32 finalizer; returns an unsigned 32-bit value.
function finish(h: number, byteLen: number): number {
  h ^= byteLen;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * MurmurHash3_x86_32 of `n` 32-bit words starting at `words[off]`, each fed as one 4-byte block;
 * no tail, length 4*n bytes. Equals the reference byte hash of the words serialized little-endian.
 */
export function murmur3Words(words: ArrayLike<number>, off: number, n: number, seed: number): number {
  let h = seed | 0;
  for (let i = 0; i < n; i++) h = mixRound(h, words[off + i]! | 0);
  return finish(h, n << 2);
}

/**
 * Flow hash of an IPv4 packet. Addresses are uint32 read big-endian from the packet. Key words:
 * 5-tuple [src, dst, protocol, srcPort << 16 | dstPort], 3-tuple [src, dst, protocol], 2-tuple [src, dst].
 * A mode other than 2 or 3 hashes the 5-tuple (config validation allows only 2, 3 and 5).
 */
export function hashFlowV4(
  src: number,
  dst: number,
  protocol: number,
  srcPort: number,
  dstPort: number,
  mode: number,
  seed: number,
): number {
  let h = mixRound(seed | 0, src | 0);
  h = mixRound(h, dst | 0);
  if (mode === HASH_MODE_2_TUPLE) return finish(h, 8);
  h = mixRound(h, protocol & 0xff);
  if (mode === HASH_MODE_3_TUPLE) return finish(h, 12);
  h = mixRound(h, ((srcPort & 0xffff) << 16) | (dstPort & 0xffff));
  return finish(h, 16);
}

/**
 * Flow hash of an IPv6 packet. Each address is four uint32 words (big-endian from the packet) at
 * `src[srcOff..]` and `dst[dstOff..]`. Key words: src0..src3, dst0..dst3, then protocol and ports as
 * for IPv4.
 */
export function hashFlowV6(
  src: ArrayLike<number>,
  srcOff: number,
  dst: ArrayLike<number>,
  dstOff: number,
  protocol: number,
  srcPort: number,
  dstPort: number,
  mode: number,
  seed: number,
): number {
  let h = mixRound(seed | 0, src[srcOff]! | 0);
  h = mixRound(h, src[srcOff + 1]! | 0);
  h = mixRound(h, src[srcOff + 2]! | 0);
  h = mixRound(h, src[srcOff + 3]! | 0);
  h = mixRound(h, dst[dstOff]! | 0);
  h = mixRound(h, dst[dstOff + 1]! | 0);
  h = mixRound(h, dst[dstOff + 2]! | 0);
  h = mixRound(h, dst[dstOff + 3]! | 0);
  if (mode === HASH_MODE_2_TUPLE) return finish(h, 32);
  h = mixRound(h, protocol & 0xff);
  if (mode === HASH_MODE_3_TUPLE) return finish(h, 36);
  h = mixRound(h, ((srcPort & 0xffff) << 16) | (dstPort & 0xffff));
  return finish(h, 40);
}

/** The length mix-in and fmix32 finalizer after `byteLen` bytes of blocks; an unsigned 32-bit hash. */
export const murmur3Finish = finish;

/** VXLAN outer UDP source port from the flow hash: 49152 + (hi16 ^ lo16) & 0x3fff (RFC 7348 5). */
export function vxlanSourcePort(hash: number): number {
  return VXLAN_SOURCE_PORT_MIN + (((hash >>> 16) ^ (hash & 0xffff)) & 0x3fff);
}

/** Reference MurmurHash3_x86_32 of a byte string (little-endian blocks, 1-3 byte tail). */
export function murmur3Bytes(bytes: Uint8Array, seed: number): number {
  const len = bytes.length;
  const blocksEnd = len & ~3;
  let h = seed | 0;
  for (let i = 0; i < blocksEnd; i += 4) {
    const k = bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24);
    h = mixRound(h, k);
  }
  const rest = len & 3;
  if (rest !== 0) {
    let k = 0;
    if (rest === 3) k ^= bytes[blocksEnd + 2]! << 16;
    if (rest >= 2) k ^= bytes[blocksEnd + 1]! << 8;
    k ^= bytes[blocksEnd]!;
    k = Math.imul(k, C1);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, C2);
    h ^= k;
  }
  return finish(h, len);
}
