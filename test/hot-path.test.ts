// The data planes' hot-path helpers (docs/performance.md, "Where the data plane's time goes"): each fast
// form is checked against the plain one it replaces, on every length and offset that matters.
import { describe, expect, it } from 'vitest';
import { setFlagsFromString } from 'node:v8';
import { Counters } from '../shared/counters.js';
import { MUX_COUNTER_NAMES } from '../mux/data-plane.js';
import { HOST_COUNTER_NAMES } from '../host-agent/data-plane.js';
import { copyPayload, WORD_COPY_MAX_LEN } from '../shared/hot-path.js';
import { Rng } from './helpers/random.js';

setFlagsFromString('--allow-natives-syntax');
const hasFastProperties = new Function('o', 'return %HasFastProperties(o)') as (o: object) => boolean;

describe('counters', () => {
  it('keep their index in fast mode (a field load per counter, not a dictionary probe)', () => {
    expect(hasFastProperties(new Counters(MUX_COUNTER_NAMES).index)).toBe(true);
    expect(hasFastProperties(new Counters(HOST_COUNTER_NAMES).index)).toBe(true);
  });

  it('index every name at its position', () => {
    const c = new Counters(HOST_COUNTER_NAMES);
    HOST_COUNTER_NAMES.forEach((n, i) => expect(c.index[n]).toBe(i));
    expect(Object.isFrozen(c.index)).toBe(true);
  });
});

describe('copyPayload', () => {
  const rng = new Rng(0xc0b1);
  const src = rng.bytes(512);
  // the destination is a view at an odd offset in a larger buffer, as a pooled Buffer may be
  const backing = new Uint8Array(1024);
  const dst = backing.subarray(3, 3 + 600);
  const view = new DataView(dst.buffer, dst.byteOffset, dst.byteLength);

  it('equals a byte copy at every length 0..200, at even and odd offsets on both sides', () => {
    for (let len = 0; len <= 200; len++) {
      for (const srcOff of [0, 1, 2, 3, 14, 17]) {
        for (const dstOff of [0, 1, 3, 64, 85]) {
          backing.fill(0xa5);
          const want = backing.slice();
          for (let i = 0; i < len; i++) want[3 + dstOff + i] = src[srcOff + i]!;
          copyPayload(src, srcOff, dst, view, dstOff, len);
          expect(backing, `len ${len}, src ${srcOff}, dst ${dstOff}`).toEqual(want);
        }
      }
    }
  });

  it('switches to set() at WORD_COPY_MAX_LEN (both sides of it are covered above)', () => {
    expect(WORD_COPY_MAX_LEN).toBeGreaterThan(0);
    expect(WORD_COPY_MAX_LEN).toBeLessThan(200);
  });
});
