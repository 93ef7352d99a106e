// The MUX's worker threads (--workers N, N >= 2), seen from the main thread: starts them (mux/worker.ts),
// hands each generation's tables to all of them (structured clone: about 1 ms for the lab's tables,
// measured in test/mux-workers.test.ts), forwards the host MACs the main thread learns, sums their
// counters (shared memory, exact at any read) and keeps their last reports (flows, traffic, ring
// counters; every 250 ms), and restarts a worker that exits without taking the others down. A restarted
// worker starts with an empty flow table: its flows fall back to the Maglev choice, as after a MUX
// restart, and its counters carry on (the shared array is the same).
import { MessageChannel, receiveMessageOnPort, Worker, type MessagePort } from 'node:worker_threads';
import type { ListedFlow } from './flow-list.js';
import type { SlbxConfig } from '../shared/config.js';
import { logInfo, logWarn } from '../runtime/log.js';
import type { MuxTables } from './tables.js';
import {
  STATUS_FLOWS_SEQ,
  STATUS_GENERATION,
  STATUS_WORDS,
  type MuxWorkerInput,
  type MuxWorkerReport,
  type MuxWorkerToMain,
} from './worker-protocol.js';

const RESTART_DELAY_MS = 200;
/** How long GET /flows waits for a worker's answer (it answers between two ring batches). */
const FLOWS_WAIT_MS = 2000;
const WORKER_FILE = new URL('./worker.js', import.meta.url);

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

interface Slot {
  index: number;
  worker: Worker | null;
  counters: SharedArrayBuffer;
  /** The worker's counters as it copied them at its last `count` request, between two batches. */
  published: SharedArrayBuffer;
  /** The last syncCounters() got this worker's copy (else its live counters are summed). */
  publishedFresh: boolean;
  status: Int32Array<SharedArrayBuffer>;
  restarts: number;
  lastExit: string | null;
  ready: boolean;
  report: MuxWorkerReport | null;
  /** This thread's end of the worker's flows port. */
  flowsPort: MessagePort | null;
}

export class MuxWorkers {
  private readonly o: MuxWorkersOptions;
  readonly slots: Slot[] = [];
  private stopping = false;
  private timers = new Set<NodeJS.Timeout>();
  /** Called with (index, generation) when a worker acknowledges a generation (tests wait on it). */
  onApplied: ((index: number, generation: number) => void) | null = null;

  constructor(o: MuxWorkersOptions) {
    this.o = o;
    for (let i = 0; i < o.count; i++) {
      const status = new SharedArrayBuffer(STATUS_WORDS * 4);
      this.slots.push({
        index: i,
        worker: null,
        counters: new SharedArrayBuffer(o.counterNames * 8),
        published: new SharedArrayBuffer(o.counterNames * 8),
        publishedFresh: false,
        status: new Int32Array(status),
        restarts: 0,
        lastExit: null,
        ready: false,
        report: null,
        flowsPort: null,
      });
    }
  }

  start(): void {
    this.stopping = false;
    for (const s of this.slots) this.spawn(s);
  }

  private spawn(s: Slot): void {
    const cur = this.o.current();
    const ch = new MessageChannel();
    s.flowsPort?.close();
    s.flowsPort = ch.port1;
    ch.port1.unref();
    const input: MuxWorkerInput = {
      slbxMuxWorker: true,
      index: s.index,
      count: this.o.count,
      name: this.o.name,
      iface: this.o.iface,
      mac: this.o.mac,
      policyKey: this.o.policyKey,
      config: cur.config,
      tables: cur.tables,
      filter: cur.filter,
      fanoutGroup: this.o.fanoutGroup,
      captureBufferBytes: this.o.captureBufferBytes,
      counters: s.counters,
      published: s.published,
      status: s.status.buffer,
      flowsPort: ch.port2,
    };
    const w = new Worker(WORKER_FILE, { workerData: input, transferList: [ch.port2] });
    s.worker = w;
    s.ready = false;
    w.on('message', (m: MuxWorkerToMain) => {
      if (m.t === 'report') s.report = m;
      else if (m.t === 'ready') {
        s.ready = true;
        logInfo('mux_worker_started', { worker: s.index, generation: m.generation, restarts: s.restarts });
        // MACs learned while it started
        const macs = this.o.current().macs;
        if (macs.length > 0) w.postMessage({ t: 'macs', macs });
      } else if (m.t === 'applied') this.onApplied?.(m.index, m.generation);
    });
    w.on('error', (e) => {
      s.lastExit = e.stack ?? String(e);
    });
    w.on('exit', (code) => {
      if (s.worker !== w) return;
      s.worker = null;
      s.ready = false;
      if (this.stopping) return;
      s.restarts++;
      s.lastExit = s.lastExit ?? `exit code ${code}`;
      logWarn('mux_worker_exited', { worker: s.index, code, error: s.lastExit, restartInMs: RESTART_DELAY_MS, restarts: s.restarts });
      s.lastExit = `exit code ${code}${s.lastExit.startsWith('exit code') ? '' : `: ${s.lastExit.split('\n')[0]}`}`;
      const t = setTimeout(() => {
        this.timers.delete(t);
        if (!this.stopping && s.worker === null) this.spawn(s);
      }, RESTART_DELAY_MS);
      this.timers.add(t);
    });
  }

