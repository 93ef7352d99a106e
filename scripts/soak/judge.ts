#!/usr/bin/env node
// The soak's judge (scripts/soak.sh, docs/soak.md): reads what one soak run left in its folder (the plan,
// the driver's events as they really happened, every request's record, the daemons' samples) and the
// MUXes' logs, and decides. Pure (judgeSoak: data in, verdict out); main() reads the files, writes
// result.json and summary.md into the run folder, prints the summary and exits 0 (pass) or 1.
//   node dist/scripts/soak/judge.js --run runs/soak/NAME --lab runs/lab/LAB
//
// The rules (docs/soak.md has the reasons):
//   requests   zero failed requests except the predicted ones. Predicted: a TCP request (new connection
//              or keep-alive) to the flapping backend that fails between its HTTP server's stop and the
//              moment every MUX has it out of its tables (plus 300 ms), with a refusal, a reset or a
//              close: the connections it held when it stopped, and new ones the Maglev table (all
//              healthy) sends to it before the probes and the controller take it out. "To the flapping
//              backend": the backend that answered the connection's previous request, or for a
//              connection that never got an answer, the one the all-healthy Maglev table names for its
//              5-tuple (computed from the config with shared/flow-hash.ts and mux/tables.ts, as the
//              MUXes do). Everything else (every UDP failure, every failure at a MUX restart) is
//              unpredicted. The predicted ones are counted per flap and bounded.
//   memory     per daemon process, after its warm-up: the median resident memory of the last window is
//              at most 10 % above the median of the first window (windows of 60 s, or a third of what
//              is left after the warm-up when that is shorter; a process with less than 30 s after its
//              warm-up is reported, not judged).
//   fds        per judged process: the median count of the last window is not above the first window's,
//              and the last window's maximum at most FD_SLACK above the first window's maximum.
//   daemons    none dies but the restarting MUX at its planned stops.
//   send errors every MUX and host agent was read (its /counters, every 2 s by the sampler, and once more
//              after the traffic) and no send_error_* counter ever moved from 0: no send the kernel
//              refused (a MUX's last 2 s before a planned stop are the only ones not seen).
//   plan       every event ran, within the traffic, and each MUX restart really lay where every open
//              connection was placed under the health view in force (from the MUXes' policy_applied
//              logs): otherwise the run did not test what it claims. Lateness against the plan is
//              reported, not judged: the driver slides a late event's followers (plan.ts afterMs) and
//              every prediction follows the events' real times.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { one, UsageError, type OptionSpec, type ParsedArgs } from '../../shared/args.js';
import { isMain, runCommand, type CommandSpec } from '../../runtime/command.js';
import { parseIpAddr } from '../../shared/addr.js';
import { formatConfigErrors, parseConfig, type SlbxConfig } from '../../shared/config.js';
import { oracleRule, type OracleRule } from '../oracle/expected-backend.js';
import type { SoakAction, SoakPlan } from './plan.js';
import type { TrafficKind, TrafficRecord } from './traffic.js';
import { sendErrorsOf, type CounterSample, type DaemonSample, type MachineSample } from './sample.js';

export const RSS_GROWTH_MAX = 0.1;
export const WINDOW_MAX_S = 60;
export const MIN_JUDGED_SPAN_S = 30;
export const FD_SLACK = 2;
/**
 * Events that started more than this late against the plan are listed in the summary (a busy machine:
 * the event before ran long). Not a failure: every check reads the events' real times.
 */
export const EVENT_LATE_NOTE_MS = 5000;
/** A predicted failure may end this long after the last MUX took the backend out (the RST's way back). */
export const PREDICT_SLACK_MS = 300;
/** A kind of the open-loop traffic must have at least this share of its planned requests. */
export const TRAFFIC_MIN_SHARE = 0.99;
/** Errors of a connection to a backend whose HTTP server stopped: refused, reset, closed. */
export const FLAP_ERRORS: readonly string[] = [
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'closed by the server',
  'closed before the response',
  'closed',
];

/** One line of events.jsonl: an event of the plan as the driver ran it (epoch ms). */
export interface RunEvent {
  atS: number;
  action: SoakAction;
  target: string;
  /** When the plan wanted it. */
  planned: number;
  /** When the driver started it: planned, or the plan's gap after the event before when that one ended late. */
  due?: number;
  t0: number;
  t1: number;
  ok: boolean;
  /** mux-stop: the PID stopped; mux-start: the new PID. */
  pid?: number | null;
}

export interface RunMeta {
  name: string;
  durationS: number;
  rate: number;
  keepAlive: number;
  /** Epoch ms: traffic start and end. */
  startMs: number;
  endMs: number;
  vip4: string;
  vip6: string;
  httpPort: number;
  [k: string]: unknown;
}

/** A MUX applying a controller policy whose health differs from what it had (from its log). */
export interface PolicyApplied {
  t: number;
  mux: string;
  down: string[];
  /** The first policy of its process (from the bootstrap config, not a change of view). */
  first: boolean;
}

/** A change of the health view: the first MUX applied it at `begin`, the last at `settled`. */
export interface ViewChange {
  down: string[];
  begin: number;
  settled: number;
}

