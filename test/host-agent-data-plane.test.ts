// Packet-in / packet-out fixtures for the host agent: VXLAN in -> NATed frame on the backend's port, and
// the backend's reply -> DSR packet from the VIP. Expected frames are built from scratch with the packet
// builder (full checksums), so they also check the incremental checksum updates of the NAT.
import { describe, expect, it } from 'vitest';
import { mac } from '../shared/addr.js';
import { pkt, type PacketBuilder } from '../shared/packet-builder.js';
import { TCP_SYN, TCP_ACK, TCP_PSH } from '../shared/tcp.js';
import { IPV4_FLAG_DF, IPV4_FLAG_MF } from '../shared/ipv4.js';
import { LINKTYPE_RAW } from '../shared/pcap-file.js';
import { dissect } from '../shared/dissect.js';
import type { SlbxConfig } from '../shared/config.js';
import { compileHostTables } from '../host-agent/tables.js';
import {
  newHostContext,
  processInbound,
  processOutbound,
  OUT_DSR,
  VERDICT_DROP,
  VERDICT_FORWARD,
  VERDICT_LOCAL,
  type HostContext,
  type HostCounterName,
} from '../host-agent/data-plane.js';
import { labConfig } from './helpers/lab-config.js';
import { expectFrame } from './helpers/frames.js';

const MUX_MAC = '02:00:00:00:00:11';
const HOST1_MAC = '02:00:00:00:00:21';
const PORT_MACS = ['02:00:00:01:00:01', '02:00:00:01:00:02'];
const CLIENT = '198.51.100.10';
const CLIENT6 = '2001:db8:c::10';
const VIP = '203.0.113.10';
const VIP6 = '2001:db8:ff::10';
const H1VM1 = { mac: '02:00:c0:00:02:0a', ip: '192.0.2.10', ip6: '2001:db8:d::10' };
const H1VM2 = { mac: '02:00:c0:00:02:0b', ip: '192.0.2.11', ip6: '2001:db8:d::11' };

function newCtx(config: SlbxConfig = labConfig(), host = 'host1'): HostContext {
  return newHostContext(
    compileHostTables(config, host, 1),
    config.fabric.vxlanPort,
    PORT_MACS.map((m) => mac(m)),
  );
}

/** A VXLAN frame as a MUX sends it, carrying `inner` (a builder positioned after the inner Ethernet). */
function vxlanTo(
  innerMac: string,
  inner: (p: PacketBuilder) => PacketBuilder,
  o: { vni?: number; src?: string; dst?: string; flags?: number; innerType?: number } = {},
): Buffer {
  const p = pkt()
    .eth({ src: MUX_MAC, dst: HOST1_MAC })
    .ipv4({ src: o.src ?? '198.18.0.11', dst: o.dst ?? '198.18.0.21' })
    .udp({ sport: 51000, dport: 4789, checksum: 'zero' })
    .vxlan({ vni: o.vni ?? 5001, ...(o.flags !== undefined ? { flags: o.flags } : {}) })
    .eth({ src: MUX_MAC, dst: innerMac, ...(o.innerType !== undefined ? { type: o.innerType } : {}) });
  return inner(p).build();
}

function runIn(ctx: HostContext, frame: Buffer) {
  const v = processInbound(frame, frame.length, ctx);
  return {
    v,
    out: Buffer.from(ctx.outBuf.subarray(ctx.outOff, ctx.outOff + (v === VERDICT_FORWARD ? ctx.outLen : 0))),
    port: ctx.outPort,
    drop: ctx.lastDrop >= 0 ? ctx.counters.names[ctx.lastDrop] : null,
  };
}
/**
 * The client's packet of a flow, as a MUX delivers it: the host agent records the flow, and only then
 * may the backend's replies leave from the VIP (host-agent/dsr-flows.ts).
 */
function clientIn(
  ctx: HostContext,
  o: { mac: string; v6?: boolean; udp?: boolean; cport: number; fport: number; client?: string; vni?: number; vip?: string },
): void {
  const r = runIn(
    ctx,
    vxlanTo(
      o.mac,
      (p) => {
        const ip = o.v6 ? p.ipv6({ src: o.client ?? CLIENT6, dst: o.vip ?? VIP6 }) : p.ipv4({ src: o.client ?? CLIENT, dst: o.vip ?? VIP });
        return o.udp ? ip.udp({ sport: o.cport, dport: o.fport }).payload('q') : ip.tcp({ sport: o.cport, dport: o.fport, flags: TCP_ACK });
      },
      { ...(o.v6 ? { innerType: 0x86dd } : {}), ...(o.vni !== undefined ? { vni: o.vni } : {}) },
    ),
  );
  expect(r.drop).toBeNull();
}
function runOut(ctx: HostContext, frame: Buffer, port = 0) {
  const v = processOutbound(frame, frame.length, port, ctx);
  return {
    v,
    out: Buffer.from(ctx.outBuf.subarray(ctx.outOff, ctx.outOff + (v !== VERDICT_DROP ? ctx.outLen : 0))),
    port: ctx.outPort,
    drop: ctx.lastDrop >= 0 ? ctx.counters.names[ctx.lastDrop] : null,
  };
}

