// The soak's timeline (scripts/soak/plan.ts): the periods at full scale, a scaled-down plan for
// CI, and every MUX restart where the plan can predict zero failures from it (docs/soak.md).
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_PROBE,
  FLAP_TAIL_S,
  flapProbeTiming,
  main,
  MIN_DURATION_S,
  MUX_START_ALLOWANCE_S,
  planSoak,
  warmupFor,
  type SoakPlan,
} from '../scripts/soak/plan.js';
import { labConfig } from './helpers/lab-config.js';

const opts = { flapNic: 'h1vm1', restartMux: 'mux2' };
const at = (p: SoakPlan, action: string) => p.events.filter((e) => e.action === action).map((e) => e.atS);

describe('planSoak', () => {
  it('10 minutes: a flap every 30 s (15 s down), one MUX restart about every 2 minutes, both kinds in turn, always the same MUX', () => {
    const p = planSoak(600, opts);
    expect(p.scale).toBe('full');
    expect(p.warmupS).toBe(60);
    expect(at(p, 'backend-stop')).toEqual(Array.from({ length: 19 }, (_, c) => 15 + 30 * c));
    expect(at(p, 'backend-start')).toEqual(Array.from({ length: 19 }, (_, c) => 30 + 30 * c));
    expect(p.restarts.map((r) => [r.kind, r.stopAtS, r.startAtS])).toEqual([
      ['in-down', 55, 57],
      ['in-up', 190, 192],
      ['in-down', 295, 297],
      ['in-up', 430, 432],
      ['in-down', 535, 537],
    ]);
    const gaps = p.restarts.slice(1).map((r, i) => r.stopAtS - p.restarts[i]!.stopAtS);
    for (const g of gaps) expect(Math.abs(g - 120)).toBeLessThanOrEqual(15);
    expect(new Set(p.events.filter((e) => e.action.startsWith('mux')).map((e) => e.target))).toEqual(new Set(['mux2']));
  });

  it('60 s (CI): two flaps and three restarts, in-down, in-up, in-down; a 12 s warm-up', () => {
    const p = planSoak(60, opts);
    expect(p.scale).toBe('short');
    expect(p.warmupS).toBe(12);
    expect(p.events.map((e) => `${e.atS} ${e.action}`)).toEqual([
      '5 backend-stop',
      '15 mux-stop',
      '17 mux-start',
      '20 backend-start',
      '30 mux-stop',
      '32 mux-start',
      '35 backend-stop',
      '45 mux-stop',
      '47 mux-start',
      '50 backend-start',
    ]);
    expect(p.restarts.map((r) => r.kind)).toEqual(['in-down', 'in-up', 'in-down']);
  });

  it('every restart lies in its window: after every connection placed under the old view closed, back before the view can change', () => {
    for (const d of [MIN_DURATION_S, 45, 60, 90, 299, 300, 600, 1800]) {
      const p = planSoak(d, opts);
      expect(p.restarts.length, `${d} s`).toBeGreaterThanOrEqual(1);
      expect(p.events.filter((e) => e.action === 'backend-stop').length, `${d} s`).toBeGreaterThanOrEqual(1);
      for (const r of p.restarts) {
        const s = p.leadS + r.cycle * p.flapPeriodS;
        const lastChange = r.kind === 'in-down' ? s + p.detectDownMaxMs / 1000 : s + p.flapDownS + p.detectUpMaxMs / 1000;
        const nextChange = r.kind === 'in-down' ? s + p.flapDownS + p.detectUpMinMs / 1000 : s + p.flapPeriodS + p.detectDownMinMs / 1000;
        expect(r.stopAtS).toBeGreaterThanOrEqual(lastChange + p.kaCloseMs / 1000);
        expect(r.startAtS + MUX_START_ALLOWANCE_S).toBeLessThanOrEqual(nextChange);
        expect(r.windowS).toEqual([lastChange + p.kaCloseMs / 1000, nextChange]);
        expect(r.startAtS + MUX_START_ALLOWANCE_S).toBeLessThanOrEqual(d);
      }
      const lastStart = Math.max(...at(p, 'backend-start'));
      expect(lastStart + FLAP_TAIL_S).toBeLessThanOrEqual(d);
      expect(p.events.map((e) => e.atS)).toEqual([...p.events.map((e) => e.atS)].sort((a, b) => a - b));
    }
  });

  it("each event's shortest distance after the one before: what its place in the cycle needs, never more than the plan's gap", () => {
    const p = planSoak(600, { flapNic: 'h1vm1', restartMux: 'mux2' });
    // probe 1000 ms x 2, push 500 ms: seen within 3.5 s, + 1 s; the in-down restart 10 s after the stop,
    // the in-up one 10 s after the start (25 s into the cycle); a MUX stays stopped 2 s; after a MUX's start
    // nothing to wait for (the driver runs events one after the other)
    const gaps = p.events.map((e, i) => [p.events[i - 1]?.action ?? '-', e.action, e.afterMs]);
    expect(gaps.slice(0, 9)).toEqual([
      ['-', 'backend-stop', 0],
      ['backend-stop', 'backend-start', 4500],
      ['backend-start', 'backend-stop', 4500],
      ['backend-stop', 'mux-stop', 10_000],
      ['mux-stop', 'mux-start', 2000],
      ['mux-start', 'backend-start', 0],
      ['backend-start', 'backend-stop', 4500],
      ['backend-stop', 'backend-start', 4500],
      ['backend-start', 'backend-stop', 4500],
    ]);
    const inUp = p.events.findIndex((e, i) => e.action === 'mux-stop' && p.events[i - 1]!.action === 'backend-start');
    expect([p.events[inUp]!.afterMs, p.events[inUp + 1]!.afterMs, p.events[inUp + 2]!]).toMatchObject([
      10_000,
      2000,
      { action: 'backend-stop', afterMs: 0 },
    ]);
    for (const [i, e] of p.events.entries()) if (i > 0) expect(e.afterMs).toBeLessThanOrEqual((e.atS - p.events[i - 1]!.atS) * 1000);
  });

  it('the bounds follow the probe and the keep-alive life', () => {
    const p = planSoak(600, opts);
    expect(p.probe).toEqual(DEFAULT_PROBE);
    expect([p.detectDownMaxMs, p.detectUpMaxMs, p.detectDownMinMs, p.kaCloseMs]).toEqual([3500, 3500, 1000, 5750]);
    // longer keep-alive lives leave no room for an in-down restart: refused, not silently squeezed
    expect(() => planSoak(600, { ...opts, keepAliveLifeS: [3, 8] })).toThrow(/no room for an in-down MUX restart/);
    expect(() => planSoak(600, { ...opts, probe: { intervalMs: 5000, upThreshold: 2, downThreshold: 2 } })).toThrow(/no room/);
  });

  it('refuses runs too short for one flap and one restart', () => {
    expect(() => planSoak(MIN_DURATION_S - 1, opts)).toThrow(RangeError);
    expect(() => planSoak(59.5, opts)).toThrow(RangeError);
  });

  it('warm-up: 20 % of the run within 12..60 s, or as given', () => {
    expect([30, 60, 100, 300, 600, 3600].map(warmupFor)).toEqual([12, 12, 20, 60, 60, 60]);
    expect(planSoak(600, { ...opts, warmupS: 300 }).warmupS).toBe(300);
    expect(() => planSoak(600, { ...opts, warmupS: 600 })).toThrow(/warm-up/);
  });

  it('takes the probe timing of the flapping nic from the config', () => {
    expect(flapProbeTiming(labConfig(), 'h1vm1')).toEqual({ intervalMs: 1000, upThreshold: 2, downThreshold: 2 });
    const slow = labConfig((raw) => {
      raw.probes[0].intervalMs = 2000;
      raw.probes[0].downThreshold = 3;
    });
    expect(flapProbeTiming(slow, 'h2vm2')).toEqual({ intervalMs: 2000, upThreshold: 2, downThreshold: 3 });
    expect(() =>
      flapProbeTiming(
        labConfig((raw) => {
          for (const v of raw.vips) for (const r of v.rules) delete r.probe;
        }),
        'h1vm1',
      ),
    ).toThrow(/no probed rule/);
  });

  it('the CLI refuses a bad duration with exit 2', () => {
    const err: string[] = [];
    const w = process.stderr.write;
    process.stderr.write = ((s: string) => {
      err.push(s);
      return true;
    }) as typeof process.stderr.write;
    try {
      expect(main(['--duration-s', '10m'])).toBe(2);
      expect(main(['--duration-s', '20'])).toBe(2);
    } finally {
      process.stderr.write = w;
    }
    expect(err.join('')).toContain('--duration-s must be a whole number of seconds');
  });
});
