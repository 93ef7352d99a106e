// Fuzz targets: every parser of untrusted bytes, both data planes, and the config validator. A target
// makes an input from a seeded generator (random bytes, or a mutation of a valid seed) and runs it; the
// result is 'accepted' or the NAME of the rejection. Throwing is a crash; taking too long is a hang.
import { mac } from '../../shared/addr.js';
import { codecErrorName } from '../../shared/codec-error.js';
import { parseEthernet, newEthernetHeader } from '../../shared/ethernet.js';
import { parseArp, newArpPacket } from '../../shared/arp.js';
import { parseIpv4, newIpv4Header } from '../../shared/ipv4.js';
import { parseIpv6, newIpv6Header } from '../../shared/ipv6.js';
import { parseTcp, newTcpHeader } from '../../shared/tcp.js';
import { parseUdp, newUdpHeader } from '../../shared/udp.js';
import { parseIcmp, newIcmpHeader } from '../../shared/icmp.js';
import { parseNd, newNdMessage } from '../../shared/icmpv6.js';
import { parseVxlan, newVxlanHeader } from '../../shared/vxlan.js';
import { readPcap } from '../../shared/pcap-file.js';
import { dissect } from '../../shared/dissect.js';
import { pkt } from '../../shared/packet-builder.js';
import { parse as parseYaml } from 'yaml';
import { parseConfig, validateConfig, type SlbxConfig } from '../../shared/config.js';
import { TCP_SYN } from '../../shared/tcp.js';
import { compileMuxTables, ALL_HEALTHY } from '../../mux/tables.js';
import { newMuxContext, processPacket, VERDICT_DROP } from '../../mux/data-plane.js';
import { compileHostTables } from '../../host-agent/tables.js';
import { newHostContext, processInbound, processOutbound, VERDICT_DROP as HOST_DROP } from '../../host-agent/data-plane.js';
import { Rng, mutate } from './rng.js';

export interface Target {
  readonly name: string;
  /** A fresh input. */
  make(rng: Rng): unknown;
  /** 'accepted', or the name of the rejection. Throws on a crash. */
  run(input: unknown): string;
  /** Bytes of an input, to keep it in the corpus. */
  bytes(input: unknown): Uint8Array;
}

const asBytes = (x: unknown) => x as Uint8Array;

function bytesTarget(name: string, seeds: readonly Uint8Array[], parse: (b: Uint8Array) => number): Target {
  return {
    name,
    make: (rng) => (rng.int(4) === 0 || seeds.length === 0 ? rng.bytes(rng.int(256)) : mutate(rng, rng.pick(seeds))),
    run: (x) => { const r = parse(asBytes(x)); return r >= 0 ? 'accepted' : codecErrorName(r); },
    bytes: asBytes,
  };
}

