// The host agent's one flow table (issue 16, "one per-flow table in the host agent, not three"): the
// return path (dsr), east-west and outbound NAT (snat_out/snat_in) share ctx.ew.flows, each bounded by its
// quota from the config (flowTable.hostMaxFlows, maxFastpathFlows, snatMaxFlows; the return path the rest).
// - a policy that rebuilds the table (a MUX added, a new bound) carries outbound NAT's flows: the same
//   packets are translated after it to the same frames (built here with the packet builder; the frontend
//   ports come from the controller's allocator), and their replies come back;
// - fill one feature's quota: the others still insert, and the full one is counted under its own name.
// Expected counts come from the quotas this test writes into the config, not from the code under test.
import { describe, expect, it } from 'vitest';
import { mac } from '../shared/addr.js';
import type { SlbxConfig } from '../shared/config.js';
import { pkt, type PacketBuilder } from '../shared/packet-builder.js';
import { LINKTYPE_RAW } from '../shared/pcap-file.js';
import { TCP_ACK, TCP_PSH, TCP_SYN } from '../shared/tcp.js';
import { SnatAllocator } from '../controller/snat-alloc.js';
import { compileHostTables } from '../host-agent/tables.js';
import { newHostContext, processInbound, processOutbound, OUT_DSR, VERDICT_FORWARD, type HostContext } from '../host-agent/data-plane.js';
import { newEwState } from '../host-agent/east-west.js';
import { carryEwState, ewStatus, hostFlowBounds, listHostFlows } from '../host-agent/east-west-io.js';
import { FLOW_FASTPATH, FLOW_TO_MUX, HostFlowTable } from '../host-agent/flow-table.js';
import { SnatControl } from '../host-agent/snat-control.js';
import type { PolicySnatRange } from '../host-agent/snat.js';
import { writeHostFlows } from '../host-agent/metrics.js';
import { PromWriter } from '../shared/prom-text.js';
import { labConfig } from './helpers/lab-config.js';
import { expectFrame } from './helpers/frames.js';

const MUX_MAC = '02:00:00:00:00:11';
const HOST1_MAC = '02:00:00:00:00:21';
const PORT_MACS = ['02:00:00:01:00:01', '02:00:00:01:00:02', '02:00:00:01:00:03'];
const FIP = '203.0.113.200';
const REMOTE = '198.51.100.5';
const CLIENT = '198.51.100.10';
const VIP = '203.0.113.10';
const H1VM1 = { mac: '02:00:c0:00:02:0a', ip: '192.0.2.10' };

function lab(o: { flowTable?: Record<string, number>; mux3?: boolean } = {}): SlbxConfig {
  return labConfig((raw) => {
    raw.outbound = [{ name: 'out', frontendIps: [FIP, '2001:db8:ff::200'], nics: ['h1vm1'], portsPerNic: 64, preallocatedPorts: 64 }];
    if (o.flowTable !== undefined) raw.flowTable = { ...(raw.flowTable ?? {}), ...o.flowTable };
    if (o.mux3) raw.muxes.push({ name: 'mux3', address: '198.18.0.13', address6: '2001:db8:f::13' });
  });
}

interface Rig {
  ctx: HostContext;
  control: SnatControl;
  config: SlbxConfig;
  ranges: PolicySnatRange[];
}

/** host1's data plane as the daemon builds it: the host flow table from the config, the engine on it. */
function rig(config: SlbxConfig): Rig {
  const ranges = new SnatAllocator(config).ranges();
  const tables = compileHostTables(config, 'host1', 1);
  const ctx = newHostContext(
    tables,
    config.fabric.vxlanPort,
    PORT_MACS.map((m) => mac(m)),
  );
  const b = hostFlowBounds(config);
  ctx.ew = newEwState(b.maxFlows, b.quotas);
  ctx.ew.nowS = 100;
  const control = new SnatControl('host1', ctx.ew.flows, config.flowTable.snatMaxFlows);
  control.install(config, tables, tables, ranges, 0);
  ctx.snat = control.engine;
  return { ctx, control, config, ranges };
}

