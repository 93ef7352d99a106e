// The host agent daemon: a capture on the fabric interface for VXLAN to our provider address, one
// capture per backend port, a raw socket for the DSR return, and the nftables rule that keeps the
// kernel from answering captured VXLAN with ICMP. start() and stop() are symmetric and idempotent.
//
// Receive paths (--receive-path; measured and chosen in docs/io-paths.md):
//   capture  a libpcap capture on the fabric interface (UDP to our PA and the VXLAN port) plus the
//            nftables rule above; the data plane sees the frame as it was on the wire
//   udp      a UDP socket bound to PA:vxlanPort; each datagram is put behind a synthesized outer
//            Ethernet/IPv4/UDP header (runtime/vxlan-socket.ts) for the same data plane; no nftables rule
import { formatMac } from '../shared/addr.js';
import type { SlbxConfig } from '../shared/config.js';
import { ETH_VLAN_TAG_LEN, VLAN_NONE } from '../shared/ethernet.js';
import { pushVlanTag } from './vlan.js';
import { DEFAULT_CAPTURE_BUFFER_BYTES } from '../runtime/pcap-port.js';
import { createFramePort, createIpSender, resolveIo, type FramePort, type IoPath, type IpSender } from '../runtime/frame-port.js';
import { VxlanSocket } from '../runtime/vxlan-socket.js';
import { readInterface } from '../runtime/netif.js';
import { installUdpDrop, removeVxlanDrop, NFT_TABLE } from '../runtime/nftables.js';
import { REDIRECT_PORT } from '../shared/redirect.js';
import { logError, logInfo, logWarn } from '../runtime/log.js';
import { compileHostTables, type HostTables } from './tables.js';
import { buildHostContext, DSR_MTU_UNKNOWN } from './context.js';
import type { HostContext } from './data-plane.js';
import type { EwState } from './east-west.js';
import { handleInbound, handleOutbound, holdFrame, type VerdictIo } from './verdicts.js';
import {
  carryEwState,
  ewStatus,
  listHostFlows,
  newDaemonEwState,
  redirectCaptureClause,
  sweepSlotsOf,
  tickEwState,
  EW_TICK_MS,
  type ListedHostFlow,
} from './east-west-io.js';
import { FabricNeighbors, NEIGHBOR_TICK_MS } from './neighbors.js';
import { FlowSnapshotter, flowSnapshotSourceOf, type FlowSnapshotSource } from './flow-snapshot.js';
import { listFlowStateSets, readFlowStateSet, removeFlowStateSet, restoreOtherSets } from './flow-state-sets.js';
import { SnatControl, SNAT_CONTROL_TICK_MS, SNAT_SWEEP_SLOTS, type SnatDemand, type SnatRelease } from './snat-control.js';
import type { PolicySnatRange } from './snat.js';
import { sendSnatIdleResets } from './snat-resets.js';
import { settleWithdrawal } from './snat-workers.js';
import { joinUrl, requestJson } from '../runtime/http-json.js';
import { bearer } from '../runtime/api-token.js';
import { SNAT_CHUNK_PORTS } from '../shared/config/outbound.js';
import { HostTrafficCounters, HOST_TRAFFIC_STRIDE } from './traffic-counters.js';
import { HostWorkers, hostWorkersRefusal, steeringVipsOf } from './workers.js';
import { Prober, healthListenerFor, type HealthListener, type HealthSink } from './prober.js';
import { createSocket, type Socket } from 'node:dgram';
import { underlayRoutesOf } from '../shared/next-hop.js';
import {
  PROBE_RTT_NONE,
  parseEchoRequest,
  writeEchoAnswer,
  echoAnswerLength,
  type EchoEntry,
  type EchoRequest,
} from '../shared/latency.js';

const PORT_RETRY_MS = 1000;
/** --workers: how often the start checks whether every worker joined, to start probing (startProbesWhenJoined). */
const PROBE_JOIN_POLL_MS = 50;
/**
 * Ready waits until every fabric peer's MAC is known (VXLAN from an unresolved peer is dropped), but at
 * most this long: a peer that does not answer (a MUX not started yet) must not keep the host from
 * serving the others.
 */
export const NEIGHBOR_READY_WAIT_MS = 3000;
/**
 * VXLAN that arrives after a start before its MUX's MAC is learned (a few hundred milliseconds) is held,
 * up to this many frames, and judged once the MAC is known, so a restarted host agent loses none of the
 * retransmissions it is waiting for; after NEIGHBOR_READY_WAIT_MS or when full it is dropped as
 * drop_in_source_unresolved.
 */
export const HOLD_MAX_FRAMES = 4096;

export const RECEIVE_PATHS = ['capture', 'udp'] as const;
export type ReceivePath = (typeof RECEIVE_PATHS)[number];
export const DEFAULT_RECEIVE_PATH: ReceivePath = 'capture';

/** The kernel's drop count of a port's capture ring (--io ring), or null when its I/O path does not report one. */
export function kernelDropsOf(port: FramePort | null): number | null {
  const stats = (port as { stats?: () => { rxKernelDrops: number } | null } | null)?.stats;
  return typeof stats === 'function' ? (stats.call(port)?.rxKernelDrops ?? null) : null;
}

export function isReceivePath(text: string): text is ReceivePath {
  return (RECEIVE_PATHS as readonly string[]).includes(text);
}

/** The addresses (text -> number) the udp receive path maps datagram sources through: MUX and other host PAs. */
function vxlanSources(config: SlbxConfig, hostName: string): Map<string, number> {
  const m = new Map<string, number>();
  for (const x of config.muxes) if (x.address.family === 4) m.set(x.address.text, x.address.words[0]!);
  for (const h of config.hosts) if (h.name !== hostName && h.address.family === 4) m.set(h.address.text, h.address.words[0]!);
  return m;
}

export interface HostDaemonOptions {
  config: SlbxConfig;
  name: string;
  /** The fabric interface. */
  iface: string;
  /** Next hop for the DSR return (the router), per family; null = that family's DSR is unavailable. */
  dsrVia4: string | null;
  dsrVia6: string | null;
  /** Install the nftables drop rule for captured VXLAN (default true; never with the udp receive path). */
  nftables?: boolean;
  /** Kernel buffer of the fabric capture, or SO_RCVBUF of the udp receive path's socket. */
  captureBufferBytes?: number;
  /** How VXLAN comes in (default capture). */
  receivePath?: ReceivePath;
  /** The fabric interface's MAC (the udp receive path writes it into the synthesized frames). */
  mac?: Uint8Array;
  /** Capture and injection (--io): pcap (default) or ring (falls back to pcap when the addon is missing). */
  io?: IoPath;
  /** Called with every probe state on each probe state change (docs/probes.md); see HostDaemon.onHealthChange. */
  onHealthChange?: HealthListener;
  /** The policy key (the controller's API token): checks Fastpath redirects (docs/east-west.md); none: every redirect is refused. */
  policyKey?: string | null;
  /**
   * Where the per-flow state is kept across a restart (host-agent/flow-snapshot.ts): the directory of
   * host-agent-NAME.flows, and how often it is looked at (ms). null or 0: no snapshot.
   */
  stateDir?: string | null;
  flowSnapshotMs?: number;
  /** The controller's replicas (--controller) and its token: outbound NAT's demands and releases go there. */
  controller?: { urls: readonly URL[]; token: string | null } | null;
  /**
   * Worker threads running the data plane (--workers N, host-agent/workers.ts; needs --io ring and the
   * capture receive path); 1 (the default): the data plane runs on this thread.
   */
  workers?: number;
}

