// The host agent's worker threads (--workers N, N >= 2), seen from the main thread (HostDaemon): starts
// them (host-agent/worker.ts), has them join their interfaces' PACKET_FANOUT_CBPF groups in index order,
// hands each generation's config to all of them (each compiles its tables and swaps them in between two
// ring batches), forwards the MACs the main thread resolves, passes a Fastpath redirect to the worker of
// the flow it names, sums their counters (shared memory) and keeps their last reports, and restarts a
// worker that exits without taking the others down.
//
// A restart is a regroup (docs/io-paths.md, "A group's member order"): the kernel picks a group member by
// its index in join order, and a leaving member's slot is taken by the last one; so once the new thread
// is ready every worker leaves every group and all join again in index order, one at a time. The frames
// that arrive meanwhile (milliseconds) go to the members in place or, with none, are dropped by the
// kernel. With --state-dir the restarted worker reads its flows (its own set and the others' records of its
// share, host-agent/flow-state-sets.ts) before its first frame, and in its first regroup, every worker out
// of the groups, the others' journals again (`catchup`): what they recorded of its share meanwhile.
// Without it, it starts with an empty host flow table: its return-path entries are learned again from each
// client's next packet (host-agent/dsr-flows.ts); until then a backend's reply of such a flow is dropped as
// drop_out_dsr_unsolicited. Its counters carry on (the shared array is the same). The slots, restarts, counters and /flows are runtime/worker-pool.ts's,
// shared with the MUX's workers.
//
// Outbound NAT (docs/outbound.md, "Workers"): every worker runs its own engine over the same chunks; the
// main thread hands each one the policy's ranges and the chunks withdrawn (with each generation, and at
// each change), sums their reports for the plan (host-agent/snat-workers.ts) and, before a release goes to
// the controller, has every worker withdraw its chunks and say which it still has a flow on.
import type { SlbxConfig } from '../shared/config.js';
import { fanoutGroupId } from '../runtime/ring-port.js';
import { logInfo, logWarn } from '../runtime/log.js';
import { WorkerPool, type PoolSlot, type PoolWorkerInput } from '../runtime/worker-pool.js';
import { ewStatusOf, type EwTableCount, type ListedHostFlow } from './east-west-io.js';
import {
  buildSteeringProgram,
  encodeSockFilters,
  STEER_FABRIC,
  STEER_MAX_INTERNAL_VIPS,
  STEER_PORT,
  type SteeringVips,
} from './worker-steering.js';
import { type HostWorkerInput, type HostWorkerJoin, type HostWorkerReport, type HostWorkerToMain } from './worker-protocol.js';
import type { PolicySnatRange } from './snat.js';
import { carrySnatExhausted, mergeSnatReports, type SnatUsage, type WithdrawAnswer } from './snat-workers.js';
import type { FlowStateBytes } from './flow-snapshot.js';
import { listFlowStateSets, readFlowStateSet, removeFlowStateSet } from './flow-state-sets.js';

/** How long the main thread waits for a worker's answer to a join or a leave. */
const ANSWER_WAIT_MS = 5000;
export const MAX_HOST_WORKERS = 16;

/** The internal VIPs of `config` (the steering key looks past them), or why there are too many. */
export function steeringVipsOf(config: SlbxConfig): SteeringVips | string {
  const v4: number[] = [];
  const v6: number[][] = [];
  for (const v of config.vips) {
    if (v.scope !== 'internal') continue;
    if (v.address.family === 4) v4.push(v.address.words[0]!);
    else v6.push([...v.address.words]);
  }
  if (v4.length > STEER_MAX_INTERNAL_VIPS || v6.length > STEER_MAX_INTERNAL_VIPS)
    return `--workers steers by a program with at most ${STEER_MAX_INTERNAL_VIPS} internal VIPs per family (the config has ${v4.length} IPv4, ${v6.length} IPv6): run one worker`;
  return { v4, v6 };
}

/** Why --workers N cannot run with these settings, or null. */
export function hostWorkersRefusal(workers: number, io: string, receivePath: string, config: SlbxConfig | null): string | null {
  if (workers <= 1) return null;
  if (io !== 'ring')
    return `--workers ${workers} needs --io ring (the kernel steers each flow to one worker's ring socket by PACKET_FANOUT_CBPF; libpcap's binding cannot load in a worker thread)`;
  if (receivePath !== 'capture') return `--workers ${workers} needs --receive-path capture (the udp receive path is one socket)`;
  if (config === null) return null;
  const vips = steeringVipsOf(config);
  return typeof vips === 'string' ? vips : null;
}

