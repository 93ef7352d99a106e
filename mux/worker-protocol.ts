// The messages between the MUX's main thread (mux/workers.ts) and its worker threads (mux/worker.ts).
import type { PoolWorkerInput } from '../runtime/worker-pool.js';
import type { SlbxConfig } from '../shared/config.js';
import type { ListedFlow } from './flow-list.js';
import type { MuxTables } from './tables.js';

/**
 * Words of a worker's shared status array (Int32, runtime/worker-pool.ts): the generation applied, and
 * the word the worker bumps after it posted a /flows answer on its flows port or brought its counters up
 * to date (a `count` request): the main thread waits on it.
 */
export {
  POOL_STATUS_GENERATION as STATUS_GENERATION,
  POOL_STATUS_SEQ as STATUS_FLOWS_SEQ,
  POOL_STATUS_WORDS as STATUS_WORDS,
} from '../runtime/worker-pool.js';

/** What a worker thread starts with (workerData). */
/** With the pool's fields (index; count: each worker takes its share of the config's flow-table limits; shared memory; flows port). */
export interface MuxWorkerInput extends PoolWorkerInput {
  slbxMuxWorker: true;
  name: string;
  iface: string;
  mac: Uint8Array;
  policyKey: string | null;
  config: SlbxConfig;
  tables: MuxTables;
  filter: string;
  fanoutGroup: number;
  captureBufferBytes: number;
}

export type MuxWorkerRequest =
  | { t: 'tables'; tables: MuxTables; config: SlbxConfig | null }
  | { t: 'macs'; macs: [string, Uint8Array][] }
  | { t: 'filter'; filter: string }
  | { t: 'report' }
  | { t: 'flows'; limit: number }
  | { t: 'count' }
  | { t: 'exit-for-test'; code: number }
  | { t: 'stop' };

export interface MuxWorkerReport {
  t: 'report';
  index: number;
  generation: number;
  flows4: number;
  flows6: number;
  /** Untrusted flows (seen once: the SYN-flood table), IPv4 and IPv6. */
  pending4: number;
  pending6: number;
  flowBytes: number;
  /** The worker's traffic counters (mux/traffic-counters.ts): by nic id and by rule slot. */
  nic: Float64Array;
  rule: Float64Array;
  rxPackets: number;
  rxKernelDrops: number;
  txPackets: number;
  sendErrors: number;
  lastSendError: string;
  internalErrors: number;
  lastInternalError: string;
}

export type { ListedFlow };

export type MuxWorkerToMain =
  { t: 'ready'; index: number; generation: number } | { t: 'applied'; index: number; generation: number } | MuxWorkerReport;
