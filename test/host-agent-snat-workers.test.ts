// Outbound NAT with host agent workers (docs/outbound.md, "Workers"): the main thread plans demands and
// releases from several workers' reports (host-agent/snat-workers.ts, host-agent/snat-control.ts `usage`),
// and a release withdraws its chunks from every worker before it is sent. The workers' engines here are
// real (flows opened through the data plane); the expected numbers come from the config and the flows the
// test opens.
import { describe, expect, it } from 'vitest';
import { mac } from '../shared/addr.js';
import type { SlbxConfig } from '../shared/config.js';
import { pkt } from '../shared/packet-builder.js';
import { TCP_SYN } from '../shared/tcp.js';
import { compileHostTables, type HostTables } from '../host-agent/tables.js';
import { newHostContext, processOutbound, type HostContext } from '../host-agent/data-plane.js';
import { SNAT_RELEASE_IDLE_S, SnatControl } from '../host-agent/snat-control.js';
import type { PolicySnatRange } from '../host-agent/snat.js';
import { carrySnatExhausted, mergeSnatReports, settleWithdrawal, type SnatWorkerReport } from '../host-agent/snat-workers.js';
import { labConfig } from './helpers/lab-config.js';

const FIP = '203.0.113.200';
const PORT_MACS = ['02:00:00:01:00:01', '02:00:00:01:00:02'];
/** Chunks of 8 from 1024: 1024 and 1032 preallocated (16 ports), 1040 on demand. */
const RANGES: PolicySnatRange[] = [{ ip: FIP, first: 1024, last: 1047, host: 'host1', nic: 'h1vm1' }];

function config(): SlbxConfig {
  return labConfig((raw) => {
    raw.outbound = [{ name: 'out', frontendIps: [FIP, '2001:db8:ff::200'], nics: ['h1vm1'], portsPerNic: 64, preallocatedPorts: 16 }];
  });
}

/** A worker: its own flow table and engine, installed with the same ranges as every other. */
interface W {
  ctx: HostContext;
  control: SnatControl;
  sport: number;
}

function worker(cfg: SlbxConfig, tables: HostTables, withdrawn: string[] = []): W {
  const ctx = newHostContext(
    tables,
    cfg.fabric.vxlanPort,
    PORT_MACS.map((m) => mac(m)),
  );
  const control = new SnatControl('host1', ctx.ew.flows, cfg.flowTable.snatMaxFlows);
  control.setWithdrawn(withdrawn, tables);
  control.install(cfg, tables, tables, RANGES, 0);
  ctx.snat = control.engine;
  ctx.ew.nowS = 10;
  return { ctx, control, sport: 40000 };
}

/** h1vm1 opens a connection to `remote`:9000 in worker `w`: the frontend port it got, or the drop reason. */
function connect(w: W, remote = '198.51.100.5'): number | string {
  const f = pkt()
    .eth({ src: '02:00:c0:00:02:0a', dst: PORT_MACS[0] })
    .ipv4({ src: '192.0.2.10', dst: remote })
    .tcp({ sport: w.sport++, dport: 9000, flags: TCP_SYN })
    .build();
  const ctx = w.ctx;
  processOutbound(f, f.length, 0, ctx);
  if (ctx.lastDrop >= 0) return ctx.counters.names[ctx.lastDrop]!;
  return (ctx.outBuf[ctx.outOff + 20]! << 8) | ctx.outBuf[ctx.outOff + 21]!; // the SNAT'd source port
}

/** What a worker's report carries (HostWorkerCore.snatReport). */
function report(w: W, tables: HostTables): SnatWorkerReport {
  return {
    flows: w.control.engine.live,
    nics: w.control.engine
      .status()
      .map((s) => [tables.nics[s.nic]!.name, s.inUse4, s.inUse6, s.exhausted4, s.exhausted6] as [string, number, number, number, number]),
    used: [...w.control.usedChunks(tables)],
  };
}

