// The shared flow table (shared/flow-table.ts: the MUX's tables, and the host agent's under
// host-agent/flow-table.ts) against a plain Map of the same entries, through random operations with a
// deliberately weak hash (8 values: long probe runs, and many keys with the same hash that differ in one
// word only), for the three key widths in use (4: MUX IPv4, 10: MUX IPv6, 11: host agent). The Map is
// the independent source: whatever the table's probing, comparison, growth and backward-shift deletion
// do, every answer must be the Map's.
import { describe, expect, it } from 'vitest';
import { FlowTable } from '../shared/flow-table.js';

function xorshift32(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return x >>> 0;
  };
}

interface Entry {
  value: number;
  expiresAt: number;
}

describe('flow table against a Map', () => {
  it.each([4, 10, 11])('%i-word keys: lookup, peek, insert, remove and sweep agree', (kw) => {
    const rnd = xorshift32(1000 + kw);
    const limit = { max: 3000, count: 0 };
    const t = new FlowTable(kw, limit);
    const model = new Map<string, Entry>();
    // a pool of keys: groups that differ in a single word (any of them), so equal hashes and near-equal keys are common
    const keys: number[][] = [];
    for (let g = 0; g < 400; g++) {
      const base = Array.from({ length: kw }, () => rnd());
      keys.push(base);
      for (let v = 0; v < 4; v++) {
        const k = [...base];
        const w = rnd() % kw;
        k[w] = (k[w]! ^ (1 << (rnd() % 32))) >>> 0;
        keys.push(k);
      }
    }
    const weakHash = (k: number[]) => (k[0]! ^ k[kw - 1]!) & 7;
    const setKey = (k: number[]) => t.key.set(k);
    let now = 10;
    const live = (e: Entry | undefined) => e !== undefined && e.expiresAt > now;
    for (let op = 0; op < 60_000; op++) {
      if (op % 500 === 0) now++;
      const k = keys[rnd() % keys.length]!;
      const id = k.join(',');
      const h = weakHash(k);
      setKey(k);
      const e = model.get(id);
      switch (rnd() % 5) {
        case 0: {
          const expiresAt = now + 1 + (rnd() % 5);
          const v = t.lookup(h, now, expiresAt);
          if (live(e)) {
            expect(v).toBe(e!.value);
            e!.expiresAt = expiresAt;
          } else {
            expect(v).toBe(-1);
            model.delete(id); // an expired entry is removed on the spot
          }
          break;
        }
        case 1:
          expect(t.peek(h, now)).toBe(live(e) ? e!.value : -1);
          break;
        case 2:
        case 3: {
          const value = rnd() & 0xffffff;
          const expiresAt = now + 1 + (rnd() % 5);
          const ok = t.insert(h, value, expiresAt);
          if (e !== undefined) {
            expect(ok).toBe(true); // a replace never fails, expired or not
            model.set(id, { value, expiresAt });
          } else {
            expect(ok).toBe(model.size < limit.max);
            if (ok) model.set(id, { value, expiresAt });
          }
          break;
        }
        default:
          expect(t.remove(h)).toBe(e !== undefined);
          model.delete(id);
      }
      if (op % 7000 === 6999) {
        const removed = t.sweep(now, 1 << 20);
        let expired = 0;
        for (const [kid, m] of model)
          if (m.expiresAt <= now) {
            model.delete(kid);
            expired++;
          }
        expect(removed).toBe(expired);
      }
      expect(t.size).toBe(model.size);
    }
    // every key's final answer, and the table grew past its first capacity along the way
    for (const k of keys) {
      setKey(k);
      const e = model.get(k.join(','));
      expect(t.peek(weakHash(k), now)).toBe(live(e) ? e!.value : -1);
    }
    expect(t.capacity).toBeGreaterThan(1024);
    expect(limit.count).toBe(model.size);
  });
});