export interface Check {
  name: string;
  ok: boolean;
  detail: string;
}

export interface KindTotals {
  total: number;
  ok: number;
  failed: number;
  predicted: number;
  unpredicted: number;
  planned: number | null;
}

export interface FlapResult {
  cycle: number;
  stopAt: number;
  startAt: number | null;
  /** From the stop until every MUX had the backend out (ms); null without logs. */
  detectDownMs: number | null;
  detectUpMs: number | null;
  windowMs: number;
  predicted: number;
  bound: number;
  byKind: Partial<Record<TrafficKind, number>>;
}

export interface RestartResult {
  index: number;
  kind: string;
  stopAt: number;
  startedAt: number;
  /** stop - (last view change settled + kaCloseMs): >= 0 means every connection open at the stop was placed under the view in force. */
  marginBeforeMs: number | null;
  /** next view change - back in the route: >= 0 means the view did not change during the restart. */
  marginAfterMs: number | null;
  failuresAround: number;
}

export interface SeriesResult {
  name: string;
  pid: number;
  firstT: number;
  lastT: number;
  samples: number;
  /** Judged, or why not. */
  judged: boolean;
  why: string | null;
  windowS: number | null;
  rssFirstKb: number | null;
  rssLastKb: number | null;
  rssMaxKb: number | null;
  growth: number | null;
  fdsFirst: number | null;
  fdsLast: number | null;
  fdsFirstMax: number | null;
  fdsLastMax: number | null;
  /** CPU seconds used while sampled, and the mean share of one core. */
  cpuS: number | null;
  cpuShare: number | null;
  /** It ended before the run did (a stop or a crash). */
  ended: boolean;
}

export interface FailureRecord {
  k: TrafficKind;
  t0: number;
  t1: number;
  src: string;
  sp: number | null;
  err: string | null;
  prev?: string | null;
  backend: string | null;
  why: string;
}

export interface SoakResult {
  verdict: 'pass' | 'fail';
  checks: Check[];
  totals: Record<TrafficKind, KindTotals>;
  flaps: FlapResult[];
  restarts: RestartResult[];
  series: SeriesResult[];
  machine: { busyMedian: number | null; busyP90: number | null; busyMax: number | null };
  /** How late the events started against the plan (ms), and those later than EVENT_LATE_NOTE_MS. */
  timing: { latestMs: number; late: { action: string; atS: number; lateMs: number }[] };
  predicted: FailureRecord[];
  unpredicted: FailureRecord[];
  views: ViewChange[] | null;
}

export interface JudgeInput {
  plan: SoakPlan;
  meta: RunMeta;
  events: RunEvent[];
  records: TrafficRecord[];
  samples: (DaemonSample | MachineSample)[];
  /** From the MUXes' logs; null when there are none (the judge then uses the plan's bounds). */
  policies: PolicyApplied[] | null;
  config: SlbxConfig;
  /**
   * The sampler's reads of the MUXes' and host agents' send_error_* counters (counters.jsonl) and their
   * counters after the traffic (counters-NODE.json); absent: not judged (runs from before they existed).
   */
  counters?: CounterSample[];
  finalCounters?: { name: string; sendErrors: Record<string, number> | null; error?: string }[];
}

const KINDS: readonly TrafficKind[] = ['http4', 'http6', 'udp4', 'udp6', 'ka4', 'ka6'];

