// The host agent's health prober: probes every (local nic, probe, family) that a rule uses, through the
// nic's port (host-agent/probe-tcp.ts), feeds each result to the dampener (shared/probe-state.ts), logs
// state changes, and tells a listener (the policy client, toward the controller) the full set of probe
// states on every change. How and why: docs/probes.md.
//
// Timing: one probe in flight per target. The first probe of a target starts after a random delay below
// min(intervalMs, 1 s), so that targets do not all fire together; each next one starts
// intervalMs - jitter after the previous one started (jitter: up to 5 % of the interval, at most 100 ms),
// or when the previous one ends if that is later (it never is: timeoutMs <= intervalMs). So probes never
// drift past the interval, and a failure is detected within intervalMs x downThreshold + timeoutMs.
import type { IpAddr } from '../shared/addr.js';
import type { ProbeConfig, SlbxConfig } from '../shared/config.js';
import {
  INITIAL_PROBE_FSM,
  aggregateByNicProbe,
  isHealthyState,
  stepProbeState,
  type ProbeEvent,
  type ProbeFsm,
  type ProbeStatus,
} from '../shared/probe-state.js';
import { log as defaultLog, type LogLevel } from '../runtime/log.js';
import { ProbeTcp, formatTarget, type ProbeOutcome, type ProbeSpec } from './probe-tcp.js';

/** Spread of the first probes after start or after a target appears. */
export const PROBE_FIRST_SPREAD_MS = 1000;
/** Each interval is shortened by a random jitter of up to this share of it ... */
export const PROBE_JITTER_SHARE = 0.05;
/** ... and at most this much. */
export const PROBE_JITTER_MAX_MS = 100;

/** Called with every probe state of this host agent whenever one of them changes state. */
export type HealthListener = (results: ProbeStatus[]) => void;

/**
 * Where health goes beyond the host agent: structurally runtime/policy-client.ts HealthReporter, which
 * takes the full set, one entry per (nic, probe) (aggregateByNicProbe), on every change.
 */
export interface HealthSink {
  reportHealth(results: readonly { nic: string; probe: string; state: 'up' | 'down' | 'unknown'; detail?: string }[]): void;
}

/** A HealthListener that hands the full set, one entry per (nic, probe), to a HealthSink. */
export function healthListenerFor(sink: HealthSink): HealthListener {
  return (results) =>
    sink.reportHealth(aggregateByNicProbe(results).map((r) => ({ nic: r.nic, probe: r.probe, state: r.state, detail: r.detail })));
}

/** What the prober needs from the daemon's ports. */
export interface ProberPorts {
  /** The MAC of the nic's port (host side), or null while the port is not open. */
  portMac(nic: string): Uint8Array | null;
  /** Sends a whole Ethernet frame out of the nic's port. */
  send(nic: string, frame: Buffer, len: number): boolean;
}

/** One thing to probe: a nic's address of one family, with one probe definition. */
export interface ProbeTarget {
  /** `${nic}/${probe}/${family}` */
  readonly key: string;
  readonly nic: string;
  readonly probe: ProbeConfig;
  readonly family: 4 | 6;
  /** The nic's address of that family. */
  readonly dst: IpAddr;
  /** The network's gateway of that family (the probe's source), or null: cannot probe. */
  readonly src: IpAddr | null;
  readonly network: string;
  readonly nicMac: Uint8Array;
  /** The rules (`vip:port/name`) that use this probe on this nic. */
  readonly rules: readonly string[];
}

