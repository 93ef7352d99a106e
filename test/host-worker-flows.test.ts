// A host agent worker's flows across its restart and the agent's (--workers N with --state-dir;
// host-agent/flow-state-sets.ts, host-agent/worker.ts):
//   - naming: worker I's set is NAME.wI (host-agent-NAME.wI.flows, .journal), the one-thread set NAME as before;
//     listing finds every set of this host (not another host's, not temporary files); a set is removed whole;
//   - the record's worker: a return-path record's and an outbound NAT record's worker (their remote end,
//     from the words of the record) is the one the kernel steers the flow's frames to (steeringKey of
//     the frames, both sides: the independent source), IPv4 and IPv6;
//   - a worker killed (no graceful stop) and started again has every flow it had recorded (its journal),
//     and those of its share another worker recorded while it was down (read at its start, and the
//     catch-up of its first regroup); its replies leave by DSR;
//   - N changed (2 -> 3 -> 2, and a one-thread agent's set -> 2 workers): every return-path and outbound
//     NAT flow lands in exactly one worker, the one steering names: none lost, none in two SNAT engines;
//   - (root) real threads: a worker killed through the hook comes back with its flows (its /flows and
//     report), a whole pool stopped and started with the same N, with 3 and with 2 again restores every
//     flow once, and the sets no worker owns any more are removed.
import { describe, expect, it, vi } from 'vitest';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pkt } from '../shared/packet-builder.js';
import { TCP_ACK, TCP_SYN } from '../shared/tcp.js';
import type { SlbxConfig } from '../shared/config.js';
import { steeringKey, steerWorker, STEER_FABRIC, STEER_PORT, NO_INTERNAL_VIPS } from '../host-agent/worker-steering.js';
import { HostWorkerCore } from '../host-agent/worker.js';
import { newHostContext } from '../host-agent/data-plane.js';
import { compileHostTables } from '../host-agent/tables.js';
import { decodeFlowSnapshot, encodeFlowSnapshot, FlowSnapshotter, DSR_RECORD_WORDS } from '../host-agent/flow-snapshot.js';
import { SNAT_FLOW_RECORD_WORDS } from '../host-agent/snat.js';
import {
  dsrRecordWorker,
  listFlowStateSets,
  readFlowStateSet,
  removeFlowStateSet,
  snatRecordWorker,
  workerFlowSetName,
} from '../host-agent/flow-state-sets.js';
import type { HostWorkerFlowState, HostWorkerInput } from '../host-agent/worker-protocol.js';
import { HostDaemon } from '../host-agent/daemon.js';
import { labConfig } from './helpers/lab-config.js';
import { notRunHere } from './helpers/prerequisite.js';
import { fromMux1, host1PoolOptions, host1WorkerInput } from './helpers/host-lab-frames.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const FIP = '203.0.113.200';
const cfg: SlbxConfig = labConfig((raw) => {
  raw.outbound = [{ name: 'out', frontendIps: [FIP, '2001:db8:ff::200'], nics: ['h1vm1'], portsPerNic: 256, preallocatedPorts: 256 }];
});
const RANGES = [{ ip: FIP, first: 1024, last: 1279, host: 'host1', nic: 'h1vm1' }];
const noLog = () => {};

function input(index: number, count: number, flowState: HostWorkerFlowState | null): HostWorkerInput {
  return host1WorkerInput(cfg, { index, count, snatRanges: RANGES, flowState });
}

const nicOf = (core: HostWorkerCore) => core.ctx.tables.nics.find((n) => n.name === 'h1vm1')!;

/** Client k's request through a MUX (VXLAN to host1, inner frame to h1vm1's MAC), IPv4 or IPv6. */
function clientFrame(k: number): Buffer {
  const v6 = k % 3 === 2;
  const b = pkt().eth({ src: '02:00:00:00:00:11', dst: '02:00:c0:00:02:0a', type: v6 ? 0x86dd : 0x0800 });
  const inner = (
    v6
      ? b.ipv6({ src: `2001:db8:c::${(k % 50) + 10}`, dst: '2001:db8:ff::10' })
      : b.ipv4({ src: `198.51.100.${(k % 50) + 10}`, dst: '203.0.113.10' })
  )
    .tcp({ sport: 40000 + k, dport: 80, flags: TCP_SYN })
    .build();
  return fromMux1(inner, 5001);
}