export function median(xs: readonly number[]): number | null {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

function quantile(xs: readonly number[], q: number): number | null {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
}

/**
 * The backend the all-healthy Maglev table names for a TCP or UDP flow to a VIP: the independent oracle's
 * answer (scripts/oracle) from the config values, not the MUXes' code.
 */
export function maglevNamer(
  config: SlbxConfig,
): (rec: { src: string; sp: number | null; dst: string; dp: number; k: TrafficKind }) => string | null {
  const rules = new Map<string, OracleRule | null>();
  const ruleOf = (dst: string, proto: number, port: number): OracleRule | null => {
    const key = `${dst} ${proto} ${port}`;
    let r = rules.get(key);
    if (r === undefined) {
      try {
        r = oracleRule(config, dst, proto, port);
      } catch {
        r = null;
      }
      rules.set(key, r);
    }
    return r;
  };
  return (rec) => {
    const d = parseIpAddr(rec.dst);
    if (rec.sp === null || d === null) return null;
    return ruleOf(d.text, rec.k.startsWith('udp') ? 17 : 6, rec.dp)?.choose(rec.src, rec.sp) ?? null;
  };
}

/**
 * The changes of the health view, from the MUXes' policy_applied events: each process's first policy is
 * its start, not a change; the same down set applied by the other MUX belongs to the same change.
 */
export function viewChanges(policies: readonly PolicyApplied[]): ViewChange[] {
  const sorted = policies.filter((p) => !p.first).sort((a, b) => a.t - b.t);
  const out: ViewChange[] = [];
  let key = '';
  for (const p of sorted) {
    const k = [...p.down].sort().join(',');
    if (k !== key) {
      out.push({ down: [...p.down].sort(), begin: p.t, settled: p.t });
      key = k;
    } else if (out.length > 0) {
      out[out.length - 1]!.settled = p.t;
    }
  }
  return out;
}

/** policy_applied events from MUX log text (JSON lines); `first` marks the first of the file (its process's start). */
export function parsePolicyLog(text: string): PolicyApplied[] {
  const out: PolicyApplied[] = [];
  for (const line of text.split('\n')) {
    if (!line.includes('"policy_applied"')) continue;
    let o: { ts?: string; daemon?: string; event?: string; down?: string[] };
    try {
      o = JSON.parse(line);
    } catch {
      continue;
    }
    if (o.event !== 'policy_applied' || typeof o.ts !== 'string') continue;
    out.push({ t: Date.parse(o.ts), mux: o.daemon ?? '?', down: Array.isArray(o.down) ? o.down : [], first: out.length === 0 });
  }
  return out;
}

interface Flap {
  cycle: number;
  stop: RunEvent;
  start: RunEvent | null;
  downSettled: number;
  downFromLogs: boolean;
  upSettled: number | null;
}

export function judgeSoak(input: JudgeInput): SoakResult {
  const { plan, meta, events, records, samples, config } = input;
  const checks: Check[] = [];
  const check = (name: string, ok: boolean, detail: string) => {
    checks.push({ name, ok, detail });
  };
  const views = input.policies === null ? null : viewChanges(input.policies);
  const nic = plan.flapNic;
  const flapTag = (down: readonly string[]) => down.some((d) => d.startsWith(`${nic}/`));

  // --- the plan as it ran
  // Lateness is reported, not judged (a busy machine); what makes a run meaningless is judged: an event
  // that failed or never ran (the plan's last cycles cut off), or one that ended after the traffic.
  const late = events.filter((e) => e.t0 - e.planned > EVENT_LATE_NOTE_MS);
  const timing = {
    latestMs: Math.max(0, ...events.map((e) => e.t0 - e.planned)),
    late: late.map((e) => ({ action: e.action, atS: e.atS, lateMs: e.t0 - e.planned })),
  };
  const failedEvents = events.filter((e) => !e.ok);
  const afterEnd = events.filter((e) => e.t1 > meta.endMs);
  const missing = plan.events.slice(events.length);
  check(
    'plan: every event ran, within the traffic',
    failedEvents.length === 0 && events.length === plan.events.length && afterEnd.length === 0,
    `${events.length} of ${plan.events.length} events ran (latest start ${(timing.latestMs / 1000).toFixed(1)} s after the plan, ${late.length} more than ${EVENT_LATE_NOTE_MS / 1000} s)` +
      (failedEvents.length > 0 ? `; failed: ${failedEvents.map((e) => `${e.action} ${e.target} at ${e.atS} s`).join(', ')}` : '') +
      (missing.length > 0
        ? `; did not run: ${missing.length} events from ${missing[0]!.action} at ${missing[0]!.atS} s on (flap cycles ${[...new Set(missing.map((e) => e.cycle + 1))].join(', ')}): fewer cycles than planned`
        : '') +
      (afterEnd.length > 0 ? `; ended after the traffic: ${afterEnd.map((e) => `${e.action} at ${e.atS} s`).join(', ')}` : ''),
  );

  // --- flaps: when each took the backend out and put it back, from the logs (or the plan's bounds)
  const stops = events.filter((e) => e.action === 'backend-stop' && e.target === nic).sort((a, b) => a.t0 - b.t0);
  const startsB = events.filter((e) => e.action === 'backend-start' && e.target === nic).sort((a, b) => a.t0 - b.t0);
  const flaps: Flap[] = stops.map((stop, cycle) => {
    const start = startsB.find((s) => s.t0 > stop.t0) ?? null;
    const down = views?.find((v) => v.begin >= stop.t0 && flapTag(v.down)) ?? null;
    const up = start === null ? null : (views?.find((v) => v.begin >= start.t0 && !flapTag(v.down)) ?? null);
    return {
      cycle,
      stop,
      start,
      downSettled: down !== null ? down.settled : stop.t1 + plan.detectDownMaxMs,
      downFromLogs: down !== null,
      upSettled: up !== null ? up.settled : null,
    };
  });
  if (views !== null) {
    const slow = flaps.filter(
      (f) =>
        !f.downFromLogs ||
        f.downSettled - f.stop.t1 > plan.detectDownMaxMs ||
        (f.start !== null && (f.upSettled === null || f.upSettled - f.start.t1 > plan.detectUpMaxMs)),
    );
    check(
      'flaps: the MUXes took the backend out and back within the probe bounds',
      slow.length === 0,
      `down within ${plan.detectDownMaxMs} ms, up within ${plan.detectUpMaxMs} ms of the event (probe ${plan.probe.intervalMs} ms x ${plan.probe.downThreshold}/${plan.probe.upThreshold} + push); measured down ${fmtRange(flaps.filter((f) => f.downFromLogs).map((f) => f.downSettled - f.stop.t1))} ms, up ${fmtRange(flaps.filter((f) => f.upSettled !== null && f.start !== null).map((f) => f.upSettled! - f.start!.t1))} ms${slow.length > 0 ? `; outside: cycles ${slow.map((f) => f.cycle + 1).join(', ')}` : ''}`,
    );
  }

  // --- requests
  const backendUp = maglevNamer(config);
  const totals = Object.fromEntries(
    KINDS.map((k) => [k, { total: 0, ok: 0, failed: 0, predicted: 0, unpredicted: 0, planned: null }]),
  ) as unknown as Record<TrafficKind, KindTotals>;
  const predicted: FailureRecord[] = [];
  const unpredicted: FailureRecord[] = [];
  const perFlap = flaps.map(() => ({ n: 0, byKind: {} as Partial<Record<TrafficKind, number>> }));
  for (const r of records) {
    const t = totals[r.k];
    if (t === undefined) continue;
    t.total++;
    if (r.err === null) {
      t.ok++;
      continue;
    }
    t.failed++;
    const tcp = !r.k.startsWith('udp');
    const backend = r.prev ?? backendUp(r);
    const fr: FailureRecord = {
      k: r.k,
      t0: r.t0,
      t1: r.t1,
      src: r.src,
      sp: r.sp,
      err: r.err,
      ...(r.prev !== undefined ? { prev: r.prev } : {}),
      backend,
      why: '',
    };
    const k =
      tcp && backend === nic && FLAP_ERRORS.includes(r.err)
        ? flaps.findIndex((f) => r.t1 >= f.stop.t0 && r.t1 <= f.downSettled + PREDICT_SLACK_MS)
        : -1;
    if (k >= 0) {
      fr.why = `flap ${k + 1}: to ${nic} within ${Math.round(r.t1 - flaps[k]!.stop.t0)} ms of its stop`;
      predicted.push(fr);
      t.predicted++;
      perFlap[k]!.n++;
      perFlap[k]!.byKind[r.k] = (perFlap[k]!.byKind[r.k] ?? 0) + 1;
    } else {
      fr.why = !tcp
        ? 'UDP: never predicted'
        : backend !== nic
          ? `to ${backend ?? 'an unknown backend'}, not the flapping one`
          : !FLAP_ERRORS.includes(r.err)
            ? `error ${r.err} is not a refusal, reset or close`
            : "outside every flap's detection window";
      unpredicted.push(fr);
      t.unpredicted++;
    }
  }
  for (const k of ['http4', 'http6', 'udp4', 'udp6'] as const) totals[k].planned = Math.floor(meta.durationS * meta.rate);
  const shortKinds = (['http4', 'http6', 'udp4', 'udp6'] as const).filter((k) => totals[k].total < TRAFFIC_MIN_SHARE * totals[k].planned!);
  check(
    'traffic: the open loop kept its rate',
    shortKinds.length === 0 && totals.ka4.ok > 0 && totals.ka6.ok > 0,
    `${KINDS.map((k) => `${k} ${totals[k].total}${totals[k].planned !== null ? `/${totals[k].planned}` : ''}`).join(', ')}${shortKinds.length > 0 ? `; short: ${shortKinds.join(', ')}` : ''}`,
  );
  const failedTotal = KINDS.reduce((a, k) => a + totals[k].failed, 0);
  const totalAll = KINDS.reduce((a, k) => a + totals[k].total, 0);
  check(
    'requests: no failure but the predicted ones',
    unpredicted.length === 0,
    `${totalAll} requests, ${failedTotal} failed: ${predicted.length} predicted, ${unpredicted.length} not${
      unpredicted.length > 0
        ? ` (first: ${unpredicted
            .slice(0, 3)
            .map((f) => `${f.k} ${f.src}:${f.sp} ${f.err} at +${((f.t1 - meta.startMs) / 1000).toFixed(2)} s, ${f.why}`)
            .join('; ')})`
        : ''
    }`,
  );

  // the bound of each flap's predicted failures: twice the new connections its window sends to the
  // backend at its share, plus each keep-alive connection twice (on it at the stop, and its reconnect)
  const pool = config.pools.find((p) => p.backends.some((b) => b.nic === nic));
  const share =
    pool === undefined
      ? 1
      : pool.backends.find((b) => b.nic === nic)!.weight / pool.backends.reduce((a, b) => a + (b.enabled ? b.weight : 0), 0);
  const flapResults: FlapResult[] = flaps.map((f, i) => {
    const windowMs = f.downSettled + PREDICT_SLACK_MS - f.stop.t0;
    const bound = Math.ceil(2 * (2 * meta.rate) * (windowMs / 1000) * share) + 4 * meta.keepAlive + 2;
    return {
      cycle: f.cycle,
      stopAt: f.stop.t0,
      startAt: f.start?.t0 ?? null,
      detectDownMs: f.downFromLogs ? f.downSettled - f.stop.t1 : null,
      detectUpMs: f.upSettled !== null && f.start !== null ? f.upSettled - f.start.t1 : null,
      windowMs,
      predicted: perFlap[i]!.n,
      bound,
      byKind: perFlap[i]!.byKind,
    };
  });
  const over = flapResults.filter((f) => f.predicted > f.bound);
  check(
    'requests: predicted failures within their bound',
    over.length === 0,
    `per flap ${fmtRange(flapResults.map((f) => f.predicted))} (bounds ${fmtRange(flapResults.map((f) => f.bound))})${over.length > 0 ? `; over: cycles ${over.map((f) => f.cycle + 1).join(', ')}` : ''}`,
  );

  // the backend came back: after each start it answered new connections again (before the next stop)
  const notBack = flaps
    .filter((f) => f.start !== null)
    .filter((f) => {
      const next = flaps[f.cycle + 1]?.stop.t0 ?? Infinity;
      return !records.some(
        (r) => r.err === null && r.be === nic && (r.k === 'http4' || r.k === 'http6') && r.t0 > f.start!.t1 && r.t0 < next,
      );
    });
  check(
    'flaps: the backend served new connections again after each start',
    notBack.length === 0,
    notBack.length === 0
      ? `${flaps.filter((f) => f.start !== null).length} of ${flaps.filter((f) => f.start !== null).length}`
      : `not after: cycles ${notBack.map((f) => f.cycle + 1).join(', ')}`,
  );

  // --- restarts: each lay where every open connection had been placed under the view in force
  const muxStops = events.filter((e) => e.action === 'mux-stop').sort((a, b) => a.t0 - b.t0);
  const muxStarts = events.filter((e) => e.action === 'mux-start').sort((a, b) => a.t0 - b.t0);
  const restarts: RestartResult[] = muxStops.map((stop, i) => {
    const start = muxStarts.find((s) => s.t0 > stop.t0);
    const back = start?.t1 ?? stop.t1;
    let marginBeforeMs: number | null = null;
    let marginAfterMs: number | null = null;
    if (views !== null) {
      const prev = [...views].reverse().find((v) => v.begin <= stop.t0);
      const next = views.find((v) => v.begin > stop.t0);
      marginBeforeMs = prev === undefined ? null : stop.t0 - (prev.settled + plan.kaCloseMs);
      marginAfterMs = next === undefined ? null : next.begin - back;
    }
    const failuresAround = unpredicted.filter((f) => f.t1 >= stop.t0 - 1000 && f.t1 <= back + 5000).length;
    return {
      index: i,
      kind: plan.restarts[i]?.kind ?? '?',
      stopAt: stop.t0,
      startedAt: back,
      marginBeforeMs,
      marginAfterMs,
      failuresAround,
    };
  });
  if (views !== null) {
    const bad = restarts.filter(
      (r) => (r.marginBeforeMs !== null && r.marginBeforeMs < 0) || (r.marginAfterMs !== null && r.marginAfterMs < 0),
    );
    check(
      'restarts: each lay where every open connection was placed under the view in force',
      bad.length === 0,
      `margins before ${fmtRange(restarts.map((r) => r.marginBeforeMs).filter((x): x is number => x !== null))} ms, after ${fmtRange(restarts.map((r) => r.marginAfterMs).filter((x): x is number => x !== null))} ms${bad.length > 0 ? `; outside: restarts ${bad.map((r) => r.index + 1).join(', ')}` : ''}`,
    );
  }

  // --- daemons: memory, fds, CPU, and whether any died
  const byProc = new Map<string, DaemonSample[]>();
  const machine: number[] = [];
  for (const s of samples) {
    if (s.name === 'machine') {
      const m = s as MachineSample;
      if (m.t >= meta.startMs && m.t <= meta.endMs) machine.push(m.busy);
      continue;
    }
    const d = s as DaemonSample;
    const key = `${d.name} ${d.pid}`;
    const list = byProc.get(key) ?? [];
    list.push(d);
    byProc.set(key, list);
  }
  const stoppedPids = new Set(muxStops.map((e) => e.pid).filter((p): p is number => typeof p === 'number'));
  const lastSampleT = Math.max(...samples.map((s) => s.t));
  const series: SeriesResult[] = [];
  const died: string[] = [];
  for (const [, list] of byProc) {
    list.sort((a, b) => a.t - b.t);
    const live = list.filter((s) => s.gone !== true && s.rssKb !== null);
    const name = list[0]!.name;
    const pid = list[0]!.pid;
    const ended = list.some((s) => s.gone === true) || list[list.length - 1]!.t < lastSampleT - 3000;
    if (ended && !stoppedPids.has(pid)) died.push(`${name} (pid ${pid})`);
    if (live.length === 0) continue;
    const firstT = live[0]!.t;
    const lastT = live[live.length - 1]!.t;
    const from = firstT + plan.warmupS * 1000;
    const spanS = (lastT - from) / 1000;
    const cpu = live.filter((s) => s.cpuS !== null);
    const cpuS = cpu.length >= 2 ? cpu[cpu.length - 1]!.cpuS! - cpu[0]!.cpuS! : null;
    const cpuShare = cpuS !== null && lastT > firstT ? cpuS / ((lastT - firstT) / 1000) : null;
    const base: SeriesResult = {
      name,
      pid,
      firstT,
      lastT,
      samples: live.length,
      judged: false,
      why: null,
      windowS: null,
      rssFirstKb: null,
      rssLastKb: null,
      rssMaxKb: Math.max(...live.map((s) => s.rssKb!)),
      growth: null,
      fdsFirst: null,
      fdsLast: null,
      fdsFirstMax: null,
      fdsLastMax: null,
      cpuS,
      cpuShare,
      ended,
    };
    if (spanS < MIN_JUDGED_SPAN_S) {
      series.push({
        ...base,
        why: `${Math.max(0, Math.round(spanS))} s after its ${plan.warmupS} s warm-up (< ${MIN_JUDGED_SPAN_S} s): not judged`,
      });
      continue;
    }
    const w = Math.min(WINDOW_MAX_S, spanS / 3);
    const first = live.filter((s) => s.t >= from && s.t <= from + w * 1000);
    const last = live.filter((s) => s.t >= lastT - w * 1000);
    const rssFirstKb = median(first.map((s) => s.rssKb!));
    const rssLastKb = median(last.map((s) => s.rssKb!));
    const fdF = first.map((s) => s.fds).filter((x): x is number => x !== null);
    const fdL = last.map((s) => s.fds).filter((x): x is number => x !== null);
    series.push({
      ...base,
      judged: true,
      windowS: Math.round(w * 10) / 10,
      rssFirstKb,
      rssLastKb,
      growth: rssFirstKb !== null && rssLastKb !== null ? rssLastKb / rssFirstKb - 1 : null,
      fdsFirst: median(fdF),
      fdsLast: median(fdL),
      fdsFirstMax: fdF.length > 0 ? Math.max(...fdF) : null,
      fdsLastMax: fdL.length > 0 ? Math.max(...fdL) : null,
    });
  }
  series.sort((a, b) => a.name.localeCompare(b.name) || a.firstT - b.firstT);
  check(
    'daemons: none died but the restarting MUX at its planned stops',
    died.length === 0,
    died.length === 0 ? `${byProc.size} processes sampled` : `ended unplanned: ${died.join(', ')}`,
  );
  const judged = series.filter((s) => s.judged);
  const grown = judged.filter((s) => s.growth === null || s.growth > RSS_GROWTH_MAX);
  check(
    `memory: resident memory after the warm-up grew at most ${RSS_GROWTH_MAX * 100} %`,
    grown.length === 0 && judged.length > 0,
    `${judged.map((s) => `${s.name} ${fmtPct(s.growth)}`).join(', ')}${grown.length > 0 ? `; over: ${grown.map((s) => s.name).join(', ')}` : ''}${judged.length === 0 ? 'no process judged' : ''}`,
  );
  const leaky = judged.filter(
    (s) => s.fdsFirst === null || s.fdsLast === null || s.fdsLast > s.fdsFirst || (s.fdsLastMax ?? 0) > (s.fdsFirstMax ?? 0) + FD_SLACK,
  );
  check(
    'fds: no growth in open file descriptors',
    leaky.length === 0 && judged.length > 0,
    `${judged.map((s) => `${s.name} ${s.fdsFirst}->${s.fdsLast}`).join(', ')}${leaky.length > 0 ? `; grew: ${leaky.map((s) => s.name).join(', ')}` : ''}`,
  );

  // --- send errors: every MUX and host agent read, and none counted a send the kernel refused
  if (input.counters !== undefined) {
    const names = [...config.muxes.map((m) => m.name), ...config.hosts.map((h) => h.name)];
    const reads = new Map<string, number>();
    const worst = new Map<string, { n: number; at: number }>();
    const note = (who: string, counter: string, n: number, at: number) => {
      const k = `${who}: ${counter}`;
      if (n > (worst.get(k)?.n ?? 0)) worst.set(k, { n, at });
    };
    for (const c of input.counters) {
      if (c.sendErrors === null) continue;
      reads.set(c.name, (reads.get(c.name) ?? 0) + 1);
      for (const [k, v] of Object.entries(c.sendErrors)) if (v !== 0) note(`${c.name} (pid ${c.pid})`, k, v, c.t);
    }
    const finalUnread: string[] = [];
    for (const f of input.finalCounters ?? []) {
      if (f.sendErrors === null) {
        finalUnread.push(`${f.name} (${f.error ?? 'unreadable'})`);
        continue;
      }
      reads.set(f.name, (reads.get(f.name) ?? 0) + 1);
      for (const [k, v] of Object.entries(f.sendErrors)) if (v !== 0) note(`${f.name} (after the traffic)`, k, v, meta.endMs);
    }
    const unread = names.filter((n) => (reads.get(n) ?? 0) === 0);
    const bad = [...worst].map(([k, w]) => `${k} ${w.n} (by ${((w.at - meta.startMs) / 1000).toFixed(0)} s)`);
    check(
      'send errors: no MUX or host agent counted a send the kernel refused',
      bad.length === 0 && unread.length === 0 && finalUnread.length === 0,
      `${input.counters.length} reads during the run, ${(input.finalCounters ?? []).length} after it, of ${names.join(', ')}` +
        (bad.length > 0 ? `; counted: ${bad.join(', ')}` : '; every send_error_* 0') +
        (unread.length > 0 ? `; never read: ${unread.join(', ')}` : '') +
        (finalUnread.length > 0 ? `; unreadable after the traffic: ${finalUnread.join(', ')}` : ''),
    );
  }

  return {
    verdict: checks.every((c) => c.ok) ? 'pass' : 'fail',
    checks,
    totals,
    flaps: flapResults,
    restarts,
    series,
    machine: { busyMedian: median(machine), busyP90: quantile(machine, 0.9), busyMax: machine.length > 0 ? Math.max(...machine) : null },
    timing,
    predicted,
    unpredicted,
    views,
  };
}

function fmtRange(xs: readonly number[]): string {
  if (xs.length === 0) return '-';
  const lo = Math.round(Math.min(...xs));
  const hi = Math.round(Math.max(...xs));
  return lo === hi ? String(lo) : `${lo}..${hi}`;
}

function fmtPct(x: number | null): string {
  return x === null ? '?' : `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)} %`;
}

const mb = (kb: number | null) => (kb === null ? '-' : (kb / 1024).toFixed(1));

/** The Markdown summary of a result. */
export function formatSummary(r: SoakResult, plan: SoakPlan, meta: RunMeta): string {
  const rel = (t: number) => `${((t - meta.startMs) / 1000).toFixed(1)}`;
  const L: string[] = [];
  L.push(`# soak ${meta.name}: ${r.verdict.toUpperCase()}`, '');
  L.push(
    `${plan.durationS} s (${plan.scale} scale), ${meta.rate} new flows/s of each of http4, http6, udp4, udp6, ${meta.keepAlive} keep-alive connections per family (life ${plan.keepAliveLifeS[0]}-${plan.keepAliveLifeS[1]} s, a request every ${plan.kaIntervalMs} ms); ${r.flaps.length} flaps of ${plan.flapNic}'s HTTP server (${plan.flapDownS} s down every ${plan.flapPeriodS} s), ${r.restarts.length} restarts of ${plan.restartMux} (SIGTERM, ${plan.muxDownS} s down); warm-up ${plan.warmupS} s.`,
    '',
  );
  L.push('## Checks', '');
  for (const c of r.checks) L.push(`- ${c.ok ? 'PASS' : '**FAIL**'} ${c.name}: ${c.detail}`);
  L.push('', '## Requests', '', '| kind | requests | ok | failed | predicted | not predicted |', '|---|---:|---:|---:|---:|---:|');
  for (const k of KINDS) {
    const t = r.totals[k];
    L.push(
      `| ${k} | ${t.total}${t.planned !== null ? ` / ${t.planned}` : ''} | ${t.ok} | ${t.failed} | ${t.predicted} | ${t.unpredicted} |`,
    );
  }
  L.push(
    '',
    '## Flaps',
    '',
    '| # | stop at s | taken out after ms | back after ms | predicted failures (bound) | by kind |',
    '|---:|---:|---:|---:|---:|---|',
  );
  for (const f of r.flaps) {
    L.push(
      `| ${f.cycle + 1} | ${rel(f.stopAt)} | ${f.detectDownMs ?? '-'} | ${f.detectUpMs ?? '-'} | ${f.predicted} (${f.bound}) | ${
        Object.entries(f.byKind)
          .map(([k, n]) => `${k} ${n}`)
          .join(', ') || '-'
      } |`,
    );
  }
  L.push(
    '',
    `## Restarts of ${plan.restartMux}`,
    '',
    '| # | kind | stop at s | back in the route at s | margin before ms | margin after ms | failures around it |',
    '|---:|---|---:|---:|---:|---:|---:|',
  );
  for (const x of r.restarts)
    L.push(
      `| ${x.index + 1} | ${x.kind} | ${rel(x.stopAt)} | ${rel(x.startedAt)} | ${x.marginBeforeMs ?? '-'} | ${x.marginAfterMs ?? '-'} | ${x.failuresAround} |`,
    );
  L.push(
    '',
    '## Daemons',
    '',
    `Resident memory (median of the first and the last window after the warm-up), open file descriptors (median, max), CPU (mean share of one core).`,
    '',
    '| daemon | pid | window s | RSS first MB | RSS last MB | growth | RSS max MB | fds first (max) | fds last (max) | CPU | |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|',
  );
  for (const s of r.series) {
    L.push(
      `| ${s.name} | ${s.pid} | ${s.windowS ?? '-'} | ${mb(s.rssFirstKb)} | ${mb(s.rssLastKb)} | ${s.judged ? fmtPct(s.growth) : '-'} | ${mb(s.rssMaxKb)} | ${s.fdsFirst ?? '-'} (${s.fdsFirstMax ?? '-'}) | ${s.fdsLast ?? '-'} (${s.fdsLastMax ?? '-'}) | ${s.cpuShare === null ? '-' : `${(s.cpuShare * 100).toFixed(1)} %`} | ${s.why ?? ''}${s.ended ? ' (ended)' : ''} |`,
    );
  }
  const m = r.machine;
  L.push(
    '',
    `Machine CPU busy (all cores, 1 s samples): median ${fmtPct(m.busyMedian).replace('+', '')}, p90 ${fmtPct(m.busyP90).replace('+', '')}, max ${fmtPct(m.busyMax).replace('+', '')}.`,
  );
  if (typeof meta.otherLabs === 'string' && meta.otherLabs !== '') L.push(`Other labs on this machine at the start: ${meta.otherLabs}.`);
  L.push(
    '',
    `Events against the plan: the latest started ${(r.timing.latestMs / 1000).toFixed(1)} s late; ${r.timing.late.length} more than ${EVENT_LATE_NOTE_MS / 1000} s late${
      r.timing.late.length > 0
        ? ` (${r.timing.late
            .slice(0, 20)
            .map((e) => `${e.action} at ${e.atS} s by ${(e.lateMs / 1000).toFixed(1)} s`)
            .join(', ')}${r.timing.late.length > 20 ? ', ...' : ''})`
        : ''
    }. Reported, not judged: every check reads the events' real times.`,
  );
  if (r.unpredicted.length > 0) {
    L.push(
      '',
      '## Failures not predicted',
      '',
      '| kind | at s | client | error | backend | why not predicted |',
      '|---|---:|---|---|---|---|',
    );
    for (const f of r.unpredicted.slice(0, 50))
      L.push(`| ${f.k} | ${rel(f.t1)} | ${f.src}:${f.sp} | ${f.err} | ${f.backend ?? '-'} | ${f.why} |`);
    if (r.unpredicted.length > 50) L.push(`| ... | | ${r.unpredicted.length - 50} more in result.json | | | |`);
  }
  return `${L.join('\n')}\n`;
}

function readJsonLines<T>(path: string): T[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as T);
}

