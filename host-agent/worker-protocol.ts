// The messages between the host agent's main thread (host-agent/workers.ts) and its worker threads
// (host-agent/worker.ts), and the shared status words.
import type { PoolWorkerInput } from '../runtime/worker-pool.js';
import type { SlbxConfig } from '../shared/config.js';
import type { EwTableCount, ListedHostFlow } from './east-west-io.js';
import type { PolicySnatRange } from './snat.js';
import type { SnatWorkerReport } from './snat-workers.js';
import type { FlowStateBytes } from './flow-snapshot.js';

/**
 * --state-dir with --workers: where the worker keeps its flow snapshot and journal (set NAME.wI,
 * host-agent/flow-state-sets.ts) and how often it looks at them; `sets`: every set's files as the main
 * thread read them at the agent's start (the first life of each worker), null: read them from disk (a restart).
 */
export interface HostWorkerFlowState {
  dir: string;
  intervalMs: number;
  sets: { set: string; bytes: FlowStateBytes }[] | null;
}

/** A worker's flow snapshot for its report and /status (host-agent/flow-state-sets.ts). */
export interface HostWorkerFlowSnapshot {
  /**
   * At this life's start: return-path records applied from snapshots and from journals, outbound NAT flows
   * (own set and the others'). A flow found in two sets (another worker's stale copy of a flow of this
   * worker's share, recorded while this one was down) counts once per set: `dsrEntries` is the table.
   */
  dsrRestored: number;
  dsrReplayed: number;
  snatRestored: number;
  /** Outbound NAT flows restored and then ended: their chunk is no longer this host's (or is being given back). */
  snatEndedNotHeld: number;
  /** Return-path entries added by the catch-up in its first regroup (recorded by another worker since this one's start). */
  dsrCaughtUp: number;
  /** Return-path entries in this worker's table after the start's restore (each flow once). */
  dsrEntries: number;
  /** Sets read at the start (own and others'). */
  setsRead: string[];
  written: number;
  writeErrors: number;
  lastError: string | null;
  lastFlows: number;
  lastSnatFlows: number;
  journalRecords: number;
}

/** Words of a worker's shared status array (Int32): the generation applied, and the answer counter the main thread waits on (runtime/worker-pool.ts). */
export {
  POOL_STATUS_GENERATION as STATUS_GENERATION,
  POOL_STATUS_SEQ as STATUS_SEQ,
  POOL_STATUS_WORDS as STATUS_WORDS,
} from '../runtime/worker-pool.js';

/** Frames a worker holds while their MUX's MAC is not known yet (its share of the daemon's HOLD_MAX_FRAMES). */
export const WORKER_HOLD_MAX_FRAMES = 2048;

/** How often a worker counts its flow table's entries by kind again for its report (the count walks every slot). */
export const FLOW_KINDS_SAMPLE_MS = 1000;

/** What a worker thread starts with (workerData). */
/** With the pool's fields (index, count, shared memory, flows port). */
export interface HostWorkerInput extends PoolWorkerInput {
  slbxHostWorker: true;
  name: string;
  /** The fabric interface and its MAC. */
  iface: string;
  fabricMac: Uint8Array;
  config: SlbxConfig;
  generation: number;
  dsrVia4: string | null;
  dsrVia6: string | null;
  policyKey: string | null;
  captureBufferBytes: number;
  /** The filter of the workers' fabric sockets (VXLAN to our PA, Fastpath redirects). */
  fabricFilter: string;
  /** The MUXes' and hosts' MACs as the main thread knows them (HostContext.peerMacs), and the hold window. */
  peerMacs: Float64Array;
  holdUnresolved: boolean;
  sourceMacCheck: boolean;
  /** Outbound NAT: the policy's ranges in force and the chunks ("ip:first") withdrawn (being given back). */
  snatRanges: PolicySnatRange[];
  snatWithdrawn: string[];
  /** --state-dir: the worker's flow snapshot and journal; null: none. */
  flowState: HostWorkerFlowState | null;
}

