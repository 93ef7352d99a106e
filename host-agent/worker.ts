// One host agent worker thread (--workers N, host-agent/workers.ts starts them): the pure data plane on
// its own ring sockets, one on the fabric interface and one per VM port, each in its interface's
// PACKET_FANOUT_CBPF group (host-agent/worker-steering.ts: both directions of a flow reach one worker), with
// its own tables, host flow table (the return path's entries, Fastpath) and DSR senders. The main thread
// keeps ARP/ND (its own socket outside the groups), probes, the latency echo's sockets, the status
// endpoint and compiling nothing for the packets: it hands every worker each generation's config, and the
// worker compiles the tables itself (compileHostTables is a pure function of config, host and generation).
// Outbound NAT: each worker has its own engine (host-agent/snat-control.ts, over this worker's flow table)
// with the policy's ranges less the chunks the main thread withdrew; it sweeps its flows, sends their idle
// resets and reports its use; the main thread plans demands and releases (host-agent/snat-workers.ts).
// --state-dir: it keeps its own flow snapshot and journal (set NAME.wI) and reads, before its first frame,
// every set present, keeping the flows steering gives it (host-agent/flow-state-sets.ts).
//
// One generation per packet: a new generation arrives as a message; a worker thread runs one thing at a
// time, so the message handler (which builds the new context and swaps it in one assignment) runs between
// two ring batches, never inside one. Every packet is handled wholly by one generation's tables.
//
// Imports: only what loads in a worker thread (the ring addon; not libpcap's binding or raw-socket, so
// nothing from runtime/frame-port.ts or host-agent/daemon.ts).
import { parentPort, workerData } from 'node:worker_threads';
import type { SlbxConfig } from '../shared/config.js';
import { formatMac } from '../shared/addr.js';
import { readU32 } from '../shared/bytes.js';
import { parseRedirect, newRedirect, REDIRECT_PORT } from '../shared/redirect.js';
import { parseEchoRequest, type EchoRequest } from '../shared/latency.js';
import { loadRingAddon, RingPort, RingRawSender, type RingAddon } from '../runtime/ring-port.js';
import { readInterface } from '../runtime/netif.js';
import { servePoolThread, startPoolThreadLog, type PoolThreadCore } from '../runtime/worker-pool.js';
import { compileHostTables, type HostTables } from './tables.js';
import { buildHostContext, DSR_MTU_UNKNOWN } from './context.js';
import type { HostContext } from './data-plane.js';
import type { EwState } from './east-west.js';
import type { HostFlowTable } from './flow-table.js';
import { handleInbound, handleOutbound, holdFrame, type VerdictIo } from './verdicts.js';
import { carryEwState, listHostFlows, newDaemonEwState, sweepSlotsOf, tickEwState, type EwTableCount } from './east-west-io.js';
import { HostTrafficCounters, HOST_TRAFFIC_STRIDE } from './traffic-counters.js';
import { steerWorker, steeringKeyOfEnd } from './worker-steering.js';
import { SnatControl, SNAT_SWEEP_SLOTS } from './snat-control.js';
import type { PolicySnatRange } from './snat.js';
import { sendSnatIdleResets } from './snat-resets.js';
import type { SnatWorkerReport } from './snat-workers.js';
import { FlowSnapshotter, flowSnapshotSourceOf, type FlowSnapshotSource } from './flow-snapshot.js';
import { FlowJournal } from './flow-journal.js';
import { listFlowStateSets, readFlowStateSet, restoreOtherSets, steeringFilter, workerFlowSetName } from './flow-state-sets.js';
import { logInfo, logWarn } from '../runtime/log.js';
import {
  FLOW_KINDS_SAMPLE_MS,
  STATUS_GENERATION,
  WORKER_HOLD_MAX_FRAMES,
  type HostWorkerFlowSnapshot,
  type HostWorkerFlowState,
  type HostWorkerInput,
  type HostWorkerJoin,
  type HostWorkerReport,
  type HostWorkerRequest,
  type HostWorkerToMain,
} from './worker-protocol.js';