interface PortState {
  port: FramePort | null;
  mac: Uint8Array | null;
  error: string | null;
  /** The nic index the capture reports its frames under (updated in place by applyConfig). */
  index: number;
  /** The port's deferredSendErrors() already counted in send_error_batch. */
  batchCounted: number;
}

export class HostDaemon {
  readonly name: string;
  readonly iface: string;
  config: SlbxConfig;
  ctx: HostContext;
  private fabric: FramePort;
  readonly receivePath: ReceivePath;
  /** The capture and injection in use, and why it is not the one asked for (null: it is). */
  readonly io: IoPath;
  private readonly ioFallback: string | null;
  private vxlanSocket: VxlanSocket | null = null;
  private vxlanSocketError: string | null = null;
  private ports: PortState[] = [];
  private raw4: IpSender | null = null;
  private raw6: IpSender | null = null;
  private timers: NodeJS.Timeout[] = [];
  private started = false;
  private generation = 1;
  private nftError: string | null = null;
  private readonly o: HostDaemonOptions;
  private readonly startedAt = Date.now();
  /** The MACs of the MUXes' and other hosts' provider addresses (host-agent/neighbors.ts). */
  readonly neighbors: FabricNeighbors;
  private readonly sourceMacCheck: boolean;
  /** Frames held while their source's MAC was unknown (hold()). */
  private held: Buffer[] = [];
  internalErrors = 0;
  lastInternalError = '';
  /** deferredSendErrors() of the fabric port and the DSR senders already counted in send_error_batch. */
  private batchCounted = { fabric: 0, raw4: 0, raw6: 0 };
  /** Health probes of the local nics, through their ports (host-agent/prober.ts). */
  readonly prober: Prober;
  /** Per nic: frames delivered to its port, replies sent by DSR (host-agent/traffic-counters.ts). */
  readonly traffic: HostTrafficCounters;
  /** Latency echo answers (docs/latency.md): one UDP socket per underlay family, bound to our PA. */
  private echo4: Socket | null = null;
  private echo6: Socket | null = null;
  private echoError: string | null = null;
  private readonly echoReq: EchoRequest = { nonceHi: 0, nonceLo: 0 };
  /** East-west: the host flow table, clocks and redirect HMAC, carried across policies (host-agent/east-west-io.ts). */
  private ew: EwState;
  private readonly fabricMac: Uint8Array;
  /** The flow snapshot (null: none): written by a timer and at stop, read at construction. */
  readonly snapshot: FlowSnapshotter | null;
  /** --workers with --state-dir: where each worker keeps its own (host-agent/flow-state-sets.ts); null: none. */
  private readonly flowState: { dir: string; intervalMs: number } | null;
  /** Outbound NAT: the engine kept across policies, its ranges, demands and releases (host-agent/snat-control.ts). */
  readonly snat: SnatControl;
  /** --workers N >= 2: the worker threads that run the data plane; null: it runs here. */
  readonly workers: HostWorkers | null;

  constructor(o: HostDaemonOptions) {
    this.o = o;
    this.name = o.name;
    this.iface = o.iface;
    this.config = o.config;
    const tables = compileHostTables(o.config, o.name, this.generation);
    // the DSR return leaves through the fabric interface: larger replies get ICMP too big
    this.ctx = buildHostContext(
      o.config,
      tables,
      tables.nics.map(() => new Uint8Array(6)),
      readInterface(o.iface)?.mtu ?? DSR_MTU_UNKNOWN,
    );
    this.traffic = new HostTrafficCounters(tables.nics);
    this.fabricMac = o.mac ?? readInterface(o.iface)?.mac ?? new Uint8Array(6);
    this.ew = newDaemonEwState(o.config, this.fabricMac, o.policyKey ?? null);
    this.ctx.ew = this.ew;
    this.snat = new SnatControl(o.name, this.ew.flows, o.config.flowTable.snatMaxFlows); // one host flow table
    this.installSnat(this.ctx, o.config, tables, []);
    const workers = o.workers ?? 1;
    const refusal = hostWorkersRefusal(workers, o.io ?? 'pcap', o.receivePath ?? DEFAULT_RECEIVE_PATH, o.config);
    if (refusal !== null) throw new Error(refusal);
    // the last process's flows (host-agent/flow-snapshot.ts), once the SNAT engine has its nics; with
    // workers each worker keeps and reads its own (host-agent/worker.ts, host-agent/flow-state-sets.ts)
    const flowLog = (level: 'info' | 'warn', event: string, fields: Record<string, unknown>) =>
      (level === 'warn' ? logWarn : logInfo)(event, fields);
    const keepsFlows = !!o.stateDir && (o.flowSnapshotMs ?? 0) > 0;
    this.flowState = keepsFlows && workers > 1 ? { dir: o.stateDir!, intervalMs: o.flowSnapshotMs! } : null;
    this.snapshot =
      keepsFlows && workers <= 1
        ? new FlowSnapshotter({ dir: o.stateDir!, name: o.name, intervalMs: o.flowSnapshotMs!, log: flowLog })
        : null;
    const target = {
      flows: this.ew.flows,
      nowS: this.ew.nowS,
      maxLeftS: Math.max(this.ew.tcpIdleS, this.ew.udpIdleS),
      snat: this.snat.engine,
    };
    // the sets of an agent that ran with --workers: every flow is this thread's (then its own set, newer)
    const workerSets = this.snapshot === null ? [] : listFlowStateSets(o.stateDir!, o.name).filter((x) => x.worker !== null);
    const fromWorkers = restoreOtherSets(
      workerSets.map((x) => ({ set: x.set, bytes: readFlowStateSet(o.stateDir!, x.set, flowLog) })),
      target,
    );
    const restored = this.snapshot?.load(target);
    for (const x of workerSets)
      logInfo('flow_state_set_retired', {
        set: x.set,
        files: removeFlowStateSet(o.stateDir!, x.set),
        why: "a worker's set read by the one-thread agent: its flows are in this agent's snapshot now",
        ...fromWorkers.sets.find((y) => y.set === x.set),
      });
    this.ctx.counters.values[this.ctx.counters.index.dsr_flows_restored]! += (restored?.dsrRestored ?? 0) + fromWorkers.dsrRestored;
    this.ctx.counters.values[this.ctx.counters.index.dsr_flows_replayed]! += (restored?.journal.dsrReplayed ?? 0) + fromWorkers.dsrReplayed;
    // from now on each new or changed return-path entry goes to the flow journal (host-agent/flow-journal.ts)
    this.ew.journal = this.snapshot?.journalSink(() => this.ew.nowS) ?? null;
    this.snat.engine.journal = this.ew.journal; // and each outbound NAT flow opened, established or ended
    const io = resolveIo(o.io ?? 'pcap');
    this.io = io.io;
    this.ioFallback = io.fallbackReason;
    if (workers > 1 && this.io !== 'ring') throw new Error(`--workers ${workers} needs the ring addon (--io ring): ${io.fallbackReason}`);
    this.fabric = createFramePort(io.io, o.iface);
    this.receivePath = o.receivePath ?? DEFAULT_RECEIVE_PATH;
    if (!isReceivePath(this.receivePath)) throw new Error(`unknown receive path ${JSON.stringify(o.receivePath)}`);
    // the source MAC check needs the frame as it was on the wire: the capture path only (docs/security.md)
    this.sourceMacCheck = this.receivePath === 'capture';
    const me = this.self();
    this.neighbors = new FabricNeighbors(
      o.mac ?? readInterface(o.iface)?.mac ?? new Uint8Array(6),
      me.address.words[0]!,
      me.address6?.words ?? null,
    );
    this.neighbors.setPeers(tables.peers, underlayRoutesOf(me));
    this.ctx.sourceMacCheck = this.sourceMacCheck;
    this.ctx.holdUnresolved = this.sourceMacCheck;
    this.prober = new Prober({
      hostName: o.name,
      config: o.config,
      onChange: o.onHealthChange ?? null,
      ports: { portMac: (nic) => this.portOf(nic)?.mac ?? null, send: (nic, frame, len) => this.sendProbe(nic, frame, len) },
    });
    this.workers = workers <= 1 ? null : this.newWorkers(workers);
    // --workers: outbound NAT's flows are the workers'; this thread's engine keeps the policies and plans from their reports
    if (this.workers !== null) this.snat.usage = this.workers.snatUsage();
  }

