// The messages between the MUX's main thread (mux/workers.ts) and its worker threads (mux/worker.ts).
import type { MessagePort } from 'node:worker_threads';
import type { SlbxConfig } from '../shared/config.js';
import type { ListedFlow } from './flow-list.js';
import type { MuxTables } from './tables.js';

/** Words of a worker's shared status array. */
export const STATUS_GENERATION = 0;
/**
 * Bumped by the worker after it posted a /flows answer on its flows port, or brought its counters up to
 * date (a `count` request): the main thread waits on it.
 */
export const STATUS_FLOWS_SEQ = 1;
export const STATUS_WORDS = 4;

/** What a worker thread starts with (workerData). */
export interface MuxWorkerInput {
  slbxMuxWorker: true;
  index: number;
  /** How many workers the MUX runs: each takes its share of the config's flow-table limits. */
  count: number;
  name: string;
  iface: string;
  mac: Uint8Array;
  policyKey: string | null;
  config: SlbxConfig;
  tables: MuxTables;
  filter: string;
  fanoutGroup: number;
  captureBufferBytes: number;
  /** Float64 counters (the MUX's counter names, in order), shared with the main thread; kept across restarts. */
  counters: SharedArrayBuffer;
  /** Where the worker copies its counters between two batches when asked (`count`): what /counters sums. */
  published: SharedArrayBuffer;
  /** Int32 status words (STATUS_*), shared with the main thread. */
  status: SharedArrayBuffer;
  /** Where the worker answers a `flows` request (read synchronously by the main thread). */
  flowsPort: MessagePort;
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
