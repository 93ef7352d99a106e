#!/usr/bin/env node
// The soak's timeline (scripts/soak.sh, docs/soak.md): when the flapping backend's HTTP server stops and
// starts, when the restarting MUX stops and starts, how long the warm-up is. Pure (planSoak); the CLI
// prints the plan for the shell driver, one event per line, and writes it as JSON:
//   node dist/scripts/soak/plan.js --duration-s 600 [--config F] [--json FILE]
//   -> "AT_S ACTION TARGET AFTER_MS" lines, ACTION one of backend-stop backend-start mux-stop mux-start
//
// The driver starts each event at AT_S, or, when the event before it ended late, AFTER_MS after that
// event's end (afterMs below): on a machine too busy to keep to the plan the timeline slides instead of
// squeezing a restart out of its slot, and the cycles without a restart catch up. The judge reads the
// real times.
//
// Why the MUX restarts sit where they do. Every MUX builds the same Maglev table from the same policy, so
// a flow the router moves to another MUX (one stopped, or came back) reaches the same backend, but only
// while the health view it was placed under is still the view in force: a keep-alive connection placed
// while the flapping backend was down, still open after it came back, hashes elsewhere on a MUX that has
// no flow entry for it (README limits, docs/bgp.md "Same decision on every MUX"). So each restart, from
// its stop until the restarted MUX is back in the route, lies where every open connection was placed
// under the current view: at least (detection bound + the longest keep-alive life) after a flap event,
// and before the next view change can happen. Then the plan predicts zero failures from restarts, and
// the judge checks, from the MUXes' logs, that the run really kept to this.
import { readFileSync, writeFileSync } from 'node:fs';
import { one, UsageError, type OptionSpec, type ParsedArgs } from '../../shared/args.js';
import { isMain, runCommand, type CommandSpec } from '../../runtime/command.js';
import { formatConfigErrors, parseConfig, type SlbxConfig } from '../../shared/config.js';

export type SoakAction = 'backend-stop' | 'backend-start' | 'mux-stop' | 'mux-start';
/** A restart inside the flapping backend's down time, or late in its up time. */
export type RestartKind = 'in-down' | 'in-up';

export interface SoakEvent {
  /** Seconds after the traffic started. */
  readonly atS: number;
  readonly action: SoakAction;
  /** A nic (backend-*) or a mux node (mux-*). */
  readonly target: string;
  /** Which flap cycle (0..) it belongs to. */
  readonly cycle: number;
  /** Why it is there (printed and kept in the plan). */
  readonly note: string;
  /**
   * The shortest time from the end of the event before it (its real end) to this one's start: what its
   * place in the cycle needs (see minGapsMs), so that a late event before it moves it instead of
   * shortening what it needs. 0 for the first.
   */
  readonly afterMs: number;
}

export interface SoakRestart {
  readonly index: number;
  readonly kind: RestartKind;
  readonly cycle: number;
  readonly mux: string;
  readonly stopAtS: number;
  readonly startAtS: number;
  /** Where a restart of this kind may lie, from the plan's bounds (the judge checks the real times). */
  readonly windowS: readonly [number, number];
}

export interface ProbeTiming {
  readonly intervalMs: number;
  readonly upThreshold: number;
  readonly downThreshold: number;
}

