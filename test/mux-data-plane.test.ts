// Packet-in / packet-out fixtures for the MUX data plane (no namespaces): each row is a frame built with
// the one packet builder, the verdict, the exact VXLAN frame out (built independently with the same
// builder) and the counters.
import { describe, expect, it } from 'vitest';
import { mac } from '../shared/addr.js';
import { pkt } from '../shared/packet-builder.js';
import { TCP_SYN, TCP_ACK } from '../shared/tcp.js';
import { IPV4_FLAG_MF, IPV4_FLAG_DF } from '../shared/ipv4.js';
import { ETHERTYPE_IPV4, ETHERTYPE_IPV6 } from '../shared/ethernet.js';
import { vxlanSourcePort } from '../shared/flow-hash.js';
import { dissect } from '../shared/dissect.js';
import type { SlbxConfig } from '../shared/config.js';
import { compileMuxTables, ALL_HEALTHY, type HealthView } from '../mux/tables.js';
import {
  newMuxContext,
  processPacket,
  sweepFlows,
  VERDICT_CONTROL,
  VERDICT_DROP,
  VERDICT_FORWARD,
  VERDICT_REPLY,
  ICMP_RATE_PER_S,
  type MuxContext,
  type MuxCounterName,
} from '../mux/data-plane.js';
import { labConfig } from './helpers/lab-config.js';
import { flowHash } from '../scripts/oracle/maglev-oracle.js';
import { oracleRule } from '../scripts/oracle/expected-backend.js';
import { expectFrame } from './helpers/frames.js';

const MUX_MAC = '02:00:00:00:00:11';
const ROUTER_MAC = '02:00:00:00:00:01';
const HOST_MACS: Record<string, string> = { host1: '02:00:00:00:00:21', host2: '02:00:00:00:00:22' };
const CLIENT = '198.51.100.10';
const CLIENT6 = '2001:db8:c::10';
const VIP = '203.0.113.10';
const VIP6 = '2001:db8:ff::10';
const SEED = 0x736c6278;

function newCtx(
  config: SlbxConfig = labConfig(),
  health: HealthView = ALL_HEALTHY,
  opts: { learn?: boolean; mtu?: number; underlay6?: boolean } = {},
): MuxContext {
  const tables = compileMuxTables(config, health, null, 1);
  if (opts.learn !== false) {
    for (const h of tables.hosts.values()) {
      h.mac.set(mac(HOST_MACS[h.name]!));
      h.macKnown = true;
    }
  }
  const mux = config.muxes[0]!;
  return newMuxContext({
    tables,
    localMac: mac(MUX_MAC),
    localPa4: mux.address.words[0]!,
    localPa6: mux.address6!.words,
    underlay6: opts.underlay6 ?? false,
    hashSeed: config.hashSeed,
    mtu: opts.mtu ?? config.fabric.mtu,
    vxlanPort: config.fabric.vxlanPort,
    flowTable: config.flowTable,
  });
}

// The expected backend and flow hash come from the independent oracle (scripts/oracle), not from the code
// under test: the lab pool's table (every rule of the VIP uses pool web), slot = hash % M.
const TABLE = oracleRule(labConfig(), VIP, 6, 80).table;
const nicOf = (hash: number) => TABLE[hash % TABLE.length]!;
const NICS: Record<string, { host: string; mac: string }> = {
  h1vm1: { host: 'host1', mac: '02:00:c0:00:02:0a' },
  h1vm2: { host: 'host1', mac: '02:00:c0:00:02:0b' },
  h2vm1: { host: 'host2', mac: '02:00:c0:00:02:0c' },
  h2vm2: { host: 'host2', mac: '02:00:c0:00:02:0d' },
};
const HOST_PA: Record<string, string> = { host1: '198.18.0.21', host2: '198.18.0.22' };

/** The VXLAN frame the MUX must send for `client` (a frame; its IP packet starts at l3). */
function encap(client: Buffer, l3: number, nic: string, flowHash: number, ipId: number, innerType = ETHERTYPE_IPV4): Buffer {
  const n = NICS[nic]!;
  return pkt()
    .eth({ src: MUX_MAC, dst: HOST_MACS[n.host]! })
    .ipv4({ src: '198.18.0.11', dst: HOST_PA[n.host]!, id: ipId, ttl: 64, flags: 0 })
    .udp({ sport: vxlanSourcePort(flowHash), dport: 4789, checksum: 'zero' })
    .vxlan({ vni: 5001 })
    .eth({ src: MUX_MAC, dst: n.mac, type: innerType })
    .payload(client.subarray(l3))
    .build();
}

const tcp4 = (sport: number, dport = 80, flags = TCP_SYN, src = CLIENT) =>
  pkt().eth({ src: ROUTER_MAC, dst: MUX_MAC }).ipv4({ src, dst: VIP, flags: IPV4_FLAG_DF }).tcp({ sport, dport, flags }).build();
const udp4 = (sport: number, dport = 7, src = CLIENT) =>
  pkt().eth({ src: ROUTER_MAC, dst: MUX_MAC }).ipv4({ src, dst: VIP }).udp({ sport, dport }).payload('ping').build();

function run(ctx: MuxContext, frame: Buffer): { verdict: number; out: Buffer; drop: string | null } {
  const verdict = processPacket(frame, frame.length, ctx);
  return {
    verdict,
    out: Buffer.from(ctx.out.subarray(0, verdict === VERDICT_FORWARD || verdict === VERDICT_REPLY ? ctx.outLen : 0)),
    drop: ctx.lastDrop >= 0 ? ctx.counters.names[ctx.lastDrop]! : null,
  };
}