/** The main thread's control: the policies, no flows, planning from the workers' reports. */
function main(cfg: SlbxConfig, tables: HostTables): SnatControl {
  const ctx = newHostContext(tables, cfg.fabric.vxlanPort, []);
  const c = new SnatControl('host1', ctx.ew.flows, cfg.flowTable.snatMaxFlows);
  c.install(cfg, tables, tables, RANGES, 0);
  c.usage = mergeSnatReports([], new Map());
  return c;
}

describe('outbound NAT workers: what the main thread makes of their reports', () => {
  it('sums flows, ports in use and exhaustion drops (with the drops of earlier lives), unites the chunks in use; skips the missing', () => {
    const a: SnatWorkerReport = { flows: 3, nics: [['h1vm1', 3, 0, 2, 0]], used: ['203.0.113.200:1024'] };
    const b: SnatWorkerReport = { flows: 4, nics: [['h1vm1', 4, 1, 1, 0]], used: ['203.0.113.200:1024', '203.0.113.200:1032'] };
    const u = mergeSnatReports([a, null, b], new Map([['h1vm1/4', 5]]));
    expect(u.flows).toBe(7);
    expect(u.inUse.get('h1vm1/4')).toBe(7);
    expect(u.inUse.get('h1vm1/6')).toBe(1);
    expect(u.exhausted.get('h1vm1/4')).toBe(8);
    expect([...u.used].sort()).toEqual(['203.0.113.200:1024', '203.0.113.200:1032']);
    // a worker that exits: its drops are carried, so the total never goes back when it restarts from 0
    const carried = new Map<string, number>([['h1vm1/4', 5]]);
    carrySnatExhausted(carried, b);
    expect(mergeSnatReports([a, { flows: 0, nics: [['h1vm1', 0, 0, 0, 0]], used: [] }], carried).exhausted.get('h1vm1/4')).toBe(8);
    // bad numbers are not counted
    expect(mergeSnatReports([{ flows: NaN, nics: [['h1vm1', -1, Infinity, NaN, 0]], used: [] }], new Map()).inUse.size).toBe(0);
  });

  it('the demand threshold takes the SUM over the workers: two workers at 6 of 16 each ask (12 >= 75 %), 5 + 6 do not', () => {
    const cfg = config();
    const tables = compileHostTables(cfg, 'host1', 1);
    const w0 = worker(cfg, tables);
    const w1 = worker(cfg, tables);
    // every worker holds all of the nic's ports: 24 with the on-demand chunk; use the preallocated 16's view
    const ranges16: PolicySnatRange[] = [{ ...RANGES[0]!, last: 1039 }];
    for (const w of [w0, w1]) w.control.install(cfg, tables, tables, ranges16, 0);
    const m = main(cfg, tables);
    m.install(cfg, tables, tables, ranges16, 0);
    for (let i = 0; i < 5; i++) expect(connect(w0, `198.51.100.${10 + i}`)).toBeTypeOf('number');
    for (let i = 0; i < 6; i++) expect(connect(w1, `198.51.100.${20 + i}`)).toBeTypeOf('number');
    m.usage = mergeSnatReports([report(w0, tables), report(w1, tables)], new Map());
    expect(m.planDemands(tables, cfg, 1_000)).toEqual([]); // 11 of 16
    expect(connect(w0, '198.51.100.15')).toBeTypeOf('number'); // 6 + 6: each worker alone is at 37.5 %
    m.usage = mergeSnatReports([report(w0, tables), report(w1, tables)], new Map());
    expect(m.planDemands(tables, cfg, 2_000)).toEqual([{ nic: 'h1vm1', family: 4, ports: 8 }]);
    // /status's snat: the workers' flows and ports in use, summed
    expect(m.status(tables)).toMatchObject({ flows: 12, nics: [{ nic: 'h1vm1', ports4: 16, inUse4: 12 }] });
  });

  it('an exhaustion drop in one worker asks (below the threshold too); a restarted worker does not ask again', () => {
    const cfg = config();
    const tables = compileHostTables(cfg, 'host1', 1);
    const w0 = worker(cfg, tables);
    const w1 = worker(cfg, tables);
    // 24 flows toward one remote endpoint fill every port toward it in w0: the 25th is refused
    for (let i = 0; i < 24; i++) expect(connect(w0)).toBeTypeOf('number');
    expect(connect(w0)).toBe('drop_out_snat_exhausted');
    const m = main(cfg, tables);
    const carried = new Map<string, number>();
    m.usage = mergeSnatReports([report(w1, tables)], carried);
    expect(m.planDemands(tables, cfg, 1_000)).toEqual([]); // w1's report alone: nothing
    // w0's drop, and the use it alone makes: 24 of 24
    m.usage = mergeSnatReports([report(w0, tables), report(w1, tables)], carried);
    const d = m.planDemands(tables, cfg, 2_000);
    expect(d).toEqual([{ nic: 'h1vm1', family: 4, ports: 8 }]);
    m.demandAnswered(d[0]!, 0, 'exhausted');
    // w0 exits (its drops carried) and restarts empty: no new drop, no new demand
    carrySnatExhausted(carried, report(w0, tables));
    const fresh = worker(cfg, tables);
    m.usage = mergeSnatReports([report(fresh, tables), report(w1, tables)], carried);
    expect(m.planDemands(tables, cfg, 5_000)).toEqual([]);
    // drops below the threshold (2 of 24 in use): 10 refused in each worker ask a port for each of the 20, in chunks
    const m2 = main(cfg, tables);
    const r: SnatWorkerReport = { flows: 1, nics: [['h1vm1', 1, 0, 10, 0]], used: [] };
    m2.usage = mergeSnatReports([r, r], new Map());
    expect(m2.planDemands(tables, cfg, 1_000)).toEqual([{ nic: 'h1vm1', family: 4, ports: 24 }]);
  });

  it('a chunk is given back only when idle in EVERY worker: one worker with a flow on it keeps it', () => {
    const cfg = config();
    const tables = compileHostTables(cfg, 'host1', 1);
    const w0 = worker(cfg, tables);
    const w1 = worker(cfg, tables);
    // w1 takes every port toward one remote: its flows hold all three chunks, the on-demand one too
    for (let i = 0; i < 24; i++) expect(connect(w1)).toBeTypeOf('number');
    expect(report(w1, tables).used).toContain(`${FIP}:1040`);
    // w0 has flows on the two low chunks, w1 on the on-demand one: no chunk is idle in every worker
    const m = main(cfg, tables);
    const t0 = 100_000;
    const r0: SnatWorkerReport = { flows: 2, nics: [['h1vm1', 2, 0, 0, 0]], used: [`${FIP}:1024`, `${FIP}:1032`] };
    m.usage = mergeSnatReports([r0, { ...report(w1, tables), nics: [['h1vm1', 1, 0, 0, 0]], used: [`${FIP}:1040`] }], new Map());
    expect(m.planRelease(tables, cfg, t0)).toBeNull(); // first look
    expect(m.planRelease(tables, cfg, t0 + SNAT_RELEASE_IDLE_S * 1000)).toBeNull(); // w1 still uses 1040
    // w1's flow ends: 1040 is idle in every worker, but only from now
    m.usage = mergeSnatReports([r0, { flows: 0, nics: [['h1vm1', 0, 0, 0, 0]], used: [] }], new Map());
    const t1 = t0 + SNAT_RELEASE_IDLE_S * 1000 + 1000;
    expect(m.planRelease(tables, cfg, t1)).toBeNull();
    const rel = m.planRelease(tables, cfg, t1 + SNAT_RELEASE_IDLE_S * 1000);
    expect(rel).toEqual({ chunks: [{ ip: FIP, first: 1040 }] });
    expect(m.withdrawn).toEqual([`${FIP}:1040`]);
  });
});