/** The backend's reply of client k's flow, on h1vm1's port. */
function replyFrame(k: number): Buffer {
  const v6 = k % 3 === 2;
  const b = pkt().eth({ src: '02:00:c0:00:02:0a', dst: '02:00:00:01:00:01', type: v6 ? 0x86dd : 0x0800 });
  return (
    v6
      ? b.ipv6({ src: '2001:db8:d::10', dst: `2001:db8:c::${(k % 50) + 10}` })
      : b.ipv4({ src: '192.0.2.10', dst: `198.51.100.${(k % 50) + 10}` })
  )
    .tcp({ sport: 80, dport: 40000 + k, flags: TCP_ACK, seq: 1, ack: 1 })
    .build();
}

/** h1vm1's own connection j to a remote server (outbound NAT), on its port. */
function outboundFrame(j: number): Buffer {
  return pkt()
    .eth({ src: '02:00:c0:00:02:0a', dst: '02:00:00:01:00:01' })
    .ipv4({ src: '192.0.2.10', dst: `198.51.100.${(j % 20) + 100}` })
    .tcp({ sport: 30000 + j, dport: 9000 + j, flags: TCP_SYN })
    .build();
}

const fabricWorker = (f: Buffer, n: number) => steerWorker(steeringKey(f, 0, f.length, STEER_FABRIC, 4789, NO_INTERNAL_VIPS), n);
const portWorker = (f: Buffer, n: number) => steerWorker(steeringKey(f, 0, f.length, STEER_PORT, 4789, NO_INTERNAL_VIPS), n);
const turnEnd = () => new Promise((r) => setImmediate(r));

/** The return-path flows (client end) and outbound NAT flows (DIP end -> remote) a core holds. */
function flowsOf(core: HostWorkerCore): { dsr: string[]; snat: string[] } {
  const all = core.flows(100_000);
  return {
    dsr: all.filter((f) => f.kind === 'dsr').map((f) => `${f.client}>${f.vip}`),
    snat: all.filter((f) => f.kind.startsWith('snat')).map((f) => `${f.client}>${f.vip}@${f.frontend}`),
  };
}

/** Feeds clients [from, to) and outbound connections [ofrom, oto) to the cores steering names among `cores.length`. */
function feed(cores: HostWorkerCore[], from: number, to: number, ofrom = 0, oto = 0, route = (w: number) => w): void {
  for (let k = from; k < to; k++) {
    const f = clientFrame(k);
    cores[route(fabricWorker(f, cores.length))]!.handleFabric(f, f.length);
  }
  for (let j = ofrom; j < oto; j++) {
    const f = outboundFrame(j);
    const c = cores[route(portWorker(f, cores.length))]!;
    c.handlePort(f, f.length, nicOf(c).index);
  }
}

const C = (core: HostWorkerCore, name: string) => core.ctx.counters.values[core.ctx.counters.index[name as 'out_dsr']]!;

