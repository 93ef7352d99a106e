// The MUX's latency measurement (docs/latency.md): a timed echo to every host agent that serves a
// backend of a pool with a latency section. The request goes as VXLAN (VNI 0) from our provider
// address to the host's, so it takes the data's fabric path and passes the host agent's source checks;
// the host agent answers on UDP with its last probe round trip per nic. A backend's latency is the
// smallest echo round trip of the last `samples` echoes to its host plus the smallest probe round trip
// of the last `samples` answers that carried one (docs/latency.md: why the minimum).
//
// Never on the data path: one UDP socket of its own, a timer, and the answers as they come. The MUX
// compiles new tables only when a pool's band changes (mux/tables.ts latencyBandChanged).
import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';
import { randomBytes } from 'node:crypto';
import type { SlbxConfig } from '../shared/config.js';
import { writeVxlan } from '../shared/vxlan.js';
import {
  LATENCY_ECHO_REQUEST_LEN,
  LATENCY_ECHO_VNI,
  PROBE_RTT_NONE,
  SampleWindow,
  parseEchoAnswer,
  writeEchoRequest,
} from '../shared/latency.js';

/** How often the meter looks for hosts that are due (the smallest intervalMs allowed is 100). */
export const LATENCY_TICK_MS = 50;
/** An answer later than this (or than 2 intervals, whichever is longer) is lost; one that comes after is late. */
export const LATENCY_ECHO_TIMEOUT_MS = 2000;
/** Requests in flight per host; an older one is given up as lost. */
const MAX_OUTSTANDING = 8;

export const LATENCY_COUNTER_NAMES = [
  'latency_echo_sent',
  'latency_echo_answered',
  'latency_echo_send_error',
  /** An answer from an address that is no host's provider address. */
  'latency_echo_unknown_source',
  /** An answer that does not parse (magic, version, type, entries, length). */
  'latency_echo_bad',
  /** An answer whose nonce matches no request sent to that host. */
  'latency_echo_unsolicited',
  /** An answer to a request already given up (after the timeout). */
  'latency_echo_late',
  /** A request without an answer by the timeout. */
  'latency_echo_lost',
] as const;
export type LatencyCounterName = (typeof LATENCY_COUNTER_NAMES)[number];

interface HostPlan {
  readonly name: string;
  readonly address: string;
  readonly intervalMs: number;
  /** The nics of latency pools on this host. */
  readonly nics: readonly string[];
}

interface HostState {
  plan: HostPlan;
  nextAtMs: number;
  /** nonce (16 hex) -> sent at (performance.now()). */
  readonly outstanding: Map<string, number>;
  /** Recently given up (late answers are told from unsolicited ones). */
  readonly givenUp: Set<string>;
  lastRttMs: number | null;
  readonly rtt: SampleWindow;
  sent: number;
  answered: number;
}

/** What the meter measures for a config: per host, its interval and the nics; per nic, the window size. */
export function planLatency(config: SlbxConfig): { hosts: HostPlan[]; windowByNic: Map<string, number>; family: 4 | 6 } {
  const family = config.fabric.underlay === 'ipv6' ? 6 : 4;
  const nicHost = new Map(config.nics.map((n) => [n.name, n.host]));
  const interval = new Map<string, number>();
  const nicsOf = new Map<string, Set<string>>();
  const windowByNic = new Map<string, number>();
  for (const p of config.pools) {
    if (p.latency === null) continue;
    for (const b of p.backends) {
      const h = nicHost.get(b.nic);
      if (h === undefined) continue;
      interval.set(h, Math.min(interval.get(h) ?? Infinity, p.latency.intervalMs));
      const set = nicsOf.get(h) ?? new Set<string>();
      set.add(b.nic);
      nicsOf.set(h, set);
      windowByNic.set(b.nic, Math.max(windowByNic.get(b.nic) ?? 0, p.latency.samples));
    }
  }
  const hosts: HostPlan[] = [];
  for (const h of config.hosts) {
    const iv = interval.get(h.name);
    if (iv === undefined) continue;
    const address = family === 6 ? h.address6?.text : h.address.text;
    if (address === undefined) continue;
    hosts.push({ name: h.name, address, intervalMs: iv, nics: [...nicsOf.get(h.name)!].sort() });
  }
  return { hosts, windowByNic, family };
}

export interface LatencyMeterOptions {
  config: SlbxConfig;
  /** Our provider address of the underlay's family (the socket binds it). */
  localAddress: string;
  /** After each answer that added samples: the MUX checks whether a band changed. */
  onSamples: () => void;
  now?: () => number;
}