/** The kernel buffer of each VM port's socket (the single-threaded agent's). */
const PORT_BUFFER_BYTES = 4 * 1024 * 1024;
/** How often the report's list of chunks carrying a flow is sampled again (it walks every SNAT flow). */
const SNAT_USED_SAMPLE_MS = 1000;

/** redirectOwner's record and its client's address as words, reused for every redirect frame (a worker reads one frame at a time). */
const ownerRedirect = newRedirect();
const ownerWords = new Uint32Array(4);

/**
 * The worker that holds the flow a Fastpath redirect names: its steering key is its client's end
 * (address, port), the end the VM's frames of that flow are steered by (docs/io-paths.md, the key table:
 * east-west, this host the client's), computed as host-agent/worker-steering.ts computes it from a frame.
 * -1: not a redirect this can read. Allocates nothing (the record is reused).
 */
export function redirectOwner(frame: Uint8Array, len: number, count: number): number {
  if (len < 14 + 20 || frame[12] !== 0x08 || frame[13] !== 0x00 || frame[23] !== 17) return -1;
  const l4 = 14 + (frame[14]! & 0x0f) * 4;
  if (l4 + 8 > len || ((frame[l4 + 2]! << 8) | frame[l4 + 3]!) !== REDIRECT_PORT) return -1;
  const r = ownerRedirect;
  if (parseRedirect(frame, l4 + 8, r, len) < 0) return -1;
  for (let i = 0; i < (r.family === 4 ? 1 : 4); i++) ownerWords[i] = readU32(r.src, i * 4);
  return steerWorker(steeringKeyOfEnd(r.family === 4 ? 4 : 6, ownerWords, r.srcPort), count);
}

interface PortEntry {
  port: RingPort;
  /** The nic index its frames are handled under (renumbered in place by a new generation; -1: gone). */
  index: number;
  mac: Uint8Array;
  batchCounted: number;
}

export class HostWorkerCore implements PoolThreadCore {
  ctx: HostContext;
  config: SlbxConfig;
  generation: number;
  readonly index: number;
  readonly count: number;
  private readonly name: string;
  private readonly iface: string;
  private readonly fabricMac: Uint8Array;
  private readonly counterValues: Float64Array;
  readonly status: Int32Array;
  private ew: EwState;
  /** Per nic name: delivered and DSR counts (host-agent/traffic-counters.ts). */
  readonly traffic: HostTrafficCounters;
  fabric: RingPort | null = null;
  private fabricBatchCounted = 0;
  /** This worker's socket on each VM port, by interface name. */
  readonly ports = new Map<string, PortEntry>();
  /** By nic index: the port's socket, or null (not joined yet). */
  private byIndex: (RingPort | null)[] = [];
  raw4: RingRawSender | null = null;
  raw6: RingRawSender | null = null;
  private rawCounted = { raw4: 0, raw6: 0 };
  private held: Buffer[] = [];
  private readonly expedite = new Set<number>();
  private readonly echoReq: EchoRequest = { nonceHi: 0, nonceLo: 0 };
  internalErrors = 0;
  lastInternalError = '';
  /** Outbound NAT: this worker's engine, with the policy's ranges less the withdrawn chunks. */
  readonly snat: SnatControl;
  private snatUsed: string[] = [];
  private snatUsedAt = -Infinity;
  /** The report's count of flow entries by kind, when it was made and of which table (a config may replace the table). */
  private kinds: Record<string, number> = {};
  private kindsAt = -Infinity;
  private kindsOf: HostFlowTable | null = null;
  /** What the worker tells the main thread (a test collects it). */
  post: (m: HostWorkerToMain) => void;
  /** --state-dir: this worker's flow snapshot and journal (set NAME.wI); null: none. */
  readonly snapshot: FlowSnapshotter | null = null;
  private readonly flowState: HostWorkerFlowState | null;
  /** What the start restored (report and /status). */
  private restored: Omit<
    HostWorkerFlowSnapshot,
    'written' | 'writeErrors' | 'lastError' | 'lastFlows' | 'lastSnatFlows' | 'journalRecords'
  > | null = null;
  /** This worker's sockets and hand-offs for the verdicts (host-agent/verdicts.ts). */
  private readonly io: VerdictIo = {
    internalError: (e) => this.internalError(e),
    hold: (frame, len) => holdFrame(this.ctx, this.held, WORKER_HOLD_MAX_FRAMES, frame, len),
    echo: (frame) => this.echo(frame),
    expedite: (peer) => void this.expedite.add(peer),
    local: (port) => this.local(port),
    port: (index) => this.byIndex[index] ?? null,
    fabric: () => this.fabric,
    dsr: (v6) => (v6 ? this.raw6 : this.raw4),
  };