export interface SoakPlan {
  readonly durationS: number;
  /** 'full' (>= FULL_SCALE_S): the periods; 'short': scaled down for CI (docs/soak.md). */
  readonly scale: 'full' | 'short';
  /** Every daemon process is judged from this many seconds after its first sample. */
  readonly warmupS: number;
  readonly flapNic: string;
  readonly restartMux: string;
  readonly flapPeriodS: number;
  /** How long the flapping backend's HTTP server stays stopped in each cycle. */
  readonly flapDownS: number;
  /** The first flap starts this long after the traffic. */
  readonly leadS: number;
  /** One MUX restart about every this many seconds (in the next slot of its kind). */
  readonly muxPeriodS: number;
  /** How long a restarted MUX stays stopped before it is started again. */
  readonly muxDownS: number;
  /** Keep-alive connections live a random time in [min, max] seconds, then close; a new one opens. */
  readonly keepAliveLifeS: readonly [number, number];
  readonly kaIntervalMs: number;
  readonly probe: ProbeTiming;
  /** Longest time from a backend's stop (start) until every MUX has it out of (back in) its tables. */
  readonly detectDownMaxMs: number;
  readonly detectUpMaxMs: number;
  /** Shortest time from a backend's stop (start) until the MUXes' view could change. */
  readonly detectDownMinMs: number;
  readonly detectUpMinMs: number;
  /** A keep-alive connection opened at t is closed by t + kaCloseMs. */
  readonly kaCloseMs: number;
  readonly events: readonly SoakEvent[];
  readonly restarts: readonly SoakRestart[];
}

export interface PlanOptions {
  readonly flapNic: string;
  readonly restartMux: string;
  readonly probe?: ProbeTiming;
  readonly keepAliveLifeS?: readonly [number, number];
  readonly kaIntervalMs?: number;
  /** Instead of warmupFor(duration): for runs whose daemons take longer to settle (a higher rate). */
  readonly warmupS?: number;
}

/** Shortest run the plan accepts: one flap (down and up, seen both ways) and one MUX restart. */
export const MIN_DURATION_S = 30;
/** Runs at least this long use the periods (2 min between MUX restarts); shorter ones restart more often. */
export const FULL_SCALE_S = 300;
export const FLAP_PERIOD_S = 30;
export const FLAP_DOWN_S = 15;
export const MUX_DOWN_S = 2;
/** The warm-up: 20 % of the run, at least 12 s, at most 60 s (docs/soak.md says why). */
export const WARMUP_FRACTION = 0.2;
export const WARMUP_MIN_S = 12;
export const WARMUP_MAX_S = 60;
/** From a probe's verdict until every MUX applied the controller's push (measured: 10-60 ms; bound 500). */
export const PUSH_ALLOWANCE_MS = 500;
/** A keep-alive request's answer, at most (a bound on the lab's sub-millisecond answers). */
const KA_ANSWER_MS = 500;
/** From a MUX's start until it is ready and back in the router's route (measured: about 1.1 s; bound). */
export const MUX_START_ALLOWANCE_S = 2;
/** After a flap's start, leave this much run for the backend to be seen up and serving again. */
export const FLAP_TAIL_S = 7;
export const DEFAULT_PROBE: ProbeTiming = { intervalMs: 1000, upThreshold: 2, downThreshold: 2 };

export function warmupFor(durationS: number): number {
  return Math.min(WARMUP_MAX_S, Math.max(WARMUP_MIN_S, Math.round(durationS * WARMUP_FRACTION)));
}

/**
 * The timeline for a run of `durationS` seconds. Every 30 s (from leadS: 15 s full scale, 5 s short) the
 * flapping backend's HTTP server is stopped for 15 s. One MUX (always the same one, so the other runs the
 * whole time and its memory is judged over the whole run) is stopped with SIGTERM and started 2 s later,
 * about every 120 s at full scale (every 15 s short), alternating the two kinds of slot:
 *   in-down  inside the backend's down time, once every connection placed before the MUXes took it out
 *            is closed (a MUX that starts while a backend is down must not send it new flows);
 *   in-up    late in the up time, once every connection placed while it was down is closed.
 */
