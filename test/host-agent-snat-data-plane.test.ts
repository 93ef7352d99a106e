// Outbound NAT through the whole host data plane (issue 15, point 3-6): a backend's frame on its port in
// -> the IP packet out toward the router (OUT_DSR); VXLAN from a MUX in -> the frame out on the backend's
// port. The engine is installed the way the daemon installs it (host-agent/snat-control.ts, from the
// config and the controller's allocation). Expected packets are built from scratch with the packet
// builder (full checksums), never by the code under test; the expected frontend ports come from the
// controller's allocator (the policy's ranges).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { mac } from '../shared/addr.js';
import { formatConfigErrors, validateConfig, type SlbxConfig } from '../shared/config.js';
import { pkt, type PacketBuilder } from '../shared/packet-builder.js';
import { LINKTYPE_RAW } from '../shared/pcap-file.js';
import { TCP_ACK, TCP_PSH, TCP_SYN } from '../shared/tcp.js';
import { SnatAllocator } from '../controller/snat-alloc.js';
import { compileHostTables, type HostTables } from '../host-agent/tables.js';
import {
  newHostContext,
  processInbound,
  processOutbound,
  OUT_DSR,
  VERDICT_DROP,
  VERDICT_FORWARD,
  type HostContext,
} from '../host-agent/data-plane.js';
import { SnatControl } from '../host-agent/snat-control.js';
import type { PolicySnatRange } from '../host-agent/snat.js';
import { labConfig } from './helpers/lab-config.js';
import { expectFrame } from './helpers/frames.js';
import { Rng, mutate } from './helpers/random.js';

const MUX_MAC = '02:00:00:00:00:11';
const HOST1_MAC = '02:00:00:00:00:21';
const PORT_MACS = ['02:00:00:01:00:01', '02:00:00:01:00:02', '02:00:00:01:00:03'];
const FIP = '203.0.113.200';
const FIP6 = '2001:db8:ff::200';
const REMOTE = '198.51.100.5';
const REMOTE6 = '2001:db8:c::5';
const H1VM1 = { mac: '02:00:c0:00:02:0a', ip: '192.0.2.10', ip6: '2001:db8:d::10' };
const H1VM2 = { mac: '02:00:c0:00:02:0b', ip: '192.0.2.11' };

function outboundLab(o: { portsPerNic?: number; nics?: string[] } = {}): SlbxConfig {
  return labConfig((raw) => {
    raw.outbound = [
      {
        name: 'out',
        frontendIps: [FIP, FIP6],
        nics: o.nics ?? ['h1vm1'],
        portsPerNic: o.portsPerNic ?? 64,
        preallocatedPorts: Math.min(64, o.portsPerNic ?? 64),
      },
    ];
  });
}

function twoTenants(): SlbxConfig {
  const raw = parseYaml(readFileSync(new URL('../examples/two-tenants.yaml', import.meta.url), 'utf8'));
  raw.outbound = [{ name: 's2s', frontendIps: [FIP], nics: ['a-h1vm1', 'a-h2vm1', 'b-h1vm1', 'b-h2vm1'], portsPerNic: 64 }];
  const r = validateConfig(raw, 'two-tenants');
  if (!r.ok) throw new Error(formatConfigErrors(r.errors, 'two-tenants'));
  return r.config;
}

interface Rig {
  ctx: HostContext;
  control: SnatControl;
  config: SlbxConfig;
  ranges: PolicySnatRange[];
  tables: HostTables;
}

/** host1's data plane with outbound NAT installed as the daemon does it. */
function rig(config: SlbxConfig, ranges?: PolicySnatRange[]): Rig {
  const r = ranges ?? new SnatAllocator(config).ranges();
  const tables = compileHostTables(config, 'host1', 1);
  const ctx = newHostContext(
    tables,
    config.fabric.vxlanPort,
    PORT_MACS.map((m) => mac(m)),
  );
  const control = new SnatControl('host1', ctx.ew.flows, config.flowTable.snatMaxFlows); // the one host flow table, as the daemon does
  control.install(config, tables, tables, r, 0);
  ctx.snat = control.engine;
  ctx.ew.nowS = 100;
  return { ctx, control, config, ranges: r, tables };
}

/** The first port of `nic`'s range on `ip`, from the controller's allocation (the policy). */
function firstPort(ranges: readonly PolicySnatRange[], nic: string, ipText: string): number {
  const r = ranges.filter((x) => x.nic === nic && x.ip === ipText).sort((a, b) => a.first - b.first)[0];
  if (r === undefined) throw new Error(`no range of ${nic} on ${ipText}`);
  return r.first;
}