  constructor(input: HostWorkerInput, post: (m: HostWorkerToMain) => void) {
    this.index = input.index;
    this.count = input.count;
    this.name = input.name;
    this.iface = input.iface;
    this.fabricMac = input.fabricMac;
    this.config = input.config;
    this.generation = input.generation;
    this.post = post;
    this.counterValues = new Float64Array(input.counters);
    this.status = new Int32Array(input.status);
    const tables = compileHostTables(input.config, input.name, input.generation);
    this.ew = newDaemonEwState(input.config, input.fabricMac, input.policyKey);
    this.ctx = this.newContext(input.config, tables, input.peerMacs);
    this.ctx.sourceMacCheck = input.sourceMacCheck;
    this.ctx.holdUnresolved = input.holdUnresolved;
    this.snat = new SnatControl(input.name, this.ew.flows, input.config.flowTable.snatMaxFlows);
    // a new outbound flow only toward the remote ends the kernel steers here: one of another worker's
    // share reaches this one only while that worker is down, and a port taken for it here could be the
    // one that worker's restored flow holds toward the same remote end (drop_out_snat_other_worker)
    if (input.count > 1) {
      const { index, count } = input;
      this.snat.engine.opensTo = (family, remote, port) => steerWorker(steeringKeyOfEnd(family, remote, port), count) === index;
    }
    this.snat.setWithdrawn(input.snatWithdrawn, tables);
    this.installSnat(this.ctx, input.config, tables, input.snatRanges);
    this.traffic = new HostTrafficCounters(tables.nics);
    // before any frame (the sockets open at the first join, after `ready`): the flows steering gives this worker
    this.flowState = input.flowState;
    if (input.flowState !== null) this.snapshot = this.restoreFlows(input.flowState, input.snatRanges.length > 0);
    Atomics.store(this.status, STATUS_GENERATION, input.generation);
  }

  /**
   * --state-dir: reads every flow state set (the others', then its own: host-agent/flow-state-sets.ts),
   * keeps the records steering gives this worker, writes its own set anew and journals from now on (as
   * the one-thread daemon does, host-agent/daemon.ts). Outbound NAT flows whose chunk this host no longer
   * holds (released while this worker was down, or being given back) end at once, as a policy without
   * that chunk ends them in any engine; with no ranges known yet (the agent's start) they wait for the
   * first ranges, as the one-thread daemon's restored flows do.
   */
  private restoreFlows(fs: HostWorkerFlowState, rangesKnown: boolean): FlowSnapshotter {
    const own = workerFlowSetName(this.name, this.index);
    const log = (level: 'info' | 'warn', event: string, fields: Record<string, unknown>) =>
      (level === 'warn' ? logWarn : logInfo)(event, { worker: this.index, ...fields });
    const snap = new FlowSnapshotter({ dir: fs.dir, name: own, intervalMs: fs.intervalMs, log });
    const target = {
      flows: this.ew.flows,
      nowS: this.ew.nowS,
      maxLeftS: Math.max(this.ew.tcpIdleS, this.ew.udpIdleS),
      snat: this.snat.engine,
      keep: steeringFilter(this.index, this.count),
    };
    const sets = fs.sets ?? listFlowStateSets(fs.dir, this.name).map((x) => ({ set: x.set, bytes: readFlowStateSet(fs.dir, x.set, log) }));
    const others = restoreOtherSets(
      sets.filter((x) => x.set !== own),
      target,
    );
    const mine = sets.find((x) => x.set === own)?.bytes ?? { snapshot: null, journals: [] };
    const c = this.ctx.counters;
    let snatEndedNotHeld = 0;
    const r = snap.load(target, mine, () => {
      if (!rangesKnown || this.snat.engine.live === 0) return;
      const before = c.values[c.index.snat_flows_ended_by_policy]!;
      this.installSnat(this.ctx, this.config, this.ctx.tables, undefined);
      snatEndedNotHeld = c.values[c.index.snat_flows_ended_by_policy]! - before;
    });
    const dsrRestored = others.dsrRestored + (r?.dsrRestored ?? 0);
    const dsrReplayed = others.dsrReplayed + (r?.journal.dsrReplayed ?? 0);
    c.values[c.index.dsr_flows_restored]! += dsrRestored;
    c.values[c.index.dsr_flows_replayed]! += dsrReplayed;
    const snatRestored = others.snatRestored + (r?.snat?.restored ?? 0);
    const byKind = this.ew.flows.countByKind(this.ew.nowS);
    const dsrEntries = (byKind['dsr'] ?? 0) + (byKind['dsr_closing'] ?? 0);
    this.restored = {
      dsrRestored,
      dsrReplayed,
      snatRestored,
      snatEndedNotHeld,
      dsrCaughtUp: 0,
      dsrEntries,
      setsRead: sets.map((x) => x.set),
    };
    if (others.sets.length > 0 || r !== null)
      logInfo('host_worker_flows_restored', {
        worker: this.index,
        workers: this.count,
        restart: fs.sets === null,
        ...this.restored,
        others: others.sets,
      });
    // from now on each new or changed flow of this worker goes to its journal, at the end of the turn that made it
    this.ew.journal = snap.journalSink(() => this.ew.nowS);
    this.snat.engine.journal = this.ew.journal;
    return snap;
  }

