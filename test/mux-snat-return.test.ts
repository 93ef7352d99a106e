// Outbound NAT's return path through the MUX data plane (docs/outbound.md): packet in -> VXLAN frame out.
// The ranges come from the controller's allocator (controller/snat-alloc.ts), the expected owner of each
// port from its chunks, the flow hash from the independent oracle, each expected frame from the packet
// builder. A reply to an owned port goes to the owning nic's host in that nic's VNI, the inner packet
// unchanged; a port no nic owns is dropped under a named reason; a VIP used as a frontend keeps its rules;
// the flow table is never touched.
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildPcap, LINKTYPE_ETHERNET } from '../shared/pcap-file.js';
import { mac } from '../shared/addr.js';
import { pkt } from '../shared/packet-builder.js';
import { TCP_ACK, TCP_SYN } from '../shared/tcp.js';
import { IPV4_FLAG_MF } from '../shared/ipv4.js';
import { ETHERTYPE_IPV4, ETHERTYPE_IPV6 } from '../shared/ethernet.js';
import { vxlanSourcePort } from '../shared/flow-hash.js';
import type { SlbxConfig } from '../shared/config.js';
import { compileMuxTables, ALL_HEALTHY } from '../mux/tables.js';
import { newMuxContext, processPacket, VERDICT_DROP, VERDICT_FORWARD, type MuxContext } from '../mux/data-plane.js';
import { SnatAllocator, type SnatRange } from '../controller/snat-alloc.js';
import { flowHash } from '../scripts/oracle/maglev-oracle.js';
import { MuxDaemon, muxCaptureFilter } from '../mux/daemon.js';
import { labConfig } from './helpers/lab-config.js';
import { expectFrame } from './helpers/frames.js';

const MUX_MAC = '02:00:00:00:00:11';
const ROUTER_MAC = '02:00:00:00:00:01';
const HOST_MACS: Record<string, string> = { host1: '02:00:00:00:00:21', host2: '02:00:00:00:00:22' };
const HOST_PA: Record<string, string> = { host1: '198.18.0.21', host2: '198.18.0.22' };
const FRONT = '203.0.113.200';
const FRONT6 = '2001:db8:ff::200';
const VIP = '203.0.113.10'; // a VIP that is also tenant-b's frontend
const REMOTE = '198.51.100.50';
const REMOTE6 = '2001:db8:c::50';
const SEED = 0x736c6278;
// the nics' host, VNI and MAC, as the config below writes them
const NICS: Record<string, { host: string; vni: number; mac: string }> = {
  h1vm1: { host: 'host1', vni: 5001, mac: '02:00:c0:00:02:0a' },
  h1vm2: { host: 'host1', vni: 5001, mac: '02:00:c0:00:02:0b' },
  h2vm1: { host: 'host2', vni: 5001, mac: '02:00:c0:00:02:0c' },
  h2vm2: { host: 'host2', vni: 5001, mac: '02:00:c0:00:02:0d' },
  h2vb1: { host: 'host2', vni: 5002, mac: '02:00:c0:00:02:14' },
};

/** The lab plus tenant-b (VNI 5002, one nic on host2) and two outbound rules: web's nics from FRONT/FRONT6, tenant-b's from the VIP. */
const CONFIG: SlbxConfig = labConfig((raw) => {
  raw.networks.push({ name: 'tenant-b', vni: 5002, gateway: '192.0.2.1' });
  raw.nics.push({ name: 'h2vb1', host: 'host2', network: 'tenant-b', port: 'h2vb1', mac: NICS.h2vb1!.mac, addresses: ['192.0.2.10'] });
  raw.outbound = [
    { name: 'web-out', frontendIps: [FRONT, FRONT6], pool: 'web', portsPerNic: 128, preallocatedPorts: 64 },
    { name: 'b-out', frontendIps: [VIP], nics: ['h2vb1'], portsPerNic: 64 },
  ];
});

