// The MUX daemon: owns the capture on the fabric interface, runs the data plane on every frame, resolves
// the hosts' provider addresses by ARP, ages the flow table, and swaps in new tables when the policy
// changes. start() and stop() are symmetric and idempotent.
//
// Send paths (--send-path; measured and chosen in docs/io-paths.md). The data plane always writes the
// whole VXLAN frame into ctx.out; the path decides how much of it goes to the kernel:
//   cap  ctx.out[0 ..)  the whole frame, injected on the capture's handle (pcap_sendpacket)
//   raw  ctx.out[14 ..) outer IPv4 onwards, on one IPPROTO_RAW socket, routed by the host's PA (the kernel
//                       resolves the next hop and writes the Ethernet header)
//   udp  ctx.out[42 ..) VXLAN header onwards, on a connected UDP socket per host (the kernel writes IPv4
//                       and UDP: the outer source port is the socket's, not the flow hash's)
import { formatMac } from '../shared/addr.js';
import type { SlbxConfig } from '../shared/config.js';
import { DEFAULT_CAPTURE_BUFFER_BYTES } from '../runtime/pcap-port.js';
import { RawSender } from '../runtime/raw-sender.js';
import { createFramePort, resolveIo, type FramePort, type IoPath } from '../runtime/frame-port.js';
import { UdpRingSender, UDP_REFUSED_NOT_CONNECTED, UDP_REFUSED_RING_FULL, UDP_REFUSED_TOO_BIG } from '../runtime/udp-sender.js';
import { logInfo, logWarn } from '../runtime/log.js';
import { compileMuxTables, latencyBandChanged, ALL_HEALTHY, type HealthView, type MuxHost, type MuxTables } from './tables.js';
import { LatencyMeter } from './latency.js';
import { buildMuxContext, muxContextKey } from './context.js';
import { processPacket, sweepFlows, VERDICT_CONTROL, VERDICT_FORWARD, VERDICT_REPLY, type MuxContext } from './data-plane.js';
import { NeighborResolver, NEIGHBOR_RETRY_MS } from './neighbors.js';
import { underlayRoutesOf } from '../shared/next-hop.js';
import { listFlows, type ListedFlow } from './flow-list.js';
import { MuxBgp } from './bgp/mux-bgp.js';
import { installMuxEwDrop, muxEwCaptureClause, muxRedirectMac, removeMuxEwDrop, sendMuxRedirect } from './east-west-io.js';
import { MuxTrafficCounters, type BackendTraffic } from './traffic-counters.js';
import type { SnatPolicyRange } from './snat-ranges.js';
import { MuxWorkers } from './workers.js';
import { LoopStallWatch } from './loop-stall.js';
import { fanoutGroupId } from '../runtime/ring-port.js';

const CLOCK_TICK_MS = 250;

export const SEND_PATHS = ['cap', 'raw', 'udp'] as const;
export type SendPath = (typeof SEND_PATHS)[number];
export const DEFAULT_SEND_PATH: SendPath = 'cap';
/** Where each send path starts in ctx.out: the whole frame, the outer IPv4 header, the VXLAN header. */
export const SEND_PATH_OFFSET: Readonly<Record<SendPath, number>> = { cap: 0, raw: 14, udp: 14 + 20 + 8 };
const OUTER_IP_OFF = SEND_PATH_OFFSET.raw;
const VXLAN_OFF = SEND_PATH_OFFSET.udp;
/** udp path: sends in flight per host socket. */
export const UDP_RING_SLOTS = 1024;
const UDP_SEND_BUFFER_BYTES = 4 * 1024 * 1024;

export function isSendPath(text: string): text is SendPath {
  return (SEND_PATHS as readonly string[]).includes(text);
}

export interface MuxDaemonOptions {
  config: SlbxConfig;
  name: string;
  iface: string;
  mac: Uint8Array;
  captureBufferBytes?: number;
  health?: HealthView;
  /** How VXLAN frames leave (default cap). */
  sendPath?: SendPath;
  /** false: no BGP speaker even when the config has a bgp section (tests, replay). Default true. */
  bgp?: boolean;
  /** Capture and injection (--io): pcap (default) or ring (falls back to pcap when the addon is missing). */
  io?: IoPath;
  /**
   * The policy will come from a controller (--controller with a bootstrap --config): BGP holds the VIPs
   * back until policyApplied() (or BGP_POLICY_WAIT_MS), since the bootstrap tables know no health.
   */
  awaitPolicy?: boolean;
  /** The policy key (the controller's API token): signs Fastpath redirects (docs/east-west.md); none: no redirects. */
  policyKey?: string | null;
  /**
   * Worker threads running the data plane (--workers N, mux/workers.ts); 1 (the default): the data plane
   * runs on the main thread as before. N >= 2 needs io ring and the cap send path.
   */
  workers?: number;
}

