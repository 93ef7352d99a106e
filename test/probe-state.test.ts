// The probe dampener (shared/probe-state.ts) as tables: a start state, a run of events, the states and
// changes that must follow.
import { describe, expect, it } from 'vitest';
import {
  INITIAL_PROBE_FSM,
  PROBE_COUNT_MAX,
  aggregateByNicProbe,
  isHealthyState,
  stepProbeState,
  type ProbeEvent,
  type ProbeFsm,
  type ProbeState,
  type ProbeStatus,
  type ProbeThresholds,
} from '../shared/probe-state.js';

const S = 'success' as const;
const F = 'failure' as const;

/** Runs events through the dampener; returns the state after each and the indexes that changed it. */
function run(start: ProbeFsm, events: ProbeEvent[], t: ProbeThresholds) {
  let s = start;
  const states: ProbeState[] = [];
  const changes: number[] = [];
  const reasons: string[] = [];
  events.forEach((e, i) => {
    const step = stepProbeState(s, e, t);
    if (step.changed) {
      changes.push(i);
      reasons.push(step.reason);
    }
    expect(step.changed).toBe(step.next.state !== s.state);
    s = step.next;
    states.push(s.state);
  });
  return { states, changes, reasons, last: s };
}

const up = (successes = 1): ProbeFsm => ({ state: 'up', successes, failures: 0 });
const down = (failures = 2): ProbeFsm => ({ state: 'down', successes: 0, failures });

describe('probe dampener', () => {
  const table: [string, ProbeFsm, ProbeThresholds, ProbeEvent[], ProbeState[]][] = [
    ['unknown: the first success confirms up at once', INITIAL_PROBE_FSM, { upThreshold: 3, downThreshold: 2 }, [S], ['up']],
    [
      'unknown: downThreshold failures to go down',
      INITIAL_PROBE_FSM,
      { upThreshold: 2, downThreshold: 3 },
      [F, F, F],
      ['unknown', 'unknown', 'down'],
    ],
    [
      'unknown: a success in between restarts the failure count',
      INITIAL_PROBE_FSM,
      { upThreshold: 2, downThreshold: 2 },
      [F, S, F, F],
      ['unknown', 'up', 'up', 'down'],
    ],
    [
      'up: one failure is not enough with downThreshold 2',
      up(),
      { upThreshold: 2, downThreshold: 2 },
      [F, S, F, S],
      ['up', 'up', 'up', 'up'],
    ],
    ['up: two consecutive failures go down', up(), { upThreshold: 2, downThreshold: 2 }, [F, F, F], ['up', 'down', 'down']],
    ['up: downThreshold 1 goes down on the first failure', up(), { upThreshold: 1, downThreshold: 1 }, [F], ['down']],
    ['down: upThreshold consecutive successes come up', down(), { upThreshold: 2, downThreshold: 2 }, [S, S, S], ['down', 'up', 'up']],
    [
      'down: a failure restarts the success count (flapping stays down)',
      down(),
      { upThreshold: 2, downThreshold: 2 },
      [S, F, S, F, S, S],
      ['down', 'down', 'down', 'down', 'down', 'up'],
    ],
    ['down: upThreshold 1 comes up on the first success', down(), { upThreshold: 1, downThreshold: 5 }, [S], ['up']],
    [
      'a full cycle: up, down, up',
      up(),
      { upThreshold: 3, downThreshold: 2 },
      [F, F, S, S, S, F],
      ['up', 'down', 'down', 'down', 'up', 'up'],
    ],
    [
      'thresholds of 100',
      down(),
      { upThreshold: 100, downThreshold: 100 },
      Array<ProbeEvent>(100).fill(S),
      [...Array<ProbeState>(99).fill('down'), 'up'],
    ],
  ];
  it.each(table)('%s', (_name, start, t, events, want) => {
    expect(run(start, events, t).states).toEqual(want);
  });

  it('counts consecutive results and resets the other count', () => {
    const t = { upThreshold: 2, downThreshold: 3 };
    let s = stepProbeState(up(4), F, t).next;
    expect(s).toEqual({ state: 'up', successes: 0, failures: 1 });
    s = stepProbeState(s, F, t).next;
    expect(s).toEqual({ state: 'up', successes: 0, failures: 2 });
    s = stepProbeState(s, S, t).next;
    expect(s).toEqual({ state: 'up', successes: 1, failures: 0 });
  });

  it('says why, with the threshold that was reached', () => {
    const t = { upThreshold: 2, downThreshold: 2 };
    expect(stepProbeState(INITIAL_PROBE_FSM, S, t).reason).toBe('first probe succeeded');
    expect(stepProbeState({ state: 'up', successes: 0, failures: 1 }, F, t).reason).toBe('2 consecutive failures (downThreshold 2)');
    expect(stepProbeState({ state: 'down', successes: 1, failures: 0 }, S, t).reason).toBe('2 consecutive successes (upThreshold 2)');
    expect(stepProbeState(up(), F, t)).toMatchObject({ changed: false, reason: '1 consecutive failure of 2 needed to go down' });
    expect(stepProbeState(down(), S, t)).toMatchObject({ changed: false, reason: '1 consecutive success of 2 needed to come up' });
  });

  it('is pure: the input state is not changed, the same input gives the same step', () => {
    const s = Object.freeze({ state: 'up', successes: 3, failures: 0 } as ProbeFsm);
    const t = { upThreshold: 2, downThreshold: 2 };
    expect(stepProbeState(s, F, t)).toEqual(stepProbeState(s, F, t));
    expect(s).toEqual({ state: 'up', successes: 3, failures: 0 });
  });

  it('saturates its counters', () => {
    const s = stepProbeState({ state: 'up', successes: PROBE_COUNT_MAX, failures: 0 }, S, { upThreshold: 1, downThreshold: 1 }).next;
    expect(s.successes).toBe(PROBE_COUNT_MAX);
  });

  it('unknown and up are healthy, down is not', () => {
    expect([isHealthyState('unknown'), isHealthyState('up'), isHealthyState('down')]).toEqual([true, true, false]);
  });
});

describe('health per (nic, probe)', () => {
  const st = (nic: string, family: 4 | 6, state: ProbeState, detail = state === 'down' ? 'refused' : 'http 200'): ProbeStatus => ({
    nic,
    probe: 'http80',
    family,
    target: '',
    state,
    healthy: isHealthyState(state),
    since: '',
    lastResult: null,
    detail,
    reason: '',
    successes: 0,
    failures: 0,
    rttMs: null,
  });
  it('is down when any probed family is down, up when all are up, unknown otherwise', () => {
    expect(
      aggregateByNicProbe([
        st('h1vm1', 4, 'up'),
        st('h1vm1', 6, 'down'),
        st('h1vm2', 4, 'up'),
        st('h1vm2', 6, 'unknown', 'not probed yet'),
        st('h2vm1', 4, 'up'),
        st('h2vm1', 6, 'up'),
        st('h2vm2', 4, 'down'),
      ]),
    ).toEqual([
      { nic: 'h1vm1', probe: 'http80', state: 'down', detail: 'ipv6 down: refused; ipv4 up: http 200' },
      { nic: 'h1vm2', probe: 'http80', state: 'unknown', detail: 'ipv6 unknown: not probed yet; ipv4 up: http 200' },
      { nic: 'h2vm1', probe: 'http80', state: 'up', detail: 'ipv4 up: http 200; ipv6 up: http 200' },
      { nic: 'h2vm2', probe: 'http80', state: 'down', detail: 'refused' },
    ]);
  });
});