/** The probe targets of one host: every (local nic, probe, VIP family) a rule asks for. Pure. */
export function planProbeTargets(config: SlbxConfig, hostName: string): ProbeTarget[] {
  const probes = new Map(config.probes.map((p) => [p.name, p]));
  const pools = new Map(config.pools.map((p) => [p.name, p]));
  const nics = new Map(config.nics.filter((n) => n.host === hostName).map((n) => [n.name, n]));
  const nets = new Map(config.networks.map((n) => [n.name, n]));
  const out = new Map<string, { t: Omit<ProbeTarget, 'rules'>; rules: string[] }>();
  for (const v of config.vips) {
    for (const r of v.rules) {
      if (r.probe === null) continue;
      const probe = probes.get(r.probe);
      const pool = pools.get(r.pool);
      if (probe === undefined || pool === undefined) continue; // config validation refuses these
      for (const b of pool.backends) {
        const nic = nics.get(b.nic);
        if (nic === undefined) continue; // on another host
        const family = v.address.family;
        const dst = family === 4 ? nic.address4 : nic.address6;
        if (dst === null) continue; // config validation refuses this too
        const net = nets.get(nic.network)!;
        const key = `${nic.name}/${probe.name}/${family}`;
        let e = out.get(key);
        if (e === undefined) {
          e = {
            t: {
              key,
              nic: nic.name,
              probe,
              family,
              dst,
              src: family === 4 ? net.gateway : net.gateway6,
              network: net.name,
              nicMac: nic.mac,
            },
            rules: [],
          };
          out.set(key, e);
        }
        const ruleName = `${v.address.family === 6 ? `[${v.address.text}]` : v.address.text}:${r.frontendPort}/${r.name}`;
        if (!e.rules.includes(ruleName)) e.rules.push(ruleName);
      }
    }
  }
  return [...out.values()]
    .map((e) => ({ ...e.t, rules: e.rules }))
    .sort((a, b) =>
      a.nic < b.nic ? -1 : a.nic > b.nic ? 1 : a.probe.name < b.probe.name ? -1 : a.probe.name > b.probe.name ? 1 : a.family - b.family,
    );
}

/** Same endpoint and same question: the state learnt so far still holds after a config change. */
function sameProbe(a: ProbeTarget, b: ProbeTarget): boolean {
  return (
    a.dst.text === b.dst.text &&
    (a.src?.text ?? null) === (b.src?.text ?? null) &&
    a.probe.protocol === b.probe.protocol &&
    a.probe.port === b.probe.port &&
    a.probe.path === b.probe.path &&
    a.nicMac.every((x, i) => x === b.nicMac[i])
  );
}

interface TargetState {
  plan: ProbeTarget;
  fsm: ProbeFsm;
  sinceMs: number;
  lastResult: ProbeEvent | null;
  detail: string;
  reason: string;
  rttMs: number | null;
  /** The last successful probe's SYN to SYN-ACK time (one round trip), ms. */
  connectMs: number | null;
  timer: NodeJS.Timeout | null;
  inFlight: boolean;
  startedAt: number;
  stopped: boolean;
  sent: number;
  succeeded: number;
  failed: number;
}

export interface ProberOptions {
  hostName: string;
  config: SlbxConfig;
  ports: ProberPorts;
  onChange?: HealthListener | null;
  /** JSON-line logger (default runtime/log.ts). */
  log?: (level: LogLevel, event: string, fields: Record<string, unknown>) => void;
  /** A uniform number in [0, 1) (default Math.random), for the jitter. */
  random?: () => number;
}

export class Prober {
  readonly hostName: string;
  onChange: HealthListener | null;
  private readonly ports: ProberPorts;
  private readonly engine: ProbeTcp;
  private readonly log: (level: LogLevel, event: string, fields: Record<string, unknown>) => void;
  private readonly random: () => number;
  private targets = new Map<string, TargetState>();
  private plans: ProbeTarget[];
  private nicMacs = new Map<string, Uint8Array>();
  private running = false;

  constructor(o: ProberOptions) {
    this.hostName = o.hostName;
    this.ports = o.ports;
    this.onChange = o.onChange ?? null;
    this.log = o.log ?? defaultLog;
    this.random = o.random ?? Math.random;
    this.plans = planProbeTargets(o.config, o.hostName);
    this.setNicMacs(o.config);
    this.engine = new ProbeTcp({
      send: (nic, frame, len) => this.ports.send(nic, frame, len),
      macs: (nic) => {
        const src = this.ports.portMac(nic);
        const dst = this.nicMacs.get(nic);
        return src === null || dst === undefined ? null : { src, dst };
      },
    });
  }

  private setNicMacs(config: SlbxConfig): void {
    this.nicMacs = new Map(config.nics.filter((n) => n.host === this.hostName).map((n) => [n.name, n.mac]));
  }

  /** Starts probing every target (idempotent). */
  start(): void {
    if (this.running) return;
    this.running = true;
    for (const p of this.plans) this.addTarget(p);
    if (this.plans.length > 0) {
      this.log('info', 'probes_started', { targets: this.plans.map((p) => describePlan(p)) });
    }
  }

