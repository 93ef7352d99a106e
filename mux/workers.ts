// The MUX's worker threads (--workers N, N >= 2), seen from the main thread: starts them (mux/worker.ts),
// hands each generation's tables to all of them (structured clone: about 1 ms for the lab's tables,
// measured in test/mux-workers.test.ts), forwards the host MACs the main thread learns, sums their
// counters (shared memory, exact at any read) and keeps their last reports (flows, traffic, ring
// counters; every 250 ms), and restarts a worker that exits without taking the others down. A restarted
// worker starts with an empty flow table: its flows fall back to the Maglev choice, as after a MUX
// restart, and its counters carry on (the shared array is the same). The slots, restarts, counters and
// /flows are runtime/worker-pool.ts's, shared with the host agent's workers.
import type { ListedFlow } from './flow-list.js';
import type { SlbxConfig } from '../shared/config.js';
import { WorkerPool, type PoolSlot, type PoolWorkerInput } from '../runtime/worker-pool.js';
import type { MuxTables } from './tables.js';
import type { MuxWorkerInput, MuxWorkerReport, MuxWorkerToMain } from './worker-protocol.js';

export interface MuxWorkersOptions {
  count: number;
  name: string;
  iface: string;
  mac: Uint8Array;
  policyKey: string | null;
  captureBufferBytes: number;
  fanoutGroup: number;
  counterNames: number;
  /** The current config, tables and filter (read at each (re)start). */
  current: () => { config: SlbxConfig; tables: MuxTables; filter: string; macs: [string, Uint8Array][] };
}

type Slot = PoolSlot<MuxWorkerReport>;

export class MuxWorkers extends WorkerPool<Slot, MuxWorkerReport, MuxWorkerToMain> {
  private readonly o: MuxWorkersOptions;

  constructor(o: MuxWorkersOptions) {
    super({ count: o.count, counterNames: o.counterNames, file: new URL('./worker.js', import.meta.url), log: 'mux_worker' }, () => ({}));
    this.o = o;
  }

  protected workerData(_s: Slot, base: PoolWorkerInput): MuxWorkerInput {
    const cur = this.o.current();
    return {
      ...base,
      slbxMuxWorker: true,
      name: this.o.name,
      iface: this.o.iface,
      mac: this.o.mac,
      policyKey: this.o.policyKey,
      config: cur.config,
      tables: cur.tables,
      filter: cur.filter,
      fanoutGroup: this.o.fanoutGroup,
      captureBufferBytes: this.o.captureBufferBytes,
    };
  }

  protected onReady(s: Slot): void {
    // MACs learned while it started
    const macs = this.o.current().macs;
    if (macs.length > 0) s.worker?.postMessage({ t: 'macs', macs });
  }

  protected onMessage(): void {} // its reports are kept by the pool

  /** A new generation for every worker (config: when the context's settings changed, else null). */
  postTables(tables: MuxTables, config: SlbxConfig | null): void {
    this.postAll({ t: 'tables', tables, config });
  }

  postMacs(macs: [string, Uint8Array][]): void {
    this.postAll({ t: 'macs', macs });
  }

  postFilter(filter: string): void {
    this.postAll({ t: 'filter', filter });
  }

  /** Adds every worker's last traffic report into `nic` and `rule` (grown to fit). */
  sumTraffic(nic: Float64Array, rule: Float64Array): void {
    for (const s of this.slots) {
      const r = s.report;
      if (r === null) continue;
      for (let i = 0; i < Math.min(nic.length, r.nic.length); i++) nic[i]! += r.nic[i]!;
      for (let i = 0; i < Math.min(rule.length, r.rule.length); i++) rule[i]! += r.rule[i]!;
    }
  }

  /** GET /flows: up to `limit` live flows of every worker (runtime/worker-pool.ts: listFlows; awaited, never blocking). */
  flows(limit: number): Promise<ListedFlow[]> {
    return this.listFlows<ListedFlow>(limit);
  }

  /** Per worker, for /status; `names`: the MUX's counter names (each worker's non-zero counters by name). */
  status(names: readonly string[]): Record<string, unknown>[] {
    const gens = this.generations();
    return this.slots.map((s) => ({
      ...this.statusHead(s, gens),
      flows: s.report === null ? null : { ipv4: s.report.flows4, ipv6: s.report.flows6 },
      rxPackets: s.report?.rxPackets ?? 0,
      rxKernelDrops: s.report?.rxKernelDrops ?? 0,
      txPackets: s.report?.txPackets ?? 0,
      sendErrors: s.report?.sendErrors ?? 0,
      internalErrors: s.report?.internalErrors ?? 0,
      counters: nonZero(names, new Float64Array(s.counters)),
    }));
  }
}

function nonZero(names: readonly string[], v: Float64Array): Record<string, number> {
  const out: Record<string, number> = {};
  for (let i = 0; i < v.length; i++) if (v[i] !== 0) out[names[i]!] = v[i]!;
  return out;
}