/** Why --workers N cannot run with these settings, or null. */
export function muxWorkersRefusal(workers: number, io: IoPath, sendPath: SendPath): string | null {
  if (workers <= 1) return null;
  if (io !== 'ring')
    return `--workers ${workers} needs --io ring (PACKET_FANOUT spreads the flows over the workers' ring sockets; libpcap's binding cannot load in a worker thread)`;
  if (sendPath !== 'cap') return `--workers ${workers} needs --send-path cap (the raw and udp senders stay on one thread)`;
  return null;
}

/**
 * The BPF filter for a VIP set: the VIPs' packets (tagged or not), and what resolves the hosts: ARP, or
 * on an IPv6 underlay neighbour solicitations and advertisements (ICMPv6 135/136 right after the header).
 */
export function muxCaptureFilter(config: SlbxConfig, pa = ''): string {
  // internal VIPs are no public VIP hosts: they reach a MUX only inside VXLAN from a host (docs/east-west.md)
  const ew = pa === '' ? null : muxEwCaptureClause(config, pa);
  // The public VIPs and outbound NAT's frontend IPs (docs/outbound.md), by the prefixes that hold them all
  // (vipRanges: the validator refuses a public VIP or a frontend IP outside them). So the filter does not
  // change when a VIP is added or removed, and the capture is not reopened for it: a reopen loses the
  // frames the old handle still holds, uncounted (a client's segments lost at every VIP change, then
  // retransmitted, moved by the router's hash to another MUX and reset there). A packet to an address of
  // a range that is no VIP is counted drop_not_vip.
  const hosts = config.vipRanges.map((r) =>
    r.network.family === 4 ? `dst net ${r.network.text}/${r.prefixLen}` : `ip6 dst net ${r.network.text}/${r.prefixLen}`,
  );
  const resolve = config.fabric.underlay === 'ipv6' ? '(icmp6 and (ip6[40] == 135 or ip6[40] == 136))' : 'arp';
  if (hosts.length === 0) return ew === null ? resolve : `${resolve} or ${ew}`;
  const any = hosts.join(' or ');
  // before `vlan`: in a BPF filter every test after it reads 4 bytes further on
  return `${resolve} or ${any}${ew === null ? '' : ` or ${ew}`} or (vlan and (${any}))`;
}

export class MuxDaemon {
  readonly name: string;
  readonly iface: string;
  readonly mac: Uint8Array;
  config: SlbxConfig;
  ctx: MuxContext;
  private port: FramePort;
  private filter = '';
  /** The redirect HMAC under the policy key (null: none), and the state of the nftables drop of host VXLAN. */
  private readonly redirectMac: MuxContext['ew']['mac'];
  private nftError: string | null = null;
  private nftInstalled = false;
  private timers: NodeJS.Timeout[] = [];
  private started = false;
  private generation = 1;
  private health: HealthView;
  private readonly neighbors: NeighborResolver;
  readonly sendPath: SendPath;
  /** The capture and injection in use, and why it is not the one asked for (null: it is). */
  readonly io: IoPath;
  private readonly ioFallback: string | null;
  /** 0 cap, 1 raw, 2 udp: compared per packet. */
  private readonly sendPathCode: number;
  private raw: RawSender | null = null;
  /** udp path: one connected socket per host, by the tables' host object (kept across configs with the same PA). */
  private udpByHost = new Map<MuxHost, UdpRingSender>();
  /** udp path: UdpRingSender.refusal -> the counter of that reason (indexes are the same in every context). */
  private readonly udpRefusalCounter: Int32Array;
  /** The port's deferredSendErrors() already counted in send_error_batch. */
  private batchErrorsCounted = 0;
  /** --io ring: send() queues, so tx_packets and tx_bytes come from the batches' results (countBatchErrors). */
  private readonly txDeferred: boolean;
  /** The port's sentCounted() (frames, bytes) already counted in tx_packets and tx_bytes, and a scratch pair. */
  private readonly txCounted = new Float64Array(2);
  private readonly txNow = new Float64Array(2);
  private readonly startedAt = Date.now();
  /** The BGP speakers (docs/bgp.md); idle without a bgp section. */
  private readonly bgp: MuxBgp | null;
  /** Started with a bootstrap config and waiting for the controller's first policy (awaitPolicy). */
  private awaitingPolicy: boolean;
  internalErrors = 0;
  lastInternalError = '';
  /** Per backend (nic id) and per (VIP, rule) slot: packets, bytes, new flows (mux/traffic-counters.ts). */
  readonly traffic = new MuxTrafficCounters();
  /** --workers N >= 2: the worker threads that run the data plane; null: it runs here (onFrame). */
  private readonly workers: MuxWorkers | null;
  /** The host MACs last handed to the workers (host name and MAC, joined). */
  private macsSent = '';
  /** The main thread's event-loop delay and stalls (BGP's keepalives share the loop): logged and in /status. */
  private readonly loop = new LoopStallWatch();