/** The sockets a worker joins: every group's id and steering program (host-agent/worker-steering.ts). */
export interface HostWorkerJoin {
  t: 'join';
  /** PACKET_FANOUT group of the fabric interface, and of each VM port by interface name. */
  fabricGroup: number;
  portGroups: [string, number][];
  fabricProgram: Uint8Array;
  portProgram: Uint8Array;
}

export type HostWorkerRequest =
  /** A generation; `snat`: the policy's ranges when they changed with it (installed with the tables in one step). */
  | { t: 'config'; config: SlbxConfig; generation: number; peerMacs: Float64Array; snat: PolicySnatRange[] | null; snatWithdrawn: string[] }
  /**
   * Outbound NAT: new ranges (null: the ones in force) and the chunks withdrawn; `id` > 0: a withdrawal,
   * answered by `withdrawn` (host-agent/snat-workers.ts).
   */
  | { t: 'snat'; ranges: PolicySnatRange[] | null; withdrawn: string[]; id: number }
  | { t: 'peers'; peerMacs: Float64Array; holdUnresolved: boolean }
  | HostWorkerJoin
  | { t: 'leave' }
  /** A restarted worker, in its first regroup once every worker has left: the other workers' journals again (answered `caughtup`). */
  | { t: 'catchup' }
  | { t: 'redirect'; frame: Uint8Array }
  | { t: 'flows'; limit: number }
  | { t: 'count' }
  | { t: 'exit-for-test'; code: number }
  | { t: 'stop' };

export interface HostWorkerReport {
  t: 'report';
  index: number;
  generation: number;
  flows: number;
  /** Its flow table's entries by kind name (counted again each FLOW_KINDS_SAMPLE_MS), bound, and each feature's quota and use. */
  flowTable: EwTableCount;
  /** Per nic name: [delivered packets, bytes, DSR packets, bytes] since the worker started. */
  traffic: [string, number, number, number, number][];
  /** Sockets open: the fabric's and each VM port's (by interface name). */
  fabricOpen: boolean;
  portsOpen: string[];
  rxPackets: number;
  rxKernelDrops: number;
  sendErrors: number;
  internalErrors: number;
  lastInternalError: string;
  /** Outbound NAT (null: the config has no outbound rules and no flow is left). */
  snat: SnatWorkerReport | null;
  /** --state-dir: this worker's flow snapshot (null: none). */
  flowSnapshot?: HostWorkerFlowSnapshot | null;
}

export type HostWorkerToMain =
  | { t: 'ready'; index: number; generation: number }
  | { t: 'applied'; index: number; generation: number }
  | { t: 'joined'; index: number; fabricOpen: boolean; portsOpen: string[]; errors: string[] }
  | { t: 'left'; index: number }
  | { t: 'caughtup'; index: number }
  /** A withdrawal applied: the withdrawn chunks this worker still has a live flow on (kept in its engine). */
  | { t: 'withdrawn'; index: number; id: number; busy: string[] }
  /** A MUX's latency echo request (VERDICT_LOCAL on the fabric): answered by the main thread. */
  | { t: 'echo'; peer: number; v6: boolean; srcPort: number; nonceHi: number; nonceLo: number }
  /** A backend's answer to a health probe (VERDICT_LOCAL on a port): for the main thread's prober. */
  | { t: 'local'; nic: string; packet: Uint8Array }
  /** A Fastpath redirect this worker installed: every other worker installs it too (its flow may be theirs). */
  | { t: 'redirect'; index: number; frame: Uint8Array }
  /** Peers whose VXLAN was dropped for an unknown or changed MAC: ask ARP/ND again (neighbors.expedite). */
  | { t: 'expedite'; peers: number[] }
  | HostWorkerReport;

export type { ListedHostFlow };