describe('host agent inbound: VXLAN -> NAT -> backend port', () => {
  const cases: [string, Buffer, number, Buffer][] = [
    [
      'TCP SYN to VIP:80 -> 192.0.2.10:80 on port h1vm1',
      vxlanTo(H1VM1.mac, (p) =>
        p.ipv4({ src: CLIENT, dst: VIP, id: 99, ttl: 63, flags: IPV4_FLAG_DF }).tcp({ sport: 40000, dport: 80, flags: TCP_SYN, seq: 7 }),
      ),
      0,
      pkt()
        .eth({ src: PORT_MACS[0], dst: H1VM1.mac })
        .ipv4({ src: CLIENT, dst: H1VM1.ip, id: 99, ttl: 63, flags: IPV4_FLAG_DF })
        .tcp({ sport: 40000, dport: 80, flags: TCP_SYN, seq: 7 })
        .build(),
    ],
    [
      'port mapping: VIP:8080 -> 192.0.2.11:8000 on port h1vm2',
      vxlanTo(H1VM2.mac, (p) =>
        p
          .ipv4({ src: CLIENT, dst: VIP })
          .tcp({ sport: 40001, dport: 8080, flags: TCP_ACK | TCP_PSH })
          .payload('GET / HTTP/1.1\r\n\r\n'),
      ),
      1,
      pkt()
        .eth({ src: PORT_MACS[1], dst: H1VM2.mac })
        .ipv4({ src: CLIENT, dst: H1VM2.ip })
        .tcp({ sport: 40001, dport: 8000, flags: TCP_ACK | TCP_PSH })
        .payload('GET / HTTP/1.1\r\n\r\n')
        .build(),
    ],
    [
      'UDP echo with a checksum',
      vxlanTo(H1VM1.mac, (p) => p.ipv4({ src: CLIENT, dst: VIP }).udp({ sport: 5353, dport: 7 }).payload('ping')),
      0,
      pkt()
        .eth({ src: PORT_MACS[0], dst: H1VM1.mac })
        .ipv4({ src: CLIENT, dst: H1VM1.ip })
        .udp({ sport: 5353, dport: 7 })
        .payload('ping')
        .build(),
    ],
    [
      'UDP without a checksum stays without one',
      vxlanTo(H1VM1.mac, (p) => p.ipv4({ src: CLIENT, dst: VIP }).udp({ sport: 5353, dport: 7, checksum: 'zero' }).payload('ping')),
      0,
      pkt()
        .eth({ src: PORT_MACS[0], dst: H1VM1.mac })
        .ipv4({ src: CLIENT, dst: H1VM1.ip })
        .udp({ sport: 5353, dport: 7, checksum: 'zero' })
        .payload('ping')
        .build(),
    ],
    [
      'TCP over IPv6 -> 2001:db8:d::10',
      vxlanTo(H1VM1.mac, (p) => p.ipv6({ src: CLIENT6, dst: VIP6, hopLimit: 60 }).tcp({ sport: 40002, dport: 80, flags: TCP_SYN }), {
        innerType: 0x86dd,
      }),
      0,
      pkt()
        .eth({ src: PORT_MACS[0], dst: H1VM1.mac })
        .ipv6({ src: CLIENT6, dst: H1VM1.ip6, hopLimit: 60 })
        .tcp({ sport: 40002, dport: 80, flags: TCP_SYN })
        .build(),
    ],
    [
      'UDP over IPv6 -> 2001:db8:d::11',
      vxlanTo(H1VM2.mac, (p) => p.ipv6({ src: CLIENT6, dst: VIP6 }).udp({ sport: 999, dport: 7 }).payload('v6'), { innerType: 0x86dd }),
      1,
      pkt()
        .eth({ src: PORT_MACS[1], dst: H1VM2.mac })
        .ipv6({ src: CLIENT6, dst: H1VM2.ip6 })
        .udp({ sport: 999, dport: 7 })
        .payload('v6')
        .build(),
    ],
  ];
  it.each(cases)('%s', (_n, frame, port, expected) => {
    const ctx = newCtx();
    const r = runIn(ctx, frame);
    expect(r.drop).toBeNull();
    expect(r.v).toBe(VERDICT_FORWARD);
    expect(r.port).toBe(port);
    expectFrame(r.out, expected);
    expect(ctx.counters.get('in_delivered')).toBe(1);
  });

  it('a fragmented datagram: the first fragment gets address, port and checksum rewritten, later ones the address', () => {
    const ctx = newCtx();
    // the UDP checksum covers the whole datagram, which the first fragment does not hold: build the
    // whole datagram, then cut it, as a sender's IP layer would
    const whole = pkt().ipv4({ src: CLIENT, dst: VIP, id: 5 }).udp({ sport: 6000, dport: 7 }).payload(1600).build();
    const natted = pkt().ipv4({ src: CLIENT, dst: H1VM1.ip, id: 5 }).udp({ sport: 6000, dport: 7 }).payload(1600).build();
    const piece = (b: Buffer, from: number, to: number) => b.subarray(20 + from, 20 + to);
    const first = vxlanTo(H1VM1.mac, (p) =>
      p.ipv4({ src: CLIENT, dst: VIP, id: 5, flags: IPV4_FLAG_MF, protocol: 17 }).payload(piece(whole, 0, 1000)),
    );
    const later = vxlanTo(H1VM1.mac, (p) =>
      p.ipv4({ src: CLIENT, dst: VIP, id: 5, fragOffset: 125, protocol: 17 }).payload(piece(whole, 1000, 1608)),
    );
    const r1 = runIn(ctx, first);
    expectFrame(
      r1.out,
      pkt()
        .eth({ src: PORT_MACS[0], dst: H1VM1.mac })
        .ipv4({ src: CLIENT, dst: H1VM1.ip, id: 5, flags: IPV4_FLAG_MF, protocol: 17 })
        .payload(piece(natted, 0, 1000))
        .build(),
    );
    const r2 = runIn(ctx, later);
    expectFrame(
      r2.out,
      pkt()
        .eth({ src: PORT_MACS[0], dst: H1VM1.mac })
        .ipv4({ src: CLIENT, dst: H1VM1.ip, id: 5, fragOffset: 125, protocol: 17 })
        .payload(piece(natted, 1000, 1608))
        .build(),
    );
    expect(ctx.counters.get('fragments')).toBe(2);
  });
});

