// The MUX main thread's event-loop watch (mux/loop-stall.ts): a tick late by STALL_MS or more is a stall
// (logged, counted, the longest kept); a tick on time or a little late is not.
import { describe, expect, it } from 'vitest';
import { LoopStallWatch, STALL_MS } from '../mux/loop-stall.js';

describe('LoopStallWatch', () => {
  it('counts a tick late by STALL_MS or more as a stall, keeps the longest, and ignores small delays', () => {
    let t = 0;
    const w = new LoopStallWatch(() => t);
    w.start();
    try {
      t += 100;
      w.tick(); // on time
      t += 100 + STALL_MS - 1;
      w.tick(); // just under
      expect(w.stalls).toBe(0);
      t += 100 + 4120;
      w.tick(); // the 4 s hold of scenario 44's heartbeat
      t += 100 + STALL_MS;
      w.tick();
      expect(w.stalls).toBe(2);
      expect(w.longestMs).toBe(4120);
      expect(w.status()).toMatchObject({ stalls: 2, longestStallMs: 4120 });
    } finally {
      w.stop();
    }
  });
});