describe('host agent worker flows: naming and listing', () => {
  it("worker I's set is NAME.wI; a listing finds this host's sets only; a set is removed whole", () => {
    const dir = mkdtempSync(join(tmpdir(), 'slbx-wflows-'));
    try {
      expect(workerFlowSetName('host1', 0)).toBe('host1.w0');
      expect(new FlowSnapshotter({ dir, name: workerFlowSetName('host1', 3), intervalMs: 1000, log: noLog }).path).toBe(
        join(dir, 'host-agent-host1.w3.flows'),
      );
      expect(new FlowSnapshotter({ dir, name: 'host1', intervalMs: 1000, log: noLog }).path).toBe(join(dir, 'host-agent-host1.flows'));
      for (const f of [
        'host-agent-host1.flows',
        'host-agent-host1.journal',
        'host-agent-host1.w0.flows',
        'host-agent-host1.w0.journal',
        'host-agent-host1.w0.journal.prev',
        'host-agent-host1.w0.flows.tmp',
        'host-agent-host1.w3.journal.prev',
        'host-agent-host10.w0.flows',
        'host-agent-host1.wx.flows',
      ])
        writeFileSync(join(dir, f), 'x');
      expect(listFlowStateSets(dir, 'host1')).toEqual([
        { set: 'host1', worker: null },
        { set: 'host1.w0', worker: 0 },
        { set: 'host1.w3', worker: 3 },
      ]);
      expect(listFlowStateSets(join(dir, 'none'), 'host1')).toEqual([]);
      expect(removeFlowStateSet(dir, 'host1.w0').map((f) => f.slice(dir.length + 1))).toEqual([
        'host-agent-host1.w0.flows',
        'host-agent-host1.w0.flows.tmp',
        'host-agent-host1.w0.journal',
        'host-agent-host1.w0.journal.prev',
      ]);
      expect(readdirSync(dir).sort()).toEqual([
        'host-agent-host1.flows',
        'host-agent-host1.journal',
        'host-agent-host1.w3.journal.prev',
        'host-agent-host1.wx.flows',
        'host-agent-host10.w0.flows',
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("host agent worker flows: a record's worker is its frames' worker", () => {
  it('return path (client end) and outbound NAT (server end), IPv4 and IPv6, for 2, 3 and 5 workers', () => {
    const core = new HostWorkerCore(input(0, 1, null), () => {});
    feed([core], 0, 90, 0, 40);
    const snap = decodeFlowSnapshot(encodeFlowSnapshot(core.ctx.ew!.flows, core.ctx.ew!.nowS, Date.now(), core.snat.engine));
    if (!snap.ok) throw new Error(snap.reason);
    expect(snap.dsrCount).toBe(90);
    expect(snap.snatCount).toBe(40);
    const spread = new Set<number>();
    for (const n of [2, 3, 5]) {
      // each record is found back by its frames: client k's port (word 10's low half) names k
      for (let o = 0; o < snap.dsr.length; o += DSR_RECORD_WORDS) {
        const rec = snap.dsr.subarray(o, o + DSR_RECORD_WORDS);
        const k = (rec[10]! & 0xffff) - 40000;
        const want = fabricWorker(clientFrame(k), n);
        expect(portWorker(replyFrame(k), n)).toBe(want);
        expect(dsrRecordWorker(rec, n), `client ${k} of ${n}`).toBe(want);
        spread.add(want);
      }
      for (let o = 0; o < snap.snat.length; o += SNAT_FLOW_RECORD_WORDS) {
        const rec = snap.snat.subarray(o, o + SNAT_FLOW_RECORD_WORDS);
        const j = (rec[18]! & 0xffff) - 9000;
        expect(snatRecordWorker(rec, n), `outbound ${j} of ${n}`).toBe(portWorker(outboundFrame(j), n));
      }
    }
    expect(spread.size).toBe(5);
  });
});

describe('host agent worker flows: a worker restarted', () => {
  it('has every flow it recorded (journal, no graceful stop) and those of its share recorded elsewhere while it was down', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'slbx-wflows-'));
    try {
      const fs = { dir, intervalMs: 1000, sets: null };
      const w = [new HostWorkerCore(input(0, 2, fs), () => {}), new HostWorkerCore(input(1, 2, fs), () => {})];
      feed(w, 0, 60, 0, 30);
      await turnEnd(); // the journals are written at the end of the turn
      const had = flowsOf(w[0]!);
      expect(had.dsr.length).toBeGreaterThan(10);
      expect(had.snat.length).toBeGreaterThan(4);
      // worker 0 dies (no graceful stop); while it is down the kernel gives its share to worker 1
      feed(w, 60, 80, 30, 40, () => 1);
      await turnEnd();
      const gap = flowsOf(w[1]!);
      const mine0 = (k: number) => fabricWorker(clientFrame(k), 2) === 0;
      const gapDsr = [...Array(20).keys()].map((i) => 60 + i).filter(mine0).length;
      expect(gapDsr).toBeGreaterThan(3);
      const again = new HostWorkerCore(input(0, 2, fs), () => {});
      const now = flowsOf(again);
      // its own flows (from its journal: its start's snapshot was empty) and the gap's of its share
      expect(now.dsr.filter((x) => had.dsr.includes(x)).sort()).toEqual([...had.dsr].sort());
      expect(now.dsr.length).toBe(had.dsr.length + gapDsr);
      expect(now.dsr.every((x) => gap.dsr.includes(x) || had.dsr.includes(x))).toBe(true);
      expect(C(again, 'dsr_flows_replayed')).toBe(had.dsr.length + gapDsr);
      expect(now.snat.filter((x) => had.snat.includes(x)).sort()).toEqual([...had.snat].sort());
      expect(again.report().flowSnapshot).toMatchObject({ dsrReplayed: had.dsr.length + gapDsr, snatEndedNotHeld: 0 });
      // until the regroup the kernel still gives its share to worker 1: the catch-up (every worker out of
      // the groups) takes what worker 1 journaled of it since the restarted worker read the sets
      feed(w, 80, 100, 0, 0, () => 1);
      await turnEnd();
      const late = [...Array(20).keys()].map((i) => 80 + i).filter(mine0).length;
      expect(late).toBeGreaterThan(3);
      expect(flowsOf(again).dsr.length).toBe(had.dsr.length + gapDsr);
      again.catchUp();
      expect(flowsOf(again).dsr.length).toBe(had.dsr.length + gapDsr + late);
      expect(again.report().flowSnapshot).toMatchObject({ dsrCaughtUp: late });
      expect(C(again, 'dsr_flows_replayed')).toBe(had.dsr.length + gapDsr + late);
      again.catchUp(); // again: nothing new
      expect(again.report().flowSnapshot).toMatchObject({ dsrCaughtUp: late });
      // every reply of its flows leaves by DSR, none is unsolicited
      for (let k = 0; k < 100; k++) {
        if (!mine0(k)) continue;
        const r = replyFrame(k);
        again.handlePort(r, r.length, nicOf(again).index);
      }
      expect(C(again, 'drop_out_dsr_unsolicited')).toBe(0);
      expect(C(again, 'out_dsr')).toBe(had.dsr.length + gapDsr + late);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('outbound NAT flows on a chunk this host no longer holds end at the restore (ranges known), as a policy without it ends them', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'slbx-wflows-'));
    try {
      const fs = { dir, intervalMs: 1000, sets: null };
      const w0 = new HostWorkerCore(input(0, 1, fs), () => {});
      feed([w0], 0, 0, 0, 12);
      await turnEnd();
      expect(w0.snat.engine.live).toBe(12); // on the first chunk, 1024-1031, and the next
      // at the agent's start (no ranges known yet) they wait for the first ranges, as the one-thread agent's do
      const start = new HostWorkerCore({ ...input(0, 1, fs), snatRanges: [] }, () => {});
      expect(start.snat.engine.live).toBe(12);
      expect(start.report().flowSnapshot).toMatchObject({ snatRestored: 12, snatEndedNotHeld: 0 });
      // restarted after the chunk 1024 was given back: those flows end, counted, and its new snapshot lacks them
      const held = [{ ip: FIP, first: 1032, last: 1279, host: 'host1', nic: 'h1vm1' }];
      const again = new HostWorkerCore({ ...input(0, 1, fs), snatRanges: held }, () => {});
      const onFirst = 8;
      expect(again.snat.engine.live).toBe(12 - onFirst);
      expect(C(again, 'snat_flows_ended_by_policy')).toBe(onFirst);
      expect(again.report().flowSnapshot).toMatchObject({ snatRestored: 12, snatEndedNotHeld: onFirst });
      const third = new HostWorkerCore({ ...input(0, 1, fs), snatRanges: held }, () => {});
      expect(third.report().flowSnapshot).toMatchObject({ snatRestored: 12 - onFirst, snatEndedNotHeld: 0 });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** Reads the sets as the main thread does at the agent's start. */
const setsNow = (dir: string) => listFlowStateSets(dir, 'host1').map((x) => ({ set: x.set, bytes: readFlowStateSet(dir, x.set, noLog) }));

function checkSpread(cores: HostWorkerCore[], all: { dsr: string[]; snat: string[] }): void {
  const got = cores.map(flowsOf);
  const dsr = got.flatMap((g) => g.dsr);
  const snat = got.flatMap((g) => g.snat);
  expect(new Set(dsr).size).toBe(dsr.length); // none in two workers
  expect(new Set(snat).size).toBe(snat.length); // no outbound NAT flow in two engines
  expect([...dsr].sort()).toEqual([...all.dsr].sort());
  expect([...snat].sort()).toEqual([...all.snat].sort());
  // and each where steering sends its frames: client k by its port 40000 + k, outbound j by its server port 9000 + j
  const n = cores.length;
  for (const x of all.dsr) {
    const k = Number(/:(\d+)>/.exec(x)![1]) - 40000;
    const i = got.findIndex((g) => g.dsr.includes(x));
    expect(i, x).toBe(fabricWorker(clientFrame(k), n));
  }
  for (const x of all.snat) {
    const j = Number(/>[^@]*:(\d+)@/.exec(x)![1]) - 9000;
    const i = got.findIndex((g) => g.snat.includes(x));
    expect(i, x).toBe(portWorker(outboundFrame(j), n));
    expect(cores.filter((c) => flowsOf(c).snat.includes(x))).toHaveLength(1);
  }
  expect(cores.reduce((s, c) => s + c.snat.engine.live, 0)).toBe(all.snat.length);
}

describe('host agent worker flows: N changed', () => {
  it('2 -> 3 -> 2 workers and a one-thread set -> 2: every flow in exactly one worker, the one steering names', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'slbx-wflows-'));
    try {
      const fs = { dir, intervalMs: 1000, sets: null };
      const two = [new HostWorkerCore(input(0, 2, fs), () => {}), new HostWorkerCore(input(1, 2, fs), () => {})];
      feed(two, 0, 120, 0, 60);
      await turnEnd();
      const all = { dsr: two.flatMap((c) => flowsOf(c).dsr), snat: two.flatMap((c) => flowsOf(c).snat) };
      expect(all.dsr.length).toBe(120);
      for (const c of two) c.close(); // a graceful stop: each writes its snapshot
      // 3 workers: the main thread read every set before any worker started
      let sets = setsNow(dir);
      expect(sets.map((s) => s.set)).toEqual(['host1.w0', 'host1.w1']);
      const three = [0, 1, 2].map((i) => new HostWorkerCore(input(i, 3, { ...fs, sets }), () => {}));
      checkSpread(three, all);
      expect(three.every((c) => flowsOf(c).dsr.length > 10)).toBe(true);
      const sum = (f: (c: HostWorkerCore) => number) => three.reduce((s, c) => s + f(c), 0);
      expect(sum((c) => C(c, 'dsr_flows_restored') + C(c, 'dsr_flows_replayed'))).toBe(120);
      expect(sum((c) => c.report().flowSnapshot!.snatRestored)).toBe(60);
      for (const c of three) c.close();
      // back to 2: set w2's flows go to workers 0 and 1
      sets = setsNow(dir);
      expect(sets.map((s) => s.set)).toEqual(['host1.w0', 'host1.w1', 'host1.w2']);
      const back = [0, 1].map((i) => new HostWorkerCore(input(i, 2, { ...fs, sets }), () => {}));
      checkSpread(back, all);
      for (const c of back) c.close();
      // a one-thread agent's set (and nothing else) -> 2 workers
      rmSync(dir, { recursive: true, force: true });
      const one = new HostWorkerCore(input(0, 1, null), () => {});
      feed([one], 0, 120, 0, 60);
      new FlowSnapshotter({ dir, name: 'host1', intervalMs: 1000, log: noLog }).writeNow(one.snapshotSource());
      sets = setsNow(dir);
      expect(sets.map((s) => s.set)).toEqual(['host1']);
      const fromOne = [0, 1].map((i) => new HostWorkerCore(input(i, 2, { ...fs, sets }), () => {}));
      checkSpread(fromOne, flowsOf(one));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('host agent worker flows: back to one thread', () => {
  it("the one-thread agent takes every worker set's flows, then retires those sets", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'slbx-wflows-'));
    try {
      const fs = { dir, intervalMs: 1000, sets: null };
      const three = [0, 1, 2].map((i) => new HostWorkerCore(input(i, 3, fs), () => {}));
      feed(three, 0, 90, 0, 30);
      await turnEnd(); // journals only: no graceful stop
      const all = { dsr: three.flatMap((c) => flowsOf(c).dsr), snat: three.flatMap((c) => flowsOf(c).snat) };
      // the daemon as slbx-host-agent builds it without --workers, not started
      const d = new HostDaemon({
        config: cfg,
        name: 'host1',
        iface: 'hG-no-such-if',
        dsrVia4: null,
        dsrVia6: null,
        nftables: false,
        stateDir: dir,
        flowSnapshotMs: 1000,
      });
      const listed = (await d.flows(10_000)) as ReturnType<HostWorkerCore['flows']>;
      expect(
        listed
          .filter((f) => f.kind === 'dsr')
          .map((f) => `${f.client}>${f.vip}`)
          .sort(),
      ).toEqual([...all.dsr].sort());
      expect(
        listed
          .filter((f) => f.kind.startsWith('snat'))
          .map((f) => `${f.client}>${f.vip}@${f.frontend}`)
          .sort(),
      ).toEqual([...all.snat].sort());
      expect(d.ctx.counters.values[d.ctx.counters.index.dsr_flows_replayed]).toBe(90);
      expect(listFlowStateSets(dir, 'host1')).toEqual([{ set: 'host1', worker: null }]);
      d.stop();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('host agent worker flows: threads (root)', () => {
  const dist = `${ROOT}dist/host-agent/workers.js`;
  const ok = process.getuid?.() === 0 && existsSync(`${ROOT}native/build/Release/slbx_ring.node`) && existsSync(dist);
  if (!ok) {
    notRunHere(
      process.getuid?.() !== 0 ? 'needs root (ring sockets)' : 'the ring addon or dist is not built',
      'host agent worker flow threads',
    );
    return;
  }
  it('flows recorded by the threads: a worker killed through the hook comes back with them; a pool stopped and started with 2, 3 and 2 workers restores each once', async () => {
    const { HostWorkers } = (await import(dist)) as typeof import('../host-agent/workers.js');
    const dir = mkdtempSync(join(tmpdir(), 'slbx-wflows-'));
    const names = newHostContext(compileHostTables(cfg, 'host1', 1), 4789, []).counters.names.length;
    const index = newHostContext(compileHostTables(cfg, 'host1', 1), 4789, []).counters.index;
    // a stale one-thread set (damaged): read, refused, retired
    writeFileSync(join(dir, 'host-agent-host1.journal'), 'not a journal');
    const pool = (count: number) =>
      new HostWorkers(
        host1PoolOptions(count, cfg, names, {
          snat: () => ({ ranges: RANGES, withdrawn: [] }),
          // no periodic snapshot in this test: what is not in a start's or a stop's snapshot is in a journal
          flowState: { dir, intervalMs: 3_600_000 },
        }),
      );
    type Pool = InstanceType<typeof HostWorkers>;
    const until = async (what: string, f: () => boolean) => {
      for (let i = 0; i < 600 && !f(); i++) await new Promise((r) => setTimeout(r, 50));
      expect(f(), what).toBe(true);
    };
    const listed = async (w: Pool) => (await w.flows(10_000)).filter((f) => f.kind === 'dsr').map((f) => `${f.client}>${f.vip}`);
    const counter = (w: Pool, name: string, i: number) => new Float64Array(w.slots[i]!.counters)[index[name as 'out_dsr']]!;
    // client k's VXLAN frame handed to the thread of worker `to` (the worker message a redirect uses: handleFabric)
    const send = (w: Pool, k: number, to: number) => {
      const f = clientFrame(k);
      w.slots[to]!.worker!.postMessage({ t: 'redirect', frame: Uint8Array.prototype.slice.call(f) });
    };
    const reported = (w: Pool) => w.slots.reduce((a, s) => a + (s.report?.flows ?? 0), 0);
    // the threads log under the daemon's name, as its main thread (the dist's log module: the one the pool uses)
    const logMod = (await import(`${ROOT}dist/runtime/log.js`)) as typeof import('../runtime/log.js');
    logMod.configureLog('host1-flows-test', 'info');
    const lines: string[] = [];
    const write = process.stdout.write.bind(process.stdout);
    const spy = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array, ...rest: unknown[]) => {
      lines.push(String(chunk));
      return (write as (c: string | Uint8Array, ...r: unknown[]) => boolean)(chunk, ...rest);
    });
    let w = pool(2);
    w.start();
    try {
      await until('both workers ready and in the fabric group', () => w.slots.every((s) => s.ready && s.fabricOpen && s.report !== null));
      expect(existsSync(join(dir, 'host-agent-host1.journal'))).toBe(false); // the one-thread set: retired
      for (let k = 0; k < 100; k++) send(w, k, fabricWorker(clientFrame(k), 2));
      await until('the threads recorded 100 flows', () => reported(w) === 100);
      const all = (await listed(w)).sort();
      const share0 = w.slots[0]!.report!.flows;
      expect(all).toHaveLength(100);
      // worker 0 killed through the hook (no graceful stop); while it is down its share goes to worker 1
      w.exitForTest(0, 3);
      await until('worker 0 gone', () => w.slots[0]!.worker === null);
      const gap = [...Array(20).keys()].map((i) => 100 + i).filter((k) => fabricWorker(clientFrame(k), 2) === 0);
      for (const k of gap) send(w, k, 1);
      await until('worker 0 restarted, regrouped, reporting', () => w.slots[0]!.restarts === 1 && w.slots[0]!.ready && w.regroups === 1);
      await until('worker 0 reporting', () => w.slots[0]!.report?.flowSnapshot != null);
      const fsr = w.slots[0]!.report!.flowSnapshot!;
      // every thread's restore lines (the first start's and the restart's) carry the daemon's name
      const restoreLines = () =>
        lines
          .join('')
          .split('\n')
          .filter((l) => l.includes('"event":"host_worker_flows_restored"'))
          .map((l) => JSON.parse(l) as { daemon: string; worker: number; restart: boolean });
      await until('the restarted thread logged its restore', () => restoreLines().some((l) => l.worker === 0 && l.restart));
      expect(restoreLines().map((l) => l.daemon)).toEqual(restoreLines().map(() => 'host1-flows-test'));
      // its own flows from its journal (its start's snapshot was empty), the gap's from worker 1's
      expect(fsr.dsrRestored + fsr.dsrReplayed + fsr.dsrCaughtUp).toBe(share0 + gap.length);
      expect(counter(w, 'dsr_flows_replayed', 0) + counter(w, 'dsr_flows_restored', 0)).toBe(share0 + gap.length);
      await until('worker 0 reports its flows', () => w.slots[0]!.report!.flows === share0 + gap.length);
      const l0 = await listed(w);
      expect(l0.filter((x) => all.includes(x)).sort()).toEqual(all);
      const withGap = [...new Set(l0)].sort();
      expect(withGap).toHaveLength(100 + gap.length);
      await w.stop(); // graceful: each worker writes its snapshot as it stops
      // the same N, then 3, then 2: each flow restored once, from the stop's snapshots (nothing to replay)
      for (const [i, n] of [2, 3, 2].entries()) {
        w = pool(n);
        w.start();
        await until(`${n} workers ready`, () => w.slots.every((s) => s.ready && s.report?.flowSnapshot != null));
        const l = await listed(w);
        expect(new Set(l).size, `${n} workers`).toBe(l.length);
        expect(l.sort(), `${n} workers`).toEqual(withGap);
        expect(w.slots.map((s) => s.report!.flowSnapshot!.dsrReplayed)).toEqual(w.slots.map(() => 0));
        // each flow once in the tables; a gap flow was in two sets the first time (worker 1 kept its stale
        // copy until this start filtered it out of its set): applied twice then
        expect(w.slots.map((s) => s.report!.flowSnapshot!.dsrEntries).reduce((a, b) => a + b, 0)).toBe(withGap.length);
        expect(w.slots.map((s) => s.report!.flowSnapshot!.dsrRestored).reduce((a, b) => a + b, 0)).toBe(
          withGap.length + (i === 0 ? gap.length : 0),
        );
        await w.stop();
      }
      expect(existsSync(join(dir, 'host-agent-host1.w2.flows'))).toBe(false); // retired by the last pool of 2
    } finally {
      await w.stop();
      spy.mockRestore();
      logMod.configureLog('slbx', 'info');
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);
});
