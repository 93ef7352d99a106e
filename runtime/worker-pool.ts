// A daemon's worker threads (--workers N, N >= 2), seen from the main thread: the part the MUX
// (mux/workers.ts) and the host agent (host-agent/workers.ts) share. One slot per worker: it starts the
// thread with the slot's shared memory (counters, a published copy of them, status words), restarts a
// thread that exits (after RESTART_DELAY_MS, without taking the others down; the shared arrays are the
// same, so its counters carry on), keeps its last report, and answers for all of them: the generations
// they acknowledged, their counters summed (syncCountersAsync / sumCounters), a /flows listing, stop.
//
// The main thread never blocks on a worker (no Atomics.wait): it runs BGP, whose peer drops the session
// after the hold time (3 s in the lab) without a keepalive. A worker's answer is awaited with
// Atomics.waitAsync, and a worker that exits stops being awaited at once: one that was told to exit, or
// crashed, never answers, and its `exit` event reaches this thread only while the loop runs.
//
// The worker thread's side of those requests (`count`, `flows`, `exit-for-test`, `stop`, the report
// timer, `ready`) is servePoolThread below. What a daemon's workers do besides (the MUX's tables, MACs
// and filter; the host agent's fanout joins and regroups, its peers, its redirects) stays in the
// daemon's own file, which extends WorkerPool.
import { MessageChannel, parentPort, receiveMessageOnPort, Worker, type MessagePort } from 'node:worker_threads';
import { configureLog, logConfig, logInfo, logWarn, type LogLevel } from './log.js';

/** Words of every worker's shared status array (Int32): the generation it applied, the answer counter. */
export const POOL_STATUS_GENERATION = 0;
/** Bumped by the worker after it answered a `flows` or `count` request: the main thread waits on it. */
export const POOL_STATUS_SEQ = 1;
export const POOL_STATUS_WORDS = 4;

const RESTART_DELAY_MS = 200;
/** How long the main thread awaits a worker's answer to `count` or `flows` (it answers between two ring batches; never a blocking wait). */
export const POOL_WAIT_MS = 2000;

/** What the pool itself reads of a worker's messages; a daemon's other messages go to its onMessage. */
export type PoolMessage<R> = { t: 'ready'; index: number; generation: number } | { t: 'applied'; index: number; generation: number } | R;

/** The pool's part of what a worker thread starts with (its workerData has these and the daemon's own fields). */
export interface PoolWorkerInput {
  index: number;
  count: number;
  /** Float64 counters (the daemon's counter names, in order), shared with the main thread; kept across restarts. */
  counters: SharedArrayBuffer;
  /** Where the worker copies its counters between two batches when asked (`count`): what /counters sums. */
  published: SharedArrayBuffer;
  /** Int32 status words (POOL_STATUS_*). */
  status: SharedArrayBuffer;
  /** Where the worker answers a `flows` request (read synchronously by the main thread). */
  flowsPort: MessagePort;
  /** The daemon's log name and level (a thread's module state starts fresh: configureLog in the thread, startPoolThreadLog). */
  log?: { name: string; level: LogLevel };
}

/** A worker thread's first step: its log lines carry the daemon's name and honour its level, as the main thread's. */
export function startPoolThreadLog(input: PoolWorkerInput): void {
  if (input.log !== undefined) configureLog(input.log.name, input.log.level);
}

export interface PoolSlot<R> {
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
  report: R | null;
  /** This thread's end of the worker's flows port. */
  flowsPort: MessagePort | null;
  /** Resolves when the current thread exits (an answer it owes is then awaited no longer). */
  exited: Promise<void>;
}

export interface WorkerPoolOptions {
  count: number;
  /** Counters per worker (the daemon's counter names). */
  counterNames: number;
  /** The worker thread's module. */
  file: URL;
  /** The logs' name of a worker: `<log>_started`, `<log>_exited`. */
  log: string;
}

/**
 * The pool of a daemon's workers. `S`: a slot with the daemon's own fields (made by `extra`); `R`: the
 * worker's periodic report (`{ t: 'report' }`); `M`: every message a worker posts.
 */