export class LatencyMeter {
  private config: SlbxConfig;
  private localAddress: string;
  private readonly onSamples: () => void;
  private readonly now: () => number;
  private socket: Socket | null = null;
  private socketError: string | null = null;
  private timer: NodeJS.Timeout | null = null;
  private hosts = new Map<string, HostState>();
  private byAddress = new Map<string, HostState>();
  /** Per nic: the probe round trips (ms) its host reported, one per answer that carried one. */
  private windows = new Map<string, SampleWindow>();
  private hostOfNic = new Map<string, string>();
  private family: 4 | 6 = 4;
  readonly counters: Record<LatencyCounterName, number> = Object.fromEntries(LATENCY_COUNTER_NAMES.map((n) => [n, 0])) as Record<
    LatencyCounterName,
    number
  >;

  constructor(o: LatencyMeterOptions) {
    this.config = o.config;
    this.localAddress = o.localAddress;
    this.onSamples = o.onSamples;
    this.now = o.now ?? (() => performance.now());
    this.plan();
  }

  /** Whether any pool asks for latency (no socket, no timer otherwise). */
  get active(): boolean {
    return this.hosts.size > 0;
  }

  private plan(): void {
    const p = planLatency(this.config);
    this.family = p.family;
    const next = new Map<string, HostState>();
    for (const h of p.hosts) {
      const old = this.hosts.get(h.name);
      if (old !== undefined && old.plan.address === h.address) {
        old.plan = h;
        old.rtt.resize(Math.max(...h.nics.map((n) => p.windowByNic.get(n) ?? 1)));
        next.set(h.name, old);
        continue;
      }
      next.set(h.name, {
        plan: h,
        nextAtMs: 0,
        outstanding: new Map(),
        givenUp: new Set(),
        lastRttMs: null,
        rtt: new SampleWindow(Math.max(...h.nics.map((n) => p.windowByNic.get(n) ?? 1))),
        sent: 0,
        answered: 0,
      });
    }
    this.hosts = next;
    this.hostOfNic = new Map(p.hosts.flatMap((h) => h.nics.map((n) => [n, h.name] as [string, string])));
    this.byAddress = new Map([...next.values()].map((s) => [s.plan.address, s]));
    const windows = new Map<string, SampleWindow>();
    for (const [nic, n] of p.windowByNic) {
      const w = this.windows.get(nic) ?? new SampleWindow(n);
      w.resize(n);
      windows.set(nic, w);
    }
    this.windows = windows;
  }

  start(): void {
    if (this.timer !== null) return;
    this.timer = setInterval(() => this.tick(), LATENCY_TICK_MS);
    this.openSocket();
    this.tick();
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.socket?.close();
    this.socket = null;
  }

  applyConfig(config: SlbxConfig, localAddress: string): void {
    const rebind = localAddress !== this.localAddress || (config.fabric.underlay === 'ipv6') !== (this.family === 6);
    this.config = config;
    this.localAddress = localAddress;
    this.plan();
    if (rebind && this.timer !== null) {
      this.socket?.close();
      this.socket = null;
      this.openSocket();
    }
  }

  /**
   * The backend's latency: the smallest echo round trip to its host in the window plus the smallest
   * probe round trip to it the host reported in the window (none reported: the host's alone); undefined
   * before the host's first answer. The minimum, because what the machines add (a busy event loop, a
   * queue) only ever adds: the smallest of N samples is the path's own round trip.
   */
  latencyMs(nic: string): number | undefined {
    const host = this.hostOfNic.get(nic);
    const h = host === undefined ? undefined : this.hosts.get(host);
    if (h === undefined || h.rtt.size === 0) return undefined;
    return h.rtt.min()! + (this.windows.get(nic)?.min() ?? 0);
  }

  private openSocket(): void {
    const s = createSocket({ type: this.family === 6 ? 'udp6' : 'udp4' });
    s.on('error', (e) => {
      this.socketError = e.message;
    });
    s.on('message', (msg, rinfo) => this.onAnswer(msg, rinfo));
    s.bind({ address: this.localAddress, port: 0, exclusive: true });
    this.socket = s;
  }

  private tick(): void {
    const now = this.now();
    for (const h of this.hosts.values()) {
      // give up on requests past the timeout
      const timeout = Math.max(LATENCY_ECHO_TIMEOUT_MS, 2 * h.plan.intervalMs);
      for (const [nonce, at] of h.outstanding) {
        if (now - at < timeout) continue;
        h.outstanding.delete(nonce);
        this.giveUp(h, nonce);
        this.counters.latency_echo_lost++;
      }
      if (now < h.nextAtMs) continue;
      h.nextAtMs = now + h.plan.intervalMs;
      this.send(h, now);
    }
  }

