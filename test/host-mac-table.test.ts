import { describe, expect, it } from 'vitest';
import { MacTable, macKey } from '../host-agent/tables.js';

// MacTable replaces a Map keyed by macKey on the inbound path: it must answer exactly as that Map would.
describe('MacTable', () => {
  const mac = (k: number): Uint8Array => {
    const b = new Uint8Array(6);
    // the first two bytes and the last four vary apart, so that halves collide across entries
    b[0] = (k * 37) & 0xff;
    b[1] = k & 1 ? 0xff : 0x02;
    b[2] = 0x80 | (k & 3);
    b[3] = (k >>> 2) & 0xff;
    b[4] = (k * 13) & 0xff;
    b[5] = k & 0xff;
    return b;
  };

  it('finds what a Map by macKey finds, through growth, for present and absent MACs', () => {
    const t = new MacTable<number>();
    const m = new Map<number, number>();
    for (let k = 0; k < 300; k++) {
      const a = mac(k);
      t.set(a, 0, k);
      m.set(macKey(a, 0), k);
      if (k % 3 === 0) {
        t.set(a, 0, -k); // replaced, not added
        m.set(macKey(a, 0), -k);
      }
    }
    expect(t.size).toBe(m.size);
    const frame = new Uint8Array(20);
    for (let k = 0; k < 600; k++) {
      frame.set(mac(k), 7);
      expect(t.get(frame, 7)).toBe(m.get(macKey(frame, 7)));
      expect(t.has(frame, 7)).toBe(m.has(macKey(frame, 7)));
    }
  });

  it('tells apart MACs that share either half', () => {
    const t = new MacTable<string>();
    t.set(Uint8Array.of(0x02, 0, 1, 2, 3, 4), 0, 'a');
    expect(t.get(Uint8Array.of(0x02, 0, 1, 2, 3, 4), 0)).toBe('a');
    expect(t.get(Uint8Array.of(0x03, 0, 1, 2, 3, 4), 0)).toBeUndefined();
    expect(t.get(Uint8Array.of(0x02, 0, 1, 2, 3, 5), 0)).toBeUndefined();
    expect(t.get(Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0xff, 0xff), 0)).toBeUndefined();
    // many entries with the same last four bytes: each is found as itself, and a first half not added is not
    const u = new MacTable<number>();
    for (let hi = 0; hi < 40; hi += 2) u.set(Uint8Array.of(hi, 0x11, 0xaa, 0xbb, 0xcc, 0xdd), 0, hi);
    for (let hi = 0; hi < 40; hi++) expect(u.get(Uint8Array.of(hi, 0x11, 0xaa, 0xbb, 0xcc, 0xdd), 0)).toBe(hi % 2 === 0 ? hi : undefined);
  });
});