export abstract class WorkerPool<S extends PoolSlot<R>, R extends { t: 'report' }, M extends { t: string }> {
  readonly slots: S[] = [];
  protected stopping = false;
  private timers = new Set<NodeJS.Timeout>();
  /** syncCountersAsync() resolved in this event-loop turn: syncCounters() keeps its copies. */
  private syncedThisTurn = false;
  /** Calls of Atomics.waitAsync on a worker's status word (tests: none on a worker that is gone). */
  waitsForTest = 0;
  /** The /flows listing under way (listFlows: one at a time). */
  private flowsChain: Promise<unknown> = Promise.resolve();
  /** Called with (index, generation) when a worker acknowledges a generation (tests wait on it). */
  onApplied: ((index: number, generation: number) => void) | null = null;

  constructor(
    private readonly pool: WorkerPoolOptions,
    extra: (index: number) => Omit<S, keyof PoolSlot<R>>,
  ) {
    for (let i = 0; i < pool.count; i++) {
      const base: PoolSlot<R> = {
        index: i,
        worker: null,
        counters: new SharedArrayBuffer(pool.counterNames * 8),
        published: new SharedArrayBuffer(pool.counterNames * 8),
        publishedFresh: false,
        status: new Int32Array(new SharedArrayBuffer(POOL_STATUS_WORDS * 4)),
        restarts: 0,
        lastExit: null,
        ready: false,
        report: null,
        flowsPort: null,
        exited: Promise.resolve(),
      };
      this.slots.push({ ...base, ...extra(i) } as S);
    }
  }

  /** The worker's workerData: the pool's fields (`base`) and the daemon's, read at each (re)start. */
  protected abstract workerData(s: S, base: PoolWorkerInput): object;
  /** A worker said it is ready (s.ready is set). */
  protected abstract onReady(s: S, generation: number): void;
  /** Any message but ready, applied (and a report, after it was kept in s.report). */
  protected abstract onMessage(s: S, m: M): void;
  /** A new thread was started in slot `s`. */
  protected onSpawn(_s: S): void {}
  /** Slot `s`'s thread exited (s.worker is null; before the restart is planned, also when stopping). */
  protected onExit(_s: S): void {}

  start(): void {
    this.stopping = false;
    for (const s of this.slots) this.spawn(s);
  }

  private spawn(s: S): void {
    const ch = new MessageChannel();
    s.flowsPort?.close();
    s.flowsPort = ch.port1;
    ch.port1.unref();
    const base: PoolWorkerInput = {
      index: s.index,
      count: this.pool.count,
      counters: s.counters,
      published: s.published,
      status: s.status.buffer,
      flowsPort: ch.port2,
      log: logConfig(),
    };
    const w = new Worker(this.pool.file, { workerData: this.workerData(s, base), transferList: [ch.port2] });
    s.worker = w;
    s.ready = false;
    s.exited = new Promise((res) => w.once('exit', () => res()));
    this.onSpawn(s);
    w.on('message', (m: PoolMessage<R> | M) => {
      if (m.t === 'ready') {
        s.ready = true;
        const generation = (m as { generation: number }).generation;
        logInfo(`${this.pool.log}_started`, { worker: s.index, generation, restarts: s.restarts });
        this.onReady(s, generation);
      } else if (m.t === 'applied') {
        const a = m as { index: number; generation: number };
        this.onApplied?.(a.index, a.generation);
      } else {
        if (m.t === 'report') s.report = m as R;
        this.onMessage(s, m as M);
      }
    });
    w.on('error', (e) => {
      s.lastExit = e.stack ?? String(e);
    });
    w.on('exit', (code) => {
      if (s.worker !== w) return;
      s.worker = null;
      s.ready = false;
      this.onExit(s);
      if (this.stopping) return;
      s.restarts++;
      s.lastExit = s.lastExit ?? `exit code ${code}`;
      logWarn(`${this.pool.log}_exited`, { worker: s.index, code, error: s.lastExit, restartInMs: RESTART_DELAY_MS, restarts: s.restarts });
      s.lastExit = `exit code ${code}${s.lastExit.startsWith('exit code') ? '' : `: ${s.lastExit.split('\n')[0]}`}`;
      const t = setTimeout(() => {
        this.timers.delete(t);
        if (!this.stopping && s.worker === null) this.spawn(s);
      }, RESTART_DELAY_MS);
      this.timers.add(t);
    });
  }