export function planSoak(durationS: number, o: PlanOptions): SoakPlan {
  if (!Number.isInteger(durationS) || durationS < MIN_DURATION_S)
    throw new RangeError(`duration must be an integer >= ${MIN_DURATION_S} s (got ${durationS})`);
  const probe = o.probe ?? DEFAULT_PROBE;
  const [kaMin, kaMax] = o.keepAliveLifeS ?? [2, 5];
  const kaIntervalMs = o.kaIntervalMs ?? 250;
  const full = durationS >= FULL_SCALE_S;
  if (o.warmupS !== undefined && (!Number.isInteger(o.warmupS) || o.warmupS < 0 || o.warmupS >= durationS)) {
    throw new RangeError(`the warm-up must be a whole number of seconds 0..${durationS - 1} (got ${o.warmupS})`);
  }
  const P = FLAP_PERIOD_S;
  const D = FLAP_DOWN_S;
  const leadS = full ? 15 : 5;
  const muxPeriodS = full ? 120 : 15;
  // a backend is seen down after downThreshold failed probes, the first at most one interval after the
  // stop; then the controller pushes (scenario 05's bound plus the push)
  const detectDownMaxMs = probe.intervalMs * probe.downThreshold + probe.intervalMs + PUSH_ALLOWANCE_MS;
  const detectUpMaxMs = probe.intervalMs * probe.upThreshold + probe.intervalMs + PUSH_ALLOWANCE_MS;
  const detectDownMinMs = probe.intervalMs * (probe.downThreshold - 1);
  const detectUpMinMs = probe.intervalMs * (probe.upThreshold - 1);
  const kaCloseMs = kaMax * 1000 + kaIntervalMs + KA_ANSWER_MS;
  // the slots, relative to the cycle's start s
  const slot = (kind: RestartKind): { stop: number; latest: number; earliest: number } => {
    const earliest = kind === 'in-down' ? (detectDownMaxMs + kaCloseMs) / 1000 : D + (detectUpMaxMs + kaCloseMs) / 1000;
    const latest = kind === 'in-down' ? D + detectUpMinMs / 1000 : P + detectDownMinMs / 1000;
    const stop = Math.ceil(earliest);
    if (stop + MUX_DOWN_S + MUX_START_ALLOWANCE_S > latest) {
      throw new RangeError(
        `no room for an ${kind} MUX restart: it may stop ${earliest} s into the cycle and must be back by ${latest} s (probe ${probe.intervalMs} ms x ${probe.downThreshold}/${probe.upThreshold}, keep-alive life up to ${kaMax} s)`,
      );
    }
    return { stop, latest, earliest };
  };
  const slots = { 'in-down': slot('in-down'), 'in-up': slot('in-up') };

  const events: Omit<SoakEvent, 'afterMs'>[] = [];
  let cycles = 0;
  for (let c = 0; ; c++) {
    const s = leadS + c * P;
    if (s + D + FLAP_TAIL_S > durationS) break;
    events.push({ atS: s, action: 'backend-stop', target: o.flapNic, cycle: c, note: `flap ${c + 1}: ${o.flapNic}'s HTTP server stopped` });
    events.push({
      atS: s + D,
      action: 'backend-start',
      target: o.flapNic,
      cycle: c,
      note: `flap ${c + 1}: ${o.flapNic}'s HTTP server started again`,
    });
    cycles++;
  }
  const restarts: SoakRestart[] = [];
  const firstTarget = full ? leadS + P + slots['in-down'].stop : leadS + slots['in-down'].stop;
  for (let j = 0; ; j++) {
    const kind: RestartKind = j % 2 === 0 ? 'in-down' : 'in-up';
    const target = firstTarget + j * muxPeriodS;
    const sl = slots[kind];
    // the first cycle whose slot of this kind is at or after the target
    const c = Math.max(0, Math.ceil((target - leadS - sl.stop) / P));
    const stopAtS = leadS + c * P + sl.stop;
    const startAtS = stopAtS + MUX_DOWN_S;
    // in-down needs its cycle's flap; an in-up slot may follow the last flap (no next view change)
    if (c >= cycles || startAtS + MUX_START_ALLOWANCE_S + 1 > durationS) break;
    const s = leadS + c * P;
    restarts.push({ index: j, kind, cycle: c, mux: o.restartMux, stopAtS, startAtS, windowS: [s + sl.earliest, s + sl.latest] });
    const where = kind === 'in-down' ? `while ${o.flapNic} is down` : `late in ${o.flapNic}'s up time`;
    events.push({
      atS: stopAtS,
      action: 'mux-stop',
      target: o.restartMux,
      cycle: c,
      note: `restart ${j + 1}: ${o.restartMux} stopped (SIGTERM) ${where}`,
    });
    events.push({
      atS: startAtS,
      action: 'mux-start',
      target: o.restartMux,
      cycle: c,
      note: `restart ${j + 1}: ${o.restartMux} started again`,
    });
  }
  events.sort((a, b) => a.atS - b.atS);
  const timed = withGaps(events, { slots, detectDownMaxMs, detectUpMaxMs, flapDownS: D });
  return {
    durationS,
    scale: full ? 'full' : 'short',
    warmupS: o.warmupS ?? warmupFor(durationS),
    flapNic: o.flapNic,
    restartMux: o.restartMux,
    flapPeriodS: P,
    flapDownS: D,
    leadS,
    muxPeriodS,
    muxDownS: MUX_DOWN_S,
    keepAliveLifeS: [kaMin, kaMax],
    kaIntervalMs,
    probe,
    detectDownMaxMs,
    detectUpMaxMs,
    detectDownMinMs,
    detectUpMinMs,
    kaCloseMs,
    events: timed,
    restarts,
  };
}