export function makeTargets(config: SlbxConfig, configText: string): Target[] {
  const client = [
    pkt().eth().ipv4({ src: '198.51.100.10', dst: '203.0.113.10' }).tcp({ sport: 40000, dport: 80, flags: TCP_SYN }).build(),
    pkt().eth({ vlan: 7 }).ipv4({ src: '198.51.100.10', dst: '203.0.113.10', options: new Uint8Array(4) }).udp({ sport: 1, dport: 7003 }).payload(9).build(),
    pkt().eth().ipv4({ src: '198.51.100.10', dst: '203.0.113.10', flags: 1 }).udp({ sport: 5, dport: 7, length: 900 }).payload(64).build(),
    pkt().eth().ipv6({ src: '2001:db8:c::10', dst: '2001:db8:ff::10' }).ext6({ type: 'hop' }).ext6({ type: 'fragment', more: true }).tcp({ sport: 1, dport: 80 }).build(),
    pkt().eth().ipv4({ src: '198.51.100.1', dst: '203.0.113.10' }).icmp({ type: 3, code: 4, rest: 1300 })
      .payload(pkt().ipv4({ src: '203.0.113.10', dst: '198.51.100.10' }).tcp({ sport: 80, dport: 4000 }).build()).build(),
    pkt().eth().ipv6({ src: '2001:db8:c::1', dst: '2001:db8:ff::10' }).icmpv6({ type: 2, rest: 1280 })
      .payload(pkt().ipv6({ src: '2001:db8:ff::10', dst: '2001:db8:c::10' }).udp({ sport: 7, dport: 4 }).build()).build(),
    pkt().eth().ipv4({ src: '198.51.100.10', dst: '203.0.113.10', flags: 2 }).tcp({ sport: 1, dport: 80 }).payload(1600).build(),
    pkt().eth().arp({ senderIp: '198.18.0.21', targetIp: '198.18.0.11' }).build(),
  ];
  const vx = (inner: Buffer, six = false) => {
    const e = pkt().eth();
    const outer = six ? e.ipv6({ src: '2001:db8:f::11', dst: '2001:db8:f::21' }).udp({ sport: 5, dport: 4789 })
      : e.ipv4({ src: '198.18.0.11', dst: '198.18.0.21' }).udp({ sport: 5, dport: 4789, checksum: 'zero' });
    return outer.vxlan({ vni: 5001 }).eth({ dst: '02:00:c0:00:02:0a', type: inner[0]! >>> 4 === 6 ? 0x86dd : 0x0800 }).payload(inner).build();
  };
  const inbound = [
    vx(pkt().ipv4({ src: '198.51.100.10', dst: '203.0.113.10' }).tcp({ sport: 4, dport: 80 }).payload(10).build()),
    vx(pkt().ipv6({ src: '2001:db8:c::10', dst: '2001:db8:ff::10' }).udp({ sport: 4, dport: 7 }).build(), true),
    vx(pkt().ipv4({ src: '198.51.100.1', dst: '203.0.113.10' }).icmp({ type: 11 }).payload(pkt().ipv4({ src: '203.0.113.10', dst: '198.51.100.10' }).tcp({ sport: 80, dport: 9 }).build()).build()),
  ];
  const outbound = [
    pkt().eth({ src: '02:00:c0:00:02:0a' }).ipv4({ src: '192.0.2.10', dst: '198.51.100.10', flags: 2 }).tcp({ sport: 80, dport: 4 }).payload(1460).build(),
    pkt().eth({ src: '02:00:c0:00:02:0a' }).ipv6({ src: '2001:db8:d::10', dst: '2001:db8:c::10' }).udp({ sport: 7, dport: 4 }).build(),
    pkt().eth({ src: '02:00:c0:00:02:0a', dst: 'ff:ff:ff:ff:ff:ff' }).arp({ senderIp: '192.0.2.10', targetIp: '192.0.2.1' }).build(),
    pkt().eth({ src: '02:00:c0:00:02:0a' }).ipv6({ src: '2001:db8:d::10', dst: 'ff02::1:ff00:1' }).icmpv6({ type: 135 }).payload(new Uint8Array(24)).build(),
    pkt().eth({ src: '02:00:c0:00:02:0a' }).ipv4({ src: '192.0.2.10', dst: '192.0.2.1' }).tcp({ sport: 80, dport: 33000 }).build(),
  ];
  const l3 = (b: Buffer) => b.subarray(14);
  const tables = compileMuxTables(config, ALL_HEALTHY, null, 1);
  for (const h of tables.hosts.values()) h.macKnown = true;
  const mux = newMuxContext({
    tables, localMac: mac('02:00:00:00:00:11'), localPa4: config.muxes[0]!.address.words[0]!, localPa6: config.muxes[0]!.address6?.words ?? null,
    hashSeed: config.hashSeed, mtu: 1600, vxlanPort: 4789, flowTable: config.flowTable,
  });
  mux.icmpTokens = Number.MAX_SAFE_INTEGER;
  const hostIn = newHostContext(compileHostTables(config, config.hosts[0]!.name, 1), 4789, [mac('02:00:00:01:00:01'), mac('02:00:00:01:00:02')]);
  const hostOut = newHostContext(compileHostTables(config, config.hosts[0]!.name, 1), 4789, [mac('02:00:00:01:00:01'), mac('02:00:00:01:00:02')]);
  hostOut.dsrMtu = 1400;
  const dropName = (names: readonly string[], i: number) => names[i] ?? 'unnamed_drop';
  const rawConfig = parseYaml(configText) as unknown;
  const enc = new TextEncoder();
  return [
    bytesTarget('ethernet', client, (b) => parseEthernet(b, 0, newEthernetHeader())),
    bytesTarget('arp', client.map(l3), (b) => parseArp(b, 0, newArpPacket())),
    bytesTarget('ipv4', client.map(l3), (b) => parseIpv4(b, 0, newIpv4Header())),
    bytesTarget('ipv4-quoted', client.map(l3), (b) => parseIpv4(b, 0, newIpv4Header(), b.length, true)),
    bytesTarget('ipv6', client.map(l3), (b) => parseIpv6(b, 0, newIpv6Header())),
    bytesTarget('ipv6-quoted', client.map(l3), (b) => parseIpv6(b, 0, newIpv6Header(), b.length, true)),
    bytesTarget('tcp', client.map((b) => b.subarray(34)), (b) => parseTcp(b, 0, newTcpHeader())),
    bytesTarget('udp', client.map((b) => b.subarray(34)), (b) => parseUdp(b, 0, newUdpHeader())),
    bytesTarget('icmp', client.map((b) => b.subarray(34)), (b) => parseIcmp(b, 0, newIcmpHeader())),
    bytesTarget('nd', outbound.map((b) => b.subarray(54)), (b) => parseNd(b, 0, newNdMessage())),
    bytesTarget('vxlan', inbound.map((b) => b.subarray(42)), (b) => parseVxlan(b, 0, newVxlanHeader())),
    bytesTarget('pcap-file', [], (b) => { const r = readPcap(b); return typeof r === 'number' ? r : 0; }),
    bytesTarget('dissect', [...client, ...inbound, ...outbound], (b) => { const d = dissect(b); return d.error ? -1 : 0; }),
    {
      name: 'mux-data-plane',
      make: (rng) => (rng.int(4) === 0 ? rng.bytes(rng.int(200)) : mutate(rng, rng.pick(client))),
      run: (x) => { const b = asBytes(x); return processPacket(b, b.length, mux) === VERDICT_DROP ? dropName(mux.counters.names, mux.lastDrop) : 'accepted'; },
      bytes: asBytes,
    },
    {
      name: 'host-inbound',
      make: (rng) => (rng.int(4) === 0 ? rng.bytes(rng.int(200)) : mutate(rng, rng.pick(inbound))),
      run: (x) => { const b = asBytes(x); return processInbound(b, b.length, hostIn) === HOST_DROP ? dropName(hostIn.counters.names, hostIn.lastDrop) : 'accepted'; },
      bytes: asBytes,
    },
    {
      name: 'host-outbound',
      make: (rng) => (rng.int(4) === 0 ? rng.bytes(rng.int(200)) : mutate(rng, rng.pick(outbound))),
      run: (x) => { const b = asBytes(x); return processOutbound(b, b.length, 0, hostOut) === HOST_DROP ? dropName(hostOut.counters.names, hostOut.lastDrop) : 'accepted'; },
      bytes: asBytes,
    },
    {
      name: 'config-object',
      make: (rng) => mutateObject(rng, structuredClone(rawConfig)),
      run: (x) => { const r = validateConfig(x); if (r.ok) return 'accepted'; if (r.errors.length === 0 || r.errors.some((e) => !e.message)) throw new Error('a refusal without a named error'); return 'refused'; },
      bytes: (x) => enc.encode(JSON.stringify(x)),
    },
    {
      name: 'config-yaml',
      make: (rng) => mutateText(rng, configText),
      run: (x) => { const r = parseConfig(x as string); if (r.ok) return 'accepted'; if (r.errors.length === 0) throw new Error('a refusal without a named error'); return 'refused'; },
      bytes: (x) => enc.encode(x as string),
    },
  ];
}