  /**
   * A restarted worker's first regroup, every worker out of the groups: the records of its share that the
   * others journaled since it read their sets at its start (the kernel gave them its frames while it was
   * down and until now). Their journals only (the gap is short: a journal is kept for two snapshot
   * intervals); entries it has are set again, outbound NAT flows it has are skipped.
   */
  catchUp(): void {
    const fs = this.flowState;
    if (fs === null || this.restored === null) return;
    const own = workerFlowSetName(this.name, this.index);
    const log = (level: 'info' | 'warn', event: string, fields: Record<string, unknown>) =>
      (level === 'warn' ? logWarn : logInfo)(event, { worker: this.index, ...fields });
    const dsrOf = () => {
      const k = this.ew.flows.countByKind(this.ew.nowS);
      return (k['dsr'] ?? 0) + (k['dsr_closing'] ?? 0);
    };
    const before = dsrOf();
    const snatBefore = this.snat.engine.live;
    const sets = listFlowStateSets(fs.dir, this.name)
      .filter((x) => x.set !== own)
      .map((x) => ({
        set: x.set,
        bytes: { snapshot: null, journals: new FlowJournal({ dir: fs.dir, name: x.set, log }).readFiles().map((f) => f.bytes) },
      }));
    restoreOtherSets(sets, {
      flows: this.ew.flows,
      nowS: this.ew.nowS,
      maxLeftS: Math.max(this.ew.tcpIdleS, this.ew.udpIdleS),
      snat: this.snat.engine,
      keep: steeringFilter(this.index, this.count),
    });
    const added = Math.max(0, dsrOf() - before);
    const c = this.ctx.counters;
    c.values[c.index.dsr_flows_replayed]! += added;
    this.restored.dsrCaughtUp += added;
    this.restored.snatRestored += this.snat.engine.live - snatBefore;
    if (added > 0 || this.snat.engine.live !== snatBefore)
      logInfo('host_worker_flows_caught_up', { worker: this.index, dsr: added, snat: this.snat.engine.live - snatBefore });
  }

  /** The snapshot timer's view of this worker's flows (as HostDaemon.snapshotSource). */
  snapshotSource(): FlowSnapshotSource {
    const c = this.ctx.counters;
    return flowSnapshotSourceOf(this.ew, c.values[c.index.dsr_flows_learned]!, this.snat.engine);
  }