  constructor(o: MuxDaemonOptions) {
    this.name = o.name;
    this.iface = o.iface;
    this.mac = o.mac;
    this.config = o.config;
    this.redirectMac = muxRedirectMac(o.policyKey);
    this.health = o.health ?? ALL_HEALTHY;
    this.latency = new LatencyMeter({
      config: o.config,
      localAddress: this.underlayAddress(o.config),
      onSamples: () => this.onLatencySamples(),
    });
    this.ctx = this.newContext(o.config, compileMuxTables(o.config, this.measured(this.health), null, this.generation));
    this.traffic.grow(this.ctx.tables);
    const io = resolveIo(o.io ?? 'pcap');
    this.io = io.io;
    this.ioFallback = io.fallbackReason;
    this.port = createFramePort(io.io, o.iface);
    this.txDeferred = this.port.txDeferred;
    this.neighbors = new NeighborResolver(o.mac, (f, len) => {
      if (!this.port.send(f, 0, len)) this.ctx.counters.values[this.ctx.counters.index.send_error_neighbor]!++;
    });
    const ci = this.ctx.counters.index;
    this.udpRefusalCounter = new Int32Array(5).fill(ci.send_error_udp);
    this.udpRefusalCounter[UDP_REFUSED_NOT_CONNECTED] = ci.send_error_udp_not_connected;
    this.udpRefusalCounter[UDP_REFUSED_RING_FULL] = ci.send_error_udp_ring_full;
    this.udpRefusalCounter[UDP_REFUSED_TOO_BIG] = ci.send_error_udp_too_big;
    this.captureBufferBytes = o.captureBufferBytes ?? DEFAULT_CAPTURE_BUFFER_BYTES;
    this.sendPath = o.sendPath ?? DEFAULT_SEND_PATH;
    this.sendPathCode = SEND_PATHS.indexOf(this.sendPath);
    if (this.sendPathCode < 0) throw new Error(`unknown send path ${JSON.stringify(o.sendPath)}`);
    this.awaitingPolicy = o.awaitPolicy === true;
    const workers = o.workers ?? 1;
    const refusal = muxWorkersRefusal(workers, this.io, this.sendPath);
    if (refusal !== null)
      throw new Error(this.ioFallback !== null ? `${refusal}; the ring path is unavailable: ${this.ioFallback}` : refusal);
    this.workers =
      workers <= 1
        ? null
        : new MuxWorkers({
            count: workers,
            name: o.name,
            iface: o.iface,
            mac: o.mac,
            policyKey: o.policyKey ?? null,
            captureBufferBytes: o.captureBufferBytes ?? DEFAULT_CAPTURE_BUFFER_BYTES,
            fanoutGroup: fanoutGroupId(process.pid, 0),
            counterNames: this.ctx.counters.names.length,
            current: () => ({ config: this.config, tables: this.ctx.tables, filter: this.filter, macs: this.learnedMacs() }),
          });
    this.bgp =
      o.bgp === false
        ? null
        : new MuxBgp({
            name: o.name,
            config: o.config,
            tables: () => this.ctx.tables,
            ready: () => {
              for (const h of this.ctx.tables.hosts.values()) if (!h.macKnown) return false;
              return true;
            },
            policyKnown: () => !this.awaitingPolicy,
          });
  }

  private readonly captureBufferBytes: number;
  /** Latency routing's measurement (mux/latency.ts, docs/latency.md): runs while a pool has a latency section. */
  private readonly latency: LatencyMeter;

  /** Our provider address on the underlay (the latency echo's source). */
  private underlayAddress(config: SlbxConfig): string {
    const m = config.muxes.find((x) => x.name === this.name);
    if (m === undefined) return '0.0.0.0';
    return config.fabric.underlay === 'ipv6' ? (m.address6?.text ?? '::') : m.address.text;
  }