function fromVm(vm: { mac: string; ip: string; ip6?: string }, l4: (p: PacketBuilder) => PacketBuilder, v6 = false): Buffer {
  const p = pkt().eth({ src: vm.mac, dst: PORT_MACS[0], ...(v6 ? { type: 0x86dd } : {}) });
  return l4(v6 ? p.ipv6({ src: vm.ip6!, dst: REMOTE6 }) : p.ipv4({ src: vm.ip, dst: REMOTE, id: 7 })).build();
}

function out(ctx: HostContext, frame: Buffer, port = 0) {
  const v = processOutbound(frame, frame.length, port, ctx);
  return {
    v,
    port: ctx.outPort,
    out: Buffer.from(ctx.outBuf.subarray(ctx.outOff, ctx.outOff + (v === VERDICT_FORWARD ? ctx.outLen : 0))),
    drop: ctx.lastDrop >= 0 ? ctx.counters.names[ctx.lastDrop] : null,
  };
}

/** A reply from the remote to frontend:port, VXLAN-encapsulated by mux1 with `vni`, inner frame unchanged. */
function fromMux(
  inner: (p: PacketBuilder) => PacketBuilder,
  o: { vni?: number; v6?: boolean; src?: string; innerDst?: string } = {},
): Buffer {
  const p = pkt()
    .eth({ src: MUX_MAC, dst: HOST1_MAC })
    .ipv4({ src: o.src ?? '198.18.0.11', dst: '198.18.0.21' })
    .udp({ sport: 51000, dport: 4789, checksum: 'zero' })
    .vxlan({ vni: o.vni ?? 5001 })
    .eth({ src: MUX_MAC, dst: o.innerDst ?? '02:00:00:00:00:99', ...(o.v6 ? { type: 0x86dd } : {}) });
  return inner(p).build();
}

function back(ctx: HostContext, frame: Buffer) {
  const v = processInbound(frame, frame.length, ctx);
  return {
    v,
    port: ctx.outPort,
    out: Buffer.from(ctx.outBuf.subarray(ctx.outOff, ctx.outOff + (v === VERDICT_FORWARD ? ctx.outLen : 0))),
    drop: ctx.lastDrop >= 0 ? ctx.counters.names[ctx.lastDrop] : null,
  };
}