/** Every MUX log of a lab run (NODE.log and the NODE.log.N of earlier processes), muxes named in the plan or config. */
export function readPolicies(labDir: string, muxes: readonly string[]): PolicyApplied[] | null {
  const logs = join(labDir, 'logs');
  if (!existsSync(logs)) return null;
  const out: PolicyApplied[] = [];
  let files = 0;
  for (const f of readdirSync(logs)) {
    if (!muxes.some((m) => f === `${m}.log` || f.startsWith(`${m}.log.`))) continue;
    files++;
    out.push(...parsePolicyLog(readFileSync(join(logs, f), 'utf8')));
  }
  return files === 0 ? null : out;
}

/** The counters-NODE.json files soak.sh saves after the traffic: each node's send_error_* counters. */
export function readFinalCounters(run: string): { name: string; sendErrors: Record<string, number> | null; error?: string }[] {
  const out: { name: string; sendErrors: Record<string, number> | null; error?: string }[] = [];
  for (const f of readdirSync(run).sort()) {
    const m = /^counters-(.+)\.json$/.exec(f);
    if (m === null) continue;
    const r = sendErrorsOf(readFileSync(join(run, f), 'utf8'));
    out.push(typeof r === 'string' ? { name: m[1]!, sendErrors: null, error: r } : { name: m[1]!, sendErrors: r });
  }
  return out;
}