  /** The report's flow snapshot part (null: none). */
  flowSnapshotReport(): HostWorkerFlowSnapshot | null {
    const s = this.snapshot;
    if (s === null || this.restored === null) return null;
    return {
      ...this.restored,
      written: s.written,
      writeErrors: s.writeErrors,
      lastError: s.lastError,
      lastFlows: s.lastFlows,
      lastSnatFlows: s.lastSnatFlows,
      journalRecords: s.journal.records,
    };
  }

  private newContext(config: SlbxConfig, tables: HostTables, peerMacs: Float64Array): HostContext {
    const macs = tables.nics.map((n) => this.ports.get(n.port)?.mac ?? new Uint8Array(6));
    const ctx = buildHostContext(config, tables, macs, readInterface(this.iface)?.mtu ?? DSR_MTU_UNKNOWN);
    // the counters live in shared memory: the main thread sums every worker's without asking
    (ctx.counters as { values: Float64Array }).values = this.counterValues;
    ctx.ew = this.ew;
    if (peerMacs.length === ctx.peerMacs.length) ctx.peerMacs.set(peerMacs);
    return ctx;
  }

  /** A new generation: its tables compiled here and swapped in between two packets (never a mix of two). */
  applyConfig(
    config: SlbxConfig,
    generation: number,
    peerMacs: Float64Array,
    snat: readonly PolicySnatRange[] | null = null,
    snatWithdrawn: readonly string[] = this.snat.withdrawn,
  ): void {
    const tables = compileHostTables(config, this.name, generation);
    this.ew = carryEwState(this.ew, this.ctx.tables, tables, config, this.fabricMac, this.snat.engine);
    const ctx = this.newContext(config, tables, peerMacs);
    ctx.sourceMacCheck = this.ctx.sourceMacCheck;
    ctx.holdUnresolved = this.ctx.holdUnresolved;
    ctx.counters.values[ctx.counters.index.host_flows_not_carried]! += this.ew.notCarried;
    this.ew.notCarried = 0;
    this.snat.setWithdrawn(snatWithdrawn, this.ctx.tables); // the flows' nics by the tables in force
    this.installSnat(ctx, config, this.ctx.tables, snat ?? undefined);
    // sockets by interface name carry over, renumbered in place; a port no nic uses any more is closed
    const byPort = new Map(tables.nics.map((n) => [n.port, n.index]));
    for (const [ifname, e] of this.ports) {
      const i = byPort.get(ifname);
      if (i === undefined) {
        e.index = -1;
        e.port.close();
        this.ports.delete(ifname);
      } else e.index = i;
    }
    this.byIndex = tables.nics.map((n) => this.ports.get(n.port)?.port ?? null);
    this.traffic.remap(tables.nics);
    this.ctx = ctx;
    this.config = config;
    this.generation = generation;
    Atomics.store(this.status, STATUS_GENERATION, generation);
  }

  /**
   * Outbound NAT for `ctx` (as HostDaemon.installSnat): the engine gets the config's rules and `ranges`
   * (undefined: the ones in force) less the withdrawn chunks; flows a generation ends are counted.
   */
  private installSnat(ctx: HostContext, config: SlbxConfig, oldTables: HostTables, ranges: readonly PolicySnatRange[] | undefined): void {
    const ended = this.snat.install(config, ctx.tables, oldTables, ranges, Date.now());
    ctx.snat = config.outbound.length > 0 || this.snat.engine.live > 0 ? this.snat.engine : null;
    ctx.counters.values[ctx.counters.index.snat_flows_ended_by_policy]! += ended;
    this.snatUsedAt = -Infinity;
  }

  /**
   * The main thread's ranges (null: the ones in force) and withdrawn chunks, between two batches. Returns
   * the withdrawn chunks this worker kept because a live flow here holds a port of one (SnatControl.setWithdrawn).
   */
  applySnat(ranges: readonly PolicySnatRange[] | null, withdrawn: readonly string[]): string[] {
    const busy = this.snat.setWithdrawn(withdrawn, this.ctx.tables);
    this.installSnat(this.ctx, this.config, this.ctx.tables, ranges ?? undefined);
    return busy;
  }