/** A policy change as the daemon applies it: new tables, the east-west state carried (or rebuilt), the engine reinstalled. */
function applyPolicy(r: Rig, next: SlbxConfig): void {
  const tables = compileHostTables(next, 'host1', 2);
  const s = carryEwState(r.ctx.ew, r.ctx.tables, tables, next, new Uint8Array(6), r.control.engine);
  r.control.install(next, tables, r.ctx.tables, r.ranges, 0);
  r.ctx.tables = tables;
  r.ctx.ew = s;
  r.config = next;
}

function firstPort(ranges: readonly PolicySnatRange[]): number {
  return ranges.filter((x) => x.nic === 'h1vm1' && x.ip === FIP).sort((a, b) => a.first - b.first)[0]!.first;
}

function fromVm(l4: (p: PacketBuilder) => PacketBuilder, dst = REMOTE): Buffer {
  return l4(pkt().eth({ src: H1VM1.mac, dst: PORT_MACS[0] }).ipv4({ src: H1VM1.ip, dst, id: 7 })).build();
}

function fromMux(inner: (p: PacketBuilder) => PacketBuilder): Buffer {
  const p = pkt()
    .eth({ src: MUX_MAC, dst: HOST1_MAC })
    .ipv4({ src: '198.18.0.11', dst: '198.18.0.21' })
    .udp({ sport: 51000, dport: 4789, checksum: 'zero' })
    .vxlan({ vni: 5001 });
  return inner(p).build();
}

function send(ctx: HostContext, frame: Buffer, inbound: boolean) {
  const v = inbound ? processInbound(frame, frame.length, ctx) : processOutbound(frame, frame.length, 0, ctx);
  return {
    port: ctx.outPort,
    out: Buffer.from(ctx.outBuf.subarray(ctx.outOff, ctx.outOff + (v === VERDICT_FORWARD ? ctx.outLen : 0))),
    drop: ctx.lastDrop >= 0 ? ctx.counters.names[ctx.lastDrop] : null,
  };
}

/** A client's TCP segment to the VIP, as mux1 encapsulates it to h1vm1 (records the flow's return path). */
function clientToVip(ctx: HostContext, cport: number) {
  return send(
    ctx,
    fromMux((p) =>
      p.eth({ src: MUX_MAC, dst: H1VM1.mac }).ipv4({ src: CLIENT, dst: VIP }).tcp({ sport: cport, dport: 80, flags: TCP_SYN }),
    ),
    true,
  );
}

/** A backend's TCP SYN (a connection of its own) from sport to REMOTE:9000. */
function synOut(ctx: HostContext, sport: number) {
  return send(
    ctx,
    fromVm((p) => p.tcp({ sport, dport: 9000, flags: TCP_SYN, seq: 1000 })),
    false,
  );
}

