// One MUX worker thread (--workers N, mux/workers.ts starts them): the pure data plane on its own ring
// socket, one of N in a PACKET_FANOUT group (hash mode: the kernel keeps every frame of a flow on one
// socket, so a flow's state lives in one worker's flow table), with its own flow table. Everything else
// (BGP, BFD, the policy client, latency, ARP/ND, the status endpoint, compiling the tables) stays on the
// main thread, which hands this worker each generation's tables by structured clone.
//
// One generation per packet: a new generation arrives as a message, and a worker thread runs one thing at
// a time: the message handler (which swaps ctx.tables in one assignment) runs between two ring batches,
// never inside one, so every packet is handled wholly by the tables of one generation. The worker then
// acknowledges the generation (the `applied` message and its slot in the shared status array), and
// every later batch is handled by it. Test: test/mux-workers.test.ts.
//
// Imports: only what can load in a worker thread. libpcap's binding (cap) and raw-socket cannot ("Module
// did not self-register"), so nothing here imports runtime/pcap-port.ts, raw-sender.ts or frame-port.ts'
// implementations: workers need --io ring and the cap send path.
import { parentPort, workerData } from 'node:worker_threads';
import type { SlbxConfig } from '../shared/config.js';
import { loadRingAddon, RingPort } from '../runtime/ring-port.js';
import { buildMuxContext, muxContextKey } from './context.js';
import { processPacket, sweepFlows, VERDICT_FORWARD, VERDICT_REPLY, type MuxContext } from './data-plane.js';
import { muxRedirectMac, sendMuxRedirect } from './east-west-io.js';
import { listFlows, type ListedFlow } from './flow-list.js';
import { servePoolThread, startPoolThreadLog, type PoolThreadCore } from '../runtime/worker-pool.js';
import type { MuxTables } from './tables.js';
import { MuxTrafficCounters } from './traffic-counters.js';
import {
  STATUS_GENERATION,
  type MuxWorkerInput,
  type MuxWorkerReport,
  type MuxWorkerRequest,
  type MuxWorkerToMain,
} from './worker-protocol.js';

/**
 * The worker's state and its per-frame work, apart from the thread so a test can drive it with frames
 * (handle) and messages (apply) in the order it chooses.
 */
/**
 * The config a worker's context is built from: the flow-table limits (`maxFlows`, `untrustedMaxFlows`)
 * divided among the MUX's `count` workers, rounded up, so that the MUX as a whole holds what its config
 * says, whatever its number of workers (the kernel's fanout hash spreads flows, floods included, evenly;
 * one worker's share can fill before the others', the price of tables that need no lock).
 */
export function workerShare(config: SlbxConfig, count: number): SlbxConfig {
  if (count <= 1) return config;
  const ft = config.flowTable;
  return {
    ...config,
    flowTable: { ...ft, maxFlows: Math.ceil(ft.maxFlows / count), untrustedMaxFlows: Math.ceil(ft.untrustedMaxFlows / count) },
  };
}

export class MuxWorkerCore implements PoolThreadCore {
  ctx: MuxContext;
  config: SlbxConfig;
  private readonly count: number;
  readonly traffic = new MuxTrafficCounters();
  private readonly name: string;
  private readonly mac: Uint8Array;
  private readonly policyKey: string | null;
  /** The shared counters (the main thread sums them) and this worker's status words (generation applied, ...). */
  private readonly counterValues: Float64Array;
  readonly status: Int32Array;
  internalErrors = 0;
  lastInternalError = '';
  private readonly txCounted = new Float64Array(2);
  private readonly txNow = new Float64Array(2);
  private batchErrorsCounted = 0;
  port: RingPort | null = null;
  readonly index: number;

  constructor(input: MuxWorkerInput) {
    this.index = input.index;
    this.name = input.name;
    this.count = input.count;
    this.mac = input.mac;
    this.policyKey = input.policyKey;
    this.config = input.config;
    this.counterValues = new Float64Array(input.counters);
    this.status = new Int32Array(input.status);
    this.ctx = this.newContext(input.config, input.tables);
    this.traffic.grow(input.tables);
    Atomics.store(this.status, STATUS_GENERATION, input.tables.generation);
  }

  private newContext(config: SlbxConfig, tables: MuxTables): MuxContext {
    const ctx = buildMuxContext(workerShare(config, this.count), this.name, tables, this.mac);
    // the counters live in shared memory: the main thread sums every worker's without asking
    (ctx.counters as { values: Float64Array }).values = this.counterValues;
    ctx.ew.mac = muxRedirectMac(this.policyKey);
    ctx.ew.unixS = Math.floor(Date.now() / 1000);
    return ctx;
  }

  /** A new generation (and a new config when the context's settings changed): swapped in between two packets. */
  applyTables(tables: MuxTables, config: SlbxConfig | null): void {
    if (config !== null && muxContextKey(config, this.name) !== muxContextKey(this.config, this.name)) {
      this.ctx = this.newContext(config, tables); // settings the context holds changed: flows restart, as in MuxDaemon
    } else this.ctx.tables = tables;
    if (config !== null) this.config = config;
    this.traffic.grow(tables);
    Atomics.store(this.status, STATUS_GENERATION, tables.generation);
  }