  /** The health view plus our own latency measurements (used only for pools with a latency section). */
  private measured(health: HealthView): HealthView {
    return { isHealthy: (nic, probe) => health.isHealthy(nic, probe), latencyMs: (nic) => this.latency.latencyMs(nic) };
  }

  /**
   * New latency samples: new tables only when a pool's band changed (the selection is cheap, a table is
   * not). Established flows keep their backend through the flow table, as for any table change.
   */
  private onLatencySamples(): void {
    if (!this.started) return;
    const view = this.measured(this.health);
    if (!latencyBandChanged(this.config, view, this.ctx.tables)) return;
    this.generation++;
    const tables = compileMuxTables(this.config, view, this.ctx.tables, this.generation);
    this.ctx.tables = tables;
    this.workers?.postTables(tables, null);
    logInfo('latency_band_changed', {
      generation: this.generation,
      pools: [...tables.poolTables.values()]
        .filter((t) => t.latency !== null)
        .map((t) => ({
          table: t.key,
          candidates: t.candidates,
          latencyMs: Object.fromEntries(t.latency!.backends.map((b) => [b.nic, b.latencyMs ?? null])),
        })),
    });
  }

  private self() {
    const m = this.config.muxes.find((x) => x.name === this.name);
    if (m === undefined)
      throw new Error(`mux ${JSON.stringify(this.name)} is not in the config (muxes: ${this.config.muxes.map((x) => x.name).join(', ')})`);
    return m;
  }

  /** The context for `config` (mux/context.ts: slbx-replay builds it the same way). */
  private newContext(config: SlbxConfig, tables: MuxTables): MuxContext {
    const ctx = buildMuxContext(config, this.name, tables, this.mac);
    ctx.ew.mac = this.redirectMac;
    ctx.ew.unixS = Math.floor(Date.now() / 1000);
    return ctx;
  }

  start(): void {
    if (this.started) return;
    if (this.sendPath === 'raw') this.raw = new RawSender(4);
    try {
      this.openCapture();
    } catch (e) {
      this.raw?.close();
      this.raw = null;
      throw e;
    }
    this.started = true;
    this.loop.start();
    this.workers?.start();
    this.syncEwDrop();
    if (this.sendPath === 'udp') this.syncUdpSenders();
    this.timers.push(setInterval(() => this.tick(), CLOCK_TICK_MS));
    this.timers.push(setInterval(() => this.resolveHosts(), NEIGHBOR_RETRY_MS));
    this.resolveHosts();
    if (this.latency.active) this.latency.start();
    if (this.ioFallback !== null) logWarn('io_fallback', { requested: 'ring', using: 'pcap', reason: this.ioFallback });
    logInfo('mux_started', {
      io: this.io,
      interface: this.iface,
      mac: formatMac(this.mac),
      pa: this.self().address.text,
      vips: this.config.vips.map((v) => v.address.text),
      filter: this.filter,
      sendPath: this.sendPath,
      workers: this.workers?.slots.length ?? 1,
    });
    this.bgp?.start();
  }

  /**
   * The first step of SIGTERM (runtime/daemon-main.ts calls it before stop()): BGP withdraws every VIP,
   * sends Cease and closes, and the MUX keeps forwarding for bgp.shutdownGraceMs while the router moves
   * the traffic elsewhere.
   */
  async drain(): Promise<void> {
    if (this.started) await this.bgp?.shutdown();
  }

  stop(): void {
    if (!this.started) return;
    this.started = false;
    this.loop.stop();
    this.countBatchErrors();
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    this.port.close();
    void this.workers?.stop();
    this.raw?.close();
    this.raw = null;
    for (const s of this.udpByHost.values()) s.close();
    this.udpByHost = new Map();
    this.latency.stop();
    this.bgp?.stop();
    if (this.nftInstalled) removeMuxEwDrop();
    this.nftInstalled = false;
    logInfo('mux_stopped', { counters: this.ctx.counters.snapshot() });
  }

  /** The nftables drop of host VXLAN while the config has an internal VIP (docs/east-west.md). */
  private syncEwDrop(): void {
    const want = muxEwCaptureClause(this.config, this.self().address.text) !== null;
    if (want === this.nftInstalled) return;
    if (!want) {
      removeMuxEwDrop();
      this.nftInstalled = false;
      return;
    }
    this.nftError = installMuxEwDrop(this.config, this.self().address);
    this.nftInstalled = this.nftError === null;
    if (this.nftError !== null)
      logWarn('nftables_failed', { error: this.nftError, effect: 'the kernel may answer host VXLAN with ICMP port unreachable' });
  }