describe('outbound NAT workers: a release withdraws its chunks from every worker first', () => {
  it('a worker with no flow on a withdrawn chunk leaves it out: no flow opens on it', () => {
    const cfg = config();
    const tables = compileHostTables(cfg, 'host1', 1);
    const w = worker(cfg, tables);
    expect(w.control.setWithdrawn([`${FIP}:1040`], tables)).toEqual([]);
    w.control.install(cfg, tables, tables, undefined, 0);
    expect(w.control.engine.status()[0]!.ports4).toBe(16);
    const ports: number[] = [];
    for (let i = 0; i < 16; i++) ports.push(connect(w) as number);
    expect(Math.max(...ports)).toBeLessThan(1040);
    expect(connect(w)).toBe('drop_out_snat_exhausted'); // not a port of the withdrawn chunk
  });

  it('a worker with a flow on a withdrawn chunk keeps the chunk (and the flow) and names it; the main thread keeps it for all', () => {
    const cfg = config();
    const tables = compileHostTables(cfg, 'host1', 1);
    const w0 = worker(cfg, tables);
    const w1 = worker(cfg, tables);
    for (let i = 0; i < 17; i++) expect(connect(w1)).toBeTypeOf('number'); // the 17th port is 1040
    expect(w1.control.usedChunks(tables).has(`${FIP}:1040`)).toBe(true);
    const keys = [`${FIP}:1032`, `${FIP}:1040`];
    const a0 = w0.control.setWithdrawn(keys, tables);
    const a1 = w1.control.setWithdrawn(keys, tables);
    expect(a0).toEqual([]);
    expect(a1).toEqual(keys); // it has flows on both
    for (const w of [w0, w1]) expect(w.control.install(cfg, tables, tables, undefined, 0)).toBe(0); // no flow ended
    expect(w0.control.engine.status()[0]!.ports4).toBe(8);
    expect(w1.control.engine.status()[0]!.ports4).toBe(24);
    expect(w1.control.engine.live).toBe(17);
    // the main thread: what a worker still uses stays; what none uses goes; a running worker that did not answer keeps all
    expect([...settleWithdrawal([`${FIP}:1040`], [a0, [`${FIP}:1040`]])]).toEqual([`${FIP}:1040`]);
    expect([...settleWithdrawal([`${FIP}:1040`], [a0, []])]).toEqual([]);
    expect([...settleWithdrawal([`${FIP}:1040`], [a0, 'exited'])]).toEqual([]);
    expect([...settleWithdrawal([`${FIP}:1032`, `${FIP}:1040`], [a0, 'timeout'])].sort()).toEqual(keys);
    // releaseWithdrawn: the busy chunk comes back (not offered again soon), the rest is sent
    const m = main(cfg, tables);
    const t0 = 1_000_000;
    m.usage = mergeSnatReports([], new Map());
    expect(m.planRelease(tables, cfg, t0)).toBeNull();
    const rel = m.planRelease(tables, cfg, t0 + SNAT_RELEASE_IDLE_S * 1000)!;
    expect(rel.chunks).toEqual([{ ip: FIP, first: 1040 }]);
    expect(m.releaseWithdrawn(rel, new Set([`${FIP}:1040`]), t0 + SNAT_RELEASE_IDLE_S * 1000)).toBeNull();
    expect(m.withdrawn).toEqual([]);
    expect(m.status(tables)['requests']).toMatchObject({ busyKept: 1 });
    // idle from the answer on: not offered again (the next idle chunk below it may be, the nic's floor counts ports)
    expect(m.planRelease(tables, cfg, t0 + SNAT_RELEASE_IDLE_S * 1000 + 1000)?.chunks ?? []).not.toContainEqual({ ip: FIP, first: 1040 });
  });
});
