// Packet-in / packet-out fixtures for the MUX's east-west path (docs/east-west.md): VXLAN from a host to an
// internal VIP is placed like public traffic and encapsulated to the DIP's host, and once the flow is
// trusted (the client's ACK; a second datagram) a signed redirect goes to the source host. The expected
// backend and flow hash come from the independent oracle (scripts/oracle); expected frames are built with
// the packet builder, the redirect's bytes with its codec (whose golden vector is openssl's).
import { describe, expect, it } from 'vitest';
import { ip, mac, writeIpAddr } from '../shared/addr.js';
import { pkt, type PacketBuilder } from '../shared/packet-builder.js';
import { TCP_ACK, TCP_PSH, TCP_SYN } from '../shared/tcp.js';
import { vxlanSourcePort } from '../shared/flow-hash.js';
import { REDIRECT_LEN, REDIRECT_PORT, REDIRECT_SIGNED_LEN, REDIRECT_VALID_S, newRedirect, writeRedirect } from '../shared/redirect.js';
import type { SlbxConfig } from '../shared/config.js';
import { ALL_HEALTHY, compileMuxTables } from '../mux/tables.js';
import { tableVips } from '../mux/bgp/routes.js';
import { VERDICT_DROP, VERDICT_FORWARD, newMuxContext, processPacket, type MuxContext } from '../mux/data-plane.js';
import { redirectMacFor } from '../runtime/redirect-mac.js';
import { flowHash } from '../scripts/oracle/maglev-oracle.js';
import { oracleRule } from '../scripts/oracle/expected-backend.js';
import { labConfig } from './helpers/lab-config.js';
import { expectFrame } from './helpers/frames.js';

const TOKEN = 'cd'.repeat(32);
const SEED = 0x736c6278;
const MUX_MAC = '02:00:00:00:00:11';
const MUX_PA = '198.18.0.11';
const HOSTS: Record<string, { pa: string; mac: string }> = {
  host1: { pa: '198.18.0.21', mac: '02:00:00:00:00:21' },
  host2: { pa: '198.18.0.22', mac: '02:00:00:00:00:22' },
};
const NICS: Record<string, { host: string; mac: string; ip: string; ip6: string }> = {
  h1vm1: { host: 'host1', mac: '02:00:c0:00:02:0a', ip: '192.0.2.10', ip6: '2001:db8:d::10' },
  h1vm2: { host: 'host1', mac: '02:00:c0:00:02:0b', ip: '192.0.2.11', ip6: '2001:db8:d::11' },
  h2vm1: { host: 'host2', mac: '02:00:c0:00:02:0c', ip: '192.0.2.12', ip6: '2001:db8:d::12' },
  h2vm2: { host: 'host2', mac: '02:00:c0:00:02:0d', ip: '192.0.2.13', ip6: '2001:db8:d::13' },
};
const VIP = '192.0.2.100';
const VIP6 = '2001:db8:d::100';
const UNIX_S = 2_000_000;

function ewConfig(udpDatagrams?: number): SlbxConfig {
  return labConfig((c) => {
    if (udpDatagrams !== undefined) c.flowTable = { fastpathUdpDatagrams: udpDatagrams };
    const rules = [
      { name: 'ew-tcp', protocol: 'tcp', frontendPort: 7000, pool: 'web' },
      { name: 'ew-udp', protocol: 'udp', frontendPort: 7001, pool: 'web' },
    ];
    c.vips.push({ address: VIP, scope: 'internal', network: 'tenant-a', rules });
    c.vips.push({ address: VIP6, scope: 'internal', network: 'tenant-a', rules });
  });
}
const CONFIG = ewConfig();