describe('host agent inbound drops', () => {
  const good = (p: PacketBuilder) => p.ipv4({ src: CLIENT, dst: VIP }).tcp({ sport: 1, dport: 80 });
  const cases: [string, HostCounterName, () => Buffer | Uint8Array][] = [
    ['a runt frame', 'drop_in_eth_truncated', () => new Uint8Array(6)],
    ['not IP on the fabric', 'drop_in_not_ip', () => pkt().eth().payload(60).build()],
    ['not addressed to this host', 'drop_in_not_for_us', () => vxlanTo(H1VM1.mac, good, { dst: '198.18.0.22' })],
    [
      'not UDP',
      'drop_in_not_vxlan',
      () => pkt().eth().ipv4({ src: '198.18.0.11', dst: '198.18.0.21' }).tcp({ sport: 1, dport: 4789 }).build(),
    ],
    [
      'another UDP port',
      'drop_in_not_vxlan',
      () => pkt().eth().ipv4({ src: '198.18.0.11', dst: '198.18.0.21' }).udp({ sport: 1, dport: 4790 }).payload(30).build(),
    ],
    [
      'an outer fragment',
      'drop_in_outer_fragment',
      () =>
        pkt()
          .eth()
          .ipv4({ src: '198.18.0.11', dst: '198.18.0.21', flags: IPV4_FLAG_MF })
          .udp({ sport: 1, dport: 4789 })
          .payload(30)
          .build(),
    ],
    [
      'outer header checksum wrong',
      'drop_in_ipv4_bad_checksum',
      () => pkt().eth().ipv4({ src: '198.18.0.11', dst: '198.18.0.21', checksum: 1 }).udp({ sport: 1, dport: 4789 }).payload(30).build(),
    ],
    ['VXLAN from an unknown source', 'drop_in_unknown_source', () => vxlanTo(H1VM1.mac, good, { src: '198.18.0.99' })],
    ['VXLAN without the I flag', 'drop_in_vxlan_bad_vxlan_flags', () => vxlanTo(H1VM1.mac, good, { flags: 0 })],
    [
      'VXLAN cut short',
      'drop_in_vxlan_truncated',
      () => pkt().eth().ipv4({ src: '198.18.0.11', dst: '198.18.0.21' }).udp({ sport: 1, dport: 4789 }).payload(4).build(),
    ],
    ['a VNI this host does not serve', 'drop_in_unknown_vni', () => vxlanTo(H1VM1.mac, good, { vni: 5002 })],
    ['an inner MAC that is no port here', 'drop_in_unknown_mac', () => vxlanTo('02:00:c0:00:02:0c', good)],
    [
      'inner frame cut short',
      'drop_in_inner_eth_truncated',
      () =>
        pkt().eth().ipv4({ src: '198.18.0.11', dst: '198.18.0.21' }).udp({ sport: 1, dport: 4789 }).vxlan({ vni: 5001 }).payload(6).build(),
    ],
    ['inner not IP', 'drop_in_inner_not_ip', () => vxlanTo(H1VM1.mac, (p) => p.payload(40))],
    [
      'inner IPv4 bad IHL',
      'drop_in_inner_ipv4_bad_ihl',
      () => vxlanTo(H1VM1.mac, (p) => p.ipv4({ src: CLIENT, dst: VIP, ihl: 2 }).tcp({ sport: 1, dport: 80 })),
    ],
    [
      'inner IPv4 bad checksum',
      'drop_in_inner_ipv4_bad_checksum',
      () => vxlanTo(H1VM1.mac, (p) => p.ipv4({ src: CLIENT, dst: VIP, checksum: 7 }).tcp({ sport: 1, dport: 80 })),
    ],
    [
      'inner destination not a VIP of this nic',
      'drop_in_not_vip_of_vni',
      () => vxlanTo(H1VM1.mac, (p) => p.ipv4({ src: CLIENT, dst: '203.0.113.77' }).tcp({ sport: 1, dport: 80 })),
    ],
    [
      'a VIP port without a rule',
      'drop_in_no_rule',
      () => vxlanTo(H1VM1.mac, (p) => p.ipv4({ src: CLIENT, dst: VIP }).tcp({ sport: 1, dport: 22 })),
    ],
    [
      'inner ICMP (not load balanced)',
      'drop_in_inner_not_tcp_udp',
      () => vxlanTo(H1VM1.mac, (p) => p.ipv4({ src: CLIENT, dst: VIP }).icmp({ type: 8 })),
    ],
    [
      'inner TCP bad data offset',
      'drop_in_inner_tcp_bad_data_offset',
      () => vxlanTo(H1VM1.mac, (p) => p.ipv4({ src: CLIENT, dst: VIP }).tcp({ sport: 1, dport: 80, dataOffset: 15 })),
    ],
    [
      'inner UDP bad length',
      'drop_in_inner_udp_bad_udp_length',
      () => vxlanTo(H1VM1.mac, (p) => p.ipv4({ src: CLIENT, dst: VIP }).udp({ sport: 1, dport: 7, length: 3 })),
    ],
    [
      'inner IPv6 bad payload length',
      'drop_in_inner_ipv6_bad_payload_length',
      () =>
        vxlanTo(H1VM1.mac, (p) => p.ipv6({ src: CLIENT6, dst: VIP6, payloadLength: 900 }).tcp({ sport: 1, dport: 80 }), {
          innerType: 0x86dd,
        }),
    ],
  ];
  it.each(cases)('%s -> %s', (_n, reason, build) => {
    const ctx = newCtx();
    const r = runIn(ctx, Buffer.from(build()));
    expect(r.v).toBe(VERDICT_DROP);
    expect(r.drop).toBe(reason);
    expect(ctx.counters.totalDrops()).toBe(1);
  });

  it('two tenants may reuse MACs and addresses: the VNI decides, and a VNI/VIP mismatch is dropped', () => {
    const config = labConfig((raw) => {
      raw.networks.push({ name: 'tenant-b', vni: 5002, gateway: '192.0.2.1' });
      raw.nics.push({
        name: 'b-h1vm1',
        host: 'host1',
        network: 'tenant-b',
        port: 'b-h1vm1',
        mac: '02:00:c0:00:02:0a',
        addresses: ['192.0.2.10'],
      });
      raw.pools.push({ name: 'b-web', backends: [{ nic: 'b-h1vm1' }] });
      raw.vips.push({ address: '203.0.113.20', rules: [{ protocol: 'tcp', frontendPort: 80, pool: 'b-web' }] });
    });
    const ctx = newHostContext(
      compileHostTables(config, 'host1', 1),
      4789,
      [...PORT_MACS, '02:00:00:01:00:03'].map((m) => mac(m)),
    );
    const a = runIn(
      ctx,
      vxlanTo(H1VM1.mac, (p) => p.ipv4({ src: CLIENT, dst: VIP }).tcp({ sport: 1, dport: 80 })),
    );
    expect(a.port).toBe(0);
    const b = runIn(
      ctx,
      vxlanTo(H1VM1.mac, (p) => p.ipv4({ src: CLIENT, dst: '203.0.113.20' }).tcp({ sport: 1, dport: 80 }), { vni: 5002 }),
    );
    expect(b.drop).toBeNull();
    expect(b.port).toBe(2);
    // tenant A's VNI carrying tenant B's VIP
    const forged = runIn(
      ctx,
      vxlanTo(H1VM1.mac, (p) => p.ipv4({ src: CLIENT, dst: '203.0.113.20' }).tcp({ sport: 1, dport: 80 }), { vni: 5001 }),
    );
    expect(forged.drop).toBe('drop_in_not_vip_of_vni');
  });
});