const OPTIONS: readonly OptionSpec[] = [
  { name: 'run', value: 'DIR', help: 'the soak run folder (plan.json, meta.json, events.jsonl, records.jsonl, samples.jsonl)' },
  { name: 'lab', value: 'DIR', help: "the lab run folder (runs/lab/NAME: config.yaml, logs/); default: meta.json's labDir" },
  { name: 'quiet', help: 'do not print the summary' },
  { name: 'help', help: 'this help' },
];

const COMMAND: CommandSpec = {
  program: 'judge',
  usage: 'judge.js --run DIR [--lab DIR]',
  options: OPTIONS,
  about: 'Judges a soak run (see the top of scripts/soak/judge.ts); writes result.json and summary.md into it; exit 0 pass, 1 fail.',
};

export const main = (argv: readonly string[]): number => runCommand(COMMAND, argv, runParsed);

function runParsed(args: ParsedArgs): number {
  const run = one(args, 'run');
  if (run === undefined) throw new UsageError('--run DIR is required');
  const lab = one(args, 'lab');
  const quiet = args.flags.has('quiet');
  const plan = JSON.parse(readFileSync(join(run, 'plan.json'), 'utf8')) as SoakPlan;
  const meta = JSON.parse(readFileSync(join(run, 'meta.json'), 'utf8')) as RunMeta;
  const labDir = lab ?? String(meta.labDir);
  const cfgPath = join(labDir, 'config.yaml');
  const parsed = parseConfig(readFileSync(cfgPath, 'utf8'), cfgPath);
  if (!parsed.ok) {
    process.stderr.write(`judge: ${formatConfigErrors(parsed.errors, cfgPath)}\n`);
    return 2;
  }
  const result = judgeSoak({
    plan,
    meta,
    config: parsed.config,
    events: readJsonLines<RunEvent>(join(run, 'events.jsonl')),
    records: readJsonLines<TrafficRecord>(join(run, 'records.jsonl')),
    samples: readJsonLines<DaemonSample | MachineSample>(join(run, 'samples.jsonl')),
    policies: readPolicies(
      labDir,
      parsed.config.muxes.map((m) => m.name),
    ),
    counters: readJsonLines<CounterSample>(join(run, 'counters.jsonl')),
    finalCounters: readFinalCounters(run),
  });
  const summary = formatSummary(result, plan, meta);
  writeFileSync(join(run, 'result.json'), `${JSON.stringify({ ...result, plan, meta }, null, 1)}\n`);
  writeFileSync(join(run, 'summary.md'), summary);
  if (!quiet) process.stdout.write(summary);
  return result.verdict === 'pass' ? 0 : 1;
}

if (isMain(import.meta.url)) process.exitCode = main(process.argv.slice(2));