export interface HostWorkersOptions {
  count: number;
  name: string;
  iface: string;
  fabricMac: Uint8Array;
  dsrVia4: string | null;
  dsrVia6: string | null;
  policyKey: string | null;
  captureBufferBytes: number;
  fabricFilter: string;
  sourceMacCheck: boolean;
  counterNames: number;
  /** The config in force, its generation, the peers' MACs and the hold window (read at each (re)start). */
  current: () => { config: SlbxConfig; generation: number; peerMacs: Float64Array; holdUnresolved: boolean };
  onEcho: (m: Extract<HostWorkerToMain, { t: 'echo' }>) => void;
  onLocal: (nic: string, packet: Uint8Array) => void;
  onExpedite: (peers: number[]) => void;
  /** A Fastpath redirect whose worker was not running: counted by the daemon. */
  onRedirectLost: () => void;
  /** Outbound NAT: the policy's ranges in force and the chunks withdrawn (read at each (re)start). */
  snat: () => { ranges: readonly PolicySnatRange[]; withdrawn: string[] };
  /** --state-dir (and --flow-snapshot-ms > 0): each worker's flow snapshot and journal there (host-agent/flow-state-sets.ts); null: none. */
  flowState?: { dir: string; intervalMs: number } | null;
}

/** The pool's slot and what the host agent keeps per worker besides. */
interface Slot extends PoolSlot<HostWorkerReport> {
  /** Traffic of the worker's earlier lives (per nic name: delivered packets, bytes, DSR packets, bytes). */
  carried: Map<string, number[]>;
  /** Answers awaited (joined, left). */
  waiting: Map<string, (m: HostWorkerToMain) => void>;
  fabricOpen: boolean;
  portsOpen: string[];
  joinErrors: string[];
  /** Withdrawals awaiting this worker's answer, by id. */
  withdrawing: Map<number, (a: WithdrawAnswer) => void>;
  /** --state-dir: restarted and not yet caught up with what the others recorded of its share (its first regroup). */
  catchUp: boolean;
}

export class HostWorkers extends WorkerPool<Slot, HostWorkerReport, HostWorkerToMain> {
  private readonly o: HostWorkersOptions;
  /** Group operations (joins, regroups) one after another. */
  private groupOps: Promise<void> = Promise.resolve();
  private readonly groupIds = new Map<string, number>();
  regroups = 0;
  /** Outbound NAT: exhaustion drops of the workers' earlier lives ("nic/family"), and the last withdrawal's id. */
  private readonly snatCarried = new Map<string, number>();
  private withdrawId = 0;
  /** --state-dir: every flow state set as read at start(), handed to each worker's first life; null once all loaded. */
  private firstSets: { set: string; worker: number | null; bytes: FlowStateBytes }[] | null = null;

  constructor(o: HostWorkersOptions) {
    super({ count: o.count, counterNames: o.counterNames, file: new URL('./worker.js', import.meta.url), log: 'host_worker' }, () => ({
      carried: new Map(),
      waiting: new Map(),
      fabricOpen: false,
      portsOpen: [],
      joinErrors: [],
      withdrawing: new Map(),
      catchUp: false,
    }));
    this.o = o;
  }

  /** The PACKET_FANOUT group of an interface (one per interface, fixed for the process's life). */
  private groupOf(ifname: string): number {
    let g = this.groupIds.get(ifname);
    if (g === undefined) {
      g = fanoutGroupId(process.pid, this.groupIds.size);
      this.groupIds.set(ifname, g);
    }
    return g;
  }

  private joinMessage(): HostWorkerJoin {
    const { config } = this.o.current();
    const vips = steeringVipsOf(config);
    const v = typeof vips === 'string' ? { v4: [], v6: [] } : vips; // refused at start and at each config
    const fabricGroup = this.groupOf(this.o.iface);
    const ports = config.nics.filter((n) => n.host === this.o.name).map((n) => n.port);
    return {
      t: 'join',
      fabricGroup,
      portGroups: ports.map((p) => [p, this.groupOf(p)]),
      fabricProgram: encodeSockFilters(buildSteeringProgram(STEER_FABRIC, config.fabric.vxlanPort, v)),
      portProgram: encodeSockFilters(buildSteeringProgram(STEER_PORT, config.fabric.vxlanPort, v)),
    };
  }