describe('mux: forwarding fixtures (packet in -> VXLAN frame out)', () => {
  const cases: [string, () => Buffer, (f: Buffer) => { nic: string; hash: number; l3: number; type?: number }][] = [
    [
      'TCP SYN over IPv4, 5-tuple',
      () => tcp4(40001),
      () => {
        const h = flowHash(CLIENT, VIP, 6, 40001, 80, 5, SEED);
        return { nic: nicOf(h), hash: h, l3: 14 };
      },
    ],
    [
      'TCP data with a payload',
      () =>
        pkt()
          .eth({ src: ROUTER_MAC, dst: MUX_MAC })
          .ipv4({ src: CLIENT, dst: VIP })
          .tcp({ sport: 40002, dport: 80, flags: TCP_ACK })
          .payload('GET / HTTP/1.1\r\n\r\n')
          .build(),
      () => {
        const h = flowHash(CLIENT, VIP, 6, 40002, 80, 5, SEED);
        return { nic: nicOf(h), hash: h, l3: 14 };
      },
    ],
    [
      'UDP over IPv4 to the echo rule',
      () => udp4(5353),
      () => {
        const h = flowHash(CLIENT, VIP, 17, 5353, 7, 5, SEED);
        return { nic: nicOf(h), hash: h, l3: 14 };
      },
    ],
    [
      'UDP, 3-tuple rule: the slot ignores ports, the outer port still follows the 5-tuple',
      () => udp4(5354, 7003),
      () => {
        const h5 = flowHash(CLIENT, VIP, 17, 5354, 7003, 5, SEED);
        return { nic: nicOf(flowHash(CLIENT, VIP, 17, 0, 0, 3, SEED)), hash: h5, l3: 14 };
      },
    ],
    [
      'UDP, 2-tuple rule',
      () => udp4(5355, 7002),
      () => {
        const h5 = flowHash(CLIENT, VIP, 17, 5355, 7002, 5, SEED);
        return { nic: nicOf(flowHash(CLIENT, VIP, 0, 0, 0, 2, SEED)), hash: h5, l3: 14 };
      },
    ],
    [
      'an 802.1Q-tagged client frame (the tag is not carried inside)',
      () => pkt().eth({ src: ROUTER_MAC, dst: MUX_MAC, vlan: 42 }).ipv4({ src: CLIENT, dst: VIP }).tcp({ sport: 40003, dport: 80 }).build(),
      () => {
        const h = flowHash(CLIENT, VIP, 6, 40003, 80, 5, SEED);
        return { nic: nicOf(h), hash: h, l3: 18 };
      },
    ],
    [
      'IPv4 with options (IHL 7)',
      () =>
        pkt()
          .eth({ src: ROUTER_MAC, dst: MUX_MAC })
          .ipv4({ src: CLIENT, dst: VIP, options: new Uint8Array(8) })
          .tcp({ sport: 40004, dport: 80 })
          .build(),
      () => {
        const h = flowHash(CLIENT, VIP, 6, 40004, 80, 5, SEED);
        return { nic: nicOf(h), hash: h, l3: 14 };
      },
    ],
    [
      'port mapping rule 8080 (the MUX leaves ports alone)',
      () => tcp4(40005, 8080),
      () => {
        const h = flowHash(CLIENT, VIP, 6, 40005, 8080, 5, SEED);
        return { nic: nicOf(h), hash: h, l3: 14 };
      },
    ],
    [
      'TCP over IPv6',
      () =>
        pkt()
          .eth({ src: ROUTER_MAC, dst: MUX_MAC })
          .ipv6({ src: CLIENT6, dst: VIP6 })
          .tcp({ sport: 40006, dport: 80, flags: TCP_SYN })
          .build(),
      () => {
        const h = flowHash(CLIENT6, VIP6, 6, 40006, 80, 5, SEED);
        return { nic: nicOf(h), hash: h, l3: 14, type: ETHERTYPE_IPV6 };
      },
    ],
    [
      'UDP over IPv6 behind hop-by-hop and destination options',
      () =>
        pkt()
          .eth({ src: ROUTER_MAC, dst: MUX_MAC })
          .ipv6({ src: CLIENT6, dst: VIP6 })
          .ext6({ type: 'hop' })
          .ext6({ type: 'dest', len8: 1 })
          .udp({ sport: 5356, dport: 7 })
          .payload('x')
          .build(),
      () => {
        const h = flowHash(CLIENT6, VIP6, 17, 5356, 7, 5, SEED);
        return { nic: nicOf(h), hash: h, l3: 14, type: ETHERTYPE_IPV6 };
      },
    ],
  ];

  it.each(cases)('%s', (_name, build, expected) => {
    const ctx = newCtx();
    const frame = build();
    const e = expected(frame);
    const r = run(ctx, frame);
    expect(r.drop).toBeNull();
    expect(r.verdict).toBe(VERDICT_FORWARD);
    expect(ctx.lastNic!.name).toBe(e.nic);
    expectFrame(r.out, encap(frame, e.l3, e.nic, e.hash, 1, e.type));
    // the inner packet is byte-identical to the client's (TTL included)
    const d = dissect(r.out);
    expect(d.first('vxlan')!.vni).toBe(5001);
    expect(d.first('udp')!.srcPort).toBeGreaterThanOrEqual(49152);
    expect(d.all('ipv4')[0]!.checksumOk).toBe(true);
    // tx_packets and tx_bytes are the daemon's, counted once the kernel took the frame (test/send-errors.test.ts)
    expect(ctx.counters.snapshot()).toEqual({ rx_packets: 1, rx_bytes: frame.length, flow_new: 1 });
  });
});