  /** Stops every probe; results still in flight are ignored. */
  stop(): void {
    if (!this.running) return;
    this.running = false;
    for (const t of this.targets.values()) this.stopTarget(t);
    this.targets.clear();
    this.engine.cancel();
  }

  /** Follows a new config: new targets start, removed ones stop, the others keep their state. */
  applyConfig(config: SlbxConfig): void {
    this.plans = planProbeTargets(config, this.hostName);
    this.setNicMacs(config);
    if (!this.running) return;
    const added: string[] = [];
    const removed: string[] = [];
    const next = new Set(this.plans.map((p) => p.key));
    for (const [key, t] of this.targets) {
      if (!next.has(key)) {
        this.stopTarget(t);
        this.targets.delete(key);
        removed.push(key);
      }
    }
    for (const p of this.plans) {
      const t = this.targets.get(p.key);
      if (t !== undefined && sameProbe(t.plan, p)) {
        t.plan = p;
        continue;
      }
      if (t !== undefined) {
        this.stopTarget(t);
        this.targets.delete(p.key);
        removed.push(p.key);
      }
      this.addTarget(p);
      added.push(p.key);
    }
    if (added.length > 0 || removed.length > 0) {
      this.log('info', 'probes_changed', { added, removed });
      this.notify();
    }
  }

  /** An IP packet a backend sent to its gateway address (VERDICT_LOCAL) on the port of `nic`. */
  onLocalPacket(nic: string, buf: Uint8Array, off: number, len: number): void {
    this.engine.onPacket(nic, buf, off, len);
  }

  /** Every probe target's state, sorted by nic, probe, family. */
  status(): ProbeStatus[] {
    const out: ProbeStatus[] = [];
    for (const t of this.targets.values()) out.push(this.statusOf(t));
    return out.sort((a, b) =>
      a.nic < b.nic ? -1 : a.nic > b.nic ? 1 : a.probe < b.probe ? -1 : a.probe > b.probe ? 1 : a.family - b.family,
    );
  }

  /**
   * Per nic with a healthy probe target: the smallest SYN to SYN-ACK time of their last successful
   * probes, ms (one network round trip to the backend; the latency echo's answer carries it).
   */
  connectTimes(): Map<string, number> {
    const out = new Map<string, number>();
    for (const t of this.targets.values()) {
      if (t.connectMs === null || !isHealthyState(t.fsm.state)) continue;
      const had = out.get(t.plan.nic);
      if (had === undefined || t.connectMs < had) out.set(t.plan.nic, t.connectMs);
    }
    return out;
  }

  /** Counters of the probe TCP client (every target), for GET /status. */
  counters(): Record<string, number> {
    return this.engine.counters.snapshot(true);
  }

  /** Per-target totals and the rules behind each, for GET /status. */
  details(): Record<string, unknown>[] {
    return [...this.targets.values()].map((t) => ({
      key: t.plan.key,
      rules: t.plan.rules,
      protocol: t.plan.probe.protocol,
      path: t.plan.probe.path,
      intervalMs: t.plan.probe.intervalMs,
      timeoutMs: t.plan.probe.timeoutMs,
      upThreshold: t.plan.probe.upThreshold,
      downThreshold: t.plan.probe.downThreshold,
      source: t.plan.src?.text ?? null,
      sent: t.sent,
      succeeded: t.succeeded,
      failed: t.failed,
    }));
  }

  private statusOf(t: TargetState): ProbeStatus {
    const p = t.plan;
    return {
      nic: p.nic,
      probe: p.probe.name,
      family: p.family,
      target: formatTarget(p.dst, p.probe.port),
      state: t.fsm.state,
      healthy: isHealthyState(t.fsm.state),
      since: new Date(t.sinceMs).toISOString(),
      lastResult: t.lastResult,
      detail: t.detail,
      reason: t.reason,
      successes: t.fsm.successes,
      failures: t.fsm.failures,
      rttMs: t.rttMs,
    };
  }

