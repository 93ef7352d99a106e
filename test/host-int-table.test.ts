import { describe, expect, it } from 'vitest';
import { IntTable } from '../host-agent/tables.js';

// IntTable replaces Maps keyed by int32 on the inbound path (peers, VNIs): it must answer exactly
// as a Map would, for keys it holds and keys it does not.
describe('IntTable', () => {
  // a seeded generator (xorshift32), so that a failure repeats
  let seed = 0x2545f491;
  const rand = (): number => {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return seed | 0;
  };

  it('finds what a Map finds, through growth, for random int32 keys held and not', () => {
    for (let round = 0; round < 20; round++) {
      const t = new IntTable<number>();
      const m = new Map<number, number>();
      const n = 1 + ((rand() >>> 0) % 500);
      // keys of every shape: any int32, small ones (VNIs, protocol << 16 | port), 0 and -1 (an empty
      // slot's key is 0), values that are 0
      const keyOf = (): number => {
        const r = (rand() >>> 0) % 4;
        return r === 0 ? rand() : r === 1 ? (rand() >>> 0) % 64 : r === 2 ? ((rand() >>> 0) % 3) - 1 : (6 << 16) | (rand() & 0xffff) | 0;
      };
      for (let i = 0; i < n; i++) {
        const k = keyOf();
        const v = (rand() >>> 0) % 7;
        t.set(k, v);
        m.set(k, v);
      }
      expect(t.size).toBe(m.size);
      for (const [k, v] of m) expect(t.get(k)).toBe(v);
      for (let i = 0; i < 2000; i++) {
        const k = keyOf();
        expect(t.get(k)).toBe(m.get(k));
      }
    }
  });

  it('takes an unsigned key as its int32, and tells 0 from an empty slot', () => {
    const t = new IntTable<string>();
    expect(t.get(0)).toBeUndefined();
    t.set(0xc0a80001, 'a'); // 192.168.0.1: set takes it as int32
    expect(t.get(0xc0a80001 | 0)).toBe('a');
    expect(t.get(0)).toBeUndefined();
    t.set(0, 'z');
    expect(t.get(0)).toBe('z');
    t.set(0, 'y'); // replaced, not added
    expect(t.get(0)).toBe('y');
    expect(t.size).toBe(2);
  });
});