/** After a flap event with no restart in between, leave this much beyond the detection bound. */
export const FLAP_SEEN_S = 1;

/**
 * Each event's afterMs, from what the event before it started:
 *   backend-start after backend-stop: the stop seen (detection bound) + FLAP_SEEN_S;
 *   backend-stop after backend-start: the start seen + FLAP_SEEN_S (it serves new connections again);
 *   mux-stop after a flap event: its slot's distance from that event (every connection placed under the
 *     previous view closed);
 *   mux-start after mux-stop: MUX_DOWN_S;
 *   a flap event after mux-start: 0 (the driver runs events one after the other, so the restarted MUX is
 *     back in the route before the next view change can begin).
 */
function withGaps(
  events: readonly Omit<SoakEvent, 'afterMs'>[],
  t: {
    slots: Record<RestartKind, { stop: number }>;
    detectDownMaxMs: number;
    detectUpMaxMs: number;
    flapDownS: number;
  },
): SoakEvent[] {
  return events.map((e, i) => {
    const prev = i === 0 ? undefined : events[i - 1]!;
    let afterMs = 0;
    if (prev !== undefined) {
      if (e.action === 'mux-start') afterMs = MUX_DOWN_S * 1000;
      else if (e.action === 'mux-stop')
        afterMs = prev.action === 'backend-stop' ? t.slots['in-down'].stop * 1000 : (t.slots['in-up'].stop - t.flapDownS) * 1000;
      else if (prev.action === 'mux-start') afterMs = 0;
      else if (e.action === 'backend-start') afterMs = t.detectDownMaxMs + FLAP_SEEN_S * 1000;
      else afterMs = t.detectUpMaxMs + FLAP_SEEN_S * 1000;
    }
    return { ...e, afterMs };
  });
}

/** The timing of the probe that decides the flapping nic's health for new flows (the first probed rule whose pool has it). */
export function flapProbeTiming(config: SlbxConfig, nic: string): ProbeTiming {
  for (const v of config.vips) {
    for (const r of v.rules) {
      if (r.probe === null) continue;
      const pool = config.pools.find((p) => p.name === r.pool);
      if (pool === undefined || !pool.backends.some((b) => b.nic === nic)) continue;
      const p = config.probes.find((x) => x.name === r.probe)!;
      return { intervalMs: p.intervalMs, upThreshold: p.upThreshold, downThreshold: p.downThreshold };
    }
  }
  throw new RangeError(`no probed rule serves ${nic}: its HTTP server's flaps would not change any table`);
}