describe('host agent outbound: replies leave from the VIP (direct server return)', () => {
  const cases: [string, number, Buffer, Buffer, Parameters<typeof clientIn>[1]][] = [
    [
      'TCP SYN-ACK from 192.0.2.10:80 -> VIP:80',
      0,
      pkt()
        .eth({ src: H1VM1.mac, dst: PORT_MACS[0] })
        .ipv4({ src: H1VM1.ip, dst: CLIENT, id: 3, flags: IPV4_FLAG_DF })
        .tcp({ sport: 80, dport: 40000, flags: TCP_SYN | TCP_ACK, seq: 1, ack: 8 })
        .build(),
      pkt()
        .ipv4({ src: VIP, dst: CLIENT, id: 3, flags: IPV4_FLAG_DF })
        .tcp({ sport: 80, dport: 40000, flags: TCP_SYN | TCP_ACK, seq: 1, ack: 8 })
        .build(),
      { mac: H1VM1.mac, cport: 40000, fport: 80 },
    ],
    [
      'port mapping back: 192.0.2.11:8000 -> VIP:8080',
      1,
      pkt()
        .eth({ src: H1VM2.mac, dst: PORT_MACS[1] })
        .ipv4({ src: H1VM2.ip, dst: CLIENT })
        .tcp({ sport: 8000, dport: 40001 })
        .payload('HTTP/1.1 200 OK\r\n')
        .build(),
      pkt().ipv4({ src: VIP, dst: CLIENT }).tcp({ sport: 8080, dport: 40001 }).payload('HTTP/1.1 200 OK\r\n').build(),
      { mac: H1VM2.mac, cport: 40001, fport: 8080 },
    ],
    [
      'UDP echo reply',
      0,
      pkt()
        .eth({ src: H1VM1.mac, dst: PORT_MACS[0] })
        .ipv4({ src: H1VM1.ip, dst: CLIENT })
        .udp({ sport: 7, dport: 5353 })
        .payload('h1vm1')
        .build(),
      pkt().ipv4({ src: VIP, dst: CLIENT }).udp({ sport: 7, dport: 5353 }).payload('h1vm1').build(),
      { mac: H1VM1.mac, udp: true, cport: 5353, fport: 7 },
    ],
    [
      'TCP over IPv6',
      0,
      pkt()
        .eth({ src: H1VM1.mac, dst: PORT_MACS[0] })
        .ipv6({ src: H1VM1.ip6, dst: CLIENT6 })
        .tcp({ sport: 80, dport: 40002, flags: TCP_ACK })
        .payload('hi')
        .build(),
      pkt().ipv6({ src: VIP6, dst: CLIENT6 }).tcp({ sport: 80, dport: 40002, flags: TCP_ACK }).payload('hi').build(),
      { mac: H1VM1.mac, v6: true, cport: 40002, fport: 80 },
    ],
    [
      'UDP over IPv6',
      1,
      pkt()
        .eth({ src: H1VM2.mac, dst: PORT_MACS[1] })
        .ipv6({ src: H1VM2.ip6, dst: CLIENT6 })
        .udp({ sport: 7, dport: 999 })
        .payload('v6')
        .build(),
      pkt().ipv6({ src: VIP6, dst: CLIENT6 }).udp({ sport: 7, dport: 999 }).payload('v6').build(),
      { mac: H1VM2.mac, v6: true, udp: true, cport: 999, fport: 7 },
    ],
  ];
  it.each(cases)('%s', (_n, port, frame, expected, flow) => {
    const ctx = newCtx();
    expect(runOut(ctx, Buffer.from(frame), port).drop).toBe('drop_out_dsr_unsolicited'); // before the client's packet
    clientIn(ctx, flow);
    const r = runOut(ctx, frame, port);
    expect(r.drop).toBeNull();
    expect(r.port).toBe(OUT_DSR);
    expectFrame(r.out, expected, LINKTYPE_RAW);
    expect(ctx.counters.get('out_dsr')).toBe(1);
    expect(ctx.counters.get('drop_out_dsr_unsolicited')).toBe(1);
  });

  it('answers ARP for the gateway on the port, from the port MAC', () => {
    const ctx = newCtx();
    const r = runOut(
      ctx,
      pkt()
        .eth({ src: H1VM1.mac, dst: 'ff:ff:ff:ff:ff:ff' })
        .arp({ op: 1, senderMac: H1VM1.mac, senderIp: H1VM1.ip, targetIp: '192.0.2.1' })
        .build(),
      0,
    );
    expect(r.port).toBe(0);
    expectFrame(
      r.out,
      pkt()
        .eth({ src: PORT_MACS[0], dst: H1VM1.mac })
        .arp({ op: 2, senderMac: PORT_MACS[0], senderIp: '192.0.2.1', targetMac: H1VM1.mac, targetIp: H1VM1.ip })
        .build(),
    );
    expect(
      runOut(
        ctx,
        pkt()
          .eth({ src: H1VM1.mac, dst: 'ff:ff:ff:ff:ff:ff' })
          .arp({ op: 1, senderMac: H1VM1.mac, senderIp: H1VM1.ip, targetIp: '192.0.2.11' })
          .build(),
        0,
      ).drop,
    ).toBe('drop_out_arp_ignored');
  });

  it('answers neighbour solicitation for the IPv6 gateway with a router advertisement of the port MAC', () => {
    const ctx = newCtx();
    // NS body: target + source link-layer option
    const body = new Uint8Array(24);
    body.set([0x20, 0x01, 0x0d, 0xb8, 0, 0x0d, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], 0); // 2001:db8:d::1
    body.set([1, 1, ...mac(H1VM1.mac)], 16);
    const ns = pkt()
      .eth({ src: H1VM1.mac, dst: '33:33:ff:00:00:01' })
      .ipv6({ src: H1VM1.ip6, dst: 'ff02::1:ff00:1', hopLimit: 255 })
      .icmpv6({ type: 135 })
      .payload(body)
      .build();
    const r = runOut(ctx, ns, 0);
    expect(r.drop).toBeNull();
    expect(r.port).toBe(0);
    const d = dissect(r.out);
    expect(d.first('eth')).toMatchObject({ src: PORT_MACS[0], dst: H1VM1.mac });
    expect(d.first('ipv6')).toMatchObject({ src: '2001:db8:d::1', dst: H1VM1.ip6, hopLimit: 255 });
    expect(d.first('icmpv6')).toMatchObject({ type: 136, checksumOk: true, rest: 0xe0000000 });
    expect(r.out.subarray(r.out.length - 6).toString('hex')).toBe(PORT_MACS[0]!.replaceAll(':', ''));
  });

  const drops: [string, HostCounterName, number, () => Buffer][] = [
    [
      "a source address that is not the nic's",
      'drop_out_spoofed_source',
      0,
      () => pkt().eth({ src: H1VM1.mac }).ipv4({ src: '192.0.2.99', dst: CLIENT }).tcp({ sport: 80, dport: 1 }).build(),
    ],
    [
      "the other nic's address on this port",
      'drop_out_spoofed_source',
      0,
      () => pkt().eth({ src: H1VM1.mac }).ipv4({ src: H1VM2.ip, dst: CLIENT }).tcp({ sport: 80, dport: 1 }).build(),
    ],
    [
      'a connection the backend opened itself (no SNAT yet)',
      'drop_out_not_lb_reply',
      0,
      () => pkt().eth({ src: H1VM1.mac }).ipv4({ src: H1VM1.ip, dst: CLIENT }).tcp({ sport: 45000, dport: 443 }).build(),
    ],
    [
      'ICMP from the backend',
      'drop_out_not_lb_reply',
      0,
      () => pkt().eth({ src: H1VM1.mac }).ipv4({ src: H1VM1.ip, dst: CLIENT }).icmp({ type: 0 }).build(),
    ],
    [
      'ICMPv6 other than neighbour solicitation',
      'drop_out_icmpv6_ignored',
      0,
      () => pkt().eth({ src: H1VM1.mac }).ipv6({ src: H1VM1.ip6, dst: 'ff02::2' }).icmpv6({ type: 133 }).build(),
    ],
    [
      'a tagged frame',
      'drop_out_vlan',
      0,
      () => pkt().eth({ src: H1VM1.mac, vlan: 5 }).ipv4({ src: H1VM1.ip, dst: CLIENT }).tcp({ sport: 80, dport: 1 }).build(),
    ],
    ['not IP', 'drop_out_not_ip', 0, () => pkt().eth({ src: H1VM1.mac }).payload(50).build()],
    [
      'IPv4 bad checksum',
      'drop_out_ipv4_bad_checksum',
      0,
      () => pkt().eth({ src: H1VM1.mac }).ipv4({ src: H1VM1.ip, dst: CLIENT, checksum: 3 }).tcp({ sport: 80, dport: 1 }).build(),
    ],
    [
      'TCP cut short',
      'drop_out_tcp_truncated',
      0,
      () => pkt().eth({ src: H1VM1.mac }).ipv4({ src: H1VM1.ip, dst: CLIENT, protocol: 6 }).payload(7).build(),
    ],
  ];
  it.each(drops)('%s -> %s', (_n, reason, port, build) => {
    const ctx = newCtx();
    const r = runOut(ctx, build(), port);
    expect(r.v).toBe(VERDICT_DROP);
    expect(r.drop).toBe(reason);
    expect(ctx.counters.totalDrops()).toBe(1);
  });

  it('packets to the gateway address are for the host agent itself (probe answers), not DSR', () => {
    const ctx = newCtx();
    const synAck = pkt()
      .eth({ src: H1VM1.mac, dst: PORT_MACS[0] })
      .ipv4({ src: H1VM1.ip, dst: '192.0.2.1' })
      .tcp({ sport: 80, dport: 33000, flags: TCP_SYN | TCP_ACK })
      .build();
    const r = runOut(ctx, synAck, 0);
    expect(r.v).toBe(VERDICT_LOCAL);
    expect(r.port).toBe(0);
    expectFrame(r.out, synAck.subarray(14), LINKTYPE_RAW);
    const v6 = pkt()
      .eth({ src: H1VM1.mac, dst: PORT_MACS[0] })
      .ipv6({ src: H1VM1.ip6, dst: '2001:db8:d::1' })
      .tcp({ sport: 80, dport: 33001, flags: TCP_SYN | TCP_ACK })
      .build();
    expect(runOut(ctx, v6, 0).v).toBe(VERDICT_LOCAL);
    expect(ctx.counters.get('out_local')).toBe(2);
    expect(ctx.counters.get('out_dsr')).toBe(0);
  });

  it("a restarted host agent re-learns an established flow from the client's next segment, and NATs its replies the same", () => {
    const reply = pkt()
      .eth({ src: H1VM1.mac, dst: PORT_MACS[0] })
      .ipv4({ src: H1VM1.ip, dst: CLIENT })
      .tcp({ sport: 80, dport: 40000, flags: TCP_ACK, seq: 5000 })
      .payload('data')
      .build();
    const before = newCtx();
    clientIn(before, { mac: H1VM1.mac, cport: 40000, fport: 80 });
    const a = runOut(before, Buffer.from(reply));
    const after = newCtx(); // a fresh process: nothing seen before
    expect(runOut(after, Buffer.from(reply)).drop).toBe('drop_out_dsr_unsolicited'); // the server speaking first is dropped
    clientIn(after, { mac: H1VM1.mac, cport: 40000, fport: 80 }); // the client's next segment (an ACK, not a SYN)
    const b = runOut(after, Buffer.from(reply));
    expect(a.port).toBe(OUT_DSR);
    expect(b.out).toEqual(a.out);
  });
});

