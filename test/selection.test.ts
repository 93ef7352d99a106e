import { describe, expect, it } from 'vitest';
import { MAGLEV_EMPTY } from '../shared/maglev.js';
import { buildPoolTable, selectCandidates, type ExclusionReason, type PoolTable, type SelectionBackend } from '../shared/selection.js';

const M = 65537;

/** A backend that is enabled, healthy, not drained, priority 1, weight 50, unless overridden. */
function be(id: string, over: Partial<SelectionBackend> = {}): SelectionBackend {
  return { id, enabled: true, healthy: true, drained: false, priority: 1, weight: 50, ...over };
}

const ids = (backends: readonly SelectionBackend[], idx: readonly number[]): string[] => idx.map((i) => backends[i]!.id);
const reasonsById = (
  backends: readonly SelectionBackend[],
  ex: readonly { index: number; reason: ExclusionReason }[],
): Record<string, ExclusionReason> => Object.fromEntries(ex.map((e) => [backends[e.index]!.id, e.reason]));

/** Input index owning each slot (or -1 for EMPTY). */
function slotOwners(p: PoolTable): Int32Array {
  const out = new Int32Array(p.table.size);
  for (let s = 0; s < p.table.size; s++) {
    const m = p.table.slots[s]!;
    out[s] = m === MAGLEV_EMPTY ? -1 : p.memberIndex[m]!;
  }
  return out;
}

/** Slot share per input index. */
function shares(p: PoolTable, n: number): number[] {
  const c = new Array<number>(n).fill(0);
  for (const o of slotOwners(p)) if (o >= 0) c[o]!++;
  return c.map((x) => x / p.table.size);
}

// The decision flow of Azure Front Door's "Traffic routing methods to origin" article, step by step,
// each step adding its rule to the previous origins.
describe('Azure Front Door decision flow examples', () => {
  // 1. Six origins A-F; C unhealthy, E disabled -> A, B, D, F available.
  const step1 = ['A', 'B', 'C', 'D', 'E', 'F'].map((id) => be(id, { healthy: id !== 'C', enabled: id !== 'E' }));
  // 2. A, B, D priority 1 and F priority 2 -> A, B, D.
  const step2 = step1.map((b) => (b.id === 'F' ? { ...b, priority: 2 } : b));
  // 3. Latency A 15 ms, B 30 ms, D 60 ms, sensitivity 30 ms -> A, B (D is beyond 30 ms of A).
  const lat: Record<string, number> = { A: 15, B: 30, D: 60 };
  const step3 = step2.map((b) => (b.id in lat ? { ...b, latencyMs: lat[b.id]! } : b));

  interface Case {
    name: string;
    backends: SelectionBackend[];
    sensitivity: number;
    level: number | null;
    candidates: string[];
    excluded: Record<string, ExclusionReason>;
  }
  const cases: Case[] = [
    {
      name: '1. available origins',
      backends: step1,
      sensitivity: 0,
      level: 1,
      candidates: ['A', 'B', 'D', 'F'],
      excluded: { C: 'unhealthy', E: 'disabled' },
    },
    {
      name: '2. priority',
      backends: step2,
      sensitivity: 0,
      level: 1,
      candidates: ['A', 'B', 'D'],
      excluded: { C: 'unhealthy', E: 'disabled', F: 'lower_priority' },
    },
    {
      name: '3. latency band',
      backends: step3,
      sensitivity: 30,
      level: 1,
      candidates: ['A', 'B'],
      excluded: { C: 'unhealthy', D: 'outside_latency_band', E: 'disabled', F: 'lower_priority' },
    },
    {
      name: '3b. default sensitivity 0 keeps only the fastest',
      backends: step3,
      sensitivity: 0,
      level: 1,
      candidates: ['A'],
      excluded: { B: 'outside_latency_band', C: 'unhealthy', D: 'outside_latency_band', E: 'disabled', F: 'lower_priority' },
    },
  ];

  it.each(cases)('$name', (c) => {
    const sel = selectCandidates(c.backends, c.sensitivity);
    expect(sel.level).toBe(c.level);
    expect(ids(c.backends, sel.candidates)).toEqual(c.candidates);
    expect(reasonsById(c.backends, sel.excluded)).toEqual(c.excluded);
    // every input index appears exactly once, in ascending order within each list
    const all = [...sel.candidates, ...sel.excluded.map((e) => e.index)].sort((a, b) => a - b);
    expect(all).toEqual(c.backends.map((_, i) => i));
    expect(sel.excluded.map((e) => e.index)).toEqual([...sel.excluded.map((e) => e.index)].sort((a, b) => a - b));
  });

  it.each([
    [3, 7],
    [5, 8], // the article's own example: 5:8
  ])('4. weights %i:%i give slot shares within 1 point', (wa, wb) => {
    const backends = step3.map((b) => (b.id === 'A' ? { ...b, weight: wa } : b.id === 'B' ? { ...b, weight: wb } : b));
    const p = buildPoolTable(backends, { latencySensitivityMs: 30 });
    expect(p.level).toBe(1);
    const sh = shares(p, backends.length);
    expect(Math.abs(sh[0]! - wa / (wa + wb))).toBeLessThan(0.01);
    expect(Math.abs(sh[1]! - wb / (wa + wb))).toBeLessThan(0.01);
    expect(sh[0]! + sh[1]!).toBe(1); // C, D, E, F own nothing
  });

  it('4. the table covers the whole level (A-E), with only the candidates owning slots', () => {
    const p = buildPoolTable(step3, { latencySensitivityMs: 30 });
    expect(p.table.members).toEqual(['A', 'B', 'C', 'D', 'E']);
    expect(Array.from(p.memberIndex)).toEqual([0, 1, 2, 3, 4]);
    expect(Array.from(p.table.counts).map((c) => c > 0)).toEqual([true, true, false, false, false]);
    expect(p.selection).toEqual(selectCandidates(step3, 30));
  });
});

