// A routed underlay (issue 18, point 2): MUXes and hosts on different subnets. The MUX resolves a host
// PA off its subnet through its gateway (one ARP for the gateway, the gateway's MAC as the outer
// destination), the host agent expects the gateway's MAC as the source of VXLAN from peers behind it,
// and the config refuses a gateway outside the node's subnet, naming the field and the fix. The
// expected addresses and MACs are this file's own (the subnets written out below), read back from the
// frames at the byte offsets of RFC 894/791/826, not with the code under test's parsers.
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { readFileSync } from 'node:fs';
import { mac } from '../shared/addr.js';
import { pkt } from '../shared/packet-builder.js';
import { TCP_SYN } from '../shared/tcp.js';
import { IPV4_FLAG_DF } from '../shared/ipv4.js';
import { ARP_OP_REPLY } from '../shared/arp.js';
import { parseConfig, plainConfig, serializeConfig, validateConfig, type SlbxConfig } from '../shared/config.js';
import { underlayRoutesOf } from '../shared/next-hop.js';
import { compileMuxTables, ALL_HEALTHY } from '../mux/tables.js';
import { newMuxContext, processPacket, VERDICT_FORWARD } from '../mux/data-plane.js';
import { NeighborResolver } from '../mux/neighbors.js';
import { compileHostTables } from '../host-agent/tables.js';
import { FabricNeighbors, NEIGHBOR_ROUND_CONFIRM_MS } from '../host-agent/neighbors.js';
import { LAB_YAML_PATH } from './helpers/lab-config.js';

const MUX_MAC = '02:00:00:00:00:11';
const GW_MUX = '198.18.1.1'; // the router on the MUXes' subnet 198.18.1.0/24
const GW_MUX_MAC = '02:00:00:00:01:01';
const GW_RACK = '198.18.2.1'; // the router on host1's subnet 198.18.2.0/24
const GW_RACK_MAC = '02:00:00:00:02:01';
const HOST1_MAC = '02:00:00:00:00:21';
const HOST2_MAC = '02:00:00:00:00:22';
const VIP = '203.0.113.10';

function rawLab(): any {
  return parseYaml(readFileSync(LAB_YAML_PATH, 'utf8'));
}

/** mux1, mux2 in 198.18.1.0/24; host1 in 198.18.2.0/24 (another rack); host2 on the MUXes' subnet. */
function routedRaw(): any {
  const raw = rawLab();
  raw.muxes[0] = { ...raw.muxes[0], address: '198.18.1.11', prefixLength: 24, gateway: GW_MUX };
  raw.muxes[1] = { ...raw.muxes[1], address: '198.18.1.12', prefixLength: 24, gateway: GW_MUX };
  raw.hosts[0] = { ...raw.hosts[0], address: '198.18.2.21', prefixLength: 24, gateway: GW_RACK };
  raw.hosts[1] = { ...raw.hosts[1], address: '198.18.1.22', prefixLength: 24, gateway: GW_MUX };
  return raw;
}

function routed(): SlbxConfig {
  const r = validateConfig(routedRaw(), 'routed');
  if (!r.ok) throw new Error(JSON.stringify(r.errors));
  return r.config;
}

function errorsOf(edit: (raw: any) => void): { path: string; message: string }[] {
  const raw = rawLab();
  edit(raw);
  const r = validateConfig(raw, 'edited');
  return r.ok ? [] : r.errors.map((e) => ({ path: e.path, message: e.message }));
}

const ipText = (b: Buffer, off: number) => `${b[off]}.${b[off + 1]}.${b[off + 2]}.${b[off + 3]}`;
const macText = (b: Buffer, off: number) => [...b.subarray(off, off + 6)].map((x) => x.toString(16).padStart(2, '0')).join(':');