describe('host agent: VXLAN over an IPv6 underlay', () => {
  const vx6 = (o: { src?: string; dst?: string; checksum?: 'zero' | 'bad' } = {}) =>
    pkt()
      .eth({ src: MUX_MAC, dst: HOST1_MAC })
      .ipv6({ src: o.src ?? '2001:db8:f::11', dst: o.dst ?? '2001:db8:f::21' })
      .udp({ sport: 51000, dport: 4789, ...(o.checksum ? { checksum: o.checksum } : {}) })
      .vxlan({ vni: 5001 })
      .eth({ src: MUX_MAC, dst: H1VM1.mac })
      .ipv4({ src: CLIENT, dst: VIP })
      .tcp({ sport: 40000, dport: 80, flags: TCP_SYN })
      .build();
  it('is decapsulated and NATed like over IPv4', () => {
    const ctx = newCtx();
    const r = runIn(ctx, vx6());
    expect(r.drop).toBeNull();
    expectFrame(
      r.out,
      pkt()
        .eth({ src: PORT_MACS[0], dst: H1VM1.mac })
        .ipv4({ src: CLIENT, dst: H1VM1.ip })
        .tcp({ sport: 40000, dport: 80, flags: TCP_SYN })
        .build(),
    );
  });
  it.each([
    ['a zero UDP checksum (RFC 8200 8.1)', { checksum: 'zero' as const }, 'drop_in_bad_udp_checksum'],
    ['a wrong UDP checksum', { checksum: 'bad' as const }, 'drop_in_bad_udp_checksum'],
    ['an unknown IPv6 source', { src: '2001:db8:f::99' }, 'drop_in_unknown_source'],
    ["another host's address", { dst: '2001:db8:f::22' }, 'drop_in_not_for_us'],
  ])('drops %s', (_n, o, reason) => {
    expect(runIn(newCtx(), vx6(o)).drop).toBe(reason);
  });
});

