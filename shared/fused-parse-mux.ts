// The MUX's fused fast path (mux/data-plane.ts, fast4 and fast6): the 5-tuple flow hash with murmur3's
// rounds written out, no calls. hashFlowV4 and hashFlowV6 (shared/flow-hash.ts) compute the same values;
// inside the fast path V8 did not inline their murmur3Round calls (callgrind: hashFlowV6 with its ten
// mixRound calls about 420 instructions a packet). test/fused-parse-mux.test.ts holds them to the same values.
import { murmur3Finish } from './flow-hash.js';

const C1 = 0xcc9e2d51;
const C2 = 0x1b873593;

/** hashFlowV4(src, dst, proto, sport, dport, 5, seed), `ports` being (sport << 16) | dport; any int32 or uint32 forms. */
export function flowHash5v4(src: number, dst: number, proto: number, ports: number, seed: number): number {
  let h = seed | 0;
  let k = Math.imul(src | 0, C1);
  k = Math.imul((k << 15) | (k >>> 17), C2);
  h ^= k;
  h = (h << 13) | (h >>> 19);
  h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  k = Math.imul(dst | 0, C1);
  k = Math.imul((k << 15) | (k >>> 17), C2);
  h ^= k;
  h = (h << 13) | (h >>> 19);
  h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  k = Math.imul(proto & 0xff, C1);
  k = Math.imul((k << 15) | (k >>> 17), C2);
  h ^= k;
  h = (h << 13) | (h >>> 19);
  h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  k = Math.imul(ports | 0, C1);
  k = Math.imul((k << 15) | (k >>> 17), C2);
  h ^= k;
  h = (h << 13) | (h >>> 19);
  h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  return murmur3Finish(h, 16);
}

/**
 * hashFlowV6 of an IPv6 5-tuple from the MUX's flow key `k` (setKey6's layout: source words 0-3,
 * destination 4-7, protocol 8, (sport << 16) | dport 9): the key's ten words in order are the hash's.
 */
export function flowHash5v6Key(k: Uint32Array, seed: number): number {
  let h = seed | 0;
  for (let i = 0; i < 10; i++) {
    let w = Math.imul(k[i]! | 0, C1);
    w = Math.imul((w << 15) | (w >>> 17), C2);
    h ^= w;
    h = (h << 13) | (h >>> 19);
    h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  }
  return murmur3Finish(h, 40);
}

/**
 * copyPayload (shared/hot-path.ts) for a run shorter than WORD_COPY_MAX_LEN, eight bytes a turn: the same
 * bytes, little-endian 32-bit stores of four byte loads through `dstView` (a DataView over exactly `dst`),
 * the offsets kept int32 with `| 0` (no overflow checks; the loads' bounds checks remain). In the MUX's
 * encapsulate the four-byte loop took about 71 instructions a word (callgrind). The caller has checked
 * both ranges.
 */
export function copyShort(src: Uint8Array, srcOff: number, dst: Uint8Array, dstView: DataView, dstOff: number, len: number): void {
  let s = srcOff | 0;
  let d = dstOff | 0;
  const end = (srcOff + len) | 0;
  const end8 = (end - 7) | 0;
  for (; s < end8; s = (s + 8) | 0, d = (d + 8) | 0) {
    dstView.setUint32(d, src[s]! | (src[(s + 1) | 0]! << 8) | (src[(s + 2) | 0]! << 16) | (src[(s + 3) | 0]! << 24), true);
    dstView.setUint32(
      (d + 4) | 0,
      src[(s + 4) | 0]! | (src[(s + 5) | 0]! << 8) | (src[(s + 6) | 0]! << 16) | (src[(s + 7) | 0]! << 24),
      true,
    );
  }
  if (s < ((end - 3) | 0)) {
    dstView.setUint32(d, src[s]! | (src[(s + 1) | 0]! << 8) | (src[(s + 2) | 0]! << 16) | (src[(s + 3) | 0]! << 24), true);
    s = (s + 4) | 0;
    d = (d + 4) | 0;
  }
  for (; s < end; s = (s + 1) | 0, d = (d + 1) | 0) dst[d] = src[s]!;
}