  /** The fabric capture's filter: VXLAN to our PA and Fastpath redirects (data plane), and the answers to our ARP/ND (`answers`). */
  private fabricFilter(): { data: string; answers: string } {
    const me = this.self();
    const vxlan = `udp dst port ${this.config.fabric.vxlanPort} and (dst host ${me.address.text}${me.address6 ? ` or dst host ${me.address6.text}` : ''})`;
    const ifMac = readInterface(this.iface)?.mac;
    return {
      data: `(${vxlan}) or ${redirectCaptureClause(me.address.text)}`,
      answers: ifMac === undefined ? '' : `(ether dst ${formatMac(ifMac)} and (arp or (icmp6 and ip6[40] == 136)))`,
    };
  }

  /** --workers: the threads, and what they hand back to this one (echo requests, probe answers, redirects). */
  private newWorkers(count: number): HostWorkers {
    return new HostWorkers({
      count,
      name: this.name,
      iface: this.iface,
      fabricMac: this.fabricMac,
      dsrVia4: this.o.dsrVia4,
      dsrVia6: this.o.dsrVia6,
      policyKey: this.o.policyKey ?? null,
      captureBufferBytes: this.o.captureBufferBytes ?? DEFAULT_CAPTURE_BUFFER_BYTES,
      fabricFilter: this.fabricFilter().data,
      sourceMacCheck: this.sourceMacCheck,
      counterNames: this.ctx.counters.names.length,
      current: () => ({
        config: this.config,
        generation: this.generation,
        peerMacs: this.ctx.peerMacs,
        holdUnresolved: this.ctx.holdUnresolved,
      }),
      onEcho: (m) => {
        this.echoReq.nonceHi = m.nonceHi;
        this.echoReq.nonceLo = m.nonceLo;
        this.answerEchoTo(m.peer, m.v6, m.srcPort);
      },
      onLocal: (nic, packet) => {
        try {
          this.prober.onLocalPacket(nic, packet, 0, packet.length);
        } catch (e) {
          this.internalError(e);
        }
      },
      onExpedite: (peers) => {
        for (const p of peers) this.neighbors.expedite(p);
      },
      onRedirectLost: () => this.ctx.counters.values[this.ctx.counters.index.drop_redirect_unbound]!++,
      snat: () => ({ ranges: this.snat.policyRanges, withdrawn: this.snat.withdrawn }),
      flowState: this.flowState,
    });
  }

  /** Receives every probe state on each change; null: nobody. (setHealthReporter installs one.) */
  set onHealthChange(cb: HealthListener | null) {
    this.prober.onChange = cb;
  }

  /**
   * With --controller (runtime/daemon-main.ts): probe results go to the controller, the full set, one
   * entry per (nic, probe), on every state change, and once now.
   */
  setHealthReporter(reporter: HealthSink): void {
    const listener = healthListenerFor(reporter);
    this.prober.onChange = listener;
    listener(this.prober.status());
  }

  /** A probe's frame out of the nic's port; a send the kernel refuses is counted (send_error_probe). */
  private sendProbe(nic: string, frame: Buffer, len: number): boolean {
    const st = this.portOf(nic);
    if (st === null) return false; // no port open (yet): the prober counts it, the probe fails
    const vid = this.ctx.tables.nics[st.index]?.vlanId ?? VLAN_NONE;
    if (vid !== VLAN_NONE) {
      // a vlan network's trunk (host-agent/vlan.ts): the probe carries the tag, as every frame on the port
      const tagged = Buffer.alloc(len + ETH_VLAN_TAG_LEN);
      frame.copy(tagged, 0, 0, len);
      if (pushVlanTag(tagged, 0, len, vid) < 0) return false;
      frame = tagged;
      len = tagged.length;
    }
    if (st.port!.send(frame, 0, len)) return true;
    this.ctx.counters.values[this.ctx.counters.index.send_error_probe]!++;
    return false;
  }

  /** The open port of a nic, by name (for the prober; not per packet). */
  private portOf(nic: string): PortState | null {
    const n = this.ctx.tables.nics.find((x) => x.name === nic);
    const st = n === undefined ? undefined : this.ports[n.index];
    return st !== undefined && st.port !== null && st.mac !== null ? st : null;
  }