  /** `msg` to every running worker. */
  protected postAll(msg: unknown): void {
    for (const s of this.slots) s.worker?.postMessage(msg);
  }

  /** The restart test: worker `index` calls process.exit(code) in its thread. */
  exitForTest(index: number, code = 3): void {
    this.slots[index]?.worker?.postMessage({ t: 'exit-for-test', code });
  }

  /** The generation each worker acknowledged (shared memory: current at any read). */
  generations(): number[] {
    return this.slots.map((s) => Atomics.load(s.status, POOL_STATUS_GENERATION));
  }

  /**
   * Worker `s`'s answer to a request just posted (its status word moved past `seq`): true when it came
   * within `ms`, false when it did not or the thread exited first (Atomics.waitAsync: this
   * thread's loop runs meanwhile).
   */
  private async answered(s: S, seq: number, ms = POOL_WAIT_MS): Promise<boolean> {
    this.waitsForTest++;
    const r = Atomics.waitAsync(s.status, POOL_STATUS_SEQ, seq, ms);
    if (r.async) await Promise.race([r.value, s.exited]);
    return Atomics.load(s.status, POOL_STATUS_SEQ) !== seq;
  }

  /** A worker that can answer now: running, ready, its thread's exit not yet seen. */
  private answering(s: S): boolean {
    return s.worker !== null && s.ready;
  }

  /**
   * The counters sumCounters() adds, never waiting: the copies of the syncCountersAsync() that resolved
   * in this event-loop turn, else every worker's live counters. It waited (Atomics.wait, up to
   * POOL_WAIT_MS per worker) until a worker's death showed that a blocked main thread drops BGP: a worker
   * told to exit, or crashed, never answers, and its exit event cannot arrive while the thread is blocked;
   * the controller heartbeat's /status and /flows, every 2 s, then held the loop 4 s (2 s each), past
   * the 3 s hold time (scenario 44 under load: BIRD dropped mux1's session).
   */
  syncCounters(): void {
    if (this.syncedThisTurn) return; // syncCountersAsync() just brought them up to date
    for (const s of this.slots) s.publishedFresh = false;
  }

  /**
   * Every worker brings its counters up to date now (the frames its ring's batches sent) and copies them,
   * between two of its batches, into its published array; each is awaited (Atomics.waitAsync, this
   * thread's loop runs meanwhile) at most POOL_WAIT_MS or until its thread exits. The copy is what is
   * summed: the live array moves inside a batch (rx_packets at each packet, tx_packets once the batch is
   * sent), so a sum of live arrays taken while a worker is busy reads received frames not yet counted as
   * sent (scenario 17 with 2 MUX workers: rx_packets 116 above tx_packets after a flood, nothing
   * dropped). GET /status, /counters, /metrics and the controller heartbeat call this first;
   * syncCounters() calls until the end of the event-loop turn in which it resolves use its copies.
   */
  async syncCountersAsync(): Promise<void> {
    const waits: Promise<unknown>[] = [];
    for (const s of this.slots) {
      s.publishedFresh = false;
      if (!this.answering(s)) continue; // dead or restarting: skipped at once
      const seq = Atomics.load(s.status, POOL_STATUS_SEQ);
      s.worker!.postMessage({ t: 'count' });
      waits.push(
        this.answered(s, seq).then((ok) => {
          s.publishedFresh = ok;
        }),
      );
    }
    await Promise.all(waits);
    this.syncedThisTurn = true;
    setImmediate(() => {
      this.syncedThisTurn = false;
    });
  }

  /** Adds every worker's counters into `out` (the daemon's counter order): its copy from the last syncCounters(), else the live ones. */
  sumCounters(out: Float64Array): void {
    for (const s of this.slots) {
      const v = new Float64Array(s.publishedFresh ? s.published : s.counters);
      for (let i = 0; i < out.length; i++) out[i]! += v[i]!;
    }
  }