const OPTIONS: readonly OptionSpec[] = [
  { name: 'duration-s', value: 'S', help: `run length in seconds (>= ${MIN_DURATION_S})`, default: '600' },
  {
    name: 'config',
    value: 'FILE',
    help: "the lab's config: the probe timing of the flapping nic comes from it (default: 1000 ms, 2 up, 2 down)",
  },
  { name: 'restart-mux', value: 'NODE', help: 'the MUX that restarts', default: 'mux2' },
  { name: 'flap-nic', value: 'NIC', help: 'the backend whose HTTP server flaps', default: 'h1vm1' },
  { name: 'ka-life-s', value: 'MIN-MAX', help: 'keep-alive connection life (as traffic.js)', default: '2-5' },
  { name: 'ka-interval-ms', value: 'MS', help: 'keep-alive request interval (as traffic.js)', default: '250' },
  { name: 'warmup-s', value: 'S', help: 'the warm-up before memory is judged (default: 20 % of the run, 12..60 s)' },
  { name: 'json', value: 'FILE', help: 'also write the plan as JSON' },
  { name: 'help', help: 'this help' },
];

const COMMAND: CommandSpec = {
  program: 'plan',
  usage: 'plan.js --duration-s S [--config F] [--json FILE]',
  options: OPTIONS,
  about: 'Prints the soak\'s timeline: one "AT_S ACTION TARGET AFTER_MS" line per event (scripts/soak.sh runs them).',
};

export const main = (argv: readonly string[]): number => runCommand(COMMAND, argv, runParsed);

function runParsed(args: ParsedArgs): number {
  try {
    const d = one(args, 'duration-s')!;
    if (!/^\d+$/.test(d)) throw new UsageError(`--duration-s must be a whole number of seconds, got ${JSON.stringify(d)}`);
    const life = /^(\d+)-(\d+)$/.exec(one(args, 'ka-life-s')!);
    if (life === null || Number(life[1]) < 1 || Number(life[2]) < Number(life[1]))
      throw new UsageError('--ka-life-s must be MIN-MAX seconds, 1 <= MIN <= MAX');
    const kaI = one(args, 'ka-interval-ms')!;
    if (!/^\d+$/.test(kaI)) throw new UsageError('--ka-interval-ms must be a whole number');
    const flapNic = one(args, 'flap-nic')!;
    let probe = DEFAULT_PROBE;
    const cfg = one(args, 'config');
    if (cfg !== undefined) {
      const r = parseConfig(readFileSync(cfg, 'utf8'), cfg);
      if (!r.ok) throw new UsageError(formatConfigErrors(r.errors, cfg));
      if (!r.config.nics.some((n) => n.name === flapNic)) throw new UsageError(`--flap-nic ${flapNic}: no such nic in ${cfg}`);
      probe = flapProbeTiming(r.config, flapNic);
    }
    const w = one(args, 'warmup-s');
    if (w !== undefined && !/^\d+$/.test(w)) throw new UsageError(`--warmup-s must be a whole number of seconds, got ${JSON.stringify(w)}`);
    const plan = planSoak(Number(d), {
      flapNic,
      restartMux: one(args, 'restart-mux')!,
      probe,
      keepAliveLifeS: [Number(life[1]), Number(life[2])],
      kaIntervalMs: Number(kaI),
      ...(w !== undefined ? { warmupS: Number(w) } : {}),
    });
    const json = one(args, 'json');
    if (json !== undefined) writeFileSync(json, `${JSON.stringify(plan, null, 1)}\n`);
    for (const e of plan.events) process.stdout.write(`${e.atS} ${e.action} ${e.target} ${e.afterMs}\n`);
    return 0;
  } catch (e) {
    if (e instanceof RangeError) throw new UsageError(e.message);
    throw e;
  }
}

if (isMain(import.meta.url)) process.exitCode = main(process.argv.slice(2));