describe('mux: drop fixtures (every drop has a named reason)', () => {
  const F = (_: string) => pkt().eth({ src: ROUTER_MAC, dst: MUX_MAC });
  const cases: [string, () => Buffer | Uint8Array, MuxCounterName][] = (
    [
      ['a frame shorter than Ethernet', () => new Uint8Array(10), 'drop_eth_truncated'],
      ['QinQ double tag', () => Buffer.from('ffffffffffff0200000000018100000a8100001408004500', 'hex'), 'drop_eth_bad_vlan'],
      ['not IP (an experimental EtherType)', () => F('').payload(40).build(), 'drop_not_ip'],
      ['IPv4 cut inside the header', () => tcp4(1).subarray(0, 14 + 12), 'drop_ipv4_truncated'],
      ['IPv4 IHL 4', () => F('').ipv4({ src: CLIENT, dst: VIP, ihl: 4 }).tcp({ sport: 1, dport: 80 }).build(), 'drop_ipv4_bad_ihl'],
      [
        'IPv4 total length beyond the frame',
        () => F('').ipv4({ src: CLIENT, dst: VIP, totalLength: 200 }).tcp({ sport: 1, dport: 80 }).build(),
        'drop_ipv4_bad_total_length',
      ],
      [
        'IPv4 bad header checksum',
        () => F('').ipv4({ src: CLIENT, dst: VIP, checksum: 0x1234 }).tcp({ sport: 1, dport: 80 }).build(),
        'drop_ipv4_bad_checksum',
      ],
      [
        'version 6 in an IPv4 EtherType',
        () => F('').ipv4({ src: CLIENT, dst: VIP, version: 6 }).tcp({ sport: 1, dport: 80 }).build(),
        'drop_ipv4_bad_version',
      ],
      ['not a VIP', () => F('').ipv4({ src: CLIENT, dst: '203.0.113.99' }).tcp({ sport: 1, dport: 80 }).build(), 'drop_not_vip'],
      ['a VIP port without a rule', () => tcp4(1, 443), 'drop_no_rule'],
      ['UDP to a TCP-only port', () => udp4(1, 80), 'drop_no_rule'],
      ['ICMP echo to the VIP (not load balanced)', () => F('').ipv4({ src: CLIENT, dst: VIP }).icmp({ type: 8 }).build(), 'drop_no_rule'],
      [
        'TCP data offset 3',
        () => F('').ipv4({ src: CLIENT, dst: VIP }).tcp({ sport: 1, dport: 80, dataOffset: 3 }).build(),
        'drop_tcp_bad_data_offset',
      ],
      ['TCP header cut short', () => F('').ipv4({ src: CLIENT, dst: VIP, protocol: 6 }).payload(10).build(), 'drop_tcp_truncated'],
      [
        'UDP length beyond the datagram',
        () => F('').ipv4({ src: CLIENT, dst: VIP }).udp({ sport: 1, dport: 7, length: 99 }).build(),
        'drop_udp_bad_udp_length',
      ],
      [
        'IPv6 payload length beyond the frame',
        () => F('').ipv6({ src: CLIENT6, dst: VIP6, payloadLength: 500 }).tcp({ sport: 1, dport: 80 }).build(),
        'drop_ipv6_bad_payload_length',
      ],
      [
        'IPv6 hop-by-hop not first',
        () => F('').ipv6({ src: CLIENT6, dst: VIP6 }).ext6({ type: 'dest' }).ext6({ type: 'hop' }).tcp({ sport: 1, dport: 80 }).build(),
        'drop_ipv6_bad_ext_header',
      ],
      ['IPv6 not a VIP', () => F('').ipv6({ src: CLIENT6, dst: '2001:db8:ff::99' }).tcp({ sport: 1, dport: 80 }).build(), 'drop_not_vip'],
      [
        'a later IPv4 fragment where TCP rules use different pools',
        () => F('').ipv4({ src: CLIENT, dst: VIP, fragOffset: 100, protocol: 6 }).payload(16).build(),
        'drop_fragment_no_rule',
      ],
    ] as [string, () => Buffer | Uint8Array, MuxCounterName][]
  ).map(([n, b, r]) => [n, b, r]);
  it.each(cases.map(([n, b, r]) => [n, r, b] as const))('%s -> %s', (_n, reason, build) => {
    const ctx = newCtx(
      labConfig((raw) => {
        // give the 8080 rule its own pool, so TCP fragments without ports are ambiguous
        raw.pools.push({ name: 'alt', backends: [{ nic: 'h1vm1' }] });
        raw.vips[0].rules[2].pool = 'alt';
      }),
    );
    const frame = build();
    const r = run(ctx, Buffer.from(frame));
    expect(r.verdict).toBe(VERDICT_DROP);
    expect(r.drop).toBe(reason);
    expect(ctx.counters.get(reason)).toBe(1);
    expect(ctx.counters.get('tx_packets')).toBe(0);
    expect(ctx.counters.totalDrops()).toBe(1);
  });

  it('ARP goes to the control plane', () => {
    const ctx = newCtx();
    const r = run(
      ctx,
      pkt().eth({ src: ROUTER_MAC, dst: 'ff:ff:ff:ff:ff:ff' }).arp({ senderIp: '198.18.0.21', targetIp: '198.18.0.11' }).build(),
    );
    expect(r.verdict).toBe(VERDICT_CONTROL);
    expect(ctx.counters.get('control_arp')).toBe(1);
  });

  it('no neighbour entry for the host yet: drop no_neighbor (the daemon resolves it by ARP)', () => {
    const ctx = newCtx(labConfig(), ALL_HEALTHY, { learn: false });
    expect(run(ctx, tcp4(40001)).drop).toBe('drop_no_neighbor');
  });

  it('a packet that would exceed the fabric MTU after encapsulation: drop too_big', () => {
    const ctx = newCtx(labConfig(), ALL_HEALTHY, { mtu: 1500 });
    const big = pkt()
      .eth({ src: ROUTER_MAC, dst: MUX_MAC })
      .ipv4({ src: CLIENT, dst: VIP })
      .tcp({ sport: 1, dport: 80 })
      .payload(1460)
      .build();
    expect(run(ctx, big).drop).toBe('drop_too_big');
    const fits = pkt()
      .eth({ src: ROUTER_MAC, dst: MUX_MAC })
      .ipv4({ src: CLIENT, dst: VIP })
      .tcp({ sport: 1, dport: 80 })
      .payload(1410)
      .build();
    expect(run(ctx, fits).verdict).toBe(VERDICT_FORWARD);
    expect(ctx.out.subarray(0, ctx.outLen).length - 14).toBe(1500);
  });

  it('no healthy backend: drop no_backend', () => {
    const down: HealthView = { isHealthy: () => false };
    const ctx = newCtx(labConfig(), down);
    expect(run(ctx, tcp4(40001)).drop).toBe('drop_no_backend');
    expect(run(ctx, udp4(1)).verdict).toBe(VERDICT_FORWARD); // the echo rule has no probe
  });
});