  override start(): void {
    const fs = this.o.flowState ?? null;
    if (fs !== null && this.slots.every((s) => s.restarts === 0 && s.worker === null)) {
      // read once, before any worker loads (and rewrites its own set with only its share of the flows)
      const log = (level: 'info' | 'warn', event: string, fields: Record<string, unknown>) =>
        (level === 'warn' ? logWarn : logInfo)(event, fields);
      this.firstSets = listFlowStateSets(fs.dir, this.o.name).map((x) => ({ ...x, bytes: readFlowStateSet(fs.dir, x.set, log) }));
    }
    super.start();
  }

  /**
   * Once every worker has loaded (each wrote its own set with its share): the sets no worker writes any
   * more (a one-thread agent's, indexes >= N of an agent that ran more workers) are removed, logged.
   */
  private retireFirstSets(): void {
    const fs = this.o.flowState ?? null;
    const sets = this.firstSets;
    this.firstSets = null;
    if (fs === null || sets === null) return;
    for (const { set, worker } of sets) {
      if (worker !== null && worker < this.slots.length) continue;
      const removed = removeFlowStateSet(fs.dir, set);
      logInfo('flow_state_set_retired', {
        set,
        files: removed,
        why:
          worker === null
            ? "a one-thread agent's set: its flows were handed to the workers steering names"
            : `worker ${worker} >= --workers ${this.slots.length}: its flows were handed to the workers steering names`,
      });
    }
  }

  protected workerData(s: Slot, base: PoolWorkerInput): HostWorkerInput {
    const cur = this.o.current();
    const snat = this.o.snat();
    const fs = this.o.flowState ?? null;
    return {
      ...base,
      slbxHostWorker: true,
      name: this.o.name,
      iface: this.o.iface,
      fabricMac: this.o.fabricMac,
      config: cur.config,
      generation: cur.generation,
      dsrVia4: this.o.dsrVia4,
      dsrVia6: this.o.dsrVia6,
      policyKey: this.o.policyKey,
      captureBufferBytes: this.o.captureBufferBytes,
      fabricFilter: this.o.fabricFilter,
      peerMacs: cur.peerMacs,
      holdUnresolved: cur.holdUnresolved,
      sourceMacCheck: this.o.sourceMacCheck,
      snatRanges: [...snat.ranges],
      snatWithdrawn: snat.withdrawn,
      flowState: fs === null ? null : { ...fs, sets: s.restarts === 0 ? this.firstSets : null },
    };
  }

  protected override onSpawn(s: Slot): void {
    s.fabricOpen = false;
    s.portsOpen = [];
    s.catchUp = s.restarts > 0 && (this.o.flowState ?? null) !== null;
  }

  protected override onExit(s: Slot): void {
    s.fabricOpen = false;
    s.portsOpen = [];
    for (const [, res] of s.waiting) res({ t: 'left', index: s.index });
    s.waiting.clear();
    // its outbound NAT flows ended with it: nothing of a withdrawal is left there
    for (const [, res] of s.withdrawing) res('exited');
    s.withdrawing.clear();
    carrySnatExhausted(this.snatCarried, s.report?.snat ?? null);
    // its traffic so far stays counted
    for (const [nic, ...v] of s.report?.traffic ?? []) {
      const c = s.carried.get(nic) ?? [0, 0, 0, 0];
      for (let i = 0; i < 4; i++) c[i]! += v[i]!;
      s.carried.set(nic, c);
    }
    s.report = null;
  }

  /** The first start: every worker joins once all are ready; a restart: a regroup. */
  protected onReady(s: Slot): void {
    const all = this.slots.every((x) => x.ready);
    if (all && this.firstSets !== null) this.retireFirstSets();
    if (s.restarts > 0) void this.regroup();
    else if (all) void this.joinRound();
  }