describe('outbound NAT through the host data plane', () => {
  it('IPv4 TCP: the SYN leaves from the frontend IP toward the router, the SYN-ACK comes back to the DIP on its port', () => {
    const { ctx, ranges } = rig(outboundLab());
    const fport = firstPort(ranges, 'h1vm1', FIP);
    const tcp = { sport: 40000, dport: 9000, flags: TCP_SYN, seq: 1000 };
    const r = out(
      ctx,
      fromVm(H1VM1, (p) => p.tcp(tcp).payload('hi')),
    );
    expect(r.drop).toBeNull();
    expect(r.port).toBe(OUT_DSR);
    expectFrame(
      r.out,
      pkt()
        .ipv4({ src: FIP, dst: REMOTE, id: 7 })
        .tcp({ ...tcp, sport: fport })
        .payload('hi')
        .build(),
      LINKTYPE_RAW,
    );
    const reply = { sport: 9000, dport: fport, flags: TCP_SYN | TCP_ACK, seq: 5, ack: 1001 };
    const b = back(
      ctx,
      fromMux((p) => p.ipv4({ src: REMOTE, dst: FIP, id: 9 }).tcp(reply)),
    );
    expect(b.drop).toBeNull();
    expect(b.port).toBe(0); // h1vm1's port
    expectFrame(
      b.out,
      pkt()
        .eth({ src: PORT_MACS[0], dst: H1VM1.mac })
        .ipv4({ src: REMOTE, dst: H1VM1.ip, id: 9 })
        .tcp({ ...reply, dport: 40000 })
        .build(),
    );
    // the next segment of the flow goes out on the same port
    const d = out(
      ctx,
      fromVm(H1VM1, (p) => p.tcp({ sport: 40000, dport: 9000, flags: TCP_ACK | TCP_PSH, seq: 1001, ack: 6 }).payload('x')),
    );
    expectFrame(
      d.out,
      pkt()
        .ipv4({ src: FIP, dst: REMOTE, id: 7 })
        .tcp({ sport: fport, dport: 9000, flags: TCP_ACK | TCP_PSH, seq: 1001, ack: 6 })
        .payload('x')
        .build(),
      LINKTYPE_RAW,
    );
    expect(ctx.counters.get('out_snat')).toBe(2);
    expect(ctx.counters.get('in_snat')).toBe(1);
    expect(ctx.counters.get('out_dsr')).toBe(0); // the load-balanced replies' counter is not these
  });

  it('IPv4 UDP out and back', () => {
    const { ctx, ranges } = rig(outboundLab());
    const fport = firstPort(ranges, 'h1vm1', FIP);
    const r = out(
      ctx,
      fromVm(H1VM1, (p) => p.udp({ sport: 5353, dport: 53 }).payload('query')),
    );
    expectFrame(
      r.out,
      pkt().ipv4({ src: FIP, dst: REMOTE, id: 7 }).udp({ sport: fport, dport: 53 }).payload('query').build(),
      LINKTYPE_RAW,
    );
    const b = back(
      ctx,
      fromMux((p) => p.ipv4({ src: REMOTE, dst: FIP, id: 3 }).udp({ sport: 53, dport: fport }).payload('answer')),
    );
    expectFrame(
      b.out,
      pkt()
        .eth({ src: PORT_MACS[0], dst: H1VM1.mac })
        .ipv4({ src: REMOTE, dst: H1VM1.ip, id: 3 })
        .udp({ sport: 53, dport: 5353 })
        .payload('answer')
        .build(),
    );
  });

  it('IPv6 TCP out from the IPv6 frontend and back', () => {
    const { ctx, ranges } = rig(outboundLab());
    const fport = firstPort(ranges, 'h1vm1', FIP6);
    const tcp = { sport: 40001, dport: 443, flags: TCP_SYN, seq: 77 };
    const r = out(
      ctx,
      fromVm(H1VM1, (p) => p.tcp(tcp), true),
    );
    expect(r.drop).toBeNull();
    expectFrame(
      r.out,
      pkt()
        .ipv6({ src: FIP6, dst: REMOTE6 })
        .tcp({ ...tcp, sport: fport })
        .build(),
      LINKTYPE_RAW,
    );
    const reply = { sport: 443, dport: fport, flags: TCP_SYN | TCP_ACK, seq: 1, ack: 78 };
    const b = back(
      ctx,
      fromMux((p) => p.ipv6({ src: REMOTE6, dst: FIP6 }).tcp(reply), { v6: true }),
    );
    expect(b.drop).toBeNull();
    expectFrame(
      b.out,
      pkt()
        .eth({ src: PORT_MACS[0], dst: H1VM1.mac, type: 0x86dd })
        .ipv6({ src: REMOTE6, dst: H1VM1.ip6 })
        .tcp({ ...reply, dport: 40001 })
        .build(),
    );
  });

  it('exhaustion: the connection beyond the ports is dropped and counted, the live ones go on', () => {
    const { ctx, ranges } = rig(outboundLab({ portsPerNic: 16 }));
    const base = firstPort(ranges, 'h1vm1', FIP);
    for (let i = 0; i < 16; i++)
      expect(
        out(
          ctx,
          fromVm(H1VM1, (p) => p.tcp({ sport: 41000 + i, dport: 80, flags: TCP_SYN })),
        ).drop,
      ).toBeNull();
    const r = out(
      ctx,
      fromVm(H1VM1, (p) => p.tcp({ sport: 41016, dport: 80, flags: TCP_SYN })),
    );
    expect(r.v).toBe(VERDICT_DROP);
    expect(r.drop).toBe('drop_out_snat_exhausted');
    expect(ctx.counters.get('drop_out_snat_exhausted')).toBe(1);
    // an existing flow still translates, both ways
    const d = out(
      ctx,
      fromVm(H1VM1, (p) => p.tcp({ sport: 41003, dport: 80, flags: TCP_ACK, seq: 2, ack: 3 })),
    );
    expect(d.drop).toBeNull();
    const ports = new Set<number>();
    for (let i = 0; i < 16; i++) ports.add(base + i);
    const sport = d.out.readUInt16BE(20);
    expect(ports.has(sport)).toBe(true);
    expect(
      back(
        ctx,
        fromMux((p) => p.ipv4({ src: REMOTE, dst: FIP }).tcp({ sport: 80, dport: sport, flags: TCP_ACK })),
      ).port,
    ).toBe(0);
  });

  it('a reply with the VXLAN VNI of another network is dropped (drop_in_snat_wrong_vni), the flow stays', () => {
    const cfg = twoTenants();
    const { ctx, ranges } = rig(cfg);
    const fa = firstPort(ranges, 'a-h1vm1', FIP);
    const vmA = { mac: '02:00:c0:00:02:0a', ip: '192.0.2.10' };
    const r = out(
      ctx,
      fromVm(vmA, (p) => p.tcp({ sport: 40000, dport: 9000, flags: TCP_SYN })),
    );
    expect(r.drop).toBeNull();
    const reply = (vni: number) =>
      fromMux((p) => p.ipv4({ src: REMOTE, dst: FIP }).tcp({ sport: 9000, dport: fa, flags: TCP_SYN | TCP_ACK }), { vni });
    const w = back(ctx, reply(5002));
    expect(w.drop).toBe('drop_in_snat_wrong_vni');
    expect(ctx.counters.get('drop_in_snat_wrong_vni')).toBe(1);
    const ok = back(ctx, reply(5001));
    expect(ok.drop).toBeNull();
    expect(ok.out.subarray(0, 6)).toEqual(Buffer.from(mac(vmA.mac)));
  });

  it('site-to-site: the same DIP:port in two tenants leaves on two ports of one frontend IP, each reply to its own VM', () => {
    const cfg = twoTenants();
    const { ctx } = rig(cfg);
    const vms = [
      { port: cfg.nics.filter((n) => n.host === 'host1').findIndex((n) => n.name === 'a-h1vm1'), mac: '02:00:c0:00:02:0a', vni: 5001 },
      { port: cfg.nics.filter((n) => n.host === 'host1').findIndex((n) => n.name === 'b-h1vm1'), mac: '02:00:c0:00:03:0a', vni: 5002 },
    ];
    const fports: number[] = [];
    for (const vm of vms) {
      const f = pkt()
        .eth({ src: vm.mac, dst: PORT_MACS[vm.port] })
        .ipv4({ src: '192.0.2.10', dst: REMOTE, id: 7 })
        .tcp({ sport: 40000, dport: 9000, flags: TCP_SYN })
        .build();
      const r = out(ctx, f, vm.port);
      expect(r.drop).toBeNull();
      expect(r.out.subarray(12, 16)).toEqual(Buffer.from([203, 0, 113, 200]));
      fports.push(r.out.readUInt16BE(20));
    }
    expect(fports[0]).not.toBe(fports[1]);
    for (const [i, vm] of vms.entries()) {
      const b = back(
        ctx,
        fromMux((p) => p.ipv4({ src: REMOTE, dst: FIP }).tcp({ sport: 9000, dport: fports[i]!, flags: TCP_SYN | TCP_ACK }), {
          vni: vm.vni,
        }),
      );
      expect(b.drop).toBeNull();
      expect(b.port).toBe(vm.port);
      expect(b.out.subarray(0, 6)).toEqual(Buffer.from(mac(vm.mac)));
      expect(b.out.readUInt16BE(14 + 20 + 2)).toBe(40000);
    }
  });

  it("a reply with no flow addressed to the nic's MAC, as the MUX writes it, is drop_in_snat_no_flow; a frontend IP that is also a VIP goes on to its rules", () => {
    // mux/data-plane.ts encapsulate: the inner destination is the owning nic's MAC for a range reply too
    const { ctx, ranges } = rig(outboundLab());
    const fport = firstPort(ranges, 'h1vm1', FIP);
    const fport6 = firstPort(ranges, 'h1vm1', FIP6);
    const to = { innerDst: H1VM1.mac };
    expect(
      back(
        ctx,
        fromMux((p) => p.ipv4({ src: REMOTE, dst: FIP }).tcp({ sport: 9000, dport: fport, flags: TCP_ACK }), to),
      ).drop,
    ).toBe('drop_in_snat_no_flow');
    expect(
      back(
        ctx,
        fromMux((p) => p.ipv6({ src: '2001:db8:c::50', dst: FIP6 }).tcp({ sport: 9000, dport: fport6, flags: TCP_ACK }), {
          ...to,
          v6: true,
        }),
      ).drop,
    ).toBe('drop_in_snat_no_flow');
    // the lab's VIP 203.0.113.10 as a frontend IP too: its rule's port (80 -> h1vm1) reaches the backend
    const both = rig(
      labConfig((raw) => {
        raw.outbound = [{ name: 'out', frontendIps: [FIP, FIP6, '203.0.113.10'], nics: ['h1vm1'], portsPerNic: 64, preallocatedPorts: 64 }];
      }),
    );
    const b = back(
      both.ctx,
      fromMux((p) => p.ipv4({ src: REMOTE, dst: '203.0.113.10' }).tcp({ sport: 9000, dport: 80, flags: TCP_SYN }), to),
    );
    expect(b.drop).toBeNull();
    expect(b.port).toBe(0);
    expect(b.out.readUInt32BE(14 + 16)).toBe(0xc000020a); // NATed to the DIP, 192.0.2.10
  });

  it('a reply to a frontend port with no flow is dropped (drop_in_snat_no_flow); one from a host, not a MUX, too', () => {
    const { ctx, ranges } = rig(outboundLab());
    const fport = firstPort(ranges, 'h1vm1', FIP);
    expect(
      back(
        ctx,
        fromMux((p) => p.ipv4({ src: REMOTE, dst: FIP }).tcp({ sport: 9000, dport: fport, flags: TCP_ACK })),
      ).drop,
    ).toBe('drop_in_snat_no_flow');
    out(
      ctx,
      fromVm(H1VM1, (p) => p.tcp({ sport: 40000, dport: 9000, flags: TCP_SYN })),
    );
    const fromHost2 = fromMux((p) => p.ipv4({ src: REMOTE, dst: FIP }).tcp({ sport: 9000, dport: fport, flags: TCP_ACK }), {
      src: '198.18.0.22',
    });
    expect(back(ctx, fromHost2).drop).toBe('drop_in_snat_not_mux');
  });

  it('only a SYN opens a TCP flow: a SYN-ACK or data of no flow from a served nic is dropped (drop_out_snat_no_flow)', () => {
    const { ctx } = rig(outboundLab());
    expect(
      out(
        ctx,
        fromVm(H1VM1, (p) => p.tcp({ sport: 40000, dport: 9000, flags: TCP_SYN | TCP_ACK })),
      ).drop,
    ).toBe('drop_out_snat_no_flow');
    expect(
      out(
        ctx,
        fromVm(H1VM1, (p) => p.tcp({ sport: 40000, dport: 9000, flags: TCP_ACK })),
      ).drop,
    ).toBe('drop_out_snat_no_flow');
    // from the service port (80, a VIP rule's backend port) to an address that never contacted the VIP: the same
    expect(
      out(
        ctx,
        fromVm(H1VM1, (p) => p.tcp({ sport: 80, dport: 5555, flags: TCP_SYN | TCP_ACK })),
      ).drop,
    ).toBe('drop_out_snat_no_flow');
    expect(ctx.counters.get('out_snat')).toBe(0);
  });

  it('a nic no outbound rule serves keeps the old verdicts: not_lb_reply, and dsr_unsolicited from a service port', () => {
    const { ctx } = rig(outboundLab());
    const vm2 = { mac: H1VM2.mac, ip: H1VM2.ip };
    expect(
      out(
        ctx,
        fromVm(vm2, (p) => p.tcp({ sport: 40000, dport: 9000, flags: TCP_SYN })),
        1,
      ).drop,
    ).toBe('drop_out_not_lb_reply');
    expect(
      out(
        ctx,
        fromVm(vm2, (p) => p.udp({ sport: 7, dport: 5555 }).payload('u')),
        1,
      ).drop,
    ).toBe('drop_out_dsr_unsolicited');
    expect(ctx.counters.get('out_snat')).toBe(0);
    // and a config without outbound rules: no engine at all
    const plain = rig(labConfig(), []);
    expect(
      out(
        plain.ctx,
        fromVm(H1VM1, (p) => p.tcp({ sport: 40000, dport: 9000, flags: TCP_SYN })),
      ).drop,
    ).toBe('drop_out_not_lb_reply');
  });

  it('a new policy keeps the flows of ranges that stay (a nic renumbered too) and ends those of a range taken away, counted', () => {
    const cfg = outboundLab({ portsPerNic: 128 });
    const ranges = new SnatAllocator(cfg).ranges();
    const grown: PolicySnatRange[] = [...ranges, { ip: FIP, first: 60000, last: 60007, host: 'host1', nic: 'h1vm1' }];
    const { ctx, control, tables } = rig(cfg, grown);
    const base = firstPort(ranges, 'h1vm1', FIP);
    const fports: number[] = [];
    // the cursor walks the ranges in order: the first 64 ports are the preallocated range, then 60000+
    for (let i = 0; i < 66; i++) {
      const r = out(
        ctx,
        fromVm(H1VM1, (p) => p.tcp({ sport: 42000 + i, dport: 80, flags: TCP_SYN })),
      );
      expect(r.drop).toBeNull();
      fports.push(r.out.readUInt16BE(20));
    }
    expect(fports.filter((p) => p >= 60000)).toHaveLength(2);
    // the next generation: h1vm1 is now the second nic of host1 (a nic added before it), 60000+ taken away
    const cfg2 = labConfig((raw) => {
      raw.nics.unshift({
        name: 'h1vm0',
        host: 'host1',
        network: 'tenant-a',
        port: 'h1vm0',
        mac: '02:00:c0:00:02:09',
        addresses: ['192.0.2.9'],
      });
      raw.outbound = cfg.outbound.map((o) => ({
        name: o.name,
        frontendIps: [FIP, FIP6],
        nics: ['h1vm1'],
        portsPerNic: 128,
        preallocatedPorts: 64,
      }));
    });
    const tables2 = compileHostTables(cfg2, 'host1', 2);
    expect(tables2.nics.find((n) => n.name === 'h1vm1')!.index).toBe(1);
    const ended = control.install(cfg2, tables2, tables, ranges, 0);
    expect(ended).toBe(2);
    const ctx2 = newHostContext(
      tables2,
      cfg2.fabric.vxlanPort,
      [...PORT_MACS, '02:00:00:01:00:04'].map((m) => mac(m)),
    );
    ctx2.snat = control.engine;
    ctx2.ew.nowS = 100;
    // a kept flow's reply goes to h1vm1's new port number
    const b = back(
      ctx2,
      fromMux((p) => p.ipv4({ src: REMOTE, dst: FIP }).tcp({ sport: 80, dport: base, flags: TCP_SYN | TCP_ACK })),
    );
    expect(b.drop).toBeNull();
    expect(b.port).toBe(1);
    expect(b.out.subarray(0, 6)).toEqual(Buffer.from(mac(H1VM1.mac)));
    // an ended one's is not delivered
    expect(
      back(
        ctx2,
        fromMux((p) => p.ipv4({ src: REMOTE, dst: FIP }).tcp({ sport: 80, dport: 60000, flags: TCP_ACK })),
      ).drop,
    ).toBe('drop_in_snat_no_flow');
    expect(control.status(tables2)['nics']).toEqual([expect.objectContaining({ nic: 'h1vm1', inUse4: 64, ports4: 64 })]);
  });

  it('random and mutated SNAT frames both ways never throw; every drop is named', () => {
    const { ctx, ranges } = rig(outboundLab());
    const fport = firstPort(ranges, 'h1vm1', FIP);
    const seeds = [
      fromVm(H1VM1, (p) => p.tcp({ sport: 40000, dport: 9000, flags: TCP_SYN })),
      fromVm(H1VM1, (p) => p.udp({ sport: 5353, dport: 53 }).payload('q')),
      fromVm(H1VM1, (p) => p.tcp({ sport: 40001, dport: 443, flags: TCP_SYN }), true),
      fromMux((p) => p.ipv4({ src: REMOTE, dst: FIP }).tcp({ sport: 9000, dport: fport, flags: TCP_SYN | TCP_ACK })),
      fromMux((p) => p.ipv6({ src: REMOTE6, dst: FIP6 }).tcp({ sport: 443, dport: fport, flags: TCP_ACK }), { v6: true }),
    ];
    for (const f of seeds.slice(0, 3)) out(ctx, Buffer.from(f)); // open flows, so mutations reach the engine's lookups
    const rng = new Rng(15);
    for (let i = 0; i < 20_000; i++) {
      const seed = seeds[rng.int(seeds.length)]!;
      const f = i % 5 === 0 ? Buffer.from(rng.bytes(rng.int(200))) : Buffer.from(mutate(rng, seed));
      const v = i % 2 === 0 ? processOutbound(f, f.length, rng.int(2), ctx) : processInbound(f, f.length, ctx);
      if (v === VERDICT_DROP) expect(ctx.lastDrop).toBeGreaterThanOrEqual(0);
    }
    expect(ctx.counters.get('drop_internal_error')).toBe(0);
    // the mutations reached the engine both ways
    const snat = Object.entries(ctx.counters.snapshot()).filter(([k, v]) => k.includes('snat') && v > 0);
    expect(snat.map(([k]) => k)).toEqual(expect.arrayContaining(['out_snat', 'in_snat', 'drop_in_snat_no_flow', 'drop_out_snat_no_flow']));
  });
});