  private openCapture(): void {
    this.filter = muxCaptureFilter(this.config, this.self().address.text);
    if (this.workers === null) {
      this.port.open(this.filter, (frame, len) => this.onFrame(frame, len), this.captureBufferBytes);
      return;
    }
    // --workers: the workers capture the VIPs' frames (this.filter, in their fanout group); this port,
    // outside the group, only resolves the hosts (ARP or ND) and sends the requests
    const resolve = this.config.fabric.underlay === 'ipv6' ? 'icmp6 and (ip6[40] == 135 or ip6[40] == 136)' : 'arp';
    this.port.open(resolve, (frame, len) => this.onResolveFrame(frame, len), this.captureBufferBytes);
    this.workers.postFilter(this.filter);
  }

  /** --workers: an ARP or ND frame: learned here, and any MAC that changed handed to the workers. */
  private onResolveFrame(frame: Buffer, len: number): void {
    this.neighbors.learn(frame, len, this.ctx.tables.hosts.values());
    this.sendMacs();
  }

  private learnedMacs(): [string, Uint8Array][] {
    return [...this.ctx.tables.hosts.values()].filter((h) => h.macKnown).map((h) => [h.name, h.mac.slice()]);
  }

  private sendMacs(): void {
    const macs = this.learnedMacs();
    const key = macs.map(([n, m]) => `${n}=${formatMac(m)}`).join(',');
    if (key === this.macsSent) return;
    this.macsSent = key;
    this.workers?.postMacs(macs);
  }

  /**
   * The hot path: one captured frame (the capture calls it; tests call it with frames of their own). A
   * frame the data plane sends is counted after the send: tx_packets and tx_bytes when the kernel took
   * it, else send_error_<path or reason>. Nothing is logged per packet and nothing allocated.
   */
  onFrame(frame: Buffer, len: number): void {
    const ctx = this.ctx;
    const flowNew = ctx.counters.values[ctx.counters.index.flow_new]!;
    let v: number;
    try {
      v = processPacket(frame, len, ctx);
    } catch (e) {
      // never expected: the data plane does not throw on bad bytes; count it and keep serving
      ctx.counters.values[ctx.counters.index.drop_internal_error]!++;
      this.internalErrors++;
      this.lastInternalError = (e as Error).stack ?? String(e);
      return;
    }
    const cv = ctx.counters.values;
    const C = ctx.counters.index;
    if (v === VERDICT_FORWARD) {
      if (ctx.ew.outLen !== 0) sendMuxRedirect(this.port, ctx); // a Fastpath redirect (docs/east-west.md)
      const path = this.sendPathCode;
      const n = ctx.outLen;
      // per backend and per rule: packets, bytes, new flows (flow_new moved: docs/metrics.md)
      this.traffic.forwarded(ctx, len, cv[C.flow_new] === flowNew ? 0 : 1);
      let failed: number;
      if (path === 0) {
        if (!this.port.send(ctx.out, 0, n, true)) failed = C.send_error_cap;
        else if (this.txDeferred)
          return; // counted when its batch went out, if the kernel took it (countBatchErrors)
        else failed = -1;
      } else if (path === 1)
        failed = this.raw!.sendTo(ctx.out, OUTER_IP_OFF, n - OUTER_IP_OFF, ctx.lastNic!.host.pa.text) ? -1 : C.send_error_raw;
      else {
        const s = this.udpByHost.get(ctx.lastNic!.host);
        if (s === undefined) failed = C.send_error_udp_no_socket;
        else if (s.send(ctx.out, VXLAN_OFF, n - VXLAN_OFF))
          return; // counted when the send completes (udpSendResult)
        else failed = this.udpRefusalCounter[s.refusal]!;
      }
      if (failed < 0) {
        cv[C.tx_packets]!++;
        cv[C.tx_bytes]! += n;
      } else cv[failed]!++;
    } else if (v === VERDICT_REPLY) {
      // ICMP back out the capture interface
      if (!this.port.send(ctx.out, 0, ctx.outLen, true)) cv[C.send_error_reply]!++;
      else if (!this.txDeferred) {
        cv[C.tx_packets]!++;
        cv[C.tx_bytes]! += ctx.outLen;
      }
    } else if (v === VERDICT_CONTROL) this.neighbors.learn(frame, len, ctx.tables.hosts.values());
  }

  /** udp path: a datagram's send completed (len: VXLAN header onwards), or the socket reported an error. */
  private readonly udpSendResult = (ok: boolean, len: number): void => {
    const c = this.ctx.counters;
    if (ok) {
      c.values[c.index.tx_packets]!++;
      c.values[c.index.tx_bytes]! += len + VXLAN_OFF;
    } else c.values[c.index.send_error_udp]!++;
  };