describe('one host flow table: outbound NAT survives a rebuild', () => {
  for (const [why, next] of [
    ['a MUX added (new east-west indexes)', () => lab({ mux3: true })],
    ['a new bound (flowTable.hostMaxFlows)', () => lab({ flowTable: { hostMaxFlows: 900_000 } })],
  ] as const) {
    it(`${why}: a fresh table, and the same packets are translated after it`, () => {
      const r = rig(lab());
      const fport = firstPort(r.ranges);
      const ctx = r.ctx;
      // a TCP flow (SYN out, SYN-ACK back) and a UDP flow, both from h1vm1, and one load-balanced flow
      expect(synOut(ctx, 40000).port).toBe(OUT_DSR);
      const synAck = (dport: number) =>
        fromMux((p) =>
          p
            .eth({ src: MUX_MAC, dst: '02:00:00:00:00:99' })
            .ipv4({ src: REMOTE, dst: FIP, id: 9 })
            .tcp({ sport: 9000, dport, flags: TCP_SYN | TCP_ACK, seq: 5, ack: 1001 }),
        );
      expect(send(ctx, synAck(fport), true).port).toBe(0);
      const udp = () => fromVm((p) => p.udp({ sport: 5353, dport: 53 }).payload('q'));
      const u0 = send(ctx, udp(), false);
      expect(u0.port).toBe(OUT_DSR);
      const udpPort = u0.out.readUInt16BE(20);
      expect(clientToVip(ctx, 41000).port).toBe(0);
      const before = ctx.ew.flows;
      expect(before.countByKind(ctx.ew.nowS)).toEqual({ dsr: 1, snat_out: 2, snat_in: 2 }); // one table, every feature

      applyPolicy(r, next());
      expect(ctx.ew.flows).not.toBe(before); // rebuilt
      expect(r.control.engine.table).toBe(ctx.ew.flows); // the engine's entries moved with it
      expect(ctx.ew.flows.countByKind(ctx.ew.nowS)).toEqual({ dsr: 1, snat_out: 2, snat_in: 2 });
      expect(ctx.ew.notCarried).toBe(0);
      before.clear(); // the old table is gone: nothing may still be found there

      // the TCP flow's next segment leaves from the same frontend port, byte for byte
      const seg = { sport: 40000, dport: 9000, flags: TCP_ACK | TCP_PSH, seq: 1001, ack: 6 };
      const d = send(
        ctx,
        fromVm((p) => p.tcp(seg).payload('x')),
        false,
      );
      expect(d.drop).toBeNull();
      expectFrame(
        d.out,
        pkt()
          .ipv4({ src: FIP, dst: REMOTE, id: 7 })
          .tcp({ ...seg, sport: fport })
          .payload('x')
          .build(),
        LINKTYPE_RAW,
      );
      // its reply still comes back to the DIP
      const back = send(ctx, synAck(fport), true);
      expect(back.drop).toBeNull();
      expectFrame(
        back.out,
        pkt()
          .eth({ src: PORT_MACS[0], dst: H1VM1.mac })
          .ipv4({ src: REMOTE, dst: H1VM1.ip, id: 9 })
          .tcp({ sport: 9000, dport: 40000, flags: TCP_SYN | TCP_ACK, seq: 5, ack: 1001 })
          .build(),
      );
      // the UDP flow keeps its port
      const u1 = send(ctx, udp(), false);
      expectFrame(
        u1.out,
        pkt().ipv4({ src: FIP, dst: REMOTE, id: 7 }).udp({ sport: udpPort, dport: 53 }).payload('q').build(),
        LINKTYPE_RAW,
      );
      expect(ctx.counters.get('drop_out_snat_no_flow')).toBe(0);
      expect(r.control.engine.live).toBe(2);
    });
  }

  it('a smaller SNAT quota than the flows: the ones that fit stay, the others end and are counted', () => {
    const r = rig(lab());
    for (let i = 0; i < 3; i++) expect(synOut(r.ctx, 40000 + i).port).toBe(OUT_DSR);
    applyPolicy(r, lab({ flowTable: { snatMaxFlows: 2 } }));
    expect(r.ctx.ew.notCarried).toBe(1);
    expect(r.control.engine.live).toBe(2);
    expect(r.ctx.ew.flows.quotaUse().snat).toEqual({ max: 4, used: 4 });
    // a mid-stream segment of each: two still leave, one has no flow any more
    const drops = [40000, 40001, 40002].map(
      (sport) =>
        send(
          r.ctx,
          fromVm((p) => p.tcp({ sport, dport: 9000, flags: TCP_ACK, seq: 1001 })),
          false,
        ).drop,
    );
    expect(drops.filter((d) => d === null)).toHaveLength(2);
    expect(drops.filter((d) => d === 'drop_out_snat_no_flow')).toHaveLength(1);
  });
});