describe('mux: distribution modes', () => {
  it('5-tuple spreads one client over all backends; 3- and 2-tuple keep it on one; clients spread', () => {
    const ctx = newCtx();
    const seen = (dport: number, src: string, n: number) => {
      const nics = new Set<string>();
      for (let i = 0; i < n; i++) {
        run(ctx, udp4(20000 + i, dport, src));
        nics.add(ctx.lastNic!.name);
      }
      return nics;
    };
    expect(seen(7, CLIENT, 200).size).toBe(4);
    expect(seen(7003, CLIENT, 200).size).toBe(1);
    expect(seen(7002, CLIENT, 200).size).toBe(1);
    const clients = new Set<string>();
    for (let c = 1; c <= 64; c++) {
      run(ctx, udp4(1000, 7002, `198.51.100.${c}`));
      clients.add(ctx.lastNic!.name);
    }
    expect(clients.size).toBe(4);
  });

  it('the 2-tuple puts TCP and UDP of one client on the same backend', () => {
    const ctx = newCtx(
      labConfig((raw) => {
        raw.vips[0].rules[0].distribution = '2-tuple';
      }),
    );
    run(ctx, tcp4(1234));
    const a = ctx.lastNic!.name;
    run(ctx, udp4(999, 7002));
    const b = ctx.lastNic!.name;
    expect(a).toBe(b);
  });
});

describe('mux: fragments', () => {
  it('every fragment of a datagram (first included) reaches the same backend by the 3-tuple', () => {
    const ctx = newCtx();
    const first = pkt()
      .eth({ src: ROUTER_MAC, dst: MUX_MAC })
      .ipv4({ src: CLIENT, dst: VIP, flags: IPV4_FLAG_MF, id: 7 })
      .udp({ sport: 5000, dport: 7, length: 2000 })
      .payload(1000)
      .build();
    const later = pkt()
      .eth({ src: ROUTER_MAC, dst: MUX_MAC })
      .ipv4({ src: CLIENT, dst: VIP, fragOffset: 126, id: 7, protocol: 17 })
      .payload(992)
      .build();
    expect(run(ctx, first).drop).toBeNull();
    const a = ctx.lastNic!.name;
    expect(run(ctx, later).verdict).toBe(VERDICT_FORWARD);
    expect(ctx.lastNic!.name).toBe(a);
    expect(a).toBe(nicOf(flowHash(CLIENT, VIP, 17, 0, 0, 3, SEED)));
    expect(ctx.counters.get('fragments')).toBe(2);
    expect(ctx.flowLimit.count).toBe(0); // fragments make no flow entries
  });
  it('IPv6 fragments too', () => {
    const ctx = newCtx();
    const first = pkt()
      .eth()
      .ipv6({ src: CLIENT6, dst: VIP6 })
      .ext6({ type: 'fragment', more: true, id: 9 })
      .udp({ sport: 5000, dport: 7, length: 3000 })
      .payload(1000)
      .build();
    const later = pkt()
      .eth()
      .ipv6({ src: CLIENT6, dst: VIP6 })
      .ext6({ type: 'fragment', offset8: 126, id: 9 })
      .udp({ sport: 0, dport: 0 })
      .build();
    run(ctx, first);
    const a = ctx.lastNic?.name;
    run(ctx, later);
    expect(a).toBeDefined();
    expect(ctx.lastNic?.name).toBe(a);
  });
});