  private get useNftables(): boolean {
    return this.o.nftables !== false && this.receivePath === 'capture';
  }

  private self() {
    return this.config.hosts.find((h) => h.name === this.name)!;
  }

  start(): void {
    if (this.started) return;
    const me = this.self();
    if (this.useNftables) {
      // VXLAN to each PA, and Fastpath redirects to the IPv4 PA (docs/east-west.md)
      this.nftError = installUdpDrop(
        NFT_TABLE,
        [me.address, ...(me.address6 ? [me.address6] : [])],
        [
          { port: this.config.fabric.vxlanPort, what: "VXLAN is read by the host agent's capture" },
          { port: REDIRECT_PORT, what: "Fastpath redirects are read by the host agent's capture" },
        ],
      );
      if (this.nftError !== null)
        logWarn('nftables_failed', { error: this.nftError, effect: 'the kernel may answer VXLAN with ICMP port unreachable' });
    }
    if (this.o.dsrVia4 !== null) this.raw4 = createIpSender(this.io, 4, this.o.dsrVia4);
    if (this.o.dsrVia6 !== null) this.raw6 = createIpSender(this.io, 6, this.o.dsrVia6);
    if (this.receivePath === 'capture') {
      // VXLAN to our provider address over IPv4, or over IPv6 to our address6; and the answers to our
      // ARP requests and neighbour solicitations (unicast to our MAC), which teach the peers' MACs.
      // --workers: the workers capture VXLAN and redirects (in their fanout groups); this socket, outside
      // them, the answers only ('less 1': nothing, when the interface has no MAC to match)
      const ff = this.fabricFilter();
      this.fabric.open(
        this.workers !== null ? ff.answers || 'less 1' : `${ff.data}${ff.answers === '' ? '' : ` or ${ff.answers}`}`,
        (f, len) => this.onFabricFrame(f, len),
        this.o.captureBufferBytes ?? DEFAULT_CAPTURE_BUFFER_BYTES,
      );
      this.timers.push(setInterval(() => this.resolveNeighbors(), NEIGHBOR_TICK_MS));
    } else {
      this.openVxlanSocket();
    }
    this.started = true;
    this.workers?.start();
    this.openPorts();
    // after the ports (opening them takes a while): the first requests go out now, answers come back in
    // a millisecond, and the peers' MACs are adopted NEIGHBOR_ROUND_CONFIRM_MS later
    if (this.receivePath === 'capture') this.resolveNeighbors();
    this.timers.push(
      setInterval(() => {
        this.openPorts();
        this.countBatchErrors();
        // a port that appeared since: every worker joins its group, in index order
        if (this.workers !== null && !this.workers.allJoined(this.ctx.tables.nics.map((n) => n.port))) void this.workers.joinRound();
      }, PORT_RETRY_MS),
    );
    this.timers.push(setInterval(() => this.tickEw(), EW_TICK_MS));
    if (this.snapshot !== null) {
      this.snapshot.resume();
      this.timers.push(setInterval(() => this.snapshot!.tick(() => this.snapshotSource()), this.snapshot.intervalMs));
    }
    this.timers.push(setInterval(() => this.tickSnat(), SNAT_CONTROL_TICK_MS));
    this.startProbesWhenJoined();
    this.openEchoSockets();
    if (this.ioFallback !== null) logWarn('io_fallback', { requested: 'ring', using: 'pcap', reason: this.ioFallback });
    logInfo('host_agent_started', {
      io: this.io,
      interface: this.iface,
      pa: me.address.text,
      dsrVia4: this.o.dsrVia4,
      dsrVia6: this.o.dsrVia6,
      ports: this.ctx.tables.nics.map((n) => n.port),
      receivePath: this.receivePath,
    });
  }

  /**
   * --workers: a probe's answer reaches this thread only through the worker whose port socket got it, so
   * probing starts once every worker joined the fabric's and every open port's fanout group; a round sent
   * before found no socket for its answer and failed (a DIP reported down right after the start).
   */
  private startProbesWhenJoined(): void {
    const joined = () => {
      const open = this.ctx.tables.nics.filter((n) => this.ports[n.index]?.port != null).map((n) => n.port);
      return this.workers === null || this.workers.allJoined(open);
    };
    if (joined()) {
      this.prober.start();
      return;
    }
    const t = setInterval(() => {
      if (!this.started || !joined()) return;
      clearInterval(t);
      this.prober.start();
    }, PROBE_JOIN_POLL_MS);
    this.timers.push(t);
  }

  /** udp receive path: binds PA:vxlanPort; a bind failure is logged and keeps the daemon not ready. */
  private openVxlanSocket(): void {
    const me = this.self();
    const s = new VxlanSocket({
      pa: me.address.text,
      pa4: me.address.words[0]!,
      port: this.config.fabric.vxlanPort,
      mac: this.o.mac ?? new Uint8Array(6),
      sources: vxlanSources(this.config, this.name),
      receiveBufferBytes: this.o.captureBufferBytes ?? DEFAULT_CAPTURE_BUFFER_BYTES,
    });
    this.vxlanSocket = s;
    this.vxlanSocketError = null;
    s.open(
      (f, len) => this.onFabricFrame(f, len),
      (e) => {
        if (e === null) {
          logInfo('vxlan_socket_bound', { address: `${me.address.text}:${this.config.fabric.vxlanPort}` });
          return;
        }
        this.vxlanSocketError = e.message;
        logError('vxlan_socket_failed', {
          address: `${me.address.text}:${this.config.fabric.vxlanPort}`,
          error: e.message,
          effect: 'no VXLAN is received',
        });
      },
      (e) => {
        this.vxlanSocketError = e.message;
      },
    );
  }

  /**
   * SIGTERM's first step (runtime/daemon-main.ts awaits it before stop()): with --workers and --state-dir
   * every worker stops now and writes its flow snapshot as it does (host-agent/worker.ts close); stop()
   * alone does not wait for the threads, and the process ends right after it.
   */
  async drain(): Promise<void> {
    if (this.workers !== null && this.flowState !== null) await this.workers.stop();
  }

  stop(): void {
    if (!this.started) return;
    this.started = false;
    this.held = [];
    void this.workers?.stop();
    this.countBatchErrors();
    this.prober.stop();
    this.echo4?.close();
    this.echo6?.close();
    this.echo4 = this.echo6 = null;
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    this.fabric.close();
    this.vxlanSocket?.close();
    this.vxlanSocket = null;
    for (const p of this.ports) p.port?.close();
    this.ports = [];
    this.raw4?.close();
    this.raw6?.close();
    this.raw4 = this.raw6 = null;
    this.batchCounted.raw4 = this.batchCounted.raw6 = 0; // new senders on the next start
    if (this.useNftables && this.nftError === null) removeVxlanDrop();
    this.snapshot?.writeNow(this.snapshotSource());
    // --workers: the workers' counters too (their shared arrays outlive the threads)
    logInfo('host_agent_stopped', { counters: this.allCounters().snapshot(), flowSnapshot: this.snapshot?.status() ?? null });
  }