  private addTarget(p: ProbeTarget): void {
    const t: TargetState = {
      plan: p,
      fsm: INITIAL_PROBE_FSM,
      sinceMs: Date.now(),
      lastResult: null,
      detail: 'not probed yet',
      reason: 'not probed yet',
      rttMs: null,
      connectMs: null,
      timer: null,
      inFlight: false,
      startedAt: 0,
      stopped: false,
      sent: 0,
      succeeded: 0,
      failed: 0,
    };
    this.targets.set(p.key, t);
    if (p.src === null) {
      // nothing to send from: the gateway address is what the backend answers to (and what the data
      // plane hands back to us). The state stays unknown, which counts as healthy.
      t.detail = `cannot probe: network ${p.network} has no IPv${p.family} gateway`;
      t.reason = t.detail;
      this.log('warn', 'probe_impossible', {
        nic: p.nic,
        probe: p.probe.name,
        target: formatTarget(p.dst, p.probe.port),
        reason: t.detail,
      });
      return;
    }
    this.schedule(t, Math.floor(this.random() * Math.min(p.probe.intervalMs, PROBE_FIRST_SPREAD_MS)));
  }

  private stopTarget(t: TargetState): void {
    t.stopped = true;
    if (t.timer !== null) clearTimeout(t.timer);
    t.timer = null;
  }

  private schedule(t: TargetState, delayMs: number): void {
    if (t.stopped) return;
    if (t.timer !== null) clearTimeout(t.timer);
    t.timer = setTimeout(
      () => {
        t.timer = null;
        this.runProbe(t);
      },
      Math.max(0, delayMs),
    );
  }

  private runProbe(t: TargetState): void {
    if (t.stopped || t.inFlight) return;
    const p = t.plan;
    t.startedAt = performance.now();
    t.inFlight = true;
    t.sent++;
    const portMac = this.ports.portMac(p.nic);
    if (portMac === null) {
      this.onResult(t, { ok: false, detail: 'port not open', rttMs: 0 });
      return;
    }
    const spec: ProbeSpec = {
      nic: p.nic,
      srcMac: portMac,
      dstMac: p.nicMac,
      src: p.src!,
      dst: p.dst,
      dstPort: p.probe.port,
      http: p.probe.protocol === 'http' ? { path: p.probe.path ?? '/' } : null,
      timeoutMs: p.probe.timeoutMs,
    };
    this.engine.start(spec, (o) => this.onResult(t, o));
  }

  private onResult(t: TargetState, o: ProbeOutcome): void {
    t.inFlight = false;
    if (t.stopped) return;
    const p = t.plan;
    const event: ProbeEvent = o.ok ? 'success' : 'failure';
    if (o.ok) {
      t.succeeded++;
      t.rttMs = o.rttMs;
      t.connectMs = o.connectMs ?? null;
    } else t.failed++;
    const step = stepProbeState(t.fsm, event, p.probe);
    const from = t.fsm.state;
    t.fsm = step.next;
    t.lastResult = event;
    t.detail = o.detail;
    if (step.changed) {
      t.sinceMs = Date.now();
      t.reason = `${step.reason}; last: ${o.detail}`;
      this.log(step.next.state === 'down' ? 'warn' : 'info', 'probe_state', {
        nic: p.nic,
        probe: p.probe.name,
        target: formatTarget(p.dst, p.probe.port),
        from,
        to: step.next.state,
        reason: step.reason,
        detail: o.detail,
        ...(o.ok ? { rttMs: o.rttMs } : {}),
      });
    }
    // the next probe: intervalMs (less a little jitter) after this one started
    const interval = p.probe.intervalMs;
    const jitter = this.random() * Math.min(interval * PROBE_JITTER_SHARE, PROBE_JITTER_MAX_MS);
    this.schedule(t, t.startedAt + interval - jitter - performance.now());
    if (step.changed) this.notify();
  }

  private notify(): void {
    const cb = this.onChange;
    if (cb === null) return;
    try {
      cb(this.status());
    } catch (e) {
      this.log('error', 'health_listener_failed', { error: (e as Error).message });
    }
  }
}

function describePlan(p: ProbeTarget): string {
  const what = p.probe.protocol === 'http' ? `http GET ${p.probe.path}` : 'tcp';
  return `${p.nic} ${p.probe.name} ${what} ${formatTarget(p.dst, p.probe.port)} every ${p.probe.intervalMs} ms from ${p.src?.text ?? '(no gateway)'}`;
}