describe('mux: flow table keeps established flows while the pool changes', () => {
  const healthOf = (down: string[]): HealthView => ({ isHealthy: (nic) => !down.includes(nic) });

  it('a backend going down: its existing flows stay (Azure keeps them), new flows avoid it, others never move', () => {
    const config = labConfig();
    const ctx = newCtx(config);
    const before = new Map<number, string>();
    for (let p = 30000; p < 30400; p++) {
      run(ctx, tcp4(p));
      before.set(p, ctx.lastNic!.name);
    }
    ctx.tables = compileMuxTables(config, healthOf(['h1vm1']), ctx.tables, 2);
    for (let p = 30000; p < 30400; p++) {
      run(ctx, tcp4(p, 80, TCP_ACK));
      expect(ctx.lastNic!.name).toBe(before.get(p));
    }
    const fresh = new Set<string>();
    const oracleDown = oracleRule(config, VIP, 6, 80, { down: ['h1vm1'] }); // the oracle's table without h1vm1
    for (let p = 40000; p < 40400; p++) {
      run(ctx, tcp4(p));
      fresh.add(ctx.lastNic!.name);
      expect(ctx.lastNic!.name).toBe(oracleDown.choose(CLIENT, p));
    }
    expect(fresh.has('h1vm1')).toBe(false);
    expect(fresh.size).toBe(3);
  });

  it('a SYN reusing the 5-tuple of an old flow is a new connection: it avoids a backend that went down', () => {
    const config = labConfig();
    const ctx = newCtx(config);
    // find a client port whose flow lands on h1vm1, and establish it
    let port = 50000;
    for (; ; port++) {
      run(ctx, tcp4(port));
      if (ctx.lastNic!.name === 'h1vm1') break;
    }
    run(ctx, tcp4(port, 80, TCP_ACK));
    expect(ctx.lastNic!.name).toBe('h1vm1');
    ctx.tables = compileMuxTables(config, healthOf(['h1vm1']), ctx.tables, 2);
    run(ctx, tcp4(port, 80, TCP_ACK)); // the established connection stays
    expect(ctx.lastNic!.name).toBe('h1vm1');
    run(ctx, tcp4(port)); // the client reuses the port for a new connection
    expect(ctx.lastNic!.name).not.toBe('h1vm1');
    const again = ctx.lastNic!.name;
    run(ctx, tcp4(port, 80, TCP_ACK));
    expect(ctx.lastNic!.name).toBe(again);
  });

  it('a disabled backend loses its flows; they move, and only they move', () => {
    const ctx = newCtx();
    const before = new Map<number, string>();
    for (let p = 30000; p < 30400; p++) {
      run(ctx, tcp4(p));
      before.set(p, ctx.lastNic!.name);
    }
    const disabled = labConfig((raw) => {
      raw.pools[0].backends[2].enabled = false;
    });
    ctx.tables = compileMuxTables(disabled, ALL_HEALTHY, ctx.tables, 2);
    const oracleDisabled = oracleRule(disabled, VIP, 6, 80); // where the oracle re-places them
    let moved = 0;
    for (let p = 30000; p < 30400; p++) {
      run(ctx, tcp4(p, 80, TCP_ACK));
      expect(before.get(p)).toBe(nicOf(flowHash(CLIENT, VIP, 6, p, 80, 5, SEED)));
      if (before.get(p) === 'h2vm1') {
        expect(ctx.lastNic!.name).toBe(oracleDisabled.choose(CLIENT, p));
        moved++;
      } else expect(ctx.lastNic!.name).toBe(before.get(p));
    }
    expect(moved).toBeGreaterThan(50);
    expect(ctx.counters.get('flow_replaced')).toBe(moved);
  });

  it('a full flow table falls back to the stateless choice and counts it', () => {
    const ctx = newCtx(
      labConfig((raw) => {
        raw.flowTable = { maxFlows: 10 };
      }),
    );
    for (let p = 1; p <= 20; p++) {
      expect(run(ctx, tcp4(p)).verdict).toBe(VERDICT_FORWARD);
      expect(run(ctx, tcp4(p, 80, TCP_ACK)).verdict).toBe(VERDICT_FORWARD);
    }
    expect(ctx.flowLimit.count).toBe(10);
    expect(ctx.counters.get('flow_promoted')).toBe(10);
    expect(ctx.counters.get('flow_table_full')).toBe(10);
  });

  it('flows seen once wait in the untrusted table; their second packet makes them trusted', () => {
    const ctx = newCtx();
    run(ctx, tcp4(5000));
    expect(ctx.pendingLimit.count).toBe(1);
    expect(ctx.flowLimit.count).toBe(0);
    run(ctx, tcp4(5000, 80, TCP_ACK));
    expect(ctx.pendingLimit.count).toBe(0);
    expect(ctx.flowLimit.count).toBe(1);
    run(ctx, tcp4(5000, 80, TCP_ACK));
    expect(ctx.counters.snapshot()).toMatchObject({ flow_new: 1, flow_promoted: 1, flow_hit: 1 });
  });

  it('a spoofed SYN flood fills only the untrusted table: established flows keep their backend and new good flows still work', () => {
    const ctx = newCtx(
      labConfig((raw) => {
        raw.flowTable = { maxFlows: 1000, untrustedMaxFlows: 100 };
      }),
    );
    const established = new Map<number, string>();
    for (let p = 1; p <= 200; p++) {
      run(ctx, tcp4(p));
      run(ctx, tcp4(p, 80, TCP_ACK));
      established.set(p, ctx.lastNic!.name);
    }
    expect(ctx.flowLimit.count).toBe(200);
    // 10,000 SYNs from random sources
    for (let i = 0; i < 10_000; i++)
      run(
        ctx,
        tcp4(
          1000 + (i % 60000),
          80,
          TCP_SYN,
          `198.51.100.${1 + (i % 250)}`.replace(/\.(\d+)$/, (_m, d) => `.${d}`),
        ),
      );
    expect(ctx.pendingLimit.count).toBe(100);
    expect(ctx.counters.get('flow_untrusted_full')).toBeGreaterThan(9000);
    expect(ctx.flowLimit.count).toBe(200); // untouched
    for (const [p, nic] of established) {
      run(ctx, tcp4(p, 80, TCP_ACK));
      expect(ctx.lastNic!.name).toBe(nic);
    }
    // a good new connection during the flood: its SYN finds no room, its ACK neither, yet both reach the hashed backend
    run(ctx, tcp4(7777));
    const a = ctx.lastNic!.name;
    run(ctx, tcp4(7777, 80, TCP_ACK));
    expect(ctx.lastNic!.name).toBe(a);
    expect(a).toBe(nicOf(flowHash(CLIENT, VIP, 6, 7777, 80, 5, SEED)));
    // the flood ages out of the untrusted table
    ctx.nowS += 6;
    ctx.pending4.sweep(ctx.nowS, 1 << 20);
    expect(ctx.pendingLimit.count).toBe(0);
  });

  it('idle flows expire after the protocol timeout', () => {
    const ctx = newCtx();
    run(ctx, tcp4(1));
    run(ctx, tcp4(1, 80, TCP_ACK));
    run(ctx, udp4(2));
    run(ctx, udp4(2));
    run(ctx, udp4(3)); // seen once: untrusted
    expect(ctx.flowLimit.count).toBe(2);
    expect(ctx.pendingLimit.count).toBe(1);
    ctx.nowS += 6; // untrusted 5 s
    sweepFlows(ctx, 1 << 20);
    expect(ctx.pendingLimit.count).toBe(0);
    ctx.nowS += 25; // UDP 30 s
    sweepFlows(ctx, 1 << 20);
    expect(ctx.flowLimit.count).toBe(1);
    ctx.nowS += 240;
    sweepFlows(ctx, 1 << 20);
    expect(ctx.flowLimit.count).toBe(0);
  });
});