const SPECIAL: unknown[] = [null, true, false, 0, -1, 1.5, 2 ** 32, '', 'x', '80', [], {}, '198.51.100.10', '2001:db8::1', '02:00:00:00:00:01', 'tcp', 1e308, NaN];

/** Changes 1..4 random places in a plain object tree: replace, delete, add a key, or wrap. */
export function mutateObject(rng: Rng, root: unknown): unknown {
  const n = 1 + rng.int(4);
  for (let k = 0; k < n; k++) {
    const paths: { parent: any; key: string | number }[] = [];
    const walk = (o: any, depth: number) => {
      if (o === null || typeof o !== 'object' || depth > 6) return;
      for (const key of Array.isArray(o) ? o.keys() : Object.keys(o)) { paths.push({ parent: o, key }); walk(o[key], depth + 1); }
    };
    walk(root, 0);
    if (paths.length === 0) return rng.pick(SPECIAL);
    const { parent, key } = rng.pick(paths);
    const op = rng.int(5);
    if (op === 0) parent[key] = rng.pick(SPECIAL);
    else if (op === 1) { if (Array.isArray(parent)) parent.splice(Number(key), 1); else delete parent[key]; }
    else if (op === 2 && !Array.isArray(parent)) parent[`k${rng.int(100)}`] = rng.pick(SPECIAL);
    else if (op === 3) parent[key] = [parent[key]];
    else if (typeof parent[key] === 'number') parent[key] = parent[key] + rng.int(3) - 1;
    else if (typeof parent[key] === 'string') parent[key] = parent[key] + rng.pick(['', 'x', '0', ':', '.', ' ']);
  }
  return root;
}

export function mutateText(rng: Rng, text: string): string {
  let t = text;
  const n = 1 + rng.int(5);
  for (let k = 0; k < n; k++) {
    const i = rng.int(t.length + 1);
    const op = rng.int(4);
    if (op === 0) t = t.slice(0, i) + t.slice(i + 1 + rng.int(8));
    else if (op === 1) t = t.slice(0, i) + rng.pick(['\n', ':', '- ', '{', '[', '"', '#', '&a', '*a', '  ', '\t', '0x', '---\n']) + t.slice(i);
    else if (op === 2) { const j = rng.int(t.length); t = t.slice(0, i) + t.slice(j, j + 1 + rng.int(20)) + t.slice(i); }
    else t = t.slice(0, i) + String.fromCharCode(rng.int(128)) + t.slice(i);
  }
  return t;
}