function newCtx(config = CONFIG): MuxContext {
  const tables = compileMuxTables(config, ALL_HEALTHY, null, 1);
  for (const h of tables.hosts.values()) {
    h.mac.set(mac(HOSTS[h.name]!.mac));
    h.macKnown = true;
  }
  const ctx = newMuxContext({
    tables,
    localMac: mac(MUX_MAC),
    localPa4: ip(MUX_PA).words[0]!,
    localPa6: ip('2001:db8:f::11').words,
    hashSeed: CONFIG.hashSeed,
    mtu: CONFIG.fabric.mtu,
    vxlanPort: CONFIG.fabric.vxlanPort,
    flowTable: CONFIG.flowTable,
  });
  ctx.ew.mac = redirectMacFor(TOKEN);
  ctx.ew.unixS = UNIX_S;
  return ctx;
}

/** VXLAN from a host's PA to the MUX, as host-agent/east-west.ts writes it. */
function fromHost(inner: (p: PacketBuilder) => PacketBuilder, o: { host?: string; pa?: string; vni?: number; src?: string } = {}): Buffer {
  const h = HOSTS[o.host ?? 'host1']!;
  const p = pkt()
    .eth({ src: o.src ?? h.mac, dst: MUX_MAC })
    .ipv4({ src: o.pa ?? h.pa, dst: MUX_PA, id: 0, flags: 0 })
    .udp({ sport: 50000, dport: 4789, checksum: 'zero' })
    .vxlan({ vni: o.vni ?? 5001 })
    .eth({ src: h.mac, dst: MUX_MAC });
  return inner(p).build();
}
const tcpIn = (sport: number, flags: number, payload?: string) => (p: PacketBuilder) => {
  const b = p.ipv4({ src: NICS.h1vm1!.ip, dst: VIP, flags: 2 }).tcp({ sport, dport: 7000, flags });
  return payload === undefined ? b : b.payload(payload);
};
const udpIn = (sport: number) => (p: PacketBuilder) =>
  p.ipv4({ src: NICS.h1vm1!.ip, dst: VIP }).udp({ sport, dport: 7001 }).payload('dgram');

/** The VXLAN frame the MUX must send to nic's host. */
function toDip(nic: string, hash: number, ipId: number, inner: (p: PacketBuilder) => PacketBuilder): Buffer {
  const n = NICS[nic]!;
  const h = HOSTS[n.host]!;
  const p = pkt()
    .eth({ src: MUX_MAC, dst: h.mac })
    .ipv4({ src: MUX_PA, dst: h.pa, id: ipId, ttl: 64, flags: 0 })
    .udp({ sport: vxlanSourcePort(hash), dport: 4789, checksum: 'zero' })
    .vxlan({ vni: 5001 })
    .eth({ src: MUX_MAC, dst: n.mac });
  return inner(p).build();
}

/** The redirect frame the MUX must send to host1 for h1vm1's flow. */
function redirectFrame(nic: string, proto: number, sport: number, dport: number, family: 4 | 6 = 4): Buffer {
  const n = NICS[nic]!;
  const r = newRedirect();
  r.family = family;
  r.protocol = proto;
  r.vni = 5001;
  r.expiresS = UNIX_S + REDIRECT_VALID_S;
  writeIpAddr(ip(family === 4 ? NICS.h1vm1!.ip : NICS.h1vm1!.ip6), r.src, 0);
  writeIpAddr(ip(family === 4 ? VIP : VIP6), r.dst, 0);
  r.srcPort = sport;
  r.dstPort = dport;
  writeIpAddr(ip(family === 4 ? n.ip : n.ip6), r.dip, 0);
  writeIpAddr(ip(HOSTS[n.host]!.pa), r.dipHostPa, 0);
  r.dipMac.set(mac(n.mac));
  const body = new Uint8Array(REDIRECT_LEN);
  writeRedirect(r, body, 0);
  redirectMacFor(TOKEN)(body, 0, REDIRECT_SIGNED_LEN, body, REDIRECT_SIGNED_LEN);
  return pkt()
    .eth({ src: MUX_MAC, dst: HOSTS.host1!.mac })
    .ipv4({ src: MUX_PA, dst: HOSTS.host1!.pa, id: 0, flags: 0, ttl: 64 })
    .udp({ sport: REDIRECT_PORT, dport: REDIRECT_PORT, checksum: 'zero' })
    .payload(body)
    .build();
}