const HOST_PA6: Record<string, string> = { host1: '2001:db8:f::21', host2: '2001:db8:f::22' };

describe('mux: the outer headers follow the tables and the neighbour resolution', () => {
  // encapsulate copies a template per nic, made at the nic's first packet: new tables (another VNI, nic
  // MAC or host address) must make it again, and a host MAC learned anew must show at the next packet
  const moved = () =>
    labConfig((raw) => {
      raw.networks[0].vni = 5077;
      raw.hosts[0].address = '198.18.0.31';
      raw.hosts[0].address6 = '2001:db8:f::31';
      for (const n of raw.nics) n.mac = n.mac.replace('02:00:c0', '02:00:c1');
    });
  const expected = (client: Buffer, h: number, o: { vni: number; hostMac: string; pa: string; nicMac: string }, ipId: number) =>
    pkt()
      .eth({ src: MUX_MAC, dst: o.hostMac })
      .ipv4({ src: '198.18.0.11', dst: o.pa, id: ipId, ttl: 64, flags: 0 })
      .udp({ sport: vxlanSourcePort(h), dport: 4789, checksum: 'zero' })
      .vxlan({ vni: o.vni })
      .eth({ src: MUX_MAC, dst: o.nicMac, type: ETHERTYPE_IPV4 })
      .payload(client.subarray(14))
      .build();

  it.each([false, true])('over IPv4 and IPv6 underlays (IPv6: %s)', (underlay6) => {
    const ctx = newCtx(labConfig(), ALL_HEALTHY, { underlay6 });
    // a flow to a nic of host1
    let port = 20000;
    for (; ; port++) if (NICS[nicOf(flowHash(CLIENT, VIP, 6, port, 80, 5, SEED))]!.host === 'host1') break;
    const h = flowHash(CLIENT, VIP, 6, port, 80, 5, SEED);
    const nic = NICS[nicOf(h)]!;
    const f = tcp4(port, 80, TCP_ACK);
    const first = run(ctx, f);
    expect(first.verdict).toBe(VERDICT_FORWARD);
    const outerOf = (out: Buffer) => dissect(out);
    const check = (out: Buffer, o: { vni: number; hostMac: string; pa: string; pa6: string; nicMac: string }, ipId: number) => {
      if (!underlay6) {
        expectFrame(out, expected(f, h, o, ipId));
        return;
      }
      const d = outerOf(out);
      expect(d.first('ipv6')!.dst).toBe(o.pa6);
      expect(d.first('udp')!.checksumOk).toBe(true);
      const e = expected(f, h, o, ipId);
      expect(out.subarray(0, 6)).toEqual(e.subarray(0, 6));
      expect(out.subarray(54 + 8)).toEqual(e.subarray(34 + 8)); // VXLAN, inner Ethernet and the packet
    };
    check(first.out, { vni: 5001, hostMac: HOST_MACS.host1!, pa: '198.18.0.21', pa6: '2001:db8:f::21', nicMac: nic.mac }, 1);
    // the neighbour resolution learns another MAC for host1, in place
    const host1 = ctx.tables.hosts.get('host1')!;
    host1.mac.set(mac('02:00:00:00:00:31'));
    check(run(ctx, f).out, { vni: 5001, hostMac: '02:00:00:00:00:31', pa: '198.18.0.21', pa6: '2001:db8:f::21', nicMac: nic.mac }, 2);
    // new tables: another VNI, host1 at another address, every nic with another MAC
    ctx.tables = compileMuxTables(moved(), ALL_HEALTHY, ctx.tables, 2);
    for (const x of ctx.tables.hosts.values()) {
      x.mac.set(mac(HOST_MACS[x.name]!));
      x.macKnown = true;
    }
    const again = run(ctx, f);
    expect(again.verdict).toBe(VERDICT_FORWARD);
    expect(ctx.lastNic!.name).toBe(nicOf(h));
    const nicMac = nic.mac.replace('02:00:c0', '02:00:c1');
    check(again.out, { vni: 5077, hostMac: HOST_MACS.host1!, pa: '198.18.0.31', pa6: '2001:db8:f::31', nicMac }, 3);
  });
});

