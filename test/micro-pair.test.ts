// scripts/bench/micro-pair.ts's summary over processes: per path the median of each figure over the
// processes (the middle one, or the mean of the two middle ones for an even count), the min-max of the
// ratios, the net figures only for paths that have them, and a refusal when processes timed different
// paths. The expected values are worked out by hand below, not by the code under test.
import { describe, expect, it } from 'vitest';
import { summarize, type PairRow } from '../scripts/bench/micro-pair.js';

const row = (plane: string, path: string, oldNs: number, newNs: number, ratio: number, net?: [number, number, number]): PairRow => ({
  plane,
  path,
  oldNs,
  newNs,
  ratio,
  ratioQ1: ratio,
  ratioQ3: ratio,
  ...(net === undefined ? {} : { oldNetNs: net[0], newNetNs: net[1], netRatio: net[2] }),
});

describe('micro-pair summarize', () => {
  it('takes the median over processes and the min-max of the ratios', () => {
    // four processes; the ratios of path 'mux udp4' sorted: 0.90 1.00 1.10 1.30 -> median (1.00 + 1.10) / 2
    const p = [
      [row('mux', 'udp4', 100, 110, 1.1), row('host-in', 'udp6', 200, 180, 0.9, [150, 130, 0.87])],
      [row('mux', 'udp4', 120, 108, 0.9), row('host-in', 'udp6', 210, 200, 0.95, [160, 150, 0.94])],
      [row('mux', 'udp4', 110, 110, 1.0), row('host-in', 'udp6', 190, 190, 1.0, [140, 140, 1.0])],
      [row('mux', 'udp4', 130, 169, 1.3), row('host-in', 'udp6', 220, 187, 0.85, [170, 137, 0.81])],
    ];
    const [mux, host] = summarize(p);
    expect(mux!.plane).toBe('mux');
    expect(mux!.path).toBe('udp4');
    expect(mux!.ratio).toBeCloseTo(1.05, 12);
    expect(mux!.ratioMin).toBe(0.9);
    expect(mux!.ratioMax).toBe(1.3);
    expect(mux!.oldNs).toBeCloseTo(115, 12); // 100 110 120 130
    expect(mux!.newNs).toBeCloseTo(110, 12); // 108 110 110 169
    expect(mux!.netRatio).toBeUndefined();
    expect(mux!.oldNetNs).toBeUndefined();
    expect(host!.ratio).toBeCloseTo(0.925, 12); // 0.85 0.90 0.95 1.00
    expect(host!.ratioMin).toBe(0.85);
    expect(host!.ratioMax).toBe(1.0);
    expect(host!.oldNetNs).toBeCloseTo(155, 12); // 140 150 160 170
    expect(host!.newNetNs).toBeCloseTo(138.5, 12); // 130 137 140 150
    expect(host!.netRatio).toBeCloseTo(0.905, 12); // 0.81 0.87 0.94 1.00
  });

  it('takes the middle value for an odd count', () => {
    const p = [[row('mux', 'tcp6', 3, 2, 0.7)], [row('mux', 'tcp6', 1, 1, 1.2)], [row('mux', 'tcp6', 2, 5, 1.0)]]; // the min first, the max second
    const [s] = summarize(p);
    expect(s!.ratio).toBe(1.0);
    expect(s!.oldNs).toBe(2);
    expect(s!.newNs).toBe(2);
    expect([s!.ratioMin, s!.ratioMax]).toEqual([0.7, 1.2]);
  });

  it('refuses processes that timed other paths, or none', () => {
    const a = [row('mux', 'udp4', 1, 1, 1), row('mux', 'tcp4', 1, 1, 1)];
    expect(() => summarize([a, [a[1]!, a[0]!]])).toThrow(/process 1 timed other paths/);
    expect(() => summarize([a, [a[0]!]])).toThrow(/1 rows against 2/);
    expect(() => summarize([])).toThrow(/no process/);
  });
});