  /** Opens the capture of every port not open yet (a port may appear after we start). */
  private openPorts(): void {
    if (!this.started) return;
    const nics = this.ctx.tables.nics;
    while (this.ports.length < nics.length)
      this.ports.push({ port: null, mac: null, error: null, index: this.ports.length, batchCounted: 0 });
    for (const nic of nics) {
      const st = this.ports[nic.index]!;
      if (st.port !== null && st.port.iface === nic.port) continue;
      st.port?.close();
      st.port = null;
      const ifc = readInterface(nic.port);
      if (ifc === null) {
        const err = `no interface ${nic.port} in this namespace`;
        if (st.error !== err) logWarn('port_missing', { nic: nic.name, port: nic.port });
        st.error = err;
        continue;
      }
      const p = createFramePort(this.io, nic.port);
      try {
        // every frame the backend sends; not the ones we send from the port's MAC. --workers: the workers
        // read the port (in its fanout group); this socket sends the probes and reads nothing
        st.index = nic.index;
        const filter = this.workers !== null ? 'less 1' : `not ether src ${formatMac(ifc.mac)}`;
        p.open(filter, (f, len) => this.onPortFrame(f, len, st.index), 4 * 1024 * 1024);
      } catch (e) {
        st.error = (e as Error).message;
        logWarn('port_open_failed', { nic: nic.name, port: nic.port, error: st.error });
        continue;
      }
      st.port = p;
      st.batchCounted = 0;
      st.mac = ifc.mac;
      st.error = null;
      this.ctx.portMacs[nic.index] = ifc.mac;
      logInfo('port_open', { nic: nic.name, port: nic.port, mac: formatMac(ifc.mac) });
    }
  }

  /** Sends the ARP requests and solicitations that are due, adopts what was confirmed (host-agent/neighbors.ts). */
  private resolveNeighbors(): void {
    if (!this.started) return;
    const now = Date.now();
    const events = this.neighbors.tick(now, (f, len) => {
      if (!this.fabric.send(f, 0, len)) this.ctx.counters.values[this.ctx.counters.index.send_error_neighbor]!++;
    });
    let learned = false;
    for (const ev of events) {
      const { event, ...fields } = ev;
      if (event === 'neighbor_conflict')
        logWarn(event, { ...fields, effect: 'two MACs answered for one provider address: the entry keeps what it had' });
      else {
        logInfo(event, fields);
        learned = true;
      }
    }
    if (events.length > 0) this.neighbors.fill(this.ctx.peerMacs);
    // the hold window after a start: over once every peer is known, or after NEIGHBOR_READY_WAIT_MS
    let ended = false;
    if (this.ctx.holdUnresolved && (this.neighbors.allResolved || now - this.startedAt >= NEIGHBOR_READY_WAIT_MS)) {
      this.ctx.holdUnresolved = false;
      ended = true;
    }
    if (events.length > 0 || ended) this.workers?.postPeers(this.ctx.peerMacs, this.ctx.holdUnresolved);
    if ((learned || ended) && this.held.length > 0) {
      // judged now against what was learned (frames of a peer still unknown are held again, or dropped
      // as drop_in_source_unresolved once the window is over)
      const held = this.held;
      this.held = [];
      for (const f of held) this.judgeInbound(f, f.length);
    }
  }

  private onFabricFrame(frame: Buffer, len: number): void {
    // ARP (0x0806) or ICMPv6 in IPv6 (0x86dd, next header 58): for the neighbour table, not the data plane
    if (
      this.sourceMacCheck &&
      len >= 21 &&
      ((frame[12] === 0x08 && frame[13] === 0x06) || (frame[12] === 0x86 && frame[13] === 0xdd && frame[20] === 58))
    ) {
      try {
        if (this.neighbors.learn(frame, len, Date.now())) return;
      } catch (e) {
        this.internalError(e);
        return;
      }
    }
    this.judgeInbound(frame, len);
  }

  /** VXLAN (or anything else the fabric capture took) through the data plane, and out of its port. */
  private judgeInbound(frame: Buffer, len: number): void {
    handleInbound(this.ctx, this.traffic, this.verdictIo, frame, len);
  }

  /** This thread's sockets and hand-offs for the verdicts (host-agent/verdicts.ts). */
  private readonly verdictIo: VerdictIo = {
    internalError: (e) => this.internalError(e),
    hold: (frame, len) => holdFrame(this.ctx, this.held, HOLD_MAX_FRAMES, frame, len),
    echo: (frame) => this.answerEcho(frame),
    expedite: (peer) => this.neighbors.expedite(peer),
    local: (port) => {
      const ctx = this.ctx;
      try {
        this.prober.onLocalPacket(ctx.tables.nics[port]!.name, ctx.outBuf, ctx.outOff, ctx.outLen);
      } catch (e) {
        this.internalError(e);
      }
    },
    port: (index) => this.ports[index]?.port ?? null,
    fabric: () => (this.fabric.isOpen ? this.fabric : null),
    dsr: (v6) => (v6 ? this.raw6 : this.raw4),
  };

  /**
   * The latency echo's answer sockets, bound to our provider addresses (any port): the answer leaves
   * from the PA the MUX measures, through the kernel (the MUX reads it on a UDP socket).
   */
  private openEchoSockets(): void {
    const me = this.self();
    const open = (type: 'udp4' | 'udp6', address: string): Socket => {
      const s = createSocket({ type });
      s.on('error', (e) => {
        this.echoError = `${address}: ${e.message}`;
        this.ctx.counters.values[this.ctx.counters.index.send_error_latency_echo]!++;
      });
      s.bind({ address, port: 0, exclusive: true });
      return s;
    };
    this.echo4 = open('udp4', me.address.text);
    if (me.address6) this.echo6 = open('udp6', me.address6.text);
  }

  /**
   * A MUX's latency echo request (VERDICT_LOCAL from processInbound: the VXLAN payload in ctx.out*, the
   * peer checked): answered to its source address and port with our last probe round trip per nic.
   * Control plane: at most a few per second per MUX.
   */
  private answerEcho(frame: Buffer): void {
    const ctx = this.ctx;
    if (parseEchoRequest(ctx.outBuf, ctx.outOff, this.echoReq, ctx.outOff + ctx.outLen) < 0) {
      ctx.counters.values[ctx.counters.index.latency_echo_bad]!++;
      return;
    }
    this.answerEchoTo(ctx.lastPeer, frame[12] === 0x86 && frame[13] === 0xdd, ctx.udp.srcPort);
  }