  /** Host MACs the main thread learned (ARP/ND stays there): set on this worker's tables' hosts. */
  applyMacs(macs: [string, Uint8Array][]): void {
    for (const [name, mac] of macs) {
      const h = this.ctx.tables.hosts.get(name);
      if (h === undefined) continue;
      (h.mac as Uint8Array).set(mac);
      h.macKnown = true;
    }
  }

  /** One frame: MuxDaemon.onFrame's cap path (the only send path workers have). Returns the verdict. */
  handle(frame: Buffer, len: number): number {
    const ctx = this.ctx;
    const cv = ctx.counters.values;
    const C = ctx.counters.index;
    const flowNew = cv[C.flow_new]!;
    let v: number;
    try {
      v = processPacket(frame, len, ctx);
    } catch (e) {
      cv[C.drop_internal_error]!++;
      this.internalErrors++;
      this.lastInternalError = (e as Error).stack ?? String(e);
      return -1;
    }
    const port = this.port;
    if (v === VERDICT_FORWARD) {
      if (ctx.ew.outLen !== 0 && port !== null) sendMuxRedirect(port, ctx);
      this.traffic.forwarded(ctx, len, cv[C.flow_new] === flowNew ? 0 : 1);
      if (port !== null && !port.send(ctx.out, 0, ctx.outLen, true)) cv[C.send_error_cap]!++;
    } else if (v === VERDICT_REPLY) {
      if (port !== null && !port.send(ctx.out, 0, ctx.outLen, true)) cv[C.send_error_reply]!++;
    }
    // VERDICT_CONTROL (ARP, ND): the main thread has its own socket for them and learns there
    return v;
  }

  /** The ring's batched sends into tx_packets, tx_bytes and send_error_batch (as MuxDaemon.countBatchErrors). */
  countBatchErrors(): void {
    const port = this.port;
    if (port === null) return;
    const cv = this.ctx.counters.values;
    const C = this.ctx.counters.index;
    port.sentCounted(this.txNow);
    cv[C.tx_packets]! += this.txNow[0]! - this.txCounted[0]!;
    cv[C.tx_bytes]! += this.txNow[1]! - this.txCounted[1]!;
    this.txCounted.set(this.txNow);
    const n = port.deferredSendErrors();
    if (n !== this.batchErrorsCounted) {
      cv[C.send_error_batch]! += n - this.batchErrorsCounted;
      this.batchErrorsCounted = n;
    }
  }

  /** Copies the counters, as they stand between two packets, into `dst` (the main thread sums that copy). */
  publishCounters(dst: Float64Array): void {
    dst.set(this.counterValues);
  }

  tick(): void {
    this.countBatchErrors();
    const ctx = this.ctx;
    ctx.nowS = Math.floor(process.uptime()) + 1;
    ctx.ew.unixS = Math.floor(Date.now() / 1000);
    sweepFlows(ctx, Math.max(1024, Math.ceil(Math.max(ctx.flows4.capacity, ctx.flows6.capacity) / 40)));
  }

  /** Up to `limit` of its live flows (GET /flows). */
  flows(limit: number): ListedFlow[] {
    return listFlows(this.ctx, limit);
  }

  close(): void {
    this.port?.close();
  }

  report(): MuxWorkerReport {
    const st = this.port?.stats() ?? null;
    return {
      t: 'report',
      index: this.index,
      generation: this.ctx.tables.generation,
      flows4: this.ctx.flows4.size,
      flows6: this.ctx.flows6.size,
      pending4: this.ctx.pending4.size,
      pending6: this.ctx.pending6.size,
      flowBytes: this.ctx.flows4.bytes + this.ctx.flows6.bytes,
      nic: this.traffic.nic.slice(),
      rule: this.traffic.rule.slice(),
      rxPackets: st?.rxPackets ?? 0,
      rxKernelDrops: st?.rxKernelDrops ?? 0,
      txPackets: st?.txPackets ?? 0,
      sendErrors: st?.txErrors ?? 0,
      lastSendError: st?.txLastError ?? '',
      internalErrors: this.internalErrors,
      lastInternalError: this.lastInternalError,
    };
  }
}

function runThread(): void {
  const input = workerData as MuxWorkerInput;
  startPoolThreadLog(input);
  const core = new MuxWorkerCore(input);
  const r = loadRingAddon();
  if (!('addon' in r)) throw new Error(`--workers needs the ring addon: ${r.error}`);
  // no qdisc bypass: the frames a worker sends are visible to a tcpdump on the interface, as the pcap
  // path's are (the scenarios verify from such captures)
  const port = new RingPort(input.iface, r.addon, { fanoutGroup: input.fanoutGroup, qdiscBypass: false });
  const open = (filter: string) => port.open(filter, (f, len) => void core.handle(f, len), input.captureBufferBytes);
  open(input.filter);
  core.port = port;
  // the report timer, count, flows, exit-for-test and stop: runtime/worker-pool.ts
  servePoolThread(input, core, core.ctx.tables.generation, (msg) => {
    const m = msg as MuxWorkerRequest;
    if (m.t === 'tables') {
      core.applyTables(m.tables, m.config);
      parentPort!.postMessage({ t: 'applied', index: input.index, generation: m.tables.generation } satisfies MuxWorkerToMain);
    } else if (m.t === 'macs') core.applyMacs(m.macs);
    else if (m.t === 'filter') open(m.filter);
    else if (m.t === 'report') parentPort!.postMessage(core.report());
  });
}

if (parentPort !== null && (workerData as { slbxMuxWorker?: boolean } | null)?.slbxMuxWorker === true) runThread();
