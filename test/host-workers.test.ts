// The host agent's worker threads (--workers N, host-agent/worker.ts and host-agent/workers.ts):
//   - a Fastpath redirect (no steering key of its own: worker 0 gets it) is handed to the worker that holds
//     the flow it names: redirectOwner agrees with the steering key the kernel computes from the VM's frame
//     of that flow (host-agent/worker-steering.ts, steeringKey on the port side: the independent source);
//   - --workers N >= 2 is refused, naming the fix, with --io pcap, the udp receive path, and outbound rules;
//   - one generation per packet: a worker compiles a new generation and swaps it in whole; a VXLAN frame to
//     a nic only generation 2 has is dropped as no_nic by generation 1 and delivered by generation 2, and
//     the generation it acknowledges (shared status word) is the one its frames used;
//   - outbound NAT opens a new flow only toward a remote end the kernel steers to the worker (one of
//     another worker's share arrives only while that worker is down: drop_out_snat_other_worker);
//   - /status's eastWest sums the workers' flow tables from their reports (by kind, bounds, quotas);
//   - a restarted worker starts with an empty host flow table: a backend's reply of a flow it has not seen
//     is dropped as drop_out_dsr_unsolicited, and leaves by DSR once the client's next packet recorded it;
//   - (root) two real worker threads with ring sockets on lo: both join in index order, acknowledge a new
//     generation; one that exits is restarted while the other keeps running (same thread), the restart is
//     a regroup (both sockets again, in order), and the shared counters carry on.
import { describe, expect, it } from 'vitest';
import { existsSync, readFileSync } from 'node:fs';
import { parseConfig } from '../shared/config.js';
import { fileURLToPath } from 'node:url';
import { getHeapSpaceStatistics } from 'node:v8';
import { pkt } from '../shared/packet-builder.js';
import { TCP_ACK, TCP_SYN } from '../shared/tcp.js';
import { ip } from '../shared/addr.js';
import { newRedirect, writeRedirect, REDIRECT_LEN, REDIRECT_PORT } from '../shared/redirect.js';
import { steeringKey, steerWorker, STEER_PORT, NO_INTERNAL_VIPS } from '../host-agent/worker-steering.js';
import { redirectOwner, HostWorkerCore } from '../host-agent/worker.js';
import { hostWorkersRefusal } from '../host-agent/workers.js';
import { ewStatusOf, hostFlowBounds } from '../host-agent/east-west-io.js';
import { newHostContext } from '../host-agent/data-plane.js';
import { compileHostTables } from '../host-agent/tables.js';
import { STATUS_GENERATION, STATUS_SEQ, type HostWorkerInput, type HostWorkerToMain } from '../host-agent/worker-protocol.js';
import { labConfig } from './helpers/lab-config.js';
import { clientSegmentFromMux1, host1PoolOptions, host1WorkerInput } from './helpers/host-lab-frames.js';
import { notRunHere } from './helpers/prerequisite.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const full = labConfig();

function redirectFrame(family: 4 | 6, src: string, sport: number): Buffer {
  const r = newRedirect();
  r.family = family;
  r.protocol = 6;
  r.vni = 100;
  r.expiresS = 1;
  const put = (dst: Uint8Array, text: string) =>
    ip(text).words.forEach((w, i) => Buffer.from(dst.buffer, dst.byteOffset).writeUInt32BE(w >>> 0, i * 4));
  put(r.src, src);
  put(r.dst, family === 4 ? '198.19.0.101' : '2001:db8:19::101');
  r.srcPort = sport;
  r.dstPort = 80;
  const body = Buffer.alloc(8 + REDIRECT_LEN);
  writeRedirect(r, body, 8);
  return pkt()
    .eth({ src: '02:00:00:00:00:01', dst: '02:00:00:00:00:21' })
    .ipv4({ src: '198.18.0.11', dst: '198.18.0.21' })
    .udp({ sport: 40000, dport: REDIRECT_PORT })
    .payload(body.subarray(8))
    .build();
}