describe('config: a node subnet and gateway', () => {
  it('no fields: every provider address on-link, as on one segment', () => {
    const r = parseConfig(readFileSync(LAB_YAML_PATH, 'utf8'));
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    const routes = underlayRoutesOf(r.config.muxes[0]!);
    expect(routes.v4.gateway).toBeNull();
    const plain = plainConfig(r.config) as { muxes: object[]; hosts: object[] };
    for (const n of [...plain.muxes, ...plain.hosts]) expect(Object.keys(n).sort()).toEqual(['address', 'address6', 'name']);
  });

  it('a routed config validates and its fields survive a round trip through serializeConfig', () => {
    const c = routed();
    expect(c.hosts[0]!.gateway?.text).toBe(GW_RACK);
    expect(c.hosts[0]!.prefixLength).toBe(24);
    const again = parseConfig(serializeConfig(c), 'again');
    expect(again.ok).toBe(true);
    if (again.ok) expect(again.config.hosts[0]!.gateway?.text).toBe(GW_RACK);
  });

  it.each([
    [
      'a gateway outside the subnet',
      (raw: any) => Object.assign(raw.hosts[0], { prefixLength: 24, gateway: '198.18.9.1' }),
      'hosts[0].gateway',
      /outside this node's subnet 198\.18\.0\.21\/24.*widen prefixLength/,
    ],
    [
      'a gateway without prefixLength',
      (raw: any) => Object.assign(raw.muxes[1], { gateway: '198.18.0.1' }),
      'muxes[1].prefixLength',
      /required with gateway/,
    ],
    [
      'prefixLength without a gateway',
      (raw: any) => Object.assign(raw.hosts[1], { prefixLength: 24 }),
      'hosts[1].gateway',
      /required with prefixLength/,
    ],
    [
      'the gateway is the node itself',
      (raw: any) => Object.assign(raw.hosts[1], { prefixLength: 24, gateway: '198.18.0.22' }),
      'hosts[1].gateway',
      /own provider address/,
    ],
    [
      'an IPv6 gateway in gateway',
      (raw: any) => Object.assign(raw.hosts[1], { prefixLength: 24, gateway: '2001:db8:f::1' }),
      'hosts[1].gateway',
      /put it in 'gateway6'/,
    ],
    [
      'a prefix length of 32',
      (raw: any) => Object.assign(raw.hosts[1], { prefixLength: 32, gateway: '198.18.0.1' }),
      'hosts[1].prefixLength',
      /1\.\.31/,
    ],
    [
      'gateway6 outside the IPv6 subnet',
      (raw: any) => Object.assign(raw.hosts[0], { prefixLength6: 64, gateway6: '2001:db8:e::1' }),
      'hosts[0].gateway6',
      /outside this node's subnet 2001:db8:f::21\/64/,
    ],
  ])('refuses %s, naming the field', (_what, edit, path, message) => {
    const errs = errorsOf(edit);
    expect(errs.map((e) => e.path)).toContain(path);
    expect(errs.find((e) => e.path === path)!.message).toMatch(message);
  });
});

describe('MUX: a host PA off its subnet goes through the gateway', () => {
  function setup() {
    const config = routed();
    const tables = compileMuxTables(config, ALL_HEALTHY, null, 1);
    const sent: Buffer[] = [];
    const r = new NeighborResolver(mac(MUX_MAC), (f, len) => sent.push(Buffer.from(f.subarray(0, len))));
    const routes = underlayRoutesOf(config.muxes[0]!);
    return { config, tables, sent, r, routes };
  }
  const reply = (fromMac: string, fromIp: string) =>
    pkt()
      .eth({ src: fromMac, dst: MUX_MAC, type: 0x0806 })
      .arp({ op: ARP_OP_REPLY, senderMac: fromMac, senderIp: fromIp, targetMac: MUX_MAC, targetIp: '198.18.1.11' })
      .build();

  it('asks for the gateway once and for the on-link host, never for the PA behind the router', () => {
    const { tables, sent, r, routes } = setup();
    r.resolve(tables.hosts.values(), false, routes, 10_000);
    // ARP target protocol address: bytes 38..41 of the frame (14 + 24, RFC 826)
    expect(sent.map((f) => ipText(f, 38)).sort()).toEqual(['198.18.1.1', '198.18.1.22']);
  });

  it("learns the gateway's MAC for host1 (behind it) and host2's own for host2; encapsulates with them, TTL 64", () => {
    const { config, tables, r, routes } = setup();
    r.resolve(tables.hosts.values(), false, routes, 10_000);
    r.learn(reply(GW_MUX_MAC, GW_MUX), 42, tables.hosts.values());
    expect(tables.hosts.get('host1')!.macKnown).toBe(true);
    expect(tables.hosts.get('host2')!.macKnown).toBe(false);
    r.learn(reply(HOST2_MAC, '198.18.1.22'), 42, tables.hosts.values());
    const mux = config.muxes[0]!;
    const ctx = newMuxContext({
      tables,
      localMac: mac(MUX_MAC),
      localPa4: mux.address.words[0]!,
      localPa6: mux.address6!.words,
      underlay6: false,
      hashSeed: config.hashSeed,
      mtu: config.fabric.mtu,
      vxlanPort: config.fabric.vxlanPort,
      flowTable: config.flowTable,
    });
    const seen = new Map<string, string>();
    for (let sport = 40000; sport < 40040; sport++) {
      const f = pkt()
        .eth({ src: GW_MUX_MAC, dst: MUX_MAC })
        .ipv4({ src: '198.51.100.10', dst: VIP, flags: IPV4_FLAG_DF })
        .tcp({ sport, dport: 80, flags: TCP_SYN })
        .build();
      expect(processPacket(f, f.length, ctx)).toBe(VERDICT_FORWARD);
      const o = Buffer.from(ctx.out.subarray(0, ctx.outLen));
      expect(o[22]).toBe(64); // outer IPv4 TTL (RFC 791 offset 8 of the header)
      seen.set(ipText(o, 30), macText(o, 0));
    }
    expect(Object.fromEntries(seen)).toEqual({ '198.18.2.21': GW_MUX_MAC, '198.18.1.22': HOST2_MAC });
  });
});