  /** The MACs the main thread resolved (ARP/ND stays there), and whether the hold window after a start is still open. */
  applyPeers(peerMacs: Float64Array, holdUnresolved: boolean): void {
    if (peerMacs.length === this.ctx.peerMacs.length) this.ctx.peerMacs.set(peerMacs);
    this.ctx.holdUnresolved = holdUnresolved;
    if (this.held.length === 0) return;
    const held = this.held;
    this.held = [];
    for (const f of held) this.handleFabric(f, f.length);
  }

  /**
   * Opens this worker's sockets not open yet: the fabric's, then each VM port's in nic order, each in its
   * group (the main thread has every worker join in index order, one at a time: docs/io-paths.md).
   */
  join(j: HostWorkerJoin, addon: RingAddon, fabricFilter: string, bufferBytes: number): { fabricOpen: boolean; errors: string[] } {
    const errors: string[] = [];
    const groups = new Map(j.portGroups);
    if (this.fabric === null) {
      const p = new RingPort(this.iface, addon, { fanoutGroup: j.fabricGroup, fanoutProgram: j.fabricProgram, qdiscBypass: false });
      try {
        p.open(fabricFilter, (f, len) => this.handleFabric(f, len), bufferBytes);
        this.fabric = p;
        this.fabricBatchCounted = 0;
      } catch (e) {
        errors.push(`${this.iface}: ${(e as Error).message}`);
      }
    }
    for (const nic of this.ctx.tables.nics) {
      if (this.ports.has(nic.port)) continue;
      const group = groups.get(nic.port);
      const ifc = readInterface(nic.port);
      if (group === undefined || ifc === null) {
        errors.push(`${nic.port}: ${ifc === null ? 'no such interface in this namespace' : 'no fanout group'}`);
        continue;
      }
      const p = new RingPort(nic.port, addon, { fanoutGroup: group, fanoutProgram: j.portProgram, qdiscBypass: false });
      const e: PortEntry = { port: p, index: nic.index, mac: ifc.mac, batchCounted: 0 };
      try {
        // every frame the backend sends; not the ones sent from the port's MAC
        p.open(`not ether src ${formatMac(ifc.mac)}`, (f, len) => this.handlePort(f, len, e.index), PORT_BUFFER_BYTES);
      } catch (err) {
        errors.push(`${nic.port}: ${(err as Error).message}`);
        continue;
      }
      this.ports.set(nic.port, e);
      this.byIndex[nic.index] = p;
      this.ctx.portMacs[nic.index] = ifc.mac;
    }
    return { fabricOpen: this.fabric !== null, errors };
  }

  /** Closes every socket of the groups (the regroup: every worker leaves, then all join again in index order). */
  leave(): void {
    this.countBatchErrors();
    this.fabric?.close();
    this.fabric = null;
    for (const e of this.ports.values()) e.port.close();
    this.ports.clear();
    this.byIndex = this.ctx.tables.nics.map(() => null);
  }

  openDsr(addon: RingAddon, via4: string | null, via6: string | null): void {
    if (via4 !== null) this.raw4 = new RingRawSender(addon, 4, via4);
    if (via6 !== null) this.raw6 = new RingRawSender(addon, 6, via6);
  }

  private internalError(e: unknown): void {
    this.ctx.counters.values[this.ctx.counters.index.drop_internal_error]!++;
    this.internalErrors++;
    this.lastInternalError = (e as Error).stack ?? String(e);
  }

  /** VXLAN or a Fastpath redirect from the fabric: HostDaemon.judgeInbound's work. */
  handleFabric(frame: Buffer, len: number): void {
    if (this.count > 1) {
      // a Fastpath redirect has no steering key (worker 0 gets it): handed to the worker of the flow it names
      const owner = redirectOwner(frame, len, this.count);
      if (owner >= 0 && owner !== this.index) {
        this.post({ t: 'redirect', index: owner, frame: Uint8Array.prototype.slice.call(frame, 0, len) });
        return;
      }
    }
    handleInbound(this.ctx, this.traffic, this.io, frame, len);
  }