describe('host agent: ICMP errors about a VIP flow are NATed, outer and quoted headers', () => {
  it('ICMP fragmentation needed about VIP:8080 -> client becomes one about DIP:8000 -> client', () => {
    const ctx = newCtx();
    const body = 'x'.repeat(1400);
    const quote = (src: string, sport: number) =>
      pkt()
        .ipv4({ src, dst: CLIENT, flags: IPV4_FLAG_DF, id: 77 })
        .tcp({ sport, dport: 40001, flags: TCP_ACK, seq: 99 })
        .payload(body)
        .build()
        .subarray(0, 20 + 20 + 8);
    const frame = vxlanTo(H1VM2.mac, (p) =>
      p.ipv4({ src: '198.51.100.1', dst: VIP }).icmp({ type: 3, code: 4, rest: 1350 }).payload(quote(VIP, 8080)),
    );
    const r = runIn(ctx, frame);
    expect(r.drop).toBeNull();
    expect(r.port).toBe(1);
    expectFrame(
      r.out,
      pkt()
        .eth({ src: PORT_MACS[1], dst: H1VM2.mac })
        .ipv4({ src: '198.51.100.1', dst: H1VM2.ip })
        .icmp({ type: 3, code: 4, rest: 1350 })
        .payload(quote(H1VM2.ip, 8000))
        .build(),
    );
    expect(ctx.counters.get('icmp_errors_in')).toBe(1);
  });

  it('a quote of only 8 transport bytes (RFC 792): ports rewritten, no TCP checksum to touch', () => {
    const ctx = newCtx();
    const quote = (src: string, sport: number) =>
      pkt().ipv4({ src, dst: CLIENT }).tcp({ sport, dport: 40001 }).payload(500).build().subarray(0, 28);
    const r = runIn(
      ctx,
      vxlanTo(H1VM2.mac, (p) => p.ipv4({ src: '198.51.100.1', dst: VIP }).icmp({ type: 11 }).payload(quote(VIP, 8080))),
    );
    const q = quote(H1VM2.ip, 8000);
    // the quoted header's checksum and the ICMP checksum are right; the quoted bytes are the expected ones
    expectFrame(
      r.out,
      pkt().eth({ src: PORT_MACS[1], dst: H1VM2.mac }).ipv4({ src: '198.51.100.1', dst: H1VM2.ip }).icmp({ type: 11 }).payload(q).build(),
    );
  });

  it('ICMPv6 packet too big about [VIP6]:80 -> client becomes one about [DIP6]:80', () => {
    const ctx = newCtx();
    const quote = (src: string) => pkt().ipv6({ src, dst: CLIENT6 }).udp({ sport: 7, dport: 999 }).payload(1400).build().subarray(0, 1232);
    const frame = vxlanTo(
      H1VM1.mac,
      (p) => p.ipv6({ src: '2001:db8:c::1', dst: VIP6 }).icmpv6({ type: 2, rest: 1280 }).payload(quote(VIP6)),
      { innerType: 0x86dd },
    );
    const r = runIn(ctx, frame);
    expect(r.drop).toBeNull();
    expectFrame(
      r.out,
      pkt()
        .eth({ src: PORT_MACS[0], dst: H1VM1.mac })
        .ipv6({ src: '2001:db8:c::1', dst: H1VM1.ip6 })
        .icmpv6({ type: 2, rest: 1280 })
        .payload(quote(H1VM1.ip6))
        .build(),
    );
  });

  it.each([
    [
      'an error about another address',
      () =>
        vxlanTo(H1VM1.mac, (p) =>
          p
            .ipv4({ src: '198.51.100.1', dst: VIP })
            .icmp({ type: 3, code: 1 })
            .payload(pkt().ipv4({ src: '203.0.113.99', dst: CLIENT }).udp({ sport: 7, dport: 1 }).build()),
        ),
      'drop_in_icmp_unrelated',
    ],
    [
      'an error quoting too little',
      () => vxlanTo(H1VM1.mac, (p) => p.ipv4({ src: '198.51.100.1', dst: VIP }).icmp({ type: 3, code: 1 }).payload(12)),
      'drop_in_icmp_bad_quote',
    ],
    [
      'an echo request',
      () => vxlanTo(H1VM1.mac, (p) => p.ipv4({ src: CLIENT, dst: VIP }).icmp({ type: 8 }).payload(8)),
      'drop_in_inner_not_tcp_udp',
    ],
  ] as const)('drops %s -> %s', (_n, build, reason) => {
    expect(runIn(newCtx(), build()).drop).toBe(reason);
  });
});