  /** The answer to this.echoReq, to peer `peerIndex`'s `srcPort` (a worker parsed the request with --workers). */
  private answerEchoTo(peerIndex: number, v6: boolean, srcPort: number): void {
    const ctx = this.ctx;
    const cv = ctx.counters.values;
    const C = ctx.counters.index;
    const peer = ctx.tables.peers[peerIndex];
    const sock = v6 ? this.echo6 : this.echo4;
    if (peer === undefined || sock === null) {
      cv[C.send_error_latency_echo]!++;
      return;
    }
    const rtt = this.prober.connectTimes();
    const entries: EchoEntry[] = ctx.tables.nics.map((n) => {
      const ms = rtt.get(n.name);
      return { nic: n.name, probeRttUs: ms === undefined ? PROBE_RTT_NONE : Math.round(ms * 1000) };
    });
    const out = Buffer.alloc(echoAnswerLength(entries));
    writeEchoAnswer({ nonceHi: this.echoReq.nonceHi, nonceLo: this.echoReq.nonceLo, entries }, out, 0);
    sock.send(out, srcPort, peer.address.text, (e) => {
      const c = this.ctx.counters; // the context may have been replaced by a new config meanwhile
      if (e) {
        this.echoError = e.message;
        c.values[c.index.send_error_latency_echo]!++;
      } else c.values[c.index.latency_echo_answered]!++;
    });
  }

  /**
   * One frame a backend sent on port `port` (its capture calls it; tests call it with frames of their
   * own). What it sends is counted when the send fails: send_error_dsr, _dsr_unavailable, _reply.
   */
  onPortFrame(frame: Buffer, len: number, port: number): void {
    handleOutbound(this.ctx, this.traffic, this.verdictIo, frame, len, port);
  }

  /**
   * Sends the ring path queued and the kernel refused when their batch went out (--io ring: one
   * sendmmsg per batch) into send_error_batch. Read from the addon's counters: on a timer and before
   * /counters answers, never per packet.
   */
  private countBatchErrors(): void {
    const b = this.batchCounted;
    let n = 0;
    const f = this.fabric.deferredSendErrors();
    n += f - b.fabric;
    b.fabric = f;
    if (this.raw4 !== null) {
      const d = this.raw4.deferredSendErrors();
      n += d - b.raw4;
      b.raw4 = d;
    }
    if (this.raw6 !== null) {
      const d = this.raw6.deferredSendErrors();
      n += d - b.raw6;
      b.raw6 = d;
    }
    for (const st of this.ports) {
      if (st.port === null) continue;
      const d = st.port.deferredSendErrors();
      n += d - st.batchCounted;
      st.batchCounted = d;
    }
    if (n > 0) this.ctx.counters.values[this.ctx.counters.index.send_error_batch]! += n;
  }

  /** What GET /counters answers: every counter, zeros included, send errors up to date. */
  counters(): Record<string, number> {
    this.countBatchErrors();
    return this.allCounters().snapshot(true);
  }

  /** This thread's counters, plus every worker's with --workers (each copied between two of its batches). */
  private allCounters(): HostContext['counters'] {
    if (this.workers === null) return this.ctx.counters;
    const c = this.ctx.counters;
    const sum = Object.create(Object.getPrototypeOf(c) as object) as HostContext['counters'];
    this.workers.syncCounters();
    Object.assign(sum, { names: c.names, index: c.index, values: Float64Array.from(c.values) });
    this.workers.sumCounters(sum.values);
    return sum;
  }