describe('host agent workers: the redirect goes to the flow worker', () => {
  it('redirectOwner = the worker the kernel steers the VM frames of the flow to', () => {
    let checked = 0;
    const seen = new Set<number>();
    for (const n of [2, 3]) {
      for (let k = 0; k < 40; k++) {
        const v6 = k % 2 === 1;
        const client = v6 ? `2001:db8:d::${10 + (k % 7)}` : `192.0.2.${10 + (k % 7)}`;
        const vip = v6 ? '2001:db8:19::101' : '198.19.0.101';
        const sport = 30000 + k * 7;
        // the client VM's request on its port: source client:port, destination the internal VIP
        const b = pkt().eth({ src: '02:00:c0:00:02:0a', dst: '02:00:00:00:00:99', type: v6 ? 0x86dd : 0x0800 });
        const f = (v6 ? b.ipv6({ src: client, dst: vip }) : b.ipv4({ src: client, dst: vip }))
          .tcp({ sport, dport: 80, flags: TCP_SYN })
          .build();
        const vips = { v4: [ip('198.19.0.101').words[0]!], v6: [[...ip('2001:db8:19::101').words]] };
        const want = steerWorker(steeringKey(f, 0, f.length, STEER_PORT, 4789, vips), n);
        expect(
          redirectOwner(redirectFrame(v6 ? 6 : 4, client, sport), redirectFrame(4, client, sport).length, n),
          `${client}:${sport} of ${n}`,
        ).toBe(want);
        seen.add(want);
        checked++;
      }
    }
    expect(checked).toBe(80);
    expect(seen.size).toBe(3); // the flows spread: the check is not always worker 0
    // not a redirect: -1 (handled where it arrived)
    const vxlan = pkt()
      .eth({})
      .ipv4({ src: '198.18.0.11', dst: '198.18.0.21' })
      .udp({ sport: 1, dport: 4789 })
      .payload(Buffer.alloc(60))
      .build();
    expect(redirectOwner(vxlan, vxlan.length, 2)).toBe(-1);
    void NO_INTERNAL_VIPS;
  });

  it('redirectOwner allocates nothing per frame (its redirect record is reused; no closure per call)', () => {
    // the young generation's bytes in use, before and after 500 calls (warmed up, so optimized): a
    // record of its own per call was about 1,300 bytes a call; a round a scavenge fell in reads less
    const f = redirectFrame(6, '2001:db8:d::10', 40000);
    let x = 0;
    for (let i = 0; i < 20000; i++) x += redirectOwner(f, f.length, 3);
    const used = () => getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')!.space_used_size;
    const perCall: number[] = [];
    for (let round = 0; round < 7; round++) {
      const before = used();
      for (let i = 0; i < 500; i++) x += redirectOwner(f, f.length, 3);
      perCall.push((used() - before) / 500);
    }
    perCall.sort((a, b) => a - b);
    expect(perCall[3], `bytes per call, by round: ${perCall.join(' ')}`).toBeLessThan(100);
    expect(x).toBeGreaterThan(0);
  });
});

describe('host agent workers: refusals', () => {
  it('names the fix', () => {
    expect(hostWorkersRefusal(1, 'pcap', 'udp', full)).toBeNull();
    expect(hostWorkersRefusal(2, 'ring', 'capture', full)).toBeNull();
    expect(hostWorkersRefusal(2, 'pcap', 'capture', full)).toMatch(/needs --io ring/);
    expect(hostWorkersRefusal(2, 'ring', 'udp', full)).toMatch(/needs --receive-path capture/);
    // outbound rules run with workers (docs/outbound.md, "Workers"): no refusal for them
    const r = parseConfig(readFileSync(`${ROOT}examples/lab-outbound.yaml`, 'utf8'), 'lab-outbound.yaml');
    if (!r.ok) throw new Error('examples/lab-outbound.yaml does not parse');
    expect(r.config.outbound.length).toBeGreaterThan(0);
    expect(hostWorkersRefusal(2, 'ring', 'capture', r.config)).toBeNull();
  });
});

function coreInput(config = full, generation = 1): HostWorkerInput {
  return host1WorkerInput(config, { generation });
}