  protected onMessage(s: Slot, m: HostWorkerToMain): void {
    switch (m.t) {
      case 'report': // kept in s.report by the pool
        s.fabricOpen = m.fabricOpen;
        s.portsOpen = m.portsOpen;
        return;
      case 'joined':
        s.fabricOpen = m.fabricOpen;
        s.portsOpen = m.portsOpen;
        s.joinErrors = m.errors;
        s.waiting.get('joined')?.(m);
        return;
      case 'left':
        s.waiting.get('left')?.(m);
        return;
      case 'caughtup':
        s.waiting.get('caughtup')?.(m);
        return;
      case 'withdrawn':
        s.withdrawing.get(m.id)?.(Array.isArray(m.busy) ? m.busy.filter((k) => typeof k === 'string') : 'timeout');
        return;
      case 'echo':
        this.o.onEcho(m);
        return;
      case 'local':
        this.o.onLocal(m.nic, m.packet);
        return;
      case 'expedite':
        this.o.onExpedite(m.peers);
        return;
      case 'redirect': {
        const owner = this.slots[m.index];
        if (owner?.worker != null && owner.ready) owner.worker.postMessage({ t: 'redirect', frame: m.frame });
        else this.o.onRedirectLost();
        return;
      }
    }
  }

  /** Posts `msg` to slot `s` and waits for its answer `answer` (at most ANSWER_WAIT_MS). */
  private ask(s: Slot, msg: unknown, answer: 'joined' | 'left' | 'caughtup'): Promise<void> {
    const w = s.worker;
    if (w === null) return Promise.resolve();
    return new Promise<void>((res) => {
      const t = setTimeout(() => {
        s.waiting.delete(answer);
        logWarn('host_worker_slow', { worker: s.index, waitedFor: answer, ms: ANSWER_WAIT_MS });
        res();
      }, ANSWER_WAIT_MS);
      s.waiting.set(answer, () => {
        clearTimeout(t);
        s.waiting.delete(answer);
        res();
      });
      w.postMessage(msg);
    });
  }

  private chain(op: () => Promise<void>): Promise<void> {
    this.groupOps = this.groupOps.then(op, op);
    return this.groupOps;
  }

  /** Every ready worker opens the sockets it has not opened yet, in index order, one at a time. */
  joinRound(): Promise<void> {
    return this.chain(async () => {
      if (this.stopping) return;
      const j = this.joinMessage();
      for (const s of this.slots) if (s.ready) await this.ask(s, j, 'joined');
    });
  }

  /** Every worker leaves every group, then all join again in index order (after a restart, or new internal VIPs). */
  regroup(): Promise<void> {
    return this.chain(async () => {
      if (this.stopping) return;
      this.regroups++;
      await Promise.all(this.slots.map((s) => (s.ready ? this.ask(s, { t: 'leave' }, 'left') : Promise.resolve())));
      // --state-dir: a restarted worker read the sets at its start; what the others recorded of its share
      // since (the kernel gave them its frames until now) it takes from their journals, before anyone joins
      for (const s of this.slots)
        if (s.ready && s.catchUp) {
          await this.ask(s, { t: 'catchup' }, 'caughtup');
          s.catchUp = false;
        }
      const j = this.joinMessage();
      for (const s of this.slots) if (s.ready) await this.ask(s, j, 'joined');
      logInfo('host_workers_regrouped', { workers: this.slots.filter((s) => s.ready).length, regroups: this.regroups });
    });
  }

  /** Every worker in every group with every port this host's config names (what /status's ready needs). */
  allJoined(ports: readonly string[]): boolean {
    return this.slots.every((s) => s.worker !== null && s.ready && s.fabricOpen && ports.every((p) => s.portsOpen.includes(p)));
  }

  /** A new generation for every worker (`snat`: the policy's ranges when they changed with it; the chunks withdrawn). */
  postConfig(
    config: SlbxConfig,
    generation: number,
    peerMacs: Float64Array,
    snat: readonly PolicySnatRange[] | undefined,
    snatWithdrawn: string[],
  ): void {
    this.postAll({ t: 'config', config, generation, peerMacs, snat: snat === undefined ? null : [...snat], snatWithdrawn });
  }

  /** Outbound NAT: new ranges (null: those in force) or withdrawn chunks for every worker, no answer awaited. */
  postSnat(ranges: readonly PolicySnatRange[] | null, withdrawn: string[]): void {
    this.postAll({ t: 'snat', ranges: ranges === null ? null : [...ranges], withdrawn, id: 0 });
  }