describe('host agent: peers behind the gateway are expected with its MAC', () => {
  it('one ARP for the gateway answers for mux1, mux2 and host2; the status names the gateway', () => {
    const config = routed();
    const t = compileHostTables(config, 'host1', 1);
    const me = config.hosts[0]!;
    const n = new FabricNeighbors(mac(HOST1_MAC), me.address.words[0]!, t.pa6, underlayRoutesOf(me));
    n.setPeers(t.peers, underlayRoutesOf(me));
    const sent: Buffer[] = [];
    n.tick(1000, (f, len) => sent.push(Buffer.from(f.subarray(0, len))));
    const arps = sent.filter((f) => f.readUInt16BE(12) === 0x0806).map((f) => ipText(f, 38));
    expect(arps).toEqual([GW_RACK]);
    const answer = pkt()
      .eth({ src: GW_RACK_MAC, dst: HOST1_MAC, type: 0x0806 })
      .arp({ op: ARP_OP_REPLY, senderMac: GW_RACK_MAC, senderIp: GW_RACK, targetMac: HOST1_MAC, targetIp: '198.18.2.21' })
      .build();
    expect(n.learn(answer, answer.length, 1001)).toBe(true);
    n.tick(1001 + NEIGHBOR_ROUND_CONFIRM_MS, () => {});
    const st = n.status(2000).filter((s) => s.address.startsWith('198.18.'));
    expect(st.map((s) => [s.peer, s.via, s.mac])).toEqual([
      ['mux1', GW_RACK, GW_RACK_MAC],
      ['mux2', GW_RACK, GW_RACK_MAC],
      ['host2', GW_RACK, GW_RACK_MAC],
    ]);
  });
});