describe('host agent: replies too big for the DSR return', () => {
  const reply4 = (df: boolean) =>
    pkt()
      .eth({ src: H1VM1.mac, dst: PORT_MACS[0] })
      .ipv4({ src: H1VM1.ip, dst: CLIENT, flags: df ? IPV4_FLAG_DF : 0 })
      .tcp({ sport: 80, dport: 40000, flags: TCP_ACK })
      .payload(1460)
      .build();
  const flow = { mac: H1VM1.mac, cport: 40000, fport: 80 };
  it('answers the backend with ICMP fragmentation needed from its gateway, quoting its own packet', () => {
    const ctx = newCtx();
    clientIn(ctx, flow);
    ctx.dsrMtu = 1400;
    const f = reply4(true);
    const r = runOut(ctx, f, 0);
    expect(r.v).toBe(VERDICT_FORWARD);
    expect(r.port).toBe(0);
    const d = dissect(r.out);
    expect(d.first('eth')).toMatchObject({ src: PORT_MACS[0], dst: H1VM1.mac });
    expect(d.all('ipv4')[0]).toMatchObject({ src: '192.0.2.1', dst: H1VM1.ip, checksumOk: true });
    expect(d.first('icmp')).toMatchObject({ type: 3, code: 4, rest: 1400, checksumOk: true });
    expect(Buffer.from(r.out.subarray(14 + 28))).toEqual(f.subarray(14, 14 + 548));
    expect(ctx.counters.get('icmp_too_big_sent')).toBe(1);
    expect(ctx.counters.get('out_dsr')).toBe(0);
  });
  it('counts a too-big reply that may be fragmented as out_too_big', () => {
    const ctx = newCtx();
    clientIn(ctx, flow);
    ctx.dsrMtu = 1400;
    expect(runOut(ctx, reply4(false), 0).drop).toBe('drop_out_too_big');
  });
  it('answers IPv6 with packet too big from the IPv6 gateway', () => {
    const ctx = newCtx();
    clientIn(ctx, { ...flow, v6: true });
    ctx.dsrMtu = 1400;
    const f = pkt()
      .eth({ src: H1VM1.mac, dst: PORT_MACS[0] })
      .ipv6({ src: H1VM1.ip6, dst: CLIENT6 })
      .tcp({ sport: 80, dport: 40000 })
      .payload(1440)
      .build();
    const r = runOut(ctx, f, 0);
    const d = dissect(r.out);
    expect(d.all('ipv6')[0]).toMatchObject({ src: '2001:db8:d::1', dst: H1VM1.ip6 });
    expect(d.first('icmpv6')).toMatchObject({ type: 2, rest: 1400, checksumOk: true });
  });
  it('sends replies that fit', () => {
    const ctx = newCtx();
    clientIn(ctx, flow);
    ctx.dsrMtu = 1500;
    expect(runOut(ctx, reply4(true), 0).port).toBe(OUT_DSR);
  });
  // the IP packet's own length against the MTU, at the boundary, for both families (IPv4 takes the fast path)
  it.each([
    ['IPv4', 1500],
    ['IPv4', 1499],
    ['IPv6', 1500],
    ['IPv6', 1499],
  ] as const)('%s: a 1500-byte reply at an MTU of %i (leaves by DSR at 1500, answered at 1499)', (family, mtu) => {
    const v6 = family === 'IPv6';
    const ctx = newCtx();
    clientIn(ctx, { ...flow, v6 });
    ctx.dsrMtu = mtu;
    const b = pkt().eth({ src: H1VM1.mac, dst: PORT_MACS[0] });
    const ip = v6 ? b.ipv6({ src: H1VM1.ip6, dst: CLIENT6 }) : b.ipv4({ src: H1VM1.ip, dst: CLIENT, flags: IPV4_FLAG_DF });
    const f = ip
      .tcp({ sport: 80, dport: 40000, flags: TCP_ACK })
      .payload(v6 ? 1440 : 1460)
      .build();
    expect(f.length).toBe(14 + 1500);
    const r = runOut(ctx, f, 0);
    expect(r.v).toBe(VERDICT_FORWARD);
    expect(r.port).toBe(mtu === 1500 ? OUT_DSR : 0);
    expect(ctx.counters.get('icmp_too_big_sent')).toBe(mtu === 1500 ? 0 : 1);
  });
});