  /**
   * A release's first step: every running worker leaves `withdrawn` out of its engine and answers which of
   * them it still has a flow on (host-agent/snat-workers.ts settleWithdrawal); each answer awaited at most
   * ANSWER_WAIT_MS ('timeout'), a worker that exits meanwhile answers 'exited'.
   */
  withdraw(withdrawn: string[]): Promise<WithdrawAnswer[]> {
    const id = ++this.withdrawId;
    return Promise.all(
      this.slots.map((s) => {
        const w = s.worker;
        if (w === null) return Promise.resolve<WithdrawAnswer>('exited');
        return new Promise<WithdrawAnswer>((res) => {
          const t = setTimeout(() => done('timeout'), ANSWER_WAIT_MS);
          const done = (a: WithdrawAnswer) => {
            clearTimeout(t);
            s.withdrawing.delete(id);
            res(a);
          };
          s.withdrawing.set(id, done);
          w.postMessage({ t: 'snat', ranges: null, withdrawn, id });
        });
      }),
    );
  }

  /** Outbound NAT over every worker: flows and ports in use summed, exhaustion drops summed with earlier lives', chunks in use united. */
  snatUsage(): SnatUsage {
    return mergeSnatReports(
      this.slots.map((s) => (s.worker !== null ? (s.report?.snat ?? null) : null)),
      this.snatCarried,
    );
  }

  postPeers(peerMacs: Float64Array, holdUnresolved: boolean): void {
    this.postAll({ t: 'peers', peerMacs, holdUnresolved });
  }

  /** Per nic name: delivered packets, bytes, DSR packets, bytes, over every worker (last reports, every 250 ms). */
  traffic(): Map<string, number[]> {
    const out = new Map<string, number[]>();
    const add = (nic: string, v: readonly number[]) => {
      const c = out.get(nic) ?? [0, 0, 0, 0];
      for (let i = 0; i < 4; i++) c[i]! += v[i]!;
      out.set(nic, c);
    };
    for (const s of this.slots) {
      for (const [nic, v] of s.carried) add(nic, v);
      for (const [nic, ...v] of s.report?.traffic ?? []) add(nic, v);
    }
    return out;
  }

  /** /status's eastWest over every running worker's flow table (their last reports; a dead worker's table went with it). */
  eastWest(redirectKey: boolean): Record<string, unknown> {
    const tables: EwTableCount[] = [];
    for (const s of this.slots) if (s.worker !== null && s.report != null) tables.push(s.report.flowTable);
    return ewStatusOf(tables, redirectKey);
  }

  /** GET /flows: up to `limit` entries of every worker's host flow table (runtime/worker-pool.ts: listFlows; awaited, never blocking). */
  flows(limit: number): Promise<ListedHostFlow[]> {
    return this.listFlows<ListedHostFlow>(limit);
  }

  /** Per worker, for /status. */
  status(): Record<string, unknown>[] {
    const gens = this.generations();
    return this.slots.map((s) => ({
      ...this.statusHead(s, gens),
      fabricOpen: s.fabricOpen,
      portsOpen: s.portsOpen,
      ...(s.joinErrors.length > 0 ? { joinErrors: s.joinErrors } : {}),
      flows: s.report?.flows ?? null,
      rxPackets: s.report?.rxPackets ?? 0,
      rxKernelDrops: s.report?.rxKernelDrops ?? 0,
      sendErrors: s.report?.sendErrors ?? 0,
      internalErrors: s.report?.internalErrors ?? 0,
      // outbound NAT: this worker's flows and, per nic, ports in use and exhaustion drops (this life)
      ...(s.report?.snat != null
        ? {
            snat: {
              flows: s.report.snat.flows,
              nics: s.report.snat.nics.map(([nic, inUse4, inUse6, exhausted4, exhausted6]) => ({
                nic,
                inUse4,
                inUse6,
                exhausted4,
                exhausted6,
              })),
            },
          }
        : {}),
      // --state-dir: this worker's flow snapshot and what its life's start restored
      ...(s.report?.flowSnapshot != null ? { flowSnapshot: s.report.flowSnapshot } : {}),
    }));
  }
}