describe('host agent workers: one generation per packet', () => {
  it('a frame to a nic only generation 2 has: dropped before the swap, judged by generation 2 after', () => {
    // generation 1 lacks h1vm2; generation 2 has it
    const without = labConfig((raw: { nics: { name: string }[]; pools: { backends: { nic: string }[] }[] }) => {
      raw.nics = raw.nics.filter((n) => n.name !== 'h1vm2');
      for (const p of raw.pools) p.backends = p.backends.filter((b) => b.nic !== 'h1vm2');
    });
    const core = new HostWorkerCore(coreInput(without, 1), () => {});
    const t2 = compileHostTables(full, 'host1', 2);
    const nic = t2.nics.find((n) => n.name === 'h1vm2')!;
    const C = core.ctx.counters.index;
    const cv = core.ctx.counters.values;
    const inner = pkt()
      .eth({ src: '02:00:00:00:00:01', dst: '02:00:00:00:00:02' })
      .ipv4({ src: '198.51.100.10', dst: '203.0.113.10' })
      .tcp({ sport: 40001, dport: 80, flags: TCP_SYN })
      .build();
    const frame = pkt()
      .eth({ src: '02:00:00:00:00:11', dst: '02:00:00:00:00:21' })
      .ipv4({ src: '198.18.0.11', dst: '198.18.0.21' })
      .udp({ sport: 50000, dport: 4789 })
      .vxlan({ vni: nic.network.vni })
      .payload(inner)
      .build();
    // the MUX addresses the inner frame to the nic's MAC
    Buffer.from(nic.mac).copy(frame, 14 + 20 + 8 + 8);
    const delivered0 = cv[C.in_delivered]!;
    core.handleFabric(frame, frame.length);
    expect(cv[C.in_delivered]).toBe(delivered0); // generation 1: no such nic
    expect(Atomics.load(core.status, STATUS_GENERATION)).toBe(1);
    core.applyConfig(full, 2, new Float64Array(0));
    expect(Atomics.load(core.status, STATUS_GENERATION)).toBe(2);
    expect(core.ctx.tables.generation).toBe(2);
    core.handleFabric(frame, frame.length);
    expect(cv[C.in_delivered]).toBe(delivered0 + 1); // generation 2 delivers it (no socket here: counted as an internal error after)
    expect(cv[C.drop_internal_error]).toBe(1);
  });
});

// outbound NAT in a worker: the lab with one rule for h1vm1, host1's first chunk, and h1vm1's SYN to a server port
const FIP = '203.0.113.200';
const snatCfg = labConfig((raw) => {
  raw.outbound = [{ name: 'out', frontendIps: [FIP, '2001:db8:ff::200'], nics: ['h1vm1'], portsPerNic: 64, preallocatedPorts: 16 }];
});
const snatRanges = [{ ip: FIP, first: 1024, last: 1039, host: 'host1', nic: 'h1vm1' }];
const backendSyn = (dport: number) =>
  pkt()
    .eth({ src: '02:00:c0:00:02:0a', dst: '02:00:00:01:00:01' })
    .ipv4({ src: '192.0.2.10', dst: '198.51.100.5' })
    .tcp({ sport: 40000, dport, flags: TCP_SYN })
    .build();

describe('host agent workers: outbound NAT in a worker', () => {
  it("opens a flow from the main thread's ranges, reports and lists it, keeps a withdrawn chunk it uses and leaves out one it does not", () => {
    const cfg = snatCfg;
    const ranges = snatRanges;
    const core = new HostWorkerCore({ ...coreInput(cfg), snatRanges: ranges, snatWithdrawn: [`${FIP}:1032`] }, () => {});
    expect(core.ctx.snat).toBe(core.snat.engine);
    expect(core.snat.engine.status()[0]).toMatchObject({ ports4: 8 }); // the withdrawn chunk left out from the start
    const nic = core.ctx.tables.nics.find((n) => n.name === 'h1vm1')!;
    const f = backendSyn(9000);
    core.handlePort(f, f.length, nic.index);
    const C = core.ctx.counters.index;
    expect(core.ctx.counters.values[C.out_snat]).toBe(1);
    expect(core.report().snat).toEqual({ flows: 1, nics: [['h1vm1', 1, 0, 0, 0]], used: [`${FIP}:1024`] });
    expect(core.flows(10).filter((x) => JSON.stringify(x).includes(FIP))).toHaveLength(1);
    // the chunk comes back; then both are withdrawn: the one with the flow stays (named), the other goes
    expect(core.applySnat(null, [])).toEqual([]);
    expect(core.snat.engine.status()[0]).toMatchObject({ ports4: 16 });
    expect(core.applySnat(null, [`${FIP}:1024`, `${FIP}:1032`])).toEqual([`${FIP}:1024`]);
    expect(core.snat.engine.status()[0]).toMatchObject({ ports4: 8, inUse4: 1 });
    expect(core.ctx.counters.values[C.snat_flows_ended_by_policy]).toBe(0);
  });
});

