// The MUX's worker threads (--workers N, mux/worker.ts and mux/workers.ts):
//   - the tables a worker gets are a structured clone of those the main thread compiled: the data plane
//     sends byte for byte what it sends with the original tables (the single-threaded daemon's path);
//   - one generation per packet: a worker swaps the tables between two packets; every frame to a VIP that
//     only generation G+1 has is dropped before the worker applied G+1 and forwarded after it, and the
//     generation it acknowledges (shared status word) is the one its packets used;
//   - (root) two real worker threads with ring sockets on lo in one fanout group: both acknowledge a new
//     generation; one that exits is restarted while the other keeps running (same thread), and its shared
//     counters carry on.
import { describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { pkt } from '../shared/packet-builder.js';
import { TCP_SYN } from '../shared/tcp.js';
import { compileMuxTables, ALL_HEALTHY, type MuxTables } from '../mux/tables.js';
import { buildMuxContext } from '../mux/context.js';
import { processPacket, VERDICT_FORWARD } from '../mux/data-plane.js';
import { MuxWorkerCore } from '../mux/worker.js';
import type { SlbxConfig } from '../shared/config.js';
import { STATUS_FLOWS_SEQ, STATUS_GENERATION, STATUS_WORDS, type MuxWorkerInput } from '../mux/worker-protocol.js';
import { MessageChannel } from 'node:worker_threads';
import { labConfig } from './helpers/lab-config.js';
import { notRunHere } from './helpers/prerequisite.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const MUX_MAC = new Uint8Array([2, 0, 0, 0, 0, 0x11]);
const VIP6 = '2001:db8:ff::10';
const full = labConfig();
// generation 1 lacks the IPv6 VIP; generation 2 adds it
const withoutV6 = labConfig((raw: { vips: { address: string }[] }) => {
  raw.vips = raw.vips.filter((v) => v.address !== VIP6);
});

function learnAll(t: MuxTables): void {
  let i = 0;
  for (const h of t.hosts.values()) {
    h.mac.set([2, 0, 0, 0, 0x21, i++]);
    h.macKnown = true;
  }
}

function frames(): Buffer[] {
  const out: Buffer[] = [];
  for (let k = 0; k < 40; k++) {
    const eth = pkt().eth({ src: '02:00:00:00:00:01', dst: '02:00:00:00:00:11', type: 0x86dd });
    out.push(
      eth
        .ipv6({ src: '2001:db8:c::10', dst: VIP6 })
        .tcp({ sport: 30000 + k, dport: 80, flags: TCP_SYN })
        .build(),
    );
  }
  for (let k = 0; k < 40; k++)
    out.push(
      pkt()
        .eth({ src: '02:00:00:00:00:01', dst: '02:00:00:00:00:11' })
        .ipv4({ src: '198.51.100.10', dst: '203.0.113.10' })
        .tcp({ sport: 31000 + k, dport: 80, flags: TCP_SYN })
        .build(),
    );
  return out;
}

function input(tables: MuxTables, config = full, count = 1): MuxWorkerInput {
  const names = buildMuxContext(config, 'mux1', tables, MUX_MAC).counters.names.length;
  return {
    slbxMuxWorker: true,
    index: 0,
    count,
    name: 'mux1',
    iface: 'lo',
    mac: MUX_MAC,
    policyKey: null,
    config: structuredClone(config),
    tables: structuredClone(tables),
    filter: '',
    fanoutGroup: 0,
    captureBufferBytes: 1 << 20,
    counters: new SharedArrayBuffer(names * 8),
    published: new SharedArrayBuffer(names * 8),
    status: new SharedArrayBuffer(STATUS_WORDS * 4),
    flowsPort: new MessageChannel().port2,
  };
}

describe('MUX workers: the tables handed over, one generation per packet', () => {
  it('a worker with cloned tables sends byte for byte what the main thread sends with the originals', () => {
    const t = compileMuxTables(full, ALL_HEALTHY, null, 1);
    learnAll(t);
    const ref = buildMuxContext(full, 'mux1', t, MUX_MAC);
    const core = new MuxWorkerCore(input(t));
    let forwarded = 0;
    for (const f of frames()) {
      const v = processPacket(f, f.length, ref);
      const w = core.handle(f, f.length);
      expect(w).toBe(v);
      if (v === VERDICT_FORWARD) {
        forwarded++;
        expect(Buffer.from(core.ctx.out.subarray(0, core.ctx.outLen)).equals(Buffer.from(ref.out.subarray(0, ref.outLen)))).toBe(true);
      }
    }
    expect(forwarded).toBe(80);
  });

  it('frames to the VIP only G+1 has: dropped until the worker applied G+1, forwarded from then on, never a mix', () => {
    const g1 = compileMuxTables(withoutV6, ALL_HEALTHY, null, 1);
    learnAll(g1);
    const g2 = compileMuxTables(full, ALL_HEALTHY, g1, 2);
    const inp = input(g1, withoutV6);
    const core = new MuxWorkerCore(inp);
    const status = new Int32Array(inp.status);
    const fs = frames().slice(0, 40); // the IPv6 VIP's
    const stamped: { gen: number; v: number }[] = [];
    for (let i = 0; i < fs.length; i++) {
      // the main thread's message arrives between two packets (the worker's event loop runs one thing at a time)
      if (i === 17) core.applyTables(structuredClone(g2), structuredClone(full));
      const v = core.handle(fs[i]!, fs[i]!.length);
      stamped.push({ gen: Atomics.load(status, STATUS_GENERATION), v });
    }
    // before the swap: generation 1, no such VIP; after: generation 2, forwarded; nothing else
    expect(stamped.slice(0, 17).every((s) => s.gen === 1 && s.v !== VERDICT_FORWARD)).toBe(true);
    expect(stamped.slice(17).every((s) => s.gen === 2 && s.v === VERDICT_FORWARD)).toBe(true);
    const counters = new Float64Array(inp.counters);
    const C = core.ctx.counters.index;
    expect(counters[C.flow_new]).toBe(23); // the shared counters are the ones the data plane bumped
  });
});

describe("MUX workers: the config's flow-table limits are the MUX's, shared among its workers", () => {
  it('each of 2 workers gets half of maxFlows and untrustedMaxFlows (rounded up); 1 worker gets them whole', () => {
    const t = compileMuxTables(full, ALL_HEALTHY, null, 1);
    const cfg: SlbxConfig = { ...full, flowTable: { ...full.flowTable, maxFlows: 1001, untrustedMaxFlows: 10_000 } };
    const one = new MuxWorkerCore(input(t, cfg, 1));
    expect([one.ctx.flowLimit.max, one.ctx.pendingLimit.max]).toEqual([1001, 10_000]);
    const halves = [0, 1].map(() => new MuxWorkerCore(input(t, cfg, 2)));
    for (const h of halves) expect([h.ctx.flowLimit.max, h.ctx.pendingLimit.max]).toEqual([501, 5000]);
  });

  it('a flood of new flows fills a worker at its share: 2 workers together take what the config allows, not twice that', () => {
    const t = compileMuxTables(full, ALL_HEALTHY, null, 1);
    learnAll(t);
    const cfg: SlbxConfig = { ...full, flowTable: { ...full.flowTable, untrustedMaxFlows: 40 } };
    const core = new MuxWorkerCore(input(t, cfg, 2));
    const C = core.ctx.counters.index;
    for (const f of frames()) core.handle(f, f.length);
    // 80 SYNs of 80 new flows: 20 recorded as untrusted, the other 60 placed statelessly (table full)
    expect(core.ctx.counters.values[C.flow_new]).toBe(20);
    expect(core.ctx.counters.values[C.flow_untrusted_full]).toBe(60);
  });

  it('the copy a worker publishes between two packets stays what it was while the live counters move on', () => {
    const t = compileMuxTables(full, ALL_HEALTHY, null, 1);
    learnAll(t);
    const inp = input(t);
    const core = new MuxWorkerCore(inp);
    const C = core.ctx.counters.index;
    const fs = frames();
    for (const f of fs.slice(0, 30)) core.handle(f, f.length);
    const published = new Float64Array(inp.published);
    core.publishCounters(published);
    expect(published[C.rx_packets]).toBe(30);
    for (const f of fs.slice(30)) core.handle(f, f.length);
    expect(new Float64Array(inp.counters)[C.rx_packets]).toBe(fs.length);
    expect(published[C.rx_packets]).toBe(30);
  });
});

describe('MUX workers: real threads on lo (root)', () => {
  const dist = `${ROOT}dist/mux/workers.js`;
  const ok = process.getuid?.() === 0 && existsSync(`${ROOT}native/build/Release/slbx_ring.node`) && existsSync(dist);
  if (!ok) {
    notRunHere(process.getuid?.() !== 0 ? 'needs root (ring sockets)' : 'the ring addon or dist is not built', 'MUX worker threads');
    return;
  }

  it('both acknowledge a new generation; a worker that exits is restarted, the other keeps running', async () => {
    const { MuxWorkers } = (await import(dist)) as typeof import('../mux/workers.js');
    const t1 = compileMuxTables(full, ALL_HEALTHY, null, 1);
    let cur = t1;
    const names = buildMuxContext(full, 'mux1', t1, MUX_MAC).counters.names.length;
    const w = new MuxWorkers({
      count: 2,
      name: 'mux1',
      iface: 'lo',
      mac: MUX_MAC,
      policyKey: null,
      captureBufferBytes: 1 << 20,
      fanoutGroup: 1 + (process.pid % 60000),
      counterNames: names,
      current: () => ({ config: full, tables: cur, filter: 'dst host 203.0.113.10', macs: [] }),
    });
    const until = async (what: string, f: () => boolean) => {
      for (let i = 0; i < 600 && !f(); i++) await new Promise((r) => setTimeout(r, 50));
      expect(f(), what).toBe(true);
    };
    const applied: string[] = [];
    w.onApplied = (i, g) => applied.push(`${i}:${g}`);
    w.start();
    try {
      await until('both workers ready', () => w.slots.every((s) => s.ready));
      expect(w.generations()).toEqual([1, 1]);
      cur = compileMuxTables(full, ALL_HEALTHY, t1, 2);
      w.postTables(cur, full);
      await until('both acknowledged generation 2', () => applied.includes('0:2') && applied.includes('1:2'));
      expect(w.generations()).toEqual([2, 2]);
      // GET /flows asks every worker and awaits its answer (none on lo: no traffic), each answered once
      expect(await w.flows(10)).toEqual([]);
      expect(w.slots.map((s) => Atomics.load(s.status, STATUS_FLOWS_SEQ))).toEqual([1, 1]);
      // /counters first brings every worker's counters up to date (each answers the request)
      await w.syncCountersAsync();
      expect(w.slots.map((s) => Atomics.load(s.status, STATUS_FLOWS_SEQ))).toEqual([2, 2]);
      expect(w.slots.map((s) => s.publishedFresh)).toEqual([true, true]);
      // the synchronous sum (a later event-loop turn) never waits for a worker: it asks none (the status words stay)
      await new Promise((r) => setImmediate(r));
      w.syncCounters();
      expect(w.slots.map((s) => Atomics.load(s.status, STATUS_FLOWS_SEQ))).toEqual([2, 2]);
      expect(w.slots.map((s) => s.publishedFresh)).toEqual([false, false]);
      const other = w.slots[1]!.worker;
      const counters0 = w.slots[0]!.counters;
      new Float64Array(counters0)[0] = 7; // as if worker 0 had counted
      w.exitForTest(0, 3);
      await until('worker 0 restarted and ready', () => w.slots[0]!.restarts === 1 && w.slots[0]!.ready);
      expect(w.slots[0]!.lastExit).toContain('exit code 3');
      expect(w.slots[1]!.restarts).toBe(0);
      expect(w.slots[1]!.worker).toBe(other); // the same thread all along
      expect(w.generations()).toEqual([2, 2]); // the restarted one started with the current tables
      expect(w.slots[0]!.counters).toBe(counters0);
      expect(new Float64Array(counters0)[0]).toBe(7);
      // GET /status, /counters and /metrics await the workers without blocking the event loop (BGP and
      // BFD share it): a worker that exits never answers, and it is awaited only until its thread's exit
      // event, which only a running loop delivers: the await ends with the slot empty, before the restart
      // (RESTART_DELAY_MS later), not at the end of POOL_WAIT_MS, when the new thread would be running
      w.exitForTest(1, 3);
      await w.syncCountersAsync();
      expect(w.slots[1]!.restarts).toBe(1);
      expect(w.slots[1]!.worker).toBe(null);
      expect(w.slots.map((s) => s.publishedFresh)).toEqual([true, false]);
      // a worker whose exit was seen (dead, or restarting) is neither asked nor awaited: one wait, on worker 0
      const waits = w.waitsForTest;
      const sync = w.syncCountersAsync();
      expect(w.waitsForTest - waits).toBe(1);
      await sync;
      await until('worker 1 restarted and ready', () => w.slots[1]!.restarts === 1 && w.slots[1]!.ready);
      await w.syncCountersAsync(); // both answer: each copy is fresh
      expect(w.slots.map((s) => s.publishedFresh)).toEqual([true, true]);
      // the controller heartbeat's reads right after a worker was told to exit (runtime/daemon-main.ts:
      // counters, then /flows) end when its thread exits: neither is awaited past it
      w.exitForTest(0, 3);
      await w.syncCountersAsync();
      expect(w.slots[0]!.worker).toBe(null);
      expect(await w.flows(10)).toEqual([]);
      expect(w.slots[0]!.restarts).toBe(2);
    } finally {
      await w.stop();
    }
  }, 60_000);
});