  /**
   * --io ring (one sendmmsg per batch): the frames the capture's send() queued that the kernel took
   * into tx_packets and tx_bytes, and those it refused into send_error_batch. Read from the addon's
   * counters, so on a timer and before /counters answers, never per packet.
   */
  private countBatchErrors(): void {
    if (this.txDeferred) {
      const now = this.txNow;
      this.port.sentCounted(now);
      const cv = this.ctx.counters.values;
      cv[this.ctx.counters.index.tx_packets]! += now[0]! - this.txCounted[0]!;
      cv[this.ctx.counters.index.tx_bytes]! += now[1]! - this.txCounted[1]!;
      this.txCounted.set(now);
    }
    const n = this.port.deferredSendErrors();
    if (n === this.batchErrorsCounted) return;
    this.ctx.counters.values[this.ctx.counters.index.send_error_batch]! += n - this.batchErrorsCounted;
    this.batchErrorsCounted = n;
  }

  /** What GET /counters answers: every counter, zeros included, send errors up to date. */
  counters(): Record<string, number> {
    this.countBatchErrors();
    return this.allCounters().snapshot(true);
  }

  /** This thread's counters, plus every worker's with --workers (shared memory: exact at any read). */
  private allCounters(): MuxContext['counters'] {
    if (this.workers === null) return this.ctx.counters;
    const c = this.ctx.counters;
    const sum = Object.create(Object.getPrototypeOf(c) as object) as MuxContext['counters'];
    this.workers.syncCounters();
    Object.assign(sum, { names: c.names, index: c.index, values: Float64Array.from(c.values) });
    this.workers.sumCounters(sum.values);
    return sum;
  }

  /** --workers: the traffic counters are the sum of the workers' last reports (every 250 ms). */
  private syncTraffic(): void {
    if (this.workers === null) return;
    this.traffic.grow(this.ctx.tables);
    this.traffic.nic.fill(0);
    this.traffic.rule.fill(0);
    this.workers.sumTraffic(this.traffic.nic, this.traffic.rule);
  }

  /** --workers: every worker's counters brought up to date without blocking (before /status, /counters, /metrics answer). */
  syncWorkersAsync(): Promise<void> {
    return this.workers?.syncCountersAsync() ?? Promise.resolve();
  }

  /** The restart test: worker `index` exits (process.exit in its thread); the others go on. */
  exitWorkerForTest(index: number): void {
    this.workers?.exitForTest(index);
  }

  /** Each worker's thread id, null while it is not running ([] without workers; --test-hooks). */
  workerThreadIdsForTest(): (number | null)[] {
    return this.workers?.slots.map((s) => s.worker?.threadId ?? null) ?? [];
  }

  /** The generation each worker acknowledged ([] without workers). */
  workerGenerations(): number[] {
    return this.workers?.generations() ?? [];
  }

  /**
   * udp path: one connected socket per host of the current tables, bound to our PA. A socket whose two
   * ends did not change is kept (with its local port); the others are closed.
   */
  private syncUdpSenders(): void {
    const local = this.self().address.text;
    const old = new Map<string, UdpRingSender>();
    for (const s of this.udpByHost.values()) old.set(`${s.local} ${s.remote}`, s);
    const next = new Map<MuxHost, UdpRingSender>();
    for (const h of this.ctx.tables.hosts.values()) {
      if (h.pa.family !== 4) continue; // IPv4 underlay only (README limits)
      let s = old.get(`${local} ${h.pa.text}`);
      if (s !== undefined) old.delete(`${local} ${h.pa.text}`);
      else {
        const host = h.name;
        const pa = h.pa.text;
        s = new UdpRingSender({
          family: 4,
          local,
          remote: pa,
          port: this.config.fabric.vxlanPort,
          slots: UDP_RING_SLOTS,
          slotBytes: this.config.fabric.mtu,
          sendBufferBytes: UDP_SEND_BUFFER_BYTES,
          onReady: (e) => {
            if (e) logWarn('udp_socket_failed', { host, pa, error: e.message });
            else logInfo('udp_socket_connected', { host, pa, localPort: s!.localPort });
          },
          // later errors (ECONNREFUSED after an ICMP port unreachable from a host without a host agent)
          // can come once per packet: counted (send_error_udp, and by the sender in /status), never logged
          onSendResult: this.udpSendResult,
        });
      }
      next.set(h, s);
    }
    for (const s of old.values()) s.close();
    this.udpByHost = next;
  }