const ALLOC = new SnatAllocator(CONFIG);
ALLOC.demand('h2vm2', 4, 8); // one chunk on demand too
const RANGES: SnatRange[] = ALLOC.ranges();
/** The allocator's own answer: the nic owning (ip, port), from its chunks. */
const OWNERS = new Map<string, string>();
for (const c of ALLOC.toState().chunks) for (let p = c.first; p < c.first + 8; p++) OWNERS.set(`${c.ip} ${p}`, c.nic);
const ownerOf = (ip: string, port: number): string | undefined => OWNERS.get(`${ip} ${port}`);
function portOf(ip: string, nic: string, k = 0): number {
  const c = ALLOC.toState().chunks.filter((x) => x.ip === ip && x.nic === nic);
  return c[k]!.first + 3;
}

function newCtx(ranges: readonly SnatRange[] = RANGES): MuxContext {
  const tables = compileMuxTables(CONFIG, ALL_HEALTHY, null, 1, ranges);
  for (const h of tables.hosts.values()) {
    h.mac.set(mac(HOST_MACS[h.name]!));
    h.macKnown = true;
  }
  const m = CONFIG.muxes[0]!;
  return newMuxContext({
    tables,
    localMac: mac(MUX_MAC),
    localPa4: m.address.words[0]!,
    localPa6: m.address6!.words,
    hashSeed: CONFIG.hashSeed,
    mtu: CONFIG.fabric.mtu,
    vxlanPort: CONFIG.fabric.vxlanPort,
    flowTable: CONFIG.flowTable,
  });
}

const reply4 = (dport: number, proto: 'tcp' | 'udp' = 'tcp', dst = FRONT, sport = 9000) => {
  const b = pkt().eth({ src: ROUTER_MAC, dst: MUX_MAC }).ipv4({ src: REMOTE, dst });
  return (proto === 'tcp' ? b.tcp({ sport, dport, flags: TCP_SYN | TCP_ACK }) : b.udp({ sport, dport }).payload('SRC echo')).build();
};
const reply6 = (dport: number, proto: 'tcp' | 'udp' = 'tcp') => {
  const b = pkt().eth({ src: ROUTER_MAC, dst: MUX_MAC }).ipv6({ src: REMOTE6, dst: FRONT6 });
  return (
    proto === 'tcp' ? b.tcp({ sport: 9000, dport, flags: TCP_ACK }).payload('echo') : b.udp({ sport: 9001, dport }).payload('x')
  ).build();
};

/** The VXLAN frame the MUX must send: to the nic's host, in the nic's VNI, to the nic's MAC, the packet unchanged. */
function expected(inner: Buffer, nic: string, hash: number, innerType = ETHERTYPE_IPV4): Buffer {
  const n = NICS[nic]!;
  return pkt()
    .eth({ src: MUX_MAC, dst: HOST_MACS[n.host]! })
    .ipv4({ src: '198.18.0.11', dst: HOST_PA[n.host]!, id: 1, ttl: 64, flags: 0 })
    .udp({ sport: vxlanSourcePort(hash), dport: 4789, checksum: 'zero' })
    .vxlan({ vni: n.vni })
    .eth({ src: MUX_MAC, dst: n.mac, type: innerType })
    .payload(inner.subarray(14))
    .build();
}

function run(ctx: MuxContext, f: Buffer) {
  const v = processPacket(f, f.length, ctx);
  return {
    v,
    out: Buffer.from(ctx.out.subarray(0, v === VERDICT_FORWARD ? ctx.outLen : 0)),
    drop: ctx.lastDrop >= 0 ? ctx.counters.names[ctx.lastDrop]! : null,
  };
}
const flowCount = (ctx: MuxContext) => ctx.flows4.size + ctx.flows6.size + ctx.pending4.size + ctx.pending6.size;