describe('mux: IPv6 underlay', () => {
  it.each([
    ['an IPv4 client packet', () => tcp4(40010), () => ({ h: flowHash(CLIENT, VIP, 6, 40010, 80, 5, SEED), l3: 14, type: ETHERTYPE_IPV4 })],
    [
      'an IPv6 client packet',
      () =>
        pkt()
          .eth({ src: ROUTER_MAC, dst: MUX_MAC })
          .ipv6({ src: CLIENT6, dst: VIP6 })
          .udp({ sport: 999, dport: 7 })
          .payload('v6 over v6')
          .build(),
      () => ({ h: flowHash(CLIENT6, VIP6, 17, 999, 7, 5, SEED), l3: 14, type: ETHERTYPE_IPV6 }),
    ],
  ] as const)("%s goes out in IPv6/UDP (checksummed, RFC 8200 8.1) from the MUX's address6 to the host's", (_n, build, exp) => {
    const ctx = newCtx(labConfig(), ALL_HEALTHY, { underlay6: true });
    const frame = build();
    const e = exp();
    const r = run(ctx, frame);
    expect(r.verdict).toBe(VERDICT_FORWARD);
    const nic = NICS[nicOf(e.h)]!;
    expect(ctx.lastNic!.name).toBe(nicOf(e.h));
    const expected = pkt()
      .eth({ src: MUX_MAC, dst: HOST_MACS[nic.host]! })
      .ipv6({ src: '2001:db8:f::11', dst: HOST_PA6[nic.host]!, hopLimit: 64, flowLabel: e.h & 0xfffff })
      .udp({ sport: vxlanSourcePort(e.h), dport: 4789 })
      .vxlan({ vni: 5001 })
      .eth({ src: MUX_MAC, dst: nic.mac, type: e.type })
      .payload(frame.subarray(e.l3))
      .build();
    expectFrame(r.out, expected);
    expect(dissect(r.out).first('udp')!.checksumOk).toBe(true);
  });

  it('leaves 70 bytes for VXLAN when checking the MTU', () => {
    const ctx = newCtx(labConfig(), ALL_HEALTHY, { underlay6: true, mtu: 1500 });
    const fits = pkt()
      .eth({ src: ROUTER_MAC, dst: MUX_MAC })
      .ipv4({ src: CLIENT, dst: VIP })
      .tcp({ sport: 1, dport: 80 })
      .payload(1430 - 40)
      .build();
    expect(run(ctx, fits).verdict).toBe(VERDICT_FORWARD);
    expect(ctx.outLen - 14).toBe(1500);
    const big = pkt()
      .eth({ src: ROUTER_MAC, dst: MUX_MAC })
      .ipv4({ src: CLIENT, dst: VIP })
      .tcp({ sport: 1, dport: 80 })
      .payload(1431 - 40)
      .build();
    expect(run(ctx, big).drop).toBe('drop_too_big');
  });

  it('hands neighbour advertisements to the control plane', () => {
    const ctx = newCtx(labConfig(), ALL_HEALTHY, { underlay6: true });
    const na = pkt()
      .eth({ src: '02:00:00:00:00:21', dst: MUX_MAC })
      .ipv6({ src: '2001:db8:f::21', dst: '2001:db8:f::11', hopLimit: 255 })
      .icmpv6({ type: 136, rest: 0x60000000 })
      .payload(new Uint8Array(24))
      .build();
    expect(run(ctx, na).verdict).toBe(VERDICT_CONTROL);
    expect(ctx.counters.get('control_nd')).toBe(1);
  });
});

describe("mux: ICMP errors about VIP flows go to the flow's backend", () => {
  // what a router on the way back sends: an error about a DSR reply VIP:80 -> client:port
  const quoted4 = (cport: number) =>
    pkt().ipv4({ src: VIP, dst: CLIENT, ttl: 1 }).tcp({ sport: 80, dport: cport, flags: TCP_ACK }).payload(100).build();
  const icmp4 = (cport: number, type = 11, code = 0) =>
    pkt()
      .eth({ src: ROUTER_MAC, dst: MUX_MAC })
      .ipv4({ src: '198.51.100.1', dst: VIP })
      .icmp({ type, code })
      .payload(quoted4(cport).subarray(0, 28 + 8))
      .build();

  it("an ICMP time-exceeded about an established flow reaches the flow's backend, untouched inside VXLAN", () => {
    const ctx = newCtx();
    // the flow picked a backend; then the pool changes so the hash alone would pick another one for some flows
    const chosen = new Map<number, string>();
    for (let p = 41000; p < 41100; p++) {
      run(ctx, tcp4(p));
      chosen.set(p, ctx.lastNic!.name);
    }
    ctx.tables = compileMuxTables(
      labConfig((raw) => {
        raw.pools[0].backends.push({ nic: 'h1vm1', priority: 1 });
        raw.pools[0].backends.shift();
      }),
      ALL_HEALTHY,
      ctx.tables,
      2,
    );
    for (let p = 41000; p < 41100; p++) {
      const f = icmp4(p);
      const r = run(ctx, f);
      expect(r.verdict).toBe(VERDICT_FORWARD);
      expect(ctx.lastNic!.name).toBe(chosen.get(p));
      expect(Buffer.from(r.out.subarray(64))).toEqual(f.subarray(14));
    }
    expect(ctx.counters.get('icmp_errors_forwarded')).toBe(100);
    expect(ctx.counters.get('flow_hit')).toBe(0); // ICMP does not refresh flows
  });

  it("without a flow entry it follows the rule's hash of the flow (client -> VIP)", () => {
    const ctx = newCtx();
    run(ctx, icmp4(42000, 3, 4));
    expect(ctx.lastNic!.name).toBe(nicOf(flowHash(CLIENT, VIP, 6, 42000, 80, 5, SEED)));
  });

  it('ICMPv6 packet too big about a v6 flow', () => {
    const ctx = newCtx();
    const q = pkt().ipv6({ src: VIP6, dst: CLIENT6 }).tcp({ sport: 80, dport: 43000, flags: TCP_ACK }).payload(1400).build();
    const f = pkt()
      .eth({ src: ROUTER_MAC, dst: MUX_MAC })
      .ipv6({ src: '2001:db8:c::1', dst: VIP6 })
      .icmpv6({ type: 2, rest: 1280 })
      .payload(q.subarray(0, 1232))
      .build();
    expect(run(ctx, f).verdict).toBe(VERDICT_FORWARD);
    expect(ctx.lastNic!.name).toBe(nicOf(flowHash(CLIENT6, VIP6, 6, 43000, 80, 5, SEED)));
  });

  it.each([
    [
      'an echo request (not load balanced)',
      () => pkt().eth().ipv4({ src: CLIENT, dst: VIP }).icmp({ type: 8 }).payload(8).build(),
      'drop_no_rule',
    ],
    [
      'an error about another address',
      () =>
        pkt()
          .eth()
          .ipv4({ src: '198.51.100.1', dst: VIP })
          .icmp({ type: 3, code: 1 })
          .payload(pkt().ipv4({ src: '203.0.113.99', dst: CLIENT }).udp({ sport: 7, dport: 1 }).build())
          .build(),
      'drop_icmp_unrelated',
    ],
    [
      'an error quoting too little',
      () => pkt().eth().ipv4({ src: '198.51.100.1', dst: VIP }).icmp({ type: 3, code: 1 }).payload(10).build(),
      'drop_icmp_bad_quote',
    ],
    [
      'an error about a port without a rule',
      () =>
        pkt()
          .eth()
          .ipv4({ src: '198.51.100.1', dst: VIP })
          .icmp({ type: 3, code: 3 })
          .payload(pkt().ipv4({ src: VIP, dst: CLIENT }).udp({ sport: 9, dport: 1 }).build())
          .build(),
      'drop_no_rule',
    ],
    ['a cut ICMP header', () => pkt().eth().ipv4({ src: '198.51.100.1', dst: VIP, protocol: 1 }).payload(4).build(), 'drop_icmp_truncated'],
  ] as const)('%s -> %s', (_n, build, reason) => {
    const ctx = newCtx();
    expect(run(ctx, build()).drop).toBe(reason);
  });
});