describe('selectCandidates rules', () => {
  it('reports the first failing rule: disabled, then unhealthy, then drained', () => {
    const bs = [
      be('dis-unh-dra', { enabled: false, healthy: false, drained: true }),
      be('unh-dra', { healthy: false, drained: true }),
      be('dra', { drained: true }),
      be('ok'),
    ];
    const sel = selectCandidates(bs);
    expect(reasonsById(bs, sel.excluded)).toEqual({ 'dis-unh-dra': 'disabled', 'unh-dra': 'unhealthy', dra: 'drained' });
    expect(ids(bs, sel.candidates)).toEqual(['ok']);
  });

  it('the best level is the lowest number that has an eligible backend, not the lowest configured', () => {
    const bs = [
      be('p1', { priority: 1, healthy: false }),
      be('p3a', { priority: 3 }),
      be('p3b', { priority: 3 }),
      be('p5', { priority: 5 }),
    ];
    const sel = selectCandidates(bs);
    expect(sel.level).toBe(3);
    expect(ids(bs, sel.candidates)).toEqual(['p3a', 'p3b']);
    expect(reasonsById(bs, sel.excluded)).toEqual({ p1: 'unhealthy', p5: 'lower_priority' });
  });

  it('backends without a measurement stay in the band', () => {
    const bs = [be('fast', { latencyMs: 5 }), be('slow', { latencyMs: 50 }), be('unknown')];
    const sel = selectCandidates(bs, 10);
    expect(ids(bs, sel.candidates)).toEqual(['fast', 'unknown']);
    expect(reasonsById(bs, sel.excluded)).toEqual({ slow: 'outside_latency_band' });
  });

  it('no measurements at all keeps the whole level', () => {
    const bs = [be('a'), be('b'), be('c')];
    expect(selectCandidates(bs).candidates).toEqual([0, 1, 2]);
  });

  it('the band is inclusive and measured from the fastest eligible backend of the level only', () => {
    const bs = [
      be('down-fastest', { latencyMs: 1, healthy: false }),
      be('other-level', { latencyMs: 2, priority: 2 }),
      be('a', { latencyMs: 20 }),
      be('b', { latencyMs: 30 }),
      be('c', { latencyMs: 30.001 }),
    ];
    const sel = selectCandidates(bs, 10);
    expect(ids(bs, sel.candidates)).toEqual(['a', 'b']);
    expect(reasonsById(bs, sel.excluded)).toEqual({
      'down-fastest': 'unhealthy',
      'other-level': 'lower_priority',
      c: 'outside_latency_band',
    });
  });

  it('ties at the fastest latency all stay with sensitivity 0', () => {
    const bs = [be('a', { latencyMs: 7 }), be('b', { latencyMs: 7 }), be('c', { latencyMs: 8 })];
    expect(ids(bs, selectCandidates(bs).candidates)).toEqual(['a', 'b']);
  });

  it('nothing eligible: level null, no candidates, every backend excluded with its reason', () => {
    const bs = [be('a', { enabled: false }), be('b', { healthy: false, priority: 2 }), be('c', { drained: true, priority: 5 })];
    const sel = selectCandidates(bs);
    expect(sel.level).toBeNull();
    expect(sel.candidates).toEqual([]);
    expect(reasonsById(bs, sel.excluded)).toEqual({ a: 'disabled', b: 'unhealthy', c: 'drained' });
    expect(selectCandidates([])).toEqual({ level: null, candidates: [], excluded: [] });
  });

  it.each([
    [{ priority: 0 }, /"x": priority must be an integer in 1\.\.5, got 0/],
    [{ priority: 6 }, /priority must be an integer in 1\.\.5, got 6/],
    [{ priority: 1.5 }, /priority must be an integer/],
    [{ latencyMs: -1 }, /"x": latencyMs must be a finite number >= 0/],
    [{ latencyMs: NaN }, /latencyMs must be a finite number/],
  ] as [Partial<SelectionBackend>, RegExp][])('rejects %o', (over, msg) => {
    expect(() => selectCandidates([be('ok'), be('x', over)])).toThrow(RangeError);
    expect(() => selectCandidates([be('ok'), be('x', over)])).toThrow(msg);
  });

  it('rejects a bad sensitivity', () => {
    expect(() => selectCandidates([be('a')], -1)).toThrow(RangeError);
    expect(() => selectCandidates([be('a')], Infinity)).toThrow(/latencySensitivityMs/);
  });
});