describe('one host flow table: quotas per feature', () => {
  // 4 NAT flows (8 entries), 3 east-west entries, the return path the rest: 16 - 8 - 3 = 5
  const quotas = { hostMaxFlows: 16, snatMaxFlows: 4, maxFastpathFlows: 3 };

  it('outbound NAT at its quota: the return path and east-west still insert; drop_out_snat_table_full', () => {
    const r = rig(lab({ flowTable: quotas }));
    const ctx = r.ctx;
    for (let i = 0; i < 4; i++) expect(synOut(ctx, 40000 + i).port).toBe(OUT_DSR);
    expect(synOut(ctx, 40004).drop).toBe('drop_out_snat_table_full');
    // the return path: 5 flows recorded (delivered, and each reply allowed out), the 6th delivered but not recorded
    for (let i = 0; i < 6; i++) expect(clientToVip(ctx, 41000 + i).port).toBe(0);
    expect(ctx.counters.get('dsr_flows_learned')).toBe(5);
    expect(ctx.counters.get('dsr_flows_full')).toBe(1);
    // east-west: 3 entries
    const t = ctx.ew.flows;
    for (let i = 0; i < 4; i++) {
      t.setKey4(5001, 0xc000020a, 0xcb00710a + i, 6, 42000, 80);
      expect(t.insert(FLOW_TO_MUX, 0, ctx.ew.nowS + 60)).toBe(i < 3);
    }
    expect(ewStatus(ctx.ew)).toMatchObject({
      maxFlows: 16,
      quotas: { eastWest: { max: 3, used: 3 }, dsr: { max: 5, used: 5 }, snat: { max: 8, used: 8 } },
      flows: { to_mux: 3, dsr: 5, snat_out: 4, snat_in: 4, fastpath: 0 },
    });
    // GET /metrics, from the same /status part
    const w = new PromWriter();
    writeHostFlows(w, ewStatus(ctx.ew) as unknown as Parameters<typeof writeHostFlows>[1]);
    const text = w.text();
    for (const [feature, max] of [
      ['eastWest', 3],
      ['dsr', 5],
      ['snat', 8],
    ] as const) {
      expect(text).toMatch(new RegExp(`^slbx_host_flows_quota\\{feature="${feature}"\\} ${max}$`, 'm'));
      expect(text).toMatch(new RegExp(`^slbx_host_flows_quota_used\\{feature="${feature}"\\} ${max}$`, 'm'));
    }
    expect(text).toMatch(/^slbx_host_flows_max 16$/m);
    expect(text).toMatch(/^slbx_host_flows\{kind="snat_in"\} 4$/m);
  });

  it('the return path at its quota: outbound NAT still opens every flow it may', () => {
    const r = rig(lab({ flowTable: quotas }));
    const ctx = r.ctx;
    for (let i = 0; i < 7; i++) clientToVip(ctx, 41000 + i);
    expect(ctx.counters.get('dsr_flows_learned')).toBe(5);
    expect(ctx.counters.get('dsr_flows_full')).toBe(2);
    for (let i = 0; i < 4; i++) expect(synOut(ctx, 40000 + i).port).toBe(OUT_DSR);
    expect(ctx.counters.get('drop_out_snat_table_full')).toBe(0);
  });

  it('east-west at its quota (a flood of new east-west flows): the return path and outbound NAT still insert', () => {
    const r = rig(lab({ flowTable: quotas }));
    const ctx = r.ctx;
    const t = ctx.ew.flows;
    let accepted = 0;
    for (let i = 0; i < 1000; i++) {
      t.setKey4(5001, 0xc000020a, 0xcb007100 + (i & 0xff), 17, 1024 + i, 53);
      if (t.insert(i % 2 === 0 ? FLOW_TO_MUX : FLOW_FASTPATH, 0, ctx.ew.nowS + 60)) accepted++;
    }
    expect(accepted).toBe(3);
    expect(t.fullFor('eastWest')).toBe(true);
    expect(t.fullFor('dsr')).toBe(false);
    for (let i = 0; i < 5; i++) expect(clientToVip(ctx, 41000 + i).port).toBe(0);
    expect(ctx.counters.get('dsr_flows_learned')).toBe(5);
    for (let i = 0; i < 4; i++) expect(synOut(ctx, 40000 + i).port).toBe(OUT_DSR);
    expect(ctx.counters.get('dsr_flows_full') + ctx.counters.get('drop_out_snat_table_full')).toBe(0);
  });

  it('an entry removed frees its quota; a kind changed within its feature keeps its count', () => {
    const t = new HostFlowTable(10, { eastWest: 1, dsr: 1, snat: 8 });
    t.setKey4(1, 1, 2, 6, 3, 4);
    expect(t.insert(FLOW_TO_MUX, 0, 50)).toBe(true);
    expect(t.insert(FLOW_FASTPATH, 2, 50)).toBe(true); // the same key redirected: still one east-west entry
    t.setKey4(1, 1, 2, 6, 3, 5);
    expect(t.insert(FLOW_TO_MUX, 0, 50)).toBe(false);
    t.setKey4(1, 1, 2, 6, 3, 4);
    expect(t.remove()).toBe(true);
    t.setKey4(1, 1, 2, 6, 3, 5);
    expect(t.insert(FLOW_TO_MUX, 0, 50)).toBe(true);
    expect(t.sweep(60, 4096)).toBe(1); // expired: swept, and its quota is free again
    expect(t.quotaUse().eastWest).toEqual({ max: 1, used: 0 });
  });

  it('GET /flows lists an outbound NAT flow once, with its frontend', () => {
    const r = rig(lab());
    synOut(r.ctx, 40000);
    const listed = listHostFlows(r.ctx.ew, r.ctx.tables, 10, r.control.engine);
    expect(listed).toEqual([
      expect.objectContaining({
        kind: 'snat_out',
        client: `${H1VM1.ip}:40000`,
        vip: `${REMOTE}:9000`,
        backend: 'h1vm1',
        frontend: `${FIP}:${firstPort(r.ranges)}`,
      }),
    ]);
  });
});

