// Outbound NAT's allocation loop between a host agent and a real controller (issue 15, points 2 and 8):
// the host agent's control side (host-agent/snat-control.ts) over its data plane asks for more ports when
// a nic's ports run low, the controller grants chunks in a new generation, the host installs the policy's
// ranges and the connection refused before goes through; an idle on-demand chunk is given back. Then
// `slbctl snat` shows what the host's heartbeat reports. Expected counts come from the traffic the test
// sends and the config's numbers, not from the code under test.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mac } from '../shared/addr.js';
import type { SlbxConfig } from '../shared/config.js';
import { pkt } from '../shared/packet-builder.js';
import { TCP_SYN } from '../shared/tcp.js';
import { runSlbctl } from '../cli/slbctl.js';
import { compileHostTables, type HostTables } from '../host-agent/tables.js';
import { newHostContext, processOutbound, type HostContext } from '../host-agent/data-plane.js';
import { SNAT_RELEASE_IDLE_S, SnatControl } from '../host-agent/snat-control.js';
import type { PolicySnatRange } from '../host-agent/snat.js';
import { labConfig } from './helpers/lab-config.js';
import { startTestController, type TestController } from './helpers/controller.js';

const FIP = '203.0.113.200';
const PORT_MACS = ['02:00:00:01:00:01', '02:00:00:01:00:02'];

function config(): SlbxConfig {
  return labConfig((raw) => {
    raw.outbound = [{ name: 'out', frontendIps: [FIP, '2001:db8:ff::200'], nics: ['h1vm1'], portsPerNic: 64, preallocatedPorts: 16 }];
  });
}

let ctl: TestController;
let cfg: SlbxConfig;
let tables: HostTables;
let ctx: HostContext;
let control: SnatControl;
let sport = 40000;

async function policyRanges(): Promise<PolicySnatRange[]> {
  const r = await ctl.req('GET', '/v1/snat');
  return (r.body as { ranges: PolicySnatRange[] }).ranges;
}

/** h1vm1 opens one connection (a SYN to a new remote port); the drop reason or null. */
function connect(): string | null {
  const f = pkt()
    .eth({ src: '02:00:c0:00:02:0a', dst: PORT_MACS[0] })
    .ipv4({ src: '192.0.2.10', dst: '198.51.100.5' })
    .tcp({ sport: sport++, dport: 9000, flags: TCP_SYN })
    .build();
  processOutbound(f, f.length, 0, ctx);
  return ctx.lastDrop >= 0 ? ctx.counters.names[ctx.lastDrop]! : null;
}

beforeAll(async () => {
  cfg = config();
  ctl = await startTestController({ init: cfg });
  tables = compileHostTables(cfg, 'host1', 1);
  ctx = newHostContext(
    tables,
    cfg.fabric.vxlanPort,
    PORT_MACS.map((m) => mac(m)),
  );
  control = new SnatControl('host1', ctx.ew.flows, cfg.flowTable.snatMaxFlows);
  control.install(cfg, tables, tables, await policyRanges(), 0);
  ctx.snat = control.engine;
  ctx.ew.nowS = 10;
});
afterAll(async () => {
  await ctl.cleanup();
});