describe('buildPoolTable', () => {
  const N = 20;
  const p1 = Array.from({ length: N }, (_, i) => be(`backend-${i}`, { priority: 1 }));
  const p2 = Array.from({ length: 5 }, (_, i) => be(`backup-${i}`, { priority: 2 }));
  const pool = [...p1, ...p2];
  const base = buildPoolTable(pool);
  const baseOwners = slotOwners(base);

  it('uses the default size and maps table members back to input indices', () => {
    expect(base.table.size).toBe(M);
    expect(base.level).toBe(1);
    expect(Array.from(base.memberIndex)).toEqual(p1.map((_, i) => i));
    expect(base.table.members).toEqual(p1.map((b) => b.id));
    expect(buildPoolTable(pool, { size: 13 }).table.size).toBe(13);
  });

  it('equal weights: every priority-1 backend gets floor or ceil of M/N, priority 2 none', () => {
    const sh = shares(base, pool.length).map((s) => Math.round(s * M));
    for (let i = 0; i < N; i++) expect([Math.floor(M / N), Math.ceil(M / N)]).toContain(sh[i]);
    for (let i = N; i < pool.length; i++) expect(sh[i]).toBe(0);
  });

  function movedSlots(next: PoolTable): { changedIdx: Set<number>; moved: number } {
    const owners = slotOwners(next);
    const changedIdx = new Set<number>();
    let moved = 0;
    for (let s = 0; s < M; s++) {
      if (owners[s] !== baseOwners[s]) {
        moved++;
        changedIdx.add(baseOwners[s]!);
      }
    }
    return { changedIdx, moved };
  }

  it.each([
    ['unhealthy', { healthy: false }],
    ['disabled', { enabled: false }],
    ['drained', { drained: true }],
    ['outside_latency_band', { latencyMs: 100 }],
  ] as [ExclusionReason, Partial<SelectionBackend>][])("a change to %s inside a level moves only that backend's slots", (reason, over) => {
    const k = 7;
    // for the latency case give the others a measurement so that the band applies
    const next = pool.map((b, i) =>
      i === k ? { ...b, ...over } : reason === 'outside_latency_band' && i < N ? { ...b, latencyMs: 10 } : b,
    );
    const p = buildPoolTable(next, { latencySensitivityMs: 20 });
    expect(p.level).toBe(1);
    expect(reasonsById(next, p.selection.excluded)[`backend-${k}`]).toBe(reason);
    const { changedIdx, moved } = movedSlots(p);
    expect([...changedIdx]).toEqual([k]);
    expect(moved).toBe(Math.round(shares(base, pool.length)[k]! * M));
    expect(shares(p, pool.length)[k]).toBe(0);
  });

  it('drained gets no slots but stays a table member', () => {
    const next = pool.map((b, i) => (i === 3 ? { ...b, drained: true } : b));
    const p = buildPoolTable(next);
    expect(p.table.members).toContain('backend-3');
    expect(p.table.counts[p.table.members.indexOf('backend-3')]).toBe(0);
    expect(p.selection.excluded).toEqual(
      [...p2.map((_, j) => ({ index: N + j, reason: 'lower_priority' })), { index: 3, reason: 'drained' }].sort(
        (a, b) => a.index - b.index,
      ),
    );
  });

  it.each([
    ['unhealthy', { healthy: false }],
    ['disabled', { enabled: false }],
    ['drained', { drained: true }],
  ] as [string, Partial<SelectionBackend>][])('fails over to priority 2 when every priority-1 backend is %s, and back', (_name, over) => {
    const down = pool.map((b) => (b.priority === 1 ? { ...b, ...over } : b));
    const p = buildPoolTable(down);
    expect(p.level).toBe(2);
    expect(Array.from(p.memberIndex)).toEqual(p2.map((_, j) => N + j));
    const sh = shares(p, pool.length);
    for (let i = 0; i < N; i++) expect(sh[i]).toBe(0);
    for (let j = 0; j < p2.length; j++) expect(Math.abs(sh[N + j]! - 1 / p2.length)).toBeLessThan(1 / M + 1e-12);
    // recovery: the same table as before the failure, slot for slot
    const back = buildPoolTable(pool);
    expect(back.level).toBe(1);
    expect(slotOwners(back)).toEqual(baseOwners);
  });

  it('mixed failures inside priority 1 still serve from priority 1', () => {
    const mixed = pool.map((b, i) => (i < N - 1 ? { ...b, ...[{ healthy: false }, { enabled: false }, { drained: true }][i % 3] } : b));
    const p = buildPoolTable(mixed);
    expect(p.level).toBe(1);
    expect(p.selection.candidates).toEqual([N - 1]);
    expect(shares(p, pool.length)[N - 1]).toBe(1);
  });

  it('nothing available at any level: level null and every slot EMPTY', () => {
    const none = pool.map((b) => ({ ...b, healthy: false }));
    const p = buildPoolTable(none, { size: 13 });
    expect(p.level).toBeNull();
    expect(p.selection.level).toBeNull();
    expect(Array.from(p.table.slots)).toEqual(new Array(13).fill(MAGLEV_EMPTY));
    expect(p.memberIndex.length).toBe(0);
    expect(buildPoolTable([]).table.slots.every((s) => s === MAGLEV_EMPTY)).toBe(true);
  });

  it('does not depend on input order', () => {
    const reversed = [...pool].reverse();
    const p = buildPoolTable(reversed);
    const a = slotOwners(base);
    const b = slotOwners(p);
    for (let s = 0; s < M; s += 97) expect(reversed[b[s]!]!.id).toBe(pool[a[s]!]!.id);
  });

  it('does not mutate (frozen) inputs', () => {
    const frozen = Object.freeze(pool.map((b, i) => Object.freeze({ ...b, latencyMs: i })));
    const before = structuredClone(frozen);
    buildPoolTable(frozen, { latencySensitivityMs: 5, size: 13 });
    expect(frozen).toEqual(before);
  });

  it('rejects a weight outside 1..1000 (via the Maglev builder)', () => {
    expect(() => buildPoolTable([be('a', { weight: 0 })])).toThrow(/"a": weight must be an integer in 1\.\.1000/);
  });
});