describe('host agent workers: outbound NAT opens only its own share', () => {
  it("a new flow toward another worker's remote end (met while that worker restarts) is refused, not given a port", () => {
    const cfg = snatCfg;
    const ranges = snatRanges;
    const core = new HostWorkerCore(host1WorkerInput(cfg, { index: 0, count: 2, snatRanges: ranges }), () => {});
    const nic = core.ctx.tables.nics.find((n) => n.name === 'h1vm1')!;
    const syn = backendSyn;
    // the worker the kernel steers each SYN to: the port side's key of the frame (checked against the
    // kernel's program in test/host-steering*.test.ts), not the engine's key of the remote end
    const workerOf = (f: Buffer) => steerWorker(steeringKey(f, 0, f.length, STEER_PORT, 4789, NO_INTERNAL_VIPS), 2);
    const ports = [...Array(64).keys()].map((i) => 9000 + i);
    const own = ports.filter((p) => workerOf(syn(p)) === 0).slice(0, 3);
    const other = ports.filter((p) => workerOf(syn(p)) === 1).slice(0, 3);
    expect([own.length, other.length]).toEqual([3, 3]);
    const C = core.ctx.counters.index;
    const cv = core.ctx.counters.values;
    for (const p of [...own, ...other]) {
      const f = syn(p);
      core.handlePort(f, f.length, nic.index);
    }
    expect(cv[C.out_snat]).toBe(3);
    expect(cv[C.drop_out_snat_other_worker]).toBe(3);
    expect(core.snat.engine.live).toBe(3);
    // one thread (count 1) opens every one
    const one = new HostWorkerCore(host1WorkerInput(cfg, { snatRanges: ranges }), () => {});
    for (const p of other) {
      const f = syn(p);
      one.handlePort(f, f.length, nic.index);
    }
    expect(one.ctx.counters.values[C.out_snat]).toBe(3);
  });
});

describe("host agent workers: /status eastWest over the workers' tables", () => {
  // two cores stand for two workers; each learns DSR flows from VXLAN frames of its own clients
  const learn = (core: HostWorkerCore, clients: string[]) => {
    const nic = core.ctx.tables.nics.find((n) => n.name === 'h1vm1')!;
    for (const src of clients) {
      const frame = clientSegmentFromMux1(src, 40002, TCP_SYN, nic.network.vni);
      core.handleFabric(frame, frame.length);
    }
  };
  it("sums every worker's entries by kind, bound and quotas (each table is counted by its own walk)", () => {
    const a = new HostWorkerCore(coreInput(full, 1), () => {});
    const b = new HostWorkerCore(coreInput(full, 1), () => {});
    learn(a, ['198.51.100.10', '198.51.100.11']);
    learn(b, ['198.51.100.12']);
    // the independent count: each worker's GET /flows list (only DSR entries were made)
    expect([a.flows(100).length, b.flows(100).length]).toEqual([2, 1]);
    const ta = a.report().flowTable;
    const tb = b.report().flowTable;
    expect(ta.flowKinds).toEqual({ dsr: 2 });
    const st = ewStatusOf([ta, tb], true) as {
      flows: Record<string, number>;
      maxFlows: number;
      quotas: Record<string, { max: number; used: number }>;
    };
    expect(st.flows).toMatchObject({ dsr: 3, dsr_closing: 0, to_mux: 0, fastpath: 0, snat_out: 0, snat_in: 0 });
    const bounds = hostFlowBounds(full);
    expect(st.maxFlows).toBe(2 * bounds.maxFlows);
    expect(st.quotas['dsr']).toEqual({ max: 2 * bounds.quotas.dsr, used: 3 });
    expect(st.quotas['eastWest']).toEqual({ max: 2 * bounds.quotas.eastWest, used: 0 });
  });
});

describe('host agent workers: a restarted worker and its flows', () => {
  it('starts with an empty table: the reply of a flow it did not see is dropped as unsolicited until the client speaks again', () => {
    // a new core is what a restarted worker is (host-agent/workers.ts spawns a thread with a fresh one)
    const core = new HostWorkerCore(coreInput(full, 1), () => {});
    const nic = core.ctx.tables.nics.find((n) => n.name === 'h1vm1')!;
    const portMac = new Uint8Array([2, 0, 0, 1, 0, 1]);
    core.ctx.portMacs[nic.index] = portMac;
    const C = core.ctx.counters.index;
    const cv = core.ctx.counters.values;
    const reply = pkt()
      .eth({ src: '02:00:c0:00:02:0a', dst: '02:00:00:01:00:01' })
      .ipv4({ src: '192.0.2.10', dst: '198.51.100.10' })
      .tcp({ sport: 80, dport: 40002, flags: TCP_ACK, seq: 1000, ack: 2000 })
      .build();
    core.handlePort(reply, reply.length, nic.index);
    expect(cv[C.drop_out_dsr_unsolicited]).toBe(1);
    expect(cv[C.out_dsr]).toBe(0);
    // the client's next packet, through a MUX: recorded again
    const frame = clientSegmentFromMux1('198.51.100.10', 40002, TCP_ACK, nic.network.vni);
    core.handleFabric(frame, frame.length);
    expect(cv[C.dsr_flows_learned]).toBe(1);
    core.handlePort(reply, reply.length, nic.index);
    expect(cv[C.drop_out_dsr_unsolicited]).toBe(1);
    expect(cv[C.out_dsr]).toBe(1); // leaves by DSR (no raw socket in this test: counted as unavailable)
    expect(cv[C.send_error_dsr_unavailable]).toBe(1);
  });
});