describe('mux: path MTU discovery through the VIP', () => {
  const big4 = (df: boolean) =>
    pkt()
      .eth({ src: ROUTER_MAC, dst: MUX_MAC })
      .ipv4({ src: CLIENT, dst: VIP, flags: df ? IPV4_FLAG_DF : 0, ttl: 63 })
      .tcp({ sport: 44000, dport: 80, flags: TCP_ACK })
      .payload(1500 - 40)
      .build();

  it('answers a DF packet too big for the fabric with ICMP fragmentation needed from the VIP (RFC 1191)', () => {
    const ctx = newCtx(labConfig(), ALL_HEALTHY, { mtu: 1400 });
    const f = big4(true);
    const r = run(ctx, f);
    expect(r.verdict).toBe(VERDICT_REPLY);
    const d = dissect(r.out);
    expect(d.first('eth')).toMatchObject({ src: MUX_MAC, dst: ROUTER_MAC });
    expect(d.all('ipv4')[0]).toMatchObject({ src: VIP, dst: CLIENT, protocol: 1, checksumOk: true, totalLength: 576 });
    expect(d.first('icmp')).toMatchObject({ type: 3, code: 4, rest: 1350, checksumOk: true });
    // the quote is the client's packet as received
    const icmpOff = d.first('icmp')!.off;
    expect(Buffer.from(r.out.subarray(icmpOff + 8))).toEqual(f.subarray(14, 14 + 548));
    expect(ctx.counters.get('icmp_too_big_sent')).toBe(1);
  });

  it('drops a packet too big that may be fragmented (DF clear): too_big', () => {
    const ctx = newCtx(labConfig(), ALL_HEALTHY, { mtu: 1400 });
    expect(run(ctx, big4(false)).drop).toBe('drop_too_big');
  });

  it('answers an IPv6 packet too big with ICMPv6 packet too big (RFC 8201), the MTU after 50 bytes of VXLAN over IPv4', () => {
    const ctx = newCtx(labConfig(), ALL_HEALTHY, { mtu: 1400 });
    const f = pkt()
      .eth({ src: ROUTER_MAC, dst: MUX_MAC })
      .ipv6({ src: CLIENT6, dst: VIP6 })
      .tcp({ sport: 44001, dport: 80 })
      .payload(1400)
      .build();
    const r = run(ctx, f);
    expect(r.verdict).toBe(VERDICT_REPLY);
    const d = dissect(r.out);
    expect(d.all('ipv6')[0]).toMatchObject({ src: VIP6, dst: CLIENT6, payloadLength: 1240 });
    expect(d.first('icmpv6')).toMatchObject({ type: 2, code: 0, rest: 1350, checksumOk: true });
  });

  it('limits ICMP to ICMP_RATE_PER_S per second', () => {
    const ctx = newCtx(labConfig(), ALL_HEALTHY, { mtu: 1400 });
    const f = big4(true);
    for (let i = 0; i < ICMP_RATE_PER_S; i++) expect(run(ctx, f).verdict).toBe(VERDICT_REPLY);
    expect(run(ctx, f).drop).toBe('drop_icmp_rate_limited');
    ctx.nowS += 1;
    expect(run(ctx, f).verdict).toBe(VERDICT_REPLY);
  });

  it('never answers an ICMP error with another one', () => {
    const ctx = newCtx(labConfig(), ALL_HEALTHY, { mtu: 1400 });
    const q = pkt().ipv4({ src: VIP, dst: CLIENT, flags: IPV4_FLAG_DF }).tcp({ sport: 80, dport: 45000 }).payload(1400).build();
    const f = pkt()
      .eth({ src: ROUTER_MAC, dst: MUX_MAC })
      .ipv4({ src: '198.51.100.1', dst: VIP, flags: IPV4_FLAG_DF })
      .icmp({ type: 3, code: 4, rest: 1300 })
      .payload(q)
      .build();
    expect(run(ctx, f).drop).toBe('drop_too_big');
  });
});