function run(ctx: MuxContext, f: Buffer) {
  const v = processPacket(f, f.length, ctx);
  return {
    v,
    out: Buffer.from(ctx.out.subarray(0, v === VERDICT_FORWARD ? ctx.outLen : 0)),
    redirect: Buffer.from(ctx.ew.out.subarray(0, v === VERDICT_FORWARD ? ctx.ew.outLen : 0)),
    drop: ctx.lastDrop >= 0 ? ctx.counters.names[ctx.lastDrop] : null,
  };
}
const count = (ctx: MuxContext, name: string) => ctx.counters.values[ctx.counters.index[name as 'rx_packets']]!;

describe('MUX east-west', () => {
  const tcpRule = oracleRule(CONFIG, VIP, 6, 7000);
  const udpRule = oracleRule(CONFIG, VIP, 17, 7001);

  it('never announces or serves an internal VIP as public', () => {
    const ctx = newCtx();
    expect(tableVips(ctx.tables).map((v) => v.addr.text)).not.toContain(VIP);
    expect(tableVips(ctx.tables).map((v) => v.addr.text)).not.toContain(VIP6);
    const direct = pkt()
      .eth({ src: '02:00:00:00:00:01', dst: MUX_MAC })
      .ipv4({ src: '198.51.100.10', dst: VIP })
      .tcp({ sport: 1, dport: 7000, flags: TCP_SYN })
      .build();
    expect(run(ctx, direct).drop).toBe('drop_not_vip');
  });

  it("places a host's SYN like public traffic (oracle's backend), no redirect; the ACK gets one, signed", () => {
    const ctx = newCtx();
    for (const sport of [41000, 41001, 41002, 41003]) {
      const h = flowHash(NICS.h1vm1!.ip, VIP, 6, sport, 7000, 5, SEED);
      const nic = tcpRule.choose(NICS.h1vm1!.ip, sport)!;
      const syn = run(ctx, fromHost(tcpIn(sport, TCP_SYN)));
      expect([syn.v, syn.drop, syn.redirect.length]).toEqual([VERDICT_FORWARD, null, 0]);
      expectFrame(syn.out, toDip(nic, h, ctx.ipId, tcpIn(sport, TCP_SYN)));
      const ack = run(ctx, fromHost(tcpIn(sport, TCP_ACK | TCP_PSH, 'request')));
      expect(ack.v).toBe(VERDICT_FORWARD);
      expectFrame(ack.out, toDip(nic, h, ctx.ipId, tcpIn(sport, TCP_ACK | TCP_PSH, 'request')));
      expectFrame(ack.redirect, redirectFrame(nic, 6, sport, 7000));
    }
    expect(count(ctx, 'redirects_sent')).toBe(4);
    expect(count(ctx, 'ew_from_host')).toBe(8);
  });

  it('UDP: the first datagram goes without a redirect, the second with one', () => {
    const ctx = newCtx();
    const nic = udpRule.choose(NICS.h1vm1!.ip, 52000)!;
    expect(run(ctx, fromHost(udpIn(52000))).redirect.length).toBe(0);
    const second = run(ctx, fromHost(udpIn(52000)));
    expectFrame(second.redirect, redirectFrame(nic, 17, 52000, 7001));
  });

  it('UDP with flowTable.fastpathUdpDatagrams 4: datagrams 1-3 without a redirect, every one from the 4th with one, per flow', () => {
    const ctx = newCtx(ewConfig(4));
    const got = (sport: number) => run(ctx, fromHost(udpIn(sport))).redirect.length > 0;
    // two flows interleaved: each counts its own datagrams
    const a: boolean[] = [];
    const b: boolean[] = [];
    for (let i = 0; i < 6; i++) {
      a.push(got(52100));
      if (i % 2 === 0) b.push(got(52101));
    }
    expect(a).toEqual([false, false, false, true, true, true]);
    expect(b).toEqual([false, false, false]);
    expect(got(52101)).toBe(true);
    const nic = udpRule.choose(NICS.h1vm1!.ip, 52100)!;
    expectFrame(run(ctx, fromHost(udpIn(52100))).redirect, redirectFrame(nic, 17, 52100, 7001));
    // TCP is not counted: its ACK after the handshake gets the redirect as before
    run(ctx, fromHost(tcpIn(41100, TCP_SYN)));
    expect(run(ctx, fromHost(tcpIn(41100, TCP_ACK | TCP_PSH, 'request'))).redirect.length).toBeGreaterThan(0);
    expect(count(ctx, 'ew_udp_count_full')).toBe(0);
  });

  it('IPv6 inner packets over the IPv4 underlay', () => {
    const ctx = newCtx();
    const inner = (flags: number) => (p: PacketBuilder) =>
      p.ipv6({ src: NICS.h1vm1!.ip6, dst: VIP6 }).tcp({ sport: 43000, dport: 7000, flags });
    const h = flowHash(NICS.h1vm1!.ip6, VIP6, 6, 43000, 7000, 5, SEED);
    const nic = oracleRule(CONFIG, VIP6, 6, 7000).choose(NICS.h1vm1!.ip6, 43000)!;
    const syn = run(ctx, fromHost(inner(TCP_SYN)));
    expect(syn.v).toBe(VERDICT_FORWARD);
    expectFrame(syn.out, toDip(nic, h, ctx.ipId, inner(TCP_SYN)));
    const ack = run(ctx, fromHost(inner(TCP_ACK)));
    expectFrame(ack.redirect, redirectFrame(nic, 6, 43000, 7000, 6));
  });

  it('without the policy key it forwards and sends no redirect (everything through the MUX)', () => {
    const ctx = newCtx();
    ctx.ew.mac = null;
    run(ctx, fromHost(tcpIn(44000, TCP_SYN)));
    const ack = run(ctx, fromHost(tcpIn(44000, TCP_ACK)));
    expect([ack.v, ack.redirect.length]).toEqual([VERDICT_FORWARD, 0]);
    expect(count(ctx, 'redirects_skipped')).toBe(1);
  });

  const refusals: [string, () => Buffer, string][] = [
    ['VXLAN from an address that is no host', () => fromHost(tcpIn(45000, TCP_SYN), { pa: '198.18.0.99' }), 'drop_ew_unknown_host'],
    [
      "a host's PA from another MAC (docs/security.md)",
      () => fromHost(tcpIn(45000, TCP_SYN), { src: '02:00:00:00:00:66' }),
      'drop_ew_spoofed_source',
    ],
    ["another tenant's VNI", () => fromHost(tcpIn(45000, TCP_SYN), { vni: 5002 }), 'drop_ew_wrong_vni'],
    [
      'a public VIP inside VXLAN',
      () => fromHost((p) => p.ipv4({ src: NICS.h1vm1!.ip, dst: '203.0.113.10' }).tcp({ sport: 45000, dport: 80, flags: TCP_SYN })),
      'drop_ew_not_internal_vip',
    ],
    [
      'a port without a rule',
      () => fromHost((p) => p.ipv4({ src: NICS.h1vm1!.ip, dst: VIP }).tcp({ sport: 45000, dport: 9, flags: TCP_SYN })),
      'drop_no_rule',
    ],
    [
      'VXLAN without the I flag',
      () => {
        const f = fromHost(tcpIn(45000, TCP_SYN));
        f[42] = 0;
        return f;
      },
      'drop_ew_bad_vxlan',
    ],
  ];
  it("drops a host's VXLAN before its PA's MAC is resolved, counted", () => {
    const ctx = newCtx();
    for (const h of ctx.tables.hosts.values()) h.macKnown = false;
    const r = run(ctx, fromHost(tcpIn(45000, TCP_SYN)));
    expect([r.v, r.drop]).toEqual([VERDICT_DROP, 'drop_ew_source_unresolved']);
  });

  it.each(refusals)('drops %s, counted', (_w, frame, counter) => {
    const ctx = newCtx();
    const r = run(ctx, frame());
    expect([r.v, r.drop]).toEqual([VERDICT_DROP, counter]);
    expect(count(ctx, counter)).toBe(1);
  });
});