  /**
   * GET /flows: up to `limit` entries of every worker's flow table, asked for now, each worker's answer
   * awaited (never blocking this thread) at most POOL_WAIT_MS or until its thread exits: a worker answers
   * between two ring batches. A worker that does not answer in time, or is dead or restarting, is left out.
   */
  protected listFlows<F>(limit: number): Promise<F[]> {
    // one listing at a time (the heartbeat's and a GET /flows may overlap): each drains its workers' ports
    const run = this.flowsChain.then(() => this.listFlowsNow<F>(limit));
    this.flowsChain = run.catch(() => undefined);
    return run;
  }

  private async listFlowsNow<F>(limit: number): Promise<F[]> {
    const out: F[] = [];
    for (const s of this.slots) {
      if (out.length >= limit || !this.answering(s) || s.flowsPort === null) continue;
      const port = s.flowsPort;
      while (receiveMessageOnPort(port) !== undefined); // a late answer to an earlier request
      let seq = Atomics.load(s.status, POOL_STATUS_SEQ);
      s.worker!.postMessage({ t: 'flows', limit: limit - out.length });
      const until = performance.now() + POOL_WAIT_MS;
      for (;;) {
        const left = until - performance.now();
        if (left <= 0 || !(await this.answered(s, seq, left))) break;
        const m = receiveMessageOnPort(port);
        if (m !== undefined) {
          out.push(...(m.message as F[]));
          break;
        }
        seq = Atomics.load(s.status, POOL_STATUS_SEQ); // the word moved for a `count` answered meanwhile
      }
    }
    return out.slice(0, limit);
  }

  /** The first fields of slot `s`'s /status row (the daemon adds its own after them). */
  protected statusHead(s: S, generations: number[]): Record<string, unknown> {
    return {
      worker: s.index,
      alive: s.worker !== null && s.ready,
      generation: generations[s.index],
      restarts: s.restarts,
      ...(s.lastExit !== null ? { lastExit: s.lastExit } : {}),
    };
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
}

/** What servePoolThread needs of a worker's core (MuxWorkerCore, HostWorkerCore). */
export interface PoolThreadCore {
  readonly status: Int32Array;
  /** The ring's batched sends into the counters (tx, send_error_batch). */
  countBatchErrors(): void;
  publishCounters(dst: Float64Array): void;
  /** Every tick: aging, counters; then its report is posted. */
  tick(): void;
  report(): unknown;
  flows(limit: number): unknown;
  /** At `stop`, before the last report: closes its sockets. */
  close(): void;
}

/** How often a worker ticks and reports. */
const TICK_MS = 250;

/**
 * A worker thread's side of the pool: the report timer, and the requests every worker answers alike
 * (`count`, `flows`, `exit-for-test`, `stop`); every other message goes to `onMessage`. Posts `ready`.
 */
export function servePoolThread(
  input: PoolWorkerInput,
  core: PoolThreadCore,
  generation: number,
  onMessage: (m: { t: string }) => void,
): void {
  const post = (m: unknown) => parentPort!.postMessage(m);
  const timer = setInterval(() => {
    core.tick();
    post(core.report());
  }, TICK_MS);
  const answered = () => {
    Atomics.add(core.status, POOL_STATUS_SEQ, 1);
    Atomics.notify(core.status, POOL_STATUS_SEQ);
  };
  parentPort!.on('message', (m: { t: string; limit?: number; code?: number }) => {
    if (m.t === 'count') {
      // the ring's batched sends into the counters now, as the single-threaded daemon does before
      // /counters answers; then the copy the main thread sums
      core.countBatchErrors();
      core.publishCounters(new Float64Array(input.published));
      answered();
    } else if (m.t === 'flows') {
      // answered on the flows port first, then the shared word bumped: the main thread, waiting on the
      // word, then finds the answer there (receiveMessageOnPort)
      input.flowsPort.postMessage(core.flows(m.limit!));
      answered();
    } else if (m.t === 'exit-for-test')
      process.exit(m.code); // ends this thread only: the restart test
    else if (m.t === 'stop') {
      clearInterval(timer);
      core.countBatchErrors();
      core.close();
      post(core.report());
      parentPort!.close();
    } else onMessage(m);
  });
  post({ t: 'ready', index: input.index, generation });
}