describe('host agent workers: threads (root)', () => {
  const dist = `${ROOT}dist/host-agent/workers.js`;
  const ok = process.getuid?.() === 0 && existsSync(`${ROOT}native/build/Release/slbx_ring.node`) && existsSync(dist);
  if (!ok) {
    notRunHere(process.getuid?.() !== 0 ? 'needs root (ring sockets)' : 'the ring addon or dist is not built', 'host agent worker threads');
    return;
  }
  it('join in order, acknowledge a generation; a worker that exits is restarted by a regroup, the other keeps running', async () => {
    const { HostWorkers } = (await import(dist)) as typeof import('../host-agent/workers.js');
    const names = newHostContext(compileHostTables(full, 'host1', 1), 4789, []).counters.names.length;
    let generation = 1;
    const w = new HostWorkers(
      host1PoolOptions(2, full, names, {
        current: () => ({ config: full, generation, peerMacs: new Float64Array(0), holdUnresolved: false }),
      }),
    );
    const until = async (what: string, f: () => boolean) => {
      for (let i = 0; i < 600 && !f(); i++) await new Promise((r) => setTimeout(r, 50));
      expect(f(), what).toBe(true);
    };
    const applied: string[] = [];
    w.onApplied = (i, g) => applied.push(`${i}:${g}`);
    w.start();
    try {
      await until('both workers ready and in the fabric group', () => w.slots.every((s) => s.ready && s.fabricOpen));
      // the lab's host1 ports do not exist here: each worker says so, by interface
      expect(w.slots[0]!.joinErrors.join(';')).toMatch(/h1vm1: no such interface/);
      expect(w.generations()).toEqual([1, 1]);
      generation = 2;
      w.postConfig(full, 2, new Float64Array(0), undefined, []);
      await until('both acknowledged generation 2', () => applied.includes('0:2') && applied.includes('1:2'));
      expect(w.generations()).toEqual([2, 2]);
      expect(await w.flows(10)).toEqual([]);
      // /status's eastWest: both workers' tables (the main thread's holds none), from their reports
      await until('both workers reported', () => w.slots.every((s) => s.report != null));
      expect(w.eastWest(false)).toMatchObject({ maxFlows: 2 * hostFlowBounds(full).maxFlows, flows: { dsr: 0 } });
      await w.syncCountersAsync();
      expect(w.slots.map((s) => Atomics.load(s.status, STATUS_SEQ))).toEqual([2, 2]);
      // outbound NAT: a withdrawal is answered by each thread (no flow on the chunk: none kept); no rule, no report
      expect(await w.withdraw(['203.0.113.200:1024'])).toEqual([[], []]);
      expect(w.snatUsage()).toMatchObject({ flows: 0, used: new Set() });
      const other = w.slots[1]!.worker;
      const counters0 = w.slots[0]!.counters;
      new Float64Array(counters0)[0] = 7;
      w.exitForTest(0, 3);
      await until('worker 0 restarted, regrouped', () => w.slots[0]!.restarts === 1 && w.slots[0]!.ready && w.regroups === 1);
      await until('both in the fabric group again', () => w.slots.every((s) => s.fabricOpen));
      expect(w.slots[0]!.lastExit).toContain('exit code 3');
      expect(w.slots[1]!.restarts).toBe(0);
      expect(w.slots[1]!.worker).toBe(other);
      expect(w.generations()).toEqual([2, 2]);
      expect(new Float64Array(w.slots[0]!.counters)[0]).toBe(7);
    } finally {
      await w.stop();
    }
  }, 60_000);
});
