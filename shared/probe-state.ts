// Health probe dampener: the rise/fall state machine of one probe target, as a pure function, and the
// shape of the health a host agent reports (docs/probes.md).
//
//   unknown --success--------------------------> up
//   unknown --downThreshold consecutive failures--> down
//   up      --downThreshold consecutive failures--> down
//   down    --upThreshold consecutive successes --> up
//
// Initial state `unknown`: no result yet. It counts as healthy (`isHealthyState`): a MUX keeps a
// backend that no host agent has reported down (mux/tables.ts ALL_HEALTHY), and a restarted host agent
// must not pull every backend out of rotation for upThreshold x interval while it learns again what it
// knew before. The first success confirms (unknown -> up at once: the backend already gets traffic, so
// there is nothing to dampen); failures need downThreshold in a row, exactly as from `up`.

export type ProbeState = 'unknown' | 'up' | 'down';
export type ProbeEvent = 'success' | 'failure';

export interface ProbeThresholds {
  /** Consecutive successes that bring a down target up (1..100). */
  readonly upThreshold: number;
  /** Consecutive failures that bring an up (or unknown) target down (1..100). */
  readonly downThreshold: number;
}

export interface ProbeFsm {
  readonly state: ProbeState;
  /** Consecutive successes so far (0 after a failure). */
  readonly successes: number;
  /** Consecutive failures so far (0 after a success). */
  readonly failures: number;
}

export interface ProbeStep {
  readonly next: ProbeFsm;
  /** The state changed (counters alone changing is not a change). */
  readonly changed: boolean;
  /** Why the state is what it is after this event, in words (for logs and status). */
  readonly reason: string;
}

export const INITIAL_PROBE_FSM: ProbeFsm = Object.freeze({ state: 'unknown', successes: 0, failures: 0 });

/** Counters saturate here, so a target that stays up for years does not grow a huge number. */
export const PROBE_COUNT_MAX = 1_000_000;

/** True when a target in this state may get new flows: up, or not probed yet. */
export function isHealthyState(s: ProbeState): boolean {
  return s !== 'down';
}

function plural(n: number, word: 'success' | 'failure'): string {
  return `${n} consecutive ${n === 1 ? word : word === 'success' ? 'successes' : 'failures'}`;
}

/** One probe result through the dampener. Pure: the same inputs always give the same step. */
export function stepProbeState(s: ProbeFsm, event: ProbeEvent, t: ProbeThresholds): ProbeStep {
  if (event === 'success') {
    const successes = Math.min(s.successes + 1, PROBE_COUNT_MAX);
    if (s.state === 'unknown') {
      return { next: { state: 'up', successes, failures: 0 }, changed: true, reason: 'first probe succeeded' };
    }
    if (s.state === 'down' && successes >= t.upThreshold) {
      return {
        next: { state: 'up', successes, failures: 0 },
        changed: true,
        reason: `${plural(successes, 'success')} (upThreshold ${t.upThreshold})`,
      };
    }
    const reason =
      s.state === 'up'
        ? `probe succeeded (${plural(successes, 'success')})`
        : `${plural(successes, 'success')} of ${t.upThreshold} needed to come up`;
    return { next: { state: s.state, successes, failures: 0 }, changed: false, reason };
  }
  const failures = Math.min(s.failures + 1, PROBE_COUNT_MAX);
  if (s.state !== 'down' && failures >= t.downThreshold) {
    return {
      next: { state: 'down', successes: 0, failures },
      changed: true,
      reason: `${plural(failures, 'failure')} (downThreshold ${t.downThreshold})`,
    };
  }
  const reason =
    s.state === 'down'
      ? `probe failed (${plural(failures, 'failure')})`
      : `${plural(failures, 'failure')} of ${t.downThreshold} needed to go down`;
  return { next: { state: s.state, successes: 0, failures }, changed: false, reason };
}

// ---------------------------------------------------------------------------------------------
// What a host agent reports (GET /status `probes`, and the health callback toward the controller)

export interface ProbeStatus {
  /** The nic probed (its port is on the reporting host). */
  readonly nic: string;
  /** The probe's name in the config; rules name it. */
  readonly probe: string;
  /** Which of the nic's addresses was probed: a rule of that family uses the probe. */
  readonly family: 4 | 6;
  /** `192.0.2.10:80`, `[2001:db8:d::10]:80`. */
  readonly target: string;
  readonly state: ProbeState;
  /** isHealthyState(state): may get new flows. */
  readonly healthy: boolean;
  /** When the state last changed (ISO 8601), or when probing started. */
  readonly since: string;
  /** The last probe's result, or null before the first. */
  readonly lastResult: ProbeEvent | null;
  /** What the last probe saw: `http 200`, `syn-ack`, `http 503`, `refused`, `reset`, `timeout`, ... */
  readonly detail: string;
  /** Why the state is what it is (the dampener's reason at the last change). */
  readonly reason: string;
  /** Consecutive successes / failures (what the thresholds compare). */
  readonly successes: number;
  readonly failures: number;
  /** Round-trip time of the last successful probe, ms; null if none. */
  readonly rttMs: number | null;
}

/** One (nic, probe) as the controller takes it (runtime/policy-client.ts ProbeResult). */
export interface NicProbeHealth {
  readonly nic: string;
  readonly probe: string;
  readonly state: ProbeState;
  readonly detail: string;
}

/**
 * Health per (nic, probe), as the controller and the MUX's HealthView take it today (they do not tell
 * address families apart): down when any probed family of the nic is down, up when every one is up,
 * unknown otherwise (which counts as healthy). The detail names the family when there are several.
 */
export function aggregateByNicProbe(results: readonly ProbeStatus[]): NicProbeHealth[] {
  const groups = new Map<string, ProbeStatus[]>();
  for (const r of results) {
    const k = `${r.nic}/${r.probe}`;
    const g = groups.get(k);
    if (g === undefined) groups.set(k, [r]);
    else g.push(r);
  }
  const out: NicProbeHealth[] = [];
  for (const g of groups.values()) {
    const state: ProbeState = g.some((r) => r.state === 'down') ? 'down' : g.every((r) => r.state === 'up') ? 'up' : 'unknown';
    // the families that decide the state come first in the detail
    const deciding = g.filter((r) => r.state === state);
    const rest = g.filter((r) => r.state !== state);
    const detail = g.length === 1 ? g[0]!.detail : [...deciding, ...rest].map((r) => `ipv${r.family} ${r.state}: ${r.detail}`).join('; ');
    out.push({ nic: g[0]!.nic, probe: g[0]!.probe, state, detail });
  }
  return out;
}