describe('outbound NAT: demand, grant, release with a controller', () => {
  it('no demand below 75 % in use; at 12 of 16 one demand of 8 ports, none again while it is in flight', () => {
    for (let i = 0; i < 11; i++) expect(connect()).toBeNull();
    expect(control.planDemands(tables, cfg, 1_000)).toEqual([]);
    expect(connect()).toBeNull(); // 12 of 16
    expect(control.planDemands(tables, cfg, 2_000)).toEqual([{ nic: 'h1vm1', family: 4, ports: 8 }]);
    expect(control.planDemands(tables, cfg, 10_000)).toEqual([]);
  });

  it('the controller grants it in a new generation; installed, the ports are usable and the time is recorded', async () => {
    for (let i = 0; i < 4; i++) expect(connect()).toBeNull(); // 16 of 16
    expect(connect()).toBe('drop_out_snat_exhausted');
    const gen0 = ((await ctl.req('GET', '/v1/snat')).body as { generation: number }).generation;
    const r = await ctl.req('POST', '/v1/agents/host/host1/snat-demand', { nic: 'h1vm1', family: 4, ports: 8 });
    expect(r.status).toBe(200);
    const granted = (r.body as { granted: unknown[] }).granted.length * 8;
    expect(granted).toBe(8);
    control.demandAnswered({ nic: 'h1vm1', family: 4, ports: 8 }, granted, null);
    const after = (await ctl.req('GET', '/v1/snat')).body as { generation: number };
    expect(after.generation).toBe(gen0 + 1);
    control.install(cfg, tables, tables, await policyRanges(), 2_350);
    for (let i = 0; i < 8; i++) expect(connect()).toBeNull(); // the 8 new ports
    expect(connect()).toBe('drop_out_snat_exhausted');
    const st = control.status(tables) as { nics: unknown[]; demands: { usableAfterMs: number | null }[] };
    expect(st.nics).toEqual([expect.objectContaining({ nic: 'h1vm1', ports4: 24, inUse4: 24, exhausted4: 2 })]);
    expect(st.demands[0]!.usableAfterMs).toBe(350);
  });

  it('an exhaustion drop asks again at once (below the threshold too), up to the cap', () => {
    // 24 of 24 in use and a drop: the next demand asks a quarter of 24 rounded to chunks (8)
    expect(control.planDemands(tables, cfg, 20_000)).toEqual([{ nic: 'h1vm1', family: 4, ports: 8 }]);
    control.demandAnswered({ nic: 'h1vm1', family: 4, ports: 8 }, 0, 'exhausted'); // say the controller had none
    expect(control.status(tables)['requests']).toMatchObject({ demands: 2, granted: 1, refused: 1 });
  });

  it('an idle on-demand chunk is given back after SNAT_RELEASE_IDLE_S; the preallocated ones stay', async () => {
    // every flow ends (the engine's sweep after their SYN timeout): nothing in use
    ctx.ew.nowS = 10_000;
    control.engine.sweep(ctx.ew.nowS, 100_000);
    expect(control.engine.live).toBe(0);
    const t0 = 100_000;
    expect(control.planRelease(tables, cfg, t0)).toBeNull(); // first look: idle from now
    const rel = control.planRelease(tables, cfg, t0 + SNAT_RELEASE_IDLE_S * 1000);
    expect(rel).not.toBeNull();
    const pre = (await policyRanges()).filter((r) => r.nic === 'h1vm1');
    // the on-demand chunk is the highest one; the preallocated 16 ports (two chunks) are not offered
    const highest = Math.max(...pre.map((r) => r.last)) - 7;
    expect(rel!.chunks).toEqual([{ ip: FIP, first: highest }]);
    // it leaves the engine at once (the daemon reinstalls the ranges in force, as here)
    control.install(cfg, tables, tables, undefined, t0);
    expect(control.status(tables)['nics']).toEqual([expect.objectContaining({ ports4: 16 })]);
    const r = await ctl.req('POST', '/v1/agents/host/host1/snat-release', rel);
    expect(r.body).toMatchObject({ released: 1, kept: [] });
    control.releaseAnswered(rel!, [], t0);
    control.install(cfg, tables, tables, await policyRanges(), t0);
    const nic = ((await ctl.req('GET', '/v1/snat')).body as { nics: { nic: string; ports4: number }[] }).nics.find(
      (n) => n.nic === 'h1vm1',
    );
    expect(nic!.ports4).toBe(16);
    expect(control.status(tables)['nics']).toEqual([expect.objectContaining({ ports4: 16 })]);
  });

  it('slbctl snat shows the host agent side from its heartbeat: ports in use and exhaustion drops per nic', async () => {
    for (let i = 0; i < 16; i++) expect(connect()).toBeNull();
    expect(connect()).toBe('drop_out_snat_exhausted');
    const hb = await ctl.req('POST', '/v1/agents/host/host1/status', { status: { name: 'host1', snat: control.status(tables) } });
    expect(hb.status).toBe(200);
    let out = '';
    const code = await runSlbctl(['snat'], { out: (t) => (out += t), err: () => {}, env: { SLBX_CONTROLLER: ctl.url } });
    expect(code).toBe(0);
    const row = out.split('\n').find((l) => /^host1\s+h1vm1\s+\d+\s+\d+\s+\d+\s+\d+\s+\d+\s+\d/.test(l)); // the heartbeat's table
    expect(row?.split(/\s+/).slice(0, 5)).toEqual(['host1', 'h1vm1', '16', '16', '3']);
    let json = '';
    await runSlbctl(['--json', 'snat'], { out: (t) => (json += t), err: () => {}, env: { SLBX_CONTROLLER: ctl.url } });
    const j = JSON.parse(json) as { hosts: { host: string; snat: { nics: { inUse4: number; exhausted4: number }[] } }[] };
    expect(j.hosts.find((h) => h.host === 'host1')!.snat.nics[0]).toMatchObject({ inUse4: 16, exhausted4: 3 });
  });
});

describe('outbound NAT: demand sizing after a burst of refused connections', () => {
  it('asks a port for each connection refused since the last look, in whole chunks, up to the cap', async () => {
    const t = compileHostTables(cfg, 'host1', 1);
    const x = newHostContext(
      t,
      cfg.fabric.vxlanPort,
      PORT_MACS.map((m) => mac(m)),
    );
    const k = new SnatControl('host1', x.ew.flows, cfg.flowTable.snatMaxFlows);
    k.install(cfg, t, t, await policyRanges(), 0);
    x.snat = k.engine;
    x.ew.nowS = 10;
    const syn = (p: number) => {
      const f = pkt()
        .eth({ src: '02:00:c0:00:02:0a', dst: PORT_MACS[0] })
        .ipv4({ src: '192.0.2.10', dst: '198.51.100.6' })
        .tcp({ sport: p, dport: 9000, flags: TCP_SYN })
        .build();
      processOutbound(f, f.length, 0, x);
      return x.lastDrop >= 0 ? x.counters.names[x.lastDrop]! : null;
    };
    const held = (k.status(t)['nics'] as { ports4: number }[])[0]!.ports4;
    for (let i = 0; i < held; i++) expect(syn(50000 + i)).toBeNull();
    for (let i = 0; i < 20; i++) expect(syn(51000 + i)).toBe('drop_out_snat_exhausted');
    // 20 refused: 24 ports (three chunks), more than a quarter of what it holds; the cap is 64
    expect(k.planDemands(t, cfg, 1_000)).toEqual([{ nic: 'h1vm1', family: 4, ports: 24 }]);
  });
});