describe('one host flow table: config', () => {
  it('defaults: 1,000,000 entries, outbound NAT 250,000 flows (500,000 entries), east-west 100,000, the return path the other 400,000', () => {
    const c = lab();
    expect([c.flowTable.hostMaxFlows, c.flowTable.snatMaxFlows, c.flowTable.maxFastpathFlows]).toEqual([1_000_000, 250_000, 100_000]);
    expect(hostFlowBounds(c)).toEqual({ maxFlows: 1_000_000, quotas: { eastWest: 100_000, dsr: 400_000, snat: 500_000 } });
  });

  it('a hostMaxFlows that leaves the return path nothing is refused, naming the field and the fix', () => {
    expect(() => lab({ flowTable: { hostMaxFlows: 1000, snatMaxFlows: 400, maxFastpathFlows: 200 } })).toThrow(
      /flowTable\.hostMaxFlows: .*leaves the return path \(DSR\) no entry.*raise hostMaxFlows above 1000, or lower snatMaxFlows or maxFastpathFlows/,
    );
    expect(() => lab({ flowTable: { snatMaxFlows: 0 } })).toThrow(/flowTable\.snatMaxFlows: .*must be an integer 1\.\.50000000/);
  });

  it('a config from before hostMaxFlows (a large maxFastpathFlows) stays valid: the default grows to leave the return path 100,000', () => {
    const c = lab({ flowTable: { maxFastpathFlows: 2_000_000 } });
    expect(c.flowTable.hostMaxFlows).toBe(2 * 250_000 + 2_000_000 + 100_000);
    expect(hostFlowBounds(c).quotas.dsr).toBe(100_000);
  });
});
