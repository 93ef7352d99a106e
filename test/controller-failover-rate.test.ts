// Scenario 30's rate (scripts/scenarios/lib/controller-failover.ts ackRate): acknowledged changes per
// whole second of the run, counted by when each answer came; the median leaves out the driver's first and
// last whole second. The logs are built here second by second, the expected counts worked out by hand.
import { describe, expect, it } from 'vitest';
import { ackRate, type ChangeRecord } from '../scripts/scenarios/lib/controller-failover.js';

const T0 = 1_000_000;

/** `perSecond[k]` acknowledged answers in whole second k (each sent 100 ms before), then one answer in a partial second. */
function logOf(perSecond: readonly number[], failedIn: number | null = null): ChangeRecord[] {
  const out: ChangeRecord[] = [];
  let i = 0;
  const rec = (endMs: number, code: number): ChangeRecord => ({
    i: i++,
    nic: 'h1vm1',
    field: 'weight',
    value: i,
    code,
    generation: code === 0 ? i + 1 : null,
    changed: code === 0 ? true : null,
    startMs: Math.max(T0, endMs - 100),
    endMs,
    error: code === 0 ? null : 'socket hang up',
  });
  out.push({ ...rec(T0 + 10, 0), startMs: T0 }); // the first change sent at T0, answered in second 0
  perSecond.forEach((n, k) => {
    for (let j = 0; j < (k === 0 ? n - 1 : n); j++) out.push(rec(T0 + k * 1000 + 100 + j, 0));
  });
  if (failedIn !== null) out.push(rec(T0 + failedIn * 1000 + 900, 1));
  out.push(rec(T0 + perSecond.length * 1000 + 400, 0)); // a partial second at the end: never a bin
  return out;
}

describe('ackRate', () => {
  it('takes the median over the whole seconds without the first and the last', () => {
    // seconds: 10 (start), 48, 0 (election), 48, 48, 0 (election), 5 (stop); then a partial one
    const r = ackRate(logOf([10, 48, 0, 48, 48, 0, 5], 2));
    // the middle five, sorted: 0 0 48 48 48 -> 48 (all seven: 0 0 5 10 48 48 48 -> 10)
    expect(r).toMatchObject({ seconds: 5, median: 48, p10: 0, max: 48 });
    // 10+48+48+48+5 = 159 acknowledged, plus the partial second's one, over 7.4 s
    expect(r.overall).toBeCloseTo(160 / 7.4, 6);
  });

  it('keeps every second of a run shorter than five', () => {
    const r = ackRate(logOf([10, 40, 50, 20]));
    // 10 20 40 50 -> index 1: 20
    expect(r).toMatchObject({ seconds: 4, median: 20, p10: 10, max: 50 });
  });
});