  private sendStatus(): Record<string, unknown> {
    if (this.sendPath === 'cap') return { path: 'cap', errors: this.port.sendErrors, lastError: this.port.lastSendError || undefined };
    if (this.sendPath === 'raw') {
      return { path: 'raw', sent: this.raw?.sent ?? 0, errors: this.raw?.sendErrors ?? 0, lastError: this.raw?.lastSendError || undefined };
    }
    return {
      path: 'udp',
      noSocket: this.ctx.counters.get('send_error_udp_no_socket'),
      hosts: [...this.udpByHost].map(([h, s]) => ({
        host: h.name,
        pa: h.pa.text,
        connected: s.connected,
        localPort: s.localPort,
        sent: s.sent,
        queued: s.queued,
        ringFull: s.ringFull,
        notConnected: s.notConnected,
        tooBig: s.tooBig,
        errors: s.sendErrors,
        lastError: s.lastSendError || undefined,
      })),
    };
  }

  private tick(): void {
    this.countBatchErrors();
    this.ctx.nowS = Math.floor(process.uptime()) + 1;
    this.ctx.ew.unixS = Math.floor(Date.now() / 1000);
    // a full pass over both flow tables about every 10 s
    sweepFlows(this.ctx, Math.max(1024, Math.ceil(Math.max(this.ctx.flows4.capacity, this.ctx.flows6.capacity) / 40)));
  }

  /** Sends the ARP requests or neighbour solicitations that are due (see mux/neighbors.ts). */
  private resolveHosts(): void {
    if (!this.started) return;
    const me = this.self();
    this.neighbors.resolve(this.ctx.tables.hosts.values(), this.ctx.underlay6, underlayRoutesOf(me));
  }

  /**
   * Installs a new config (and health view): new tables, swapped in between two packets; the flow table
   * and learned MACs carry over. The capture filter is rebuilt only when the VIP set (or the outbound NAT
   * frontend IPs) changed. `snat`: the policy's outbound NAT ranges (default: those in force).
   */
  applyConfig(config: SlbxConfig, health: HealthView = this.health, snat?: readonly SnatPolicyRange[]): void {
    if (!config.muxes.some((m) => m.name === this.name)) {
      throw new Error(`mux ${JSON.stringify(this.name)} is not in the new config`);
    }
    this.generation++;
    this.latency.applyConfig(config, this.underlayAddress(config));
    let tables: MuxTables;
    try {
      tables = compileMuxTables(config, this.measured(health), this.ctx.tables, this.generation, snat);
    } catch (e) {
      // refused (e.g. outbound NAT ranges that do not fit the config): nothing of it stays in force
      this.generation--;
      this.latency.applyConfig(this.config, this.underlayAddress(this.config));
      throw e;
    }
    if (this.started && this.latency.active) this.latency.start();
    const sameShape = muxContextKey(config, this.name) === muxContextKey(this.config, this.name);
    if (sameShape) this.ctx.tables = tables;
    else {
      // settings the context holds changed: a fresh one (flows restart; the counters carry over)
      const counters = this.ctx.counters.values;
      this.ctx = this.newContext(config, tables);
      this.ctx.counters.values.set(counters);
    }
    this.traffic.grow(tables);
    this.config = config;
    this.health = health;
    // one clone per worker of the tables compiled once (and of the config: a worker rebuilds its context
    // when the context's settings changed); each applies it between two ring batches
    this.workers?.postTables(tables, config);
    if (this.started && muxCaptureFilter(config, this.self().address.text) !== this.filter) this.openCapture();
    if (this.started) this.syncEwDrop();
    if (this.started && this.sendPath === 'udp') this.syncUdpSenders();
    const failOpen = [...tables.poolTables.values()].filter((t) => t.failOpen).map((t) => t.key);
    logInfo('tables_installed', {
      generation: this.generation,
      vips: config.vips.length,
      flowsKept: sameShape,
      ...(failOpen.length > 0 ? { failOpen } : {}),
    });
    this.bgp?.update(config);
    this.resolveHosts();
  }

  /**
   * A controller policy is in force (called for every policy, changed or not): the first one ends the
   * wait of awaitPolicy, and the VIPs are announced at once (if nothing else holds them).
   */
  policyApplied(): void {
    if (!this.awaitingPolicy) return;
    this.awaitingPolicy = false;
    this.bgp?.replan();
  }