  /** A MUX's latency echo request: its fields to the main thread, which answers from its sockets. */
  private echo(frame: Buffer): void {
    const ctx = this.ctx;
    if (parseEchoRequest(ctx.outBuf, ctx.outOff, this.echoReq, ctx.outOff + ctx.outLen) < 0) {
      ctx.counters.values[ctx.counters.index.latency_echo_bad]!++;
      return;
    }
    this.post({
      t: 'echo',
      peer: ctx.lastPeer,
      v6: frame[12] === 0x86 && frame[13] === 0xdd,
      srcPort: ctx.udp.srcPort,
      nonceHi: this.echoReq.nonceHi,
      nonceLo: this.echoReq.nonceLo,
    });
  }

  /** A frame a backend sent on nic `port`: HostDaemon.onPortFrame's work. */
  handlePort(frame: Buffer, len: number, port: number): void {
    if (port < 0) return; // its nic left with the last generation
    handleOutbound(this.ctx, this.traffic, this.io, frame, len, port);
  }

  /** A backend's answer to a health probe on nic `port` (in ctx.out*): the prober is on the main thread. */
  private local(port: number): void {
    const ctx = this.ctx;
    const nic = ctx.tables.nics[port];
    if (nic !== undefined)
      this.post({ t: 'local', nic: nic.name, packet: Uint8Array.prototype.slice.call(ctx.outBuf, ctx.outOff, ctx.outOff + ctx.outLen) });
  }

  /** The batched sends the kernel refused into send_error_batch (as HostDaemon.countBatchErrors). */
  countBatchErrors(): void {
    let n = 0;
    if (this.fabric !== null) {
      const d = this.fabric.deferredSendErrors();
      n += d - this.fabricBatchCounted;
      this.fabricBatchCounted = d;
    }
    for (const [key, raw] of [
      ['raw4', this.raw4],
      ['raw6', this.raw6],
    ] as const) {
      if (raw === null) continue;
      const d = raw.deferredSendErrors();
      n += d - this.rawCounted[key];
      this.rawCounted[key] = d;
    }
    for (const e of this.ports.values()) {
      const d = e.port.deferredSendErrors();
      n += d - e.batchCounted;
      e.batchCounted = d;
    }
    if (n > 0) this.ctx.counters.values[this.ctx.counters.index.send_error_batch]! += n;
  }

  publishCounters(dst: Float64Array): void {
    dst.set(this.counterValues);
  }

  tick(): void {
    this.countBatchErrors();
    tickEwState(this.ew, sweepSlotsOf(this.ew));
    // outbound NAT: this worker's flows age here, and their idle resets leave by its sockets
    if (this.ctx.snat !== null) this.snat.engine.sweep(this.ew.nowS, SNAT_SWEEP_SLOTS);
    sendSnatIdleResets(this.snat.engine, this.ctx, this.raw4, this.raw6, (nic) => this.byIndex[nic] ?? null);
    if (this.expedite.size > 0) {
      this.post({ t: 'expedite', peers: [...this.expedite] });
      this.expedite.clear();
    }
  }

  flows(limit: number): ReturnType<typeof listHostFlows> {
    return listHostFlows(this.ew, this.ctx.tables, limit, this.snat.engine);
  }

  report(): HostWorkerReport {
    const sts = [this.fabric?.stats() ?? null, ...[...this.ports.values()].map((e) => e.port.stats())];
    const traffic: HostWorkerReport['traffic'] = this.ctx.tables.nics.map((n) => {
      const k = n.index * HOST_TRAFFIC_STRIDE;
      const d = this.traffic.delivered;
      const r = this.traffic.dsr;
      return [n.name, d[k] ?? 0, d[k + 1] ?? 0, r[k] ?? 0, r[k + 1] ?? 0];
    });
    return {
      t: 'report',
      index: this.index,
      generation: this.generation,
      flows: this.ew.flows.size,
      flowTable: this.flowTable(),
      traffic,
      fabricOpen: this.fabric !== null,
      portsOpen: [...this.ports.keys()],
      rxPackets: sts.reduce((s, x) => s + (x?.rxPackets ?? 0), 0),
      rxKernelDrops: sts.reduce((s, x) => s + (x?.rxKernelDrops ?? 0), 0),
      sendErrors: sts.reduce((s, x) => s + (x?.txErrors ?? 0), 0) + (this.raw4?.sendErrors ?? 0) + (this.raw6?.sendErrors ?? 0),
      internalErrors: this.internalErrors,
      lastInternalError: this.lastInternalError,
      snat: this.snatReport(),
      flowSnapshot: this.flowSnapshotReport(),
    };
  }