  /** --workers: the per-backend traffic is the sum of the workers' last reports (every 250 ms). */
  private syncTraffic(): void {
    if (this.workers === null) return;
    const byNic = this.workers.traffic();
    this.traffic.delivered.fill(0);
    this.traffic.dsr.fill(0);
    for (const n of this.ctx.tables.nics) {
      const v = byNic.get(n.name);
      if (v === undefined) continue;
      const k = n.index * HOST_TRAFFIC_STRIDE;
      this.traffic.delivered[k] = v[0]!;
      this.traffic.delivered[k + 1] = v[1]!;
      this.traffic.dsr[k] = v[2]!;
      this.traffic.dsr[k + 1] = v[3]!;
    }
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

  private internalError(e: unknown): void {
    this.ctx.counters.values[this.ctx.counters.index.drop_internal_error]!++;
    this.internalErrors++;
    this.lastInternalError = (e as Error).stack ?? String(e);
  }

  /**
   * Installs a new config: new tables swapped in; ports opened or closed to match. `snat`: the policy's
   * outbound NAT ranges when they changed with it (installed with the new tables in one step, so that no
   * flow ends for a moment's mismatch of config and ranges).
   */
  applyConfig(config: SlbxConfig, snat?: readonly PolicySnatRange[]): void {
    const me = config.hosts.find((h) => h.name === this.name);
    if (me === undefined) throw new Error(`host ${JSON.stringify(this.name)} is not in the new config`);
    if (me.address.text !== this.self().address.text || config.fabric.vxlanPort !== this.config.fabric.vxlanPort) {
      throw new Error('the provider address or VXLAN port changed: restart the host agent to apply that');
    }
    const workersRefusal = this.workers === null ? null : hostWorkersRefusal(this.workers.slots.length, this.io, this.receivePath, config);
    if (workersRefusal !== null) throw new Error(`the new config cannot run here: ${workersRefusal}`);
    const vipsBefore = this.workers === null ? '' : JSON.stringify(steeringVipsOf(this.config));
    this.generation++;
    const tables: HostTables = compileHostTables(config, this.name, this.generation);
    // ports by nic name carry over; the data plane's port numbers are the new tables' nic indexes
    const old = new Map(this.ctx.tables.nics.map((n) => [n.name, this.ports[n.index]]));
    const ports: PortState[] = [];
    const macs: Uint8Array[] = [];
    for (const n of tables.nics) {
      const st = old.get(n.name);
      if (st !== undefined && st.port !== null && st.port.iface === n.port) {
        ports.push(st);
        macs.push(st.mac!);
        old.delete(n.name);
      } else {
        ports.push({ port: null, mac: null, error: null, index: n.index, batchCounted: 0 });
        macs.push(new Uint8Array(6));
      }
    }
    this.countBatchErrors();
    for (const st of old.values()) st?.port?.close();
    const counters = this.ctx.counters;
    const ctx = buildHostContext(config, tables, macs, this.ctx.dsrMtu);
    this.ew = carryEwState(this.ew, this.ctx.tables, tables, config, this.fabricMac, this.snat.engine);
    ctx.ew = this.ew;
    ctx.sourceMacCheck = this.sourceMacCheck;
    ctx.holdUnresolved = this.ctx.holdUnresolved;
    const meNext = config.hosts.find((h) => h.name === this.name);
    this.neighbors.setPeers(tables.peers, meNext === undefined ? undefined : underlayRoutesOf(meNext));
    this.neighbors.fill(ctx.peerMacs);
    ctx.counters.values.set(counters.values); // counters survive a policy change
    ctx.counters.values[ctx.counters.index.host_flows_not_carried]! += this.ew.notCarried;
    this.ew.notCarried = 0;
    this.installSnat(ctx, config, this.ctx.tables, snat);
    // captures call back with their PortState's index: renumber in place. (Not closed and reopened: no
    // frame is lost during a reload, and a closed `cap` handle that is garbage-collected can crash the
    // process: cap's close() stops its uv_poll handle without uv_close(), and its destructor frees it.)
    for (let i = 0; i < ports.length; i++) ports[i]!.index = i;
    this.ports = ports;
    this.traffic.remap(tables.nics);
    this.ctx = ctx;
    this.config = config;
    if (this.workers !== null) {
      // every worker compiles this generation and swaps it in between two of its batches; new ports are
      // joined in index order; new internal VIPs change the steering programs: a regroup
      this.workers.postConfig(config, this.generation, ctx.peerMacs, snat, this.snat.withdrawn);
      if (JSON.stringify(steeringVipsOf(config)) !== vipsBefore) void this.workers.regroup();
      else void this.workers.joinRound();
    }
    this.vxlanSocket?.setSources(vxlanSources(config, this.name));
    this.openPorts();
    this.prober.applyConfig(config);
    logInfo('tables_installed', { generation: this.generation, nics: tables.nics.map((n) => n.name) });
  }

  status(): Record<string, unknown> {
    this.countBatchErrors();
    this.syncTraffic();
    const counters = this.allCounters();
    const t = this.ctx.tables;
    const ports = t.nics.map((n) => ({
      nic: n.name,
      port: n.port,
      open: this.ports[n.index]?.port != null,
      mac: this.ports[n.index]?.mac ? formatMac(this.ports[n.index]!.mac!) : null,
      error: this.ports[n.index]?.error ?? null,
      addresses: [n.addr4 >= 0 ? 'ipv4' : null, n.addr6 ? 'ipv6' : null].filter(Boolean),
      // frames the kernel dropped before this agent read them (its capture ring full): --io ring only;
      // null with libpcap's binding, which does not report them (README limits)
      kernelDrops: kernelDropsOf(this.ports[n.index]?.port ?? null),
    }));
    return {
      daemon: 'host-agent',
      name: this.name,
      ready:
        this.started &&
        (this.receivePath === 'capture' ? this.fabric.isOpen : this.vxlanSocket?.isOpen === true) &&
        ports.every((p) => p.open) &&
        (this.workers === null || this.workers.allJoined(t.nics.map((n) => n.port))) &&
        (!this.sourceMacCheck || this.neighbors.allResolved || Date.now() - this.startedAt >= NEIGHBOR_READY_WAIT_MS),
      uptimeS: Math.round((Date.now() - this.startedAt) / 1000),
      generation: t.generation,
      interface: this.iface,
      pa: this.self().address.text,
      dsr: {
        via4: this.o.dsrVia4,
        via6: this.o.dsrVia6,
        sent4: this.raw4?.sent ?? 0,
        sent6: this.raw6?.sent ?? 0,
        errors: (this.raw4?.sendErrors ?? 0) + (this.raw6?.sendErrors ?? 0),
        lastError: this.raw4?.lastSendError || this.raw6?.lastSendError || undefined,
        unavailable: counters.get('send_error_dsr_unavailable'),
      },
      io: this.io,
      receive:
        this.receivePath === 'capture'
          ? { path: 'capture', open: this.fabric.isOpen, kernelDrops: kernelDropsOf(this.fabric) }
          : {
              path: 'udp',
              open: this.vxlanSocket?.isOpen === true,
              received: this.vxlanSocket?.received ?? 0,
              errors: this.vxlanSocket?.errors ?? 0,
              lastError: this.vxlanSocketError ?? undefined,
            },
      nftables:
        this.receivePath === 'udp'
          ? 'not needed (udp receive path)'
          : this.o.nftables === false
            ? 'disabled'
            : (this.nftError ?? 'installed'),
      ports,
      sourceMacCheck: this.sourceMacCheck ? 'on' : 'off (udp receive path: the kernel hides the source MAC)',
      neighbors: this.neighbors.status(Date.now()),
      neighborCounters: this.neighbors.counters,
      sendErrors: this.fabric.sendErrors + this.ports.reduce((s, p) => s + (p.port?.sendErrors ?? 0), 0),
      internalErrors: this.internalErrors,
      probes: this.prober.status(),
      probeTargets: this.prober.details(),
      probeCounters: this.prober.counters(),
      latencyEcho: {
        socket4: this.echo4 !== null,
        socket6: this.echo6 !== null,
        answered: this.ctx.counters.get('latency_echo_answered'),
        bad: this.ctx.counters.get('latency_echo_bad'),
        sendErrors: this.ctx.counters.get('send_error_latency_echo'),
        lastError: this.echoError ?? undefined,
      },
      // --workers: their flow tables (this thread's holds none)
      eastWest: this.workers !== null ? this.workers.eastWest(this.ew.mac !== null) : ewStatus(this.ew),
      flowSnapshot: this.snapshot?.status() ?? null,
      snat: this.snatStatus(t),
      counters: counters.snapshot(),
      // --workers: each worker's generation (the one it handles every packet by), sockets and restarts
      ...(this.workers !== null ? { workers: this.workers.status(), workerRegroups: this.workers.regroups } : {}),
      // per backend: frames delivered to its port and replies sent by DSR (slbctl top reads them from the heartbeats)
      backends: this.traffic.backends(),
    };
  }

  /** /status's snat: the engine's; --workers: summed over the workers' last reports (each one's in workers[]). */
  private snatStatus(t: HostTables): Record<string, unknown> {
    if (this.workers !== null) this.snat.usage = this.workers.snatUsage();
    return this.snat.status(t);
  }

  /** East-west clocks and a slice of the host flow table's idle sweep (every EW_TICK_MS), and of the SNAT flows'. */
  private tickEw(): void {
    tickEwState(this.ew, sweepSlotsOf(this.ew));
    if (this.ctx.snat !== null) this.snat.engine.sweep(this.ew.nowS, SNAT_SWEEP_SLOTS);
    this.sendSnatIdleResets();
  }

  /** tcpResetOnIdle's RSTs for the flows this thread's engine ended (host-agent/snat-resets.ts). */
  private sendSnatIdleResets(): void {
    sendSnatIdleResets(this.snat.engine, this.ctx, this.raw4, this.raw6, (nic) => this.ports[nic]?.port ?? null);
  }

  /**
   * Outbound NAT for `ctx` (its tables by the new nic indexes; `oldTables` those in force): the engine
   * gets the config's rules and the policy's ranges (`ranges`; undefined: the ones in force). A config
   * without outbound rules leaves ctx.snat null. Flows a generation ends are counted.
   */
  private installSnat(ctx: HostContext, config: SlbxConfig, oldTables: HostTables, ranges: readonly PolicySnatRange[] | undefined): void {
    const ended = this.snat.install(config, ctx.tables, oldTables, ranges, Date.now());
    ctx.snat = config.outbound.length > 0 || this.snat.engine.live > 0 ? this.snat.engine : null;
    ctx.counters.values[ctx.counters.index.snat_flows_ended_by_policy]! += ended;
  }

  /** The policy's outbound NAT ranges (every host's; a generation that changed only them). */
  applySnatRanges(ranges: readonly PolicySnatRange[]): void {
    this.installSnat(this.ctx, this.config, this.ctx.tables, ranges);
    this.workers?.postSnat(ranges, this.snat.withdrawn);
  }

  /** Every SNAT_CONTROL_TICK_MS: demands for nics running short, idle chunks given back. */
  private tickSnat(): void {
    const c = this.o.controller ?? null;
    if (this.workers !== null) this.snat.usage = this.workers.snatUsage(); // the workers' last reports
    if (this.ctx.snat === null || c === null || c.urls.length === 0) return;
    const now = Date.now();
    for (const d of this.snat.planDemands(this.ctx.tables, this.config, now)) void this.sendDemand(c, d);
    if (this.snatWithdrawing) return; // --workers: one release at a time
    const r = this.snat.planRelease(this.ctx.tables, this.config, now);
    if (r !== null) {
      this.installSnat(this.ctx, this.config, this.ctx.tables, undefined); // the chunks leave the engine now
      if (this.workers === null) void this.sendRelease(c, r);
      else void this.withdrawAndRelease(this.workers, c, r);
    }
  }

  /** --workers: a release is in its withdrawal (host-agent/snat-workers.ts) or at the controller. */
  private snatWithdrawing = false;

  /**
   * --workers: every worker leaves the release's chunks out of its engine first and names those it still
   * has a flow on (opened since its last report); those stay for every worker, the rest go to the controller.
   */
  private async withdrawAndRelease(workers: HostWorkers, c: { urls: readonly URL[]; token: string | null }, r: SnatRelease): Promise<void> {
    this.snatWithdrawing = true;
    try {
      const answers = await workers.withdraw(this.snat.withdrawn);
      const keep = settleWithdrawal(
        r.chunks.map((x) => `${x.ip}:${x.first}`),
        answers,
      );
      const rest = this.snat.releaseWithdrawn(r, keep, Date.now());
      if (keep.size > 0) {
        logInfo('snat_release_busy', { chunks: keep.size, answers: answers.map((a) => (Array.isArray(a) ? a.length : a)) });
        this.installSnat(this.ctx, this.config, this.ctx.tables, undefined); // they come back, here and in every worker
        workers.postSnat(null, this.snat.withdrawn);
      }
      if (rest !== null) await this.sendRelease(c, rest);
    } catch (e) {
      this.internalError(e);
    } finally {
      this.snatWithdrawing = false;
    }
  }

  private async postController(c: { urls: readonly URL[]; token: string | null }, path: string, body: unknown): Promise<unknown> {
    let last: unknown = null;
    for (const u of c.urls) {
      try {
        const r = await requestJson(joinUrl(u, path), {
          method: 'POST',
          body,
          timeoutMs: 5000,
          headers: c.token === null ? {} : bearer(c.token),
        });
        if (r.status === 200) return r.body;
        last = `HTTP ${r.status}: ${r.text.slice(0, 200)}`;
        if (r.status !== 503) break; // an answer, not an unreachable leader: no other replica will say otherwise
      } catch (e) {
        last = (e as Error).message;
      }
    }
    throw new Error(String(last));
  }

  private async sendDemand(c: { urls: readonly URL[]; token: string | null }, d: SnatDemand): Promise<void> {
    try {
      const b = (await this.postController(c, `/v1/agents/host/${encodeURIComponent(this.name)}/snat-demand`, d)) as {
        granted?: unknown[];
        reason?: string;
      };
      const granted = Array.isArray(b?.granted) ? b.granted.length * SNAT_CHUNK_PORTS : 0;
      this.snat.demandAnswered(d, granted, b?.reason ?? null);
      logInfo('snat_demand', { nic: d.nic, family: d.family, asked: d.ports, granted, reason: b?.reason });
    } catch (e) {
      this.snat.demandAnswered(d, null, null);
      logWarn('snat_demand_failed', { nic: d.nic, family: d.family, asked: d.ports, error: (e as Error).message });
    }
  }

  private async sendRelease(c: { urls: readonly URL[]; token: string | null }, r: SnatRelease): Promise<void> {
    try {
      const b = (await this.postController(c, `/v1/agents/host/${encodeURIComponent(this.name)}/snat-release`, r)) as {
        kept?: { ip: string; first: number }[];
      };
      this.snat.releaseAnswered(r, Array.isArray(b?.kept) ? b.kept : [], Date.now());
      logInfo('snat_release', { chunks: r.chunks.length, kept: Array.isArray(b?.kept) ? b.kept.length : 0 });
    } catch (e) {
      this.snat.releaseAnswered(r, null, Date.now());
      logWarn('snat_release_failed', { chunks: r.chunks.length, error: (e as Error).message });
    }
    this.installSnat(this.ctx, this.config, this.ctx.tables, undefined); // kept chunks come back
    this.workers?.postSnat(null, this.snat.withdrawn); // in every worker too
  }

  /** What the flow snapshot copies: the host flow table's return-path entries and the outbound NAT engine's flows. */
  private snapshotSource(): FlowSnapshotSource {
    return flowSnapshotSourceOf(this.ew, this.ctx.counters.get('dsr_flows_learned'), this.snat.engine);
  }

  /** What GET /flows answers: up to `limit` entries of the host flow table (every kind; an outbound NAT flow once). */
  flows(limit: number): ListedHostFlow[] | Promise<ListedHostFlow[]> {
    if (this.workers !== null) return this.workers.flows(limit); // --workers: each worker's answer awaited
    return listHostFlows(this.ew, this.ctx.tables, limit, this.snat.engine);
  }
}