  private giveUp(h: HostState, nonce: string): void {
    h.givenUp.add(nonce);
    if (h.givenUp.size > 64) h.givenUp.delete(h.givenUp.values().next().value!);
  }

  /**
   * The next request to a host: a fresh random nonce, registered as outstanding at `now`; the bytes
   * are the VXLAN header (VNI 0) and the echo request. Null for a host the meter does not measure.
   */
  makeRequest(host: string, now: number): Buffer | null {
    const h = this.hosts.get(host);
    if (h === undefined) return null;
    const nonce = randomBytes(8);
    const b = Buffer.alloc(8 + LATENCY_ECHO_REQUEST_LEN);
    writeVxlan({ flags: 0x08, vni: LATENCY_ECHO_VNI }, b, 0);
    writeEchoRequest({ nonceHi: nonce.readUInt32BE(0), nonceLo: nonce.readUInt32BE(4) }, b, 8);
    if (h.outstanding.size >= MAX_OUTSTANDING) {
      const oldest = h.outstanding.keys().next().value!;
      h.outstanding.delete(oldest);
      this.giveUp(h, oldest);
      this.counters.latency_echo_lost++;
    }
    h.outstanding.set(nonce.toString('hex'), now);
    h.sent++;
    this.counters.latency_echo_sent++;
    return b;
  }

  private send(h: HostState, now: number): void {
    const s = this.socket;
    if (s === null) {
      this.counters.latency_echo_send_error++;
      return;
    }
    const b = this.makeRequest(h.plan.name, now)!;
    const key = b.toString('hex', 16, 24);
    s.send(b, this.config.fabric.vxlanPort, h.plan.address, (e) => {
      if (e) {
        this.socketError = e.message;
        this.counters.latency_echo_send_error++;
        h.outstanding.delete(key);
      }
    });
  }

  /** An answer on our socket (also from tests). */
  onAnswer(msg: Buffer, rinfo: Pick<RemoteInfo, 'address'>): void {
    const now = this.now();
    const h = this.byAddress.get(rinfo.address);
    if (h === undefined) {
      this.counters.latency_echo_unknown_source++;
      return;
    }
    const a = parseEchoAnswer(msg, 0, msg.length);
    if (typeof a === 'number') {
      this.counters.latency_echo_bad++;
      return;
    }
    const key = ((BigInt(a.nonceHi) << 32n) | BigInt(a.nonceLo)).toString(16).padStart(16, '0');
    const at = h.outstanding.get(key);
    if (at === undefined) {
      if (h.givenUp.delete(key)) this.counters.latency_echo_late++;
      else this.counters.latency_echo_unsolicited++;
      return;
    }
    h.outstanding.delete(key);
    // the requests sent before this one and still open were overtaken: they stay open until the timeout
    const rttMs = now - at;
    h.lastRttMs = rttMs;
    h.rtt.push(rttMs);
    h.answered++;
    this.counters.latency_echo_answered++;
    const probe = new Map(a.entries.map((e) => [e.nic, e.probeRttUs]));
    for (const nic of h.plan.nics) {
      const w = this.windows.get(nic);
      const us = probe.get(nic);
      // a nic without a probe round trip (no probe, none successful yet, not configured there yet): none
      if (w !== undefined && us !== undefined && us !== PROBE_RTT_NONE) w.push(us / 1000);
    }
    this.onSamples();
  }

  /** For GET /status: per host the echo's round trip, per backend its samples and latency. */
  status(): Record<string, unknown> {
    const r = (x: number | null | undefined) => (x === null || x === undefined ? null : Math.round(x * 1000) / 1000);
    return {
      socket: this.socket !== null,
      lastError: this.socketError ?? undefined,
      hosts: [...this.hosts.values()].map((h) => ({
        host: h.plan.name,
        pa: h.plan.address,
        intervalMs: h.plan.intervalMs,
        rttMs: r(h.rtt.min()),
        medianRttMs: r(h.rtt.median()),
        lastRttMs: r(h.lastRttMs),
        sent: h.sent,
        answered: h.answered,
        outstanding: h.outstanding.size,
      })),
      backends: [...this.windows].map(([nic, w]) => ({
        nic,
        host: this.hostOfNic.get(nic),
        latencyMs: r(this.latencyMs(nic)),
        probeRttMs: r(w.min()),
        samples: this.hosts.get(this.hostOfNic.get(nic) ?? '')?.rtt.size ?? 0,
        probeSamples: w.size,
        window: w.max,
      })),
      counters: { ...this.counters },
    };
  }
}