describe('host agent tables: the reply ports of the outbound fast path', () => {
  it("holds exactly the backend ports of each nic's public VIP rules, not its internal VIPs'", () => {
    const config = labConfig((c) => {
      const rules = [{ name: 'ew-tcp', protocol: 'tcp', frontendPort: 7000, backendPort: 7000, pool: 'web' }];
      c.vips.push({ address: '192.0.2.100', scope: 'internal', network: 'tenant-a', rules });
    });
    const tables = compileHostTables(config, 'host1', 1);
    for (const nic of tables.nics) {
      // from the config, not from the compiled rules: every public rule with a backend on this nic
      const want = new Set<number>();
      for (const v of config.vips) {
        if (v.scope === 'internal') continue;
        for (const r of v.rules) {
          const pool = config.pools.find((p) => p.name === r.pool)!;
          if (pool.backends.some((b) => b.nic === nic.name)) want.add(r.backendPort);
        }
      }
      const got = new Set<number>();
      for (let p = 0; p < 65536; p++) if ((nic.replyPorts[p >>> 5]! & (1 << (p & 31))) !== 0) got.add(p);
      expect(want.size).toBeGreaterThan(0);
      expect(got.has(7000)).toBe(false);
      expect([...got].sort((a, b) => a - b)).toEqual([...want].sort((a, b) => a - b));
    }
  });
});
