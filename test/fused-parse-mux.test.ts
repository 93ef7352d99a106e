// The MUX fast path's written-out flow hashes (shared/fused-parse-mux.ts) against the reference ones.
import { describe, expect, it } from 'vitest';
import { hashFlowV4, hashFlowV6 } from '../shared/flow-hash.js';
import { copyShort, flowHash5v4, flowHash5v6Key } from '../shared/fused-parse-mux.js';
import { copyPayload, WORD_COPY_MAX_LEN } from '../shared/hot-path.js';
import { Rng } from './helpers/random.js';

describe('the MUX fast path flow hashes', () => {
  it('flowHash5v4 equals hashFlowV4 (5-tuple) on random keys, addresses as uint32 or int32', () => {
    const r = new Rng(19);
    for (let n = 0; n < 20000; n++) {
      const src = r.u32();
      const dst = r.u32();
      const proto = n & 1 ? 6 : 17;
      const sport = r.int(65536);
      const dport = r.int(65536);
      const seed = r.u32();
      const want = hashFlowV4(src, dst, proto, sport, dport, 5, seed);
      expect(flowHash5v4(src, dst, proto, (sport << 16) | dport, seed)).toBe(want);
      expect(flowHash5v4(src | 0, dst | 0, proto, ((sport << 16) | dport) >>> 0, seed | 0)).toBe(want);
    }
  });

  it("flowHash5v6Key equals hashFlowV6 (5-tuple) over setKey6's layout", () => {
    const r = new Rng(20);
    const k = new Uint32Array(10);
    for (let n = 0; n < 20000; n++) {
      for (let i = 0; i < 8; i++) k[i] = r.u32();
      const proto = n & 1 ? 6 : 17;
      const sport = r.int(65536);
      const dport = r.int(65536);
      k[8] = proto;
      k[9] = (sport << 16) | dport;
      const seed = r.u32();
      expect(flowHash5v6Key(k, seed)).toBe(hashFlowV6(k, 0, k, 4, proto, sport, dport, 5, seed));
    }
  });
});

describe('the MUX fast path copy', () => {
  it('copyShort copies what copyPayload copies, at every length below WORD_COPY_MAX_LEN and odd offsets', () => {
    const r = new Rng(21);
    const src = new Uint8Array(200);
    for (let i = 0; i < src.length; i++) src[i] = r.int(256);
    for (let len = 0; len < WORD_COPY_MAX_LEN; len++)
      for (const so of [0, 1, 2, 3, 14, 37])
        for (const dof of [0, 1, 2, 3, 64, 85]) {
          const a = new Uint8Array(180).fill(0xa5);
          const b = new Uint8Array(180).fill(0xa5);
          copyPayload(src, so, a, new DataView(a.buffer), dof, len);
          copyShort(src, so, b, new DataView(b.buffer), dof, len);
          expect(b).toEqual(a);
        }
  });
});