  /** What GET /status answers. */
  status(): Record<string, unknown> {
    this.countBatchErrors();
    this.syncTraffic();
    const t = this.ctx.tables;
    const w = this.workers;
    const reports = w === null ? [] : w.slots.map((s) => s.report);
    const hosts = [...t.hosts.values()].map((h) => ({ name: h.name, pa: h.pa.text, mac: h.macKnown ? formatMac(h.mac) : null }));
    return {
      daemon: 'mux',
      name: this.name,
      ready: this.started && hosts.every((h) => h.mac !== null),
      uptimeS: Math.round((Date.now() - this.startedAt) / 1000),
      generation: t.generation,
      interface: this.iface,
      mac: formatMac(this.mac),
      pa: this.self().address.text,
      captureFilter: this.filter,
      eastWest: {
        redirectKey: this.redirectMac !== null,
        nftables: this.nftInstalled ? 'installed' : (this.nftError ?? 'not needed (no internal VIP)'),
      },
      vips: this.config.vips.map((v) => v.address.text),
      hosts,
      pools: [...t.poolTables.values()].map((p) => ({
        table: p.key,
        vni: p.vni,
        level: p.level,
        candidates: p.candidates,
        ...(p.failOpen ? { failOpen: true } : {}),
        ...(p.latency !== null ? { latency: p.latency } : {}),
      })),
      latency: this.latency.status(),
      // outbound NAT's return path (docs/outbound.md): the frontend IPs captured, the policy's ranges in the table
      snat: { frontends: t.snat.frontends.map((a) => a.text), ranges: t.snat.ranges.length },
      flows: {
        ipv4: this.ctx.flows4.size + reports.reduce((n, r) => n + (r?.flows4 ?? 0), 0),
        ipv6: this.ctx.flows6.size + reports.reduce((n, r) => n + (r?.flows6 ?? 0), 0),
        max: this.ctx.flowLimit.max,
        bytes: this.ctx.flows4.bytes + this.ctx.flows6.bytes + reports.reduce((n, r) => n + (r?.flowBytes ?? 0), 0),
      },
      sendErrors: this.port.sendErrors,
      lastSendError: this.port.lastSendError || undefined,
      send: this.sendStatus(),
      io: this.io,
      internalErrors: this.internalErrors + reports.reduce((n, r) => n + (r?.internalErrors ?? 0), 0),
      bgp: this.bgp?.status() ?? null,
      eventLoop: this.loop.status(),
      counters: this.allCounters().snapshot(),
      // --workers N: each worker's generation, liveness, restarts, flows, ring and counters (the sums are above)
      ...(w !== null ? { workers: w.status(this.ctx.counters.names) } : {}),
      // per backend: frames and bytes forwarded to it (slbctl top reads them from the heartbeats)
      backends: this.backendCounts(),
      // per (VIP, rule): frames forwarded under it, their bytes as captured, new flows
      rules: this.traffic.rules(this.ctx.tables),
    };
  }

  /** Per backend ever configured: frames and bytes forwarded to it, new flows placed on it (GET /metrics). */
  backendCounts(): BackendTraffic[] {
    this.syncTraffic();
    return this.traffic.backends(this.ctx.tables);
  }

  /**
   * The flow tables' sizes, this thread's plus every worker's last report (every 250 ms) with --workers,
   * and their limits (the config's: the workers share them, mux/worker.ts workerShare). GET /metrics.
   */
  flowSizes(): { trusted4: number; trusted6: number; untrusted4: number; untrusted6: number; trustedMax: number; untrustedMax: number } {
    const c = this.ctx;
    const reports = this.workers === null ? [] : this.workers.slots.map((s) => s.report);
    const sum = (f: (r: NonNullable<(typeof reports)[number]>) => number) => reports.reduce((n, r) => n + (r === null ? 0 : f(r)), 0);
    return {
      trusted4: c.flows4.size + sum((r) => r.flows4),
      trusted6: c.flows6.size + sum((r) => r.flows6),
      untrusted4: c.pending4.size + sum((r) => r.pending4),
      untrusted6: c.pending6.size + sum((r) => r.pending6),
      trustedMax: c.flowLimit.max,
      untrustedMax: c.pendingLimit.max,
    };
  }

  /** The BGP speakers' and BFD sessions' status (docs/bgp.md), or null without BGP. */
  bgpStatus(): Record<string, unknown> | null {
    return this.bgp?.status() ?? null;
  }

  /** What GET /flows answers: up to `limit` live flows. */
  flows(limit: number): ListedFlow[] | Promise<ListedFlow[]> {
    // --workers: asked of every worker now, their answers awaited without blocking this thread (mux/workers.ts)
    if (this.workers !== null) return this.workers.flows(limit);
    return listFlows(this.ctx, limit);
  }
}