  /** A new generation for every worker (config: when the context's settings changed, else null). */
  postTables(tables: MuxTables, config: SlbxConfig | null): void {
    for (const s of this.slots) s.worker?.postMessage({ t: 'tables', tables, config });
  }

  postMacs(macs: [string, Uint8Array][]): void {
    for (const s of this.slots) s.worker?.postMessage({ t: 'macs', macs });
  }

  postFilter(filter: string): void {
    for (const s of this.slots) s.worker?.postMessage({ t: 'filter', filter });
  }

  /** The restart test: worker `index` calls process.exit(code) in its thread. */
  exitForTest(index: number, code = 3): void {
    this.slots[index]?.worker?.postMessage({ t: 'exit-for-test', code });
  }

  /** The generation each worker acknowledged (shared memory: current at any read). */
  generations(): number[] {
    return this.slots.map((s) => Atomics.load(s.status, STATUS_GENERATION));
  }

  /**
   * Every worker brings its counters up to date now (the frames its ring's batches sent: tx_packets,
   * tx_bytes, send_error_batch) and copies them, between two of its batches, into its published array,
   * waited for at most FLOWS_WAIT_MS each, before /counters or /status sums them. The copy is what is
   * summed: the live array moves inside a batch (rx_packets at each packet, tx_packets once the batch
   * is sent), so a sum of live arrays taken while a worker is busy reads received frames not yet counted
   * as sent (scenario 17 with 2 workers: rx_packets 116 above tx_packets after a flood, nothing dropped).
   */
  syncCounters(): void {
    for (const s of this.slots) {
      s.publishedFresh = false;
      if (s.worker === null || !s.ready) continue;
      const seq = Atomics.load(s.status, STATUS_FLOWS_SEQ);
      s.worker.postMessage({ t: 'count' });
      Atomics.wait(s.status, STATUS_FLOWS_SEQ, seq, FLOWS_WAIT_MS);
      s.publishedFresh = Atomics.load(s.status, STATUS_FLOWS_SEQ) !== seq;
    }
  }

  /** Adds every worker's counters into `out` (the MUX's counter order): its copy from the last syncCounters(), else the live ones. */
  sumCounters(out: Float64Array): void {
    for (const s of this.slots) {
      const v = new Float64Array(s.publishedFresh ? s.published : s.counters);
      for (let i = 0; i < out.length; i++) out[i]! += v[i]!;
    }
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

  async stop(): Promise<void> {
    this.stopping = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    await Promise.all(
      this.slots.map(async (s) => {
        const w = s.worker;
        if (w === null) return;
        const done = new Promise<void>((res) => w.once('exit', () => res()));
        w.postMessage({ t: 'stop' });
        const t = setTimeout(() => void w.terminate(), 2000);
        await done;
        clearTimeout(t);
        s.worker = null;
      }),
    );
  }

  /**
   * GET /flows: up to `limit` live flows of every worker, asked for now and waited for (synchronously, at
   * most FLOWS_WAIT_MS each: a worker answers between two ring batches). A worker that does not answer in
   * time is left out.
   */
  flows(limit: number): ListedFlow[] {
    const out: ListedFlow[] = [];
    for (const s of this.slots) {
      if (out.length >= limit || s.worker === null || !s.ready || s.flowsPort === null) continue;
      while (receiveMessageOnPort(s.flowsPort) !== undefined); // a late answer to an earlier request
      const seq = Atomics.load(s.status, STATUS_FLOWS_SEQ);
      s.worker.postMessage({ t: 'flows', limit: limit - out.length });
      if (Atomics.wait(s.status, STATUS_FLOWS_SEQ, seq, FLOWS_WAIT_MS) === 'timed-out') continue;
      const m = receiveMessageOnPort(s.flowsPort);
      if (m !== undefined) out.push(...(m.message as ListedFlow[]));
    }
    return out.slice(0, limit);
  }

  /** Per worker, for /status; `names`: the MUX's counter names (each worker's non-zero counters by name). */
  status(names: readonly string[]): Record<string, unknown>[] {
    const gens = this.generations();
    return this.slots.map((s) => ({
      worker: s.index,
      alive: s.worker !== null && s.ready,
      generation: gens[s.index],
      restarts: s.restarts,
      ...(s.lastExit !== null ? { lastExit: s.lastExit } : {}),
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