describe('mux: outbound NAT return path (packet in -> VXLAN frame out)', () => {
  const cases: [string, () => Buffer, string, number, number?][] = [
    ['TCP to an owned port of the IPv4 frontend', () => reply4(portOf(FRONT, 'h1vm2')), 'h1vm2', 6],
    ['UDP to a port of a chunk given on demand', () => reply4(portOf(FRONT, 'h2vm2', 8), 'udp'), 'h2vm2', 17],
    ['TCP to the IPv6 frontend', () => reply6(portOf(FRONT6, 'h2vm1')), 'h2vm1', 6, ETHERTYPE_IPV6],
    ['UDP to the IPv6 frontend', () => reply6(portOf(FRONT6, 'h1vm1'), 'udp'), 'h1vm1', 17, ETHERTYPE_IPV6],
    ["a VIP used as tenant-b's frontend: the nic's VNI 5002", () => reply4(portOf(VIP, 'h2vb1'), 'tcp', VIP), 'h2vb1', 6],
  ];
  for (const [name, make, nic, proto, type] of cases) {
    it(name, () => {
      const ctx = newCtx();
      const f = make();
      const six = type === ETHERTYPE_IPV6;
      const dport = f.readUInt16BE(14 + (six ? 40 : 20) + 2);
      const sport = f.readUInt16BE(14 + (six ? 40 : 20));
      const dst = six ? FRONT6 : f.readUInt32BE(30) === 0xcb00710a ? VIP : FRONT;
      expect(ownerOf(dst, dport)).toBe(nic); // the fixture's port is the allocator's for that nic
      const r = run(ctx, f);
      expect(r.drop).toBeNull();
      expect(r.v).toBe(VERDICT_FORWARD);
      const h = flowHash(six ? REMOTE6 : REMOTE, dst, proto, sport, dport, 5, SEED);
      expectFrame(r.out, expected(f, nic, h, type));
      expect(ctx.lastNic!.name).toBe(nic);
      expect(ctx.counters.get('snat_forwarded')).toBe(1);
      expect(flowCount(ctx)).toBe(0); // the flow table is not touched
      expect([ctx.counters.get('flow_new'), ctx.counters.get('flow_hit')]).toEqual([0, 0]);
    });
  }

  it('every port of the IPv4 frontend goes to the nic the allocator gave it, or is dropped as no_snat_owner', () => {
    const ctx = newCtx();
    let owned = 0;
    for (let p = 1; p <= 65535; p++) {
      const r = run(ctx, reply4(p, p % 2 === 0 ? 'tcp' : 'udp'));
      const o = ownerOf(FRONT, p);
      if (o === undefined) expect([p, r.drop]).toEqual([p, 'drop_snat_no_owner']);
      else {
        owned++;
        expect([p, r.v, ctx.lastNic!.name, r.out.readUInt32BE(14 + 20 + 8 + 4) >>> 8]).toEqual([p, VERDICT_FORWARD, o, NICS[o]!.vni]);
      }
    }
    expect(owned).toBe(4 * 64 + 8); // four nics' preallocation and the chunk on demand
    expect(ctx.counters.get('drop_snat_no_owner')).toBe(65535 - owned);
    expect(ctx.counters.get('snat_forwarded')).toBe(owned);
    expect(flowCount(ctx)).toBe(0);
  });

  it('a VIP that is a frontend keeps its rules: port 80 and 8080 to Maglev (a flow), an unowned other port dropped', () => {
    const ctx = newCtx();
    const syn = (dport: number) =>
      pkt().eth({ src: ROUTER_MAC, dst: MUX_MAC }).ipv4({ src: REMOTE, dst: VIP }).tcp({ sport: 40000, dport, flags: TCP_SYN }).build();
    for (const port of [80, 8080]) {
      const r = run(ctx, syn(port));
      expect([port, r.v, ctx.lastRule?.frontendPort]).toEqual([port, VERDICT_FORWARD, port]);
    }
    expect(ctx.counters.get('flow_new')).toBe(2);
    expect(ctx.counters.get('snat_forwarded')).toBe(0);
    // UDP 7 and 7003 are rules too
    expect(run(ctx, reply4(7003, 'udp', VIP)).v).toBe(VERDICT_FORWARD);
    expect(ctx.lastRule?.name).toBe('echo-3tuple');
    const free = 65000;
    expect(ownerOf(VIP, free)).toBeUndefined();
    expect(run(ctx, syn(free)).drop).toBe('drop_snat_no_owner');
  });

  it('what has no port to look up: ICMP and fragments dropped with their reasons, never to Maglev or a flow', () => {
    const ctx = newCtx();
    const icmp = pkt()
      .eth({ src: ROUTER_MAC, dst: MUX_MAC })
      .ipv4({ src: REMOTE, dst: FRONT })
      .icmp({ type: 8, code: 0 })
      .payload('ping')
      .build();
    expect(run(ctx, icmp).drop).toBe('drop_snat_not_tcp_udp');
    const frag = pkt()
      .eth({ src: ROUTER_MAC, dst: MUX_MAC })
      .ipv4({ src: REMOTE, dst: FRONT, flags: IPV4_FLAG_MF })
      .udp({ sport: 9001, dport: portOf(FRONT, 'h1vm1') })
      .payload('x'.repeat(64))
      .build();
    expect(run(ctx, frag).drop).toBe('drop_snat_fragment');
    const later = pkt()
      .eth({ src: ROUTER_MAC, dst: MUX_MAC })
      .ipv4({ src: REMOTE, dst: FRONT, fragOffset: 10 })
      .payload('x'.repeat(24))
      .build();
    later[14 + 9] = 17;
    later.writeUInt16BE(0, 14 + 10);
    // (the builder's checksum covered protocol 0: recompute it after setting UDP)
    let s = 0;
    for (let i = 14; i < 34; i += 2) s += later.readUInt16BE(i);
    while (s > 0xffff) s = (s & 0xffff) + (s >>> 16);
    later.writeUInt16BE(~s & 0xffff, 14 + 10);
    expect(run(ctx, later).drop).toBe('drop_snat_fragment');
    expect(flowCount(ctx)).toBe(0);
  });

  it("before the first policy (no ranges): the frontend is still the MUX's, every port no_snat_owner (not not_vip)", () => {
    const ctx = newCtx([]);
    expect(run(ctx, reply4(portOf(FRONT, 'h1vm1'))).drop).toBe('drop_snat_no_owner');
    expect(run(ctx, reply6(portOf(FRONT6, 'h1vm1'))).drop).toBe('drop_snat_no_owner');
  });

  it('a policy whose ranges do not fit its config is refused, naming the range', () => {
    const bad = [{ ...RANGES[0]!, host: 'host2' }];
    expect(() => compileMuxTables(CONFIG, ALL_HEALTHY, null, 1, bad)).toThrow(/nic h1vm1 is on host1, not host2/);
    expect(() => compileMuxTables(CONFIG, ALL_HEALTHY, null, 1, [{ ...RANGES[0]!, ip: '203.0.113.201' }])).toThrow(/no frontend IP/);
  });

  it('a daemon refusing such a policy keeps nothing of it: the next policy is the very next generation', () => {
    // the daemon as slbx-mux builds it, not started (nothing opened)
    const d = new MuxDaemon({ config: CONFIG, name: 'mux1', iface: 'hF-no-such-if', mac: mac(MUX_MAC), bgp: false });
    d.applyConfig(CONFIG, ALL_HEALTHY, RANGES);
    const g = d.ctx.tables.generation;
    expect(() => d.applyConfig(CONFIG, ALL_HEALTHY, [{ ...RANGES[0]!, host: 'host2' }])).toThrow(/not host2/);
    expect(d.ctx.tables.generation).toBe(g);
    expect(d.ctx.tables.snat.ranges).toBe(RANGES);
    d.applyConfig(CONFIG, ALL_HEALTHY, RANGES);
    expect(d.ctx.tables.generation).toBe(g + 1);
  });

  it('a health change keeps the ranges; the capture filter names the dedicated frontends once', () => {
    const t1 = compileMuxTables(CONFIG, ALL_HEALTHY, null, 1, RANGES);
    const t2 = compileMuxTables(CONFIG, { isHealthy: () => false }, t1, 2);
    expect(t2.snat.ranges).toBe(RANGES);
    const f = muxCaptureFilter(CONFIG);
    expect(f).toContain('dst net 203.0.113.0/24');
    expect(f).toContain('ip6 dst net 2001:db8:ff::/48');
    expect(f.split('dst net 203.0.113.0/24').length - 1).toBe(2); // once, and once more inside the vlan clause
  });

  // libpcap itself (tcpdump -r) says which frames the filter takes: the VIPs, the dedicated frontends
  // (IPv4, IPv6, also VLAN-tagged), not an address outside vipRanges; and a VIP added or removed leaves
  // the filter as it was, so the MUX does not reopen its capture (a reopen loses the frames queued in it)
  it.skipIf(spawnSync('tcpdump', ['--version']).status !== 0)(
    'the capture filter takes the VIPs and frontends by their ranges: a VIP change keeps it',
    () => {
      const f = muxCaptureFilter(CONFIG);
      const withVip = labConfig((raw) => {
        raw.vips.push({ ...raw.vips[0], address: '203.0.113.77', rules: [{ ...raw.vips[0].rules[0], backendPort: 9000 }] });
      });
      expect(withVip.vips.length).toBe(labConfig().vips.length + 1);
      expect(muxCaptureFilter(withVip)).toBe(muxCaptureFilter(labConfig()));
      const frame = (dst: string, vlan = false) => {
        const b = pkt().eth({ src: ROUTER_MAC, dst: MUX_MAC, ...(vlan ? { vlan: 7 } : {}) });
        return (dst.includes(':') ? b.ipv6({ src: REMOTE6, dst }) : b.ipv4({ src: REMOTE, dst }))
          .tcp({ sport: 40000, dport: 80, flags: TCP_SYN })
          .build();
      };
      const dsts = [VIP, FRONT, FRONT6, '203.0.113.77', '198.51.100.99', '2001:db8:c::99'];
      const want = [true, true, true, true, false, false];
      const dir = mkdtempSync(join(tmpdir(), 'slbx-filter-'));
      try {
        for (const vlan of [false, true]) {
          const file = join(dir, `f${vlan ? 'v' : ''}.pcap`);
          writeFileSync(
            file,
            buildPcap(
              LINKTYPE_ETHERNET,
              dsts.map((d, i) => {
                const data = frame(d, vlan);
                return { tsUs: i + 1, data, origLen: data.length };
              }),
            ),
          );
          const r = spawnSync('tcpdump', ['-n', '-r', file, '-tt', f], { encoding: 'utf8' });
          expect(r.status, r.stderr).toBe(0);
          const taken = r.stdout
            .split('\n')
            .filter((l) => l !== '')
            .map((l) => Math.round(Number(l.split(' ')[0]) * 1e6) - 1);
          expect(
            dsts.map((_, i) => taken.includes(i)),
            `vlan ${vlan}: ${r.stdout}`,
          ).toEqual(want);
        }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  it('random bytes after a frontend header never throw; each drop is named', () => {
    const ctx = newCtx();
    let seed = 7;
    const rnd = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) >>> 16) & 0xff;
    for (let i = 0; i < 3000; i++) {
      const f = reply4(1024 + (i % 4000), i % 2 === 0 ? 'tcp' : 'udp');
      const n = 14 + (i % (f.length - 14));
      for (let k = n; k < f.length; k++) f[k] = rnd();
      const r = run(ctx, f.subarray(0, f.length - (i % 3)));
      if (r.v === VERDICT_DROP) expect(r.drop).not.toBeNull();
    }
  });
});