  /** Its flow table's entries by kind (counted again when the last count is FLOW_KINDS_SAMPLE_MS old, or of a replaced table), bound and quotas. */
  private flowTable(): EwTableCount {
    const now = performance.now();
    const flows = this.ew.flows;
    if (this.kindsOf !== flows || now - this.kindsAt >= FLOW_KINDS_SAMPLE_MS) {
      this.kinds = flows.countByKind(this.ew.nowS);
      this.kindsAt = now;
      this.kindsOf = flows;
    }
    return { flowKinds: this.kinds, maxFlows: flows.limit.max, quotas: flows.quotaUse() };
  }

  /** This worker's outbound NAT for its report: flows, use per nic, the chunks carrying a flow (sampled each SNAT_USED_SAMPLE_MS). */
  snatReport(): SnatWorkerReport | null {
    const e = this.snat.engine;
    if (this.ctx.snat === null && e.live === 0) return null;
    const now = performance.now();
    if (now - this.snatUsedAt >= SNAT_USED_SAMPLE_MS) {
      this.snatUsed = [...this.snat.usedChunks(this.ctx.tables)];
      this.snatUsedAt = now;
    }
    const nics: SnatWorkerReport['nics'] = e
      .status()
      .map((st) => [this.ctx.tables.nics[st.nic]?.name ?? `#${st.nic}`, st.inUse4, st.inUse6, st.exhausted4, st.exhausted6]);
    return { flows: e.live, nics, used: this.snatUsed };
  }

  close(): void {
    this.leave();
    // a graceful stop: the flows as they are now, before the thread ends
    this.snapshot?.writeNow(this.snapshotSource());
    this.raw4?.close();
    this.raw6?.close();
    this.raw4 = this.raw6 = null;
  }
}

function runThread(): void {
  const input = workerData as HostWorkerInput;
  startPoolThreadLog(input);
  const post = (m: HostWorkerToMain) => parentPort!.postMessage(m);
  const core = new HostWorkerCore(input, post);
  const r = loadRingAddon();
  if (!('addon' in r)) throw new Error(`--workers needs the ring addon: ${r.error}`);
  const addon = r.addon;
  core.openDsr(addon, input.dsrVia4, input.dsrVia6);
  const snap = core.snapshot;
  if (snap !== null) {
    snap.resume();
    setInterval(() => snap.tick(() => core.snapshotSource()), snap.intervalMs).unref();
  }
  // the report timer, count, flows, exit-for-test and stop: runtime/worker-pool.ts
  servePoolThread(input, core, core.generation, (msg) => {
    const m = msg as HostWorkerRequest;
    if (m.t === 'config') {
      core.applyConfig(m.config, m.generation, m.peerMacs, m.snat, m.snatWithdrawn);
      post({ t: 'applied', index: input.index, generation: m.generation });
    } else if (m.t === 'snat') {
      const busy = core.applySnat(m.ranges, m.withdrawn);
      if (m.id > 0) post({ t: 'withdrawn', index: input.index, id: m.id, busy });
    } else if (m.t === 'peers') core.applyPeers(m.peerMacs, m.holdUnresolved);
    else if (m.t === 'join') {
      const j = core.join(m, addon, input.fabricFilter, input.captureBufferBytes);
      post({ t: 'joined', index: input.index, fabricOpen: j.fabricOpen, portsOpen: [...core.ports.keys()], errors: j.errors });
    } else if (m.t === 'leave') {
      core.leave();
      post({ t: 'left', index: input.index });
    } else if (m.t === 'catchup') {
      core.catchUp();
      post({ t: 'caughtup', index: input.index });
    } else if (m.t === 'redirect')
      core.handleFabric(Buffer.from(m.frame.buffer, m.frame.byteOffset, m.frame.byteLength), m.frame.byteLength);
  });
}

if (parentPort !== null && (workerData as { slbxHostWorker?: boolean } | null)?.slbxHostWorker === true) runThread();