describe('BFD multihop (RFC 5883) toward a peer off the subnet, on loopback', () => {
  it('sends to UDP 4784 (not 3784) and two multihop sessions come Up', async () => {
    const { BfdPeer } = await import('../mux/bgp/bfd.js');
    const { createSocket } = await import('node:dgram');
    // a plain socket in the peer's place first: what arrives on 4784, read at RFC 5880 4.1's offsets
    const got: Buffer[] = [];
    const sink = createSocket('udp4');
    sink.on('error', (e) => got.push(Buffer.from(`error ${e.message}`)));
    await new Promise<void>((r) => sink.bind(4784, '127.0.0.4', r));
    sink.on('message', (m) => got.push(m));
    const probe = new BfdPeer({
      local: '127.0.0.3',
      peer: '127.0.0.4',
      intervalMs: 100,
      multiplier: 3,
      multihop: true,
      log: () => {},
      onDown: () => {},
    });
    probe.start();
    try {
      const t0 = Date.now();
      while (got.length === 0 && Date.now() - t0 < 20_000) await new Promise((r) => setTimeout(r, 20));
      expect(got.length).toBeGreaterThan(0);
      expect(got[0]![0]! >>> 5).toBe(1); // version 1
      expect(got[0]![3]).toBe(24); // length of a control packet without authentication
      expect(probe.status()).toMatchObject({ multihop: true, port: 4784 });
    } finally {
      probe.stop();
      sink.close();
    }
    const a = new BfdPeer({
      local: '127.0.0.5',
      peer: '127.0.0.6',
      intervalMs: 100,
      multiplier: 3,
      multihop: true,
      log: () => {},
      onDown: () => {},
    });
    const b = new BfdPeer({
      local: '127.0.0.6',
      peer: '127.0.0.5',
      intervalMs: 100,
      multiplier: 3,
      multihop: true,
      log: () => {},
      onDown: () => {},
    });
    a.start();
    b.start();
    try {
      const t0 = Date.now();
      while ((a.state !== 'Up' || b.state !== 'Up') && Date.now() - t0 < 20_000) await new Promise((r) => setTimeout(r, 20));
      expect([a.state, b.state]).toEqual(['Up', 'Up']);
    } finally {
      a.stop();
      b.stop();
    }
  }, 60_000);
});

describe('lab plan and BIRD config of the routed example (examples/lab-routed.yaml)', () => {
  it('one rack per host subnet behind a leaf, the loopback as BGP peer, multihop sessions and BFD', async () => {
    const { buildLabPlan } = await import('../scripts/lab/plan.js');
    const { birdConfig } = await import('../scripts/lab/bird-conf.js');
    const file = LAB_YAML_PATH.replace(/lab\.yaml$/, 'lab-routed.yaml');
    const r = parseConfig(readFileSync(file, 'utf8'), file);
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    const p = buildLabPlan(r.config);
    if (!p.ok) throw new Error(p.errors.join('\n'));
    expect(p.plan.racks).toEqual([
      { leaf: 'leaf1', net4: '198.18.1.0/24', gw4: '198.18.1.1', uplink4: '198.18.0.241', hosts: ['host1'] },
      { leaf: 'leaf2', net4: '198.18.2.0/24', gw4: '198.18.2.1', uplink4: '198.18.0.242', hosts: ['host2'] },
    ]);
    expect(p.plan.loopback4).toBe('198.18.255.1');
    const conf = birdConfig(r.config, p.plan);
    expect(conf).toMatch(/^ {2}multihop;/m);
    expect(conf).toMatch(/^ {2}multihop \{ min rx interval 100 ms;/m);
    expect(conf).toMatch(/^protocol direct \{ ipv4; interface "fab0"; \}/m);
    expect(conf).toMatch(/local 198\.18\.255\.1 as 65000;/);
    // the default lab: one segment, no multihop
    const d = parseConfig(readFileSync(LAB_YAML_PATH, 'utf8'));
    if (!d.ok) throw new Error('lab.yaml');
    const dp = buildLabPlan(d.config);
    if (!dp.ok) throw new Error(dp.errors.join('\n'));
    expect(dp.plan.racks).toEqual([]);
    expect(birdConfig(d.config, dp.plan)).not.toMatch(/multihop|protocol direct/);
  });

  it('refuses a rack host with an IPv6 address and a MUX whose gateway is not the lab router', async () => {
    const { buildLabPlan } = await import('../scripts/lab/plan.js');
    const raw = parseYaml(readFileSync(LAB_YAML_PATH.replace(/lab\.yaml$/, 'lab-routed.yaml'), 'utf8'));
    raw.hosts[0].address6 = '2001:db8:f::21';
    raw.muxes[1].gateway = '198.18.0.9';
    const r = validateConfig(raw, 'edited');
    if (!r.ok) throw new Error(JSON.stringify(r.errors));
    const p = buildLabPlan(r.config);
    expect(p.ok).toBe(false);
    if (p.ok) return;
    expect(p.errors.join('\n')).toMatch(/hosts host1: the lab's routed underlay is IPv4 only/);
    expect(p.errors.join('\n')).toMatch(/muxes mux2: gateway 198\.18\.0\.9 is not the lab router \(198\.18\.0\.1\)/);
  });
});
