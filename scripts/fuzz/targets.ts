// Fuzz targets: every parser of untrusted bytes (packet codecs, BGP, BFD), both data planes, the BGP
// session FSM, the controller's API writes and the config validator. A target
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
import { ip } from '../../shared/addr.js';
import {
  BGP_TYPE_NOTIFICATION,
  BGP_TYPE_OPEN,
  BGP_TYPE_UPDATE,
  bgpErrorName,
  encodeBgpKeepalive,
  encodeBgpNotification,
  newBgpHeader,
  newBgpNotification,
  parseBgpHeader,
  parseBgpNotification,
} from '../../shared/bgp-message.js';
import { BGP_IPV4_UNICAST, BGP_IPV6_UNICAST, encodeBgpOpen, newBgpOpen, newBgpOpenRecord, parseBgpOpen } from '../../shared/bgp-open.js';
import {
  buildBgpAnnouncements,
  buildBgpEndOfRib,
  buildBgpWithdrawals,
  hostPrefix,
  newBgpUpdate,
  parseBgpUpdate,
  BGP_ORIGIN_IGP,
} from '../../shared/bgp-update.js';
import { BGP_STATES, newBgpFsm, stepBgpFsm, type BgpEvent, type BgpFsm } from '../../shared/bgp-fsm.js';
import { newBfdControl, parseBfdControl, writeBfdControl, bfdErrorName } from '../../shared/bgp-bfd.js';
import { ApiError, applyWrite, COLLECTIONS, type Target as ApiTarget, type WriteMethod } from '../../controller/document.js';

export interface Target {
  readonly name: string;
  /** A fresh input. */
  make(rng: Rng): unknown;
  /** 'accepted', or the name of the rejection. Throws on a crash. */
  run(input: unknown): string;
  /** Bytes of an input, to keep it in the corpus. */
  bytes(input: unknown): Uint8Array;
  /** The input back from its corpus bytes (the inverse of bytes). */
  fromBytes(b: Uint8Array): unknown;
  /** True when the input is the bytes themselves (a packet or a message): any-*.bin corpus files go to every such target. */
  readonly raw: boolean;
}

const asBytes = (x: unknown) => x as Uint8Array;
const dec = new TextDecoder();
/** Inputs kept as JSON; Uint8Array fields are written as arrays of numbers and read back as Uint8Array. */
const fromJson = (b: Uint8Array): unknown =>
  JSON.parse(dec.decode(b), (k, v) => (k === 'data' && Array.isArray(v) ? Uint8Array.from(v as number[]) : v));
const RAW = { bytes: asBytes, fromBytes: (b: Uint8Array): unknown => b, raw: true } as const;

function bytesTarget(name: string, seeds: readonly Uint8Array[], parse: (b: Uint8Array) => number): Target {
  return {
    name,
    make: (rng) => (rng.int(4) === 0 || seeds.length === 0 ? rng.bytes(rng.int(256)) : mutate(rng, rng.pick(seeds))),
    run: (x) => {
      const r = parse(asBytes(x));
      return r >= 0 ? 'accepted' : codecErrorName(r);
    },
    ...RAW,
  };
}

/** A data plane's verdict that no named counter explains: a fuzzer failure (kept in the corpus), not an outcome. */
export class UnnamedDrop extends Error {}

/**
 * The outcome of one data-plane call, from its counters before and after: a DROP must bump exactly one
 * drop counter, by one, the one lastDrop names, and not the catch-all drop_internal_error (which names
 * no reason); any other verdict bumps no drop counter. Otherwise throws UnnamedDrop.
 */
export function verdictOutcome(
  dropped: boolean,
  counters: { readonly names: readonly string[]; readonly values: Float64Array },
  lastDrop: number,
  before: Float64Array,
): string {
  const moved: string[] = [];
  for (let i = 0; i < counters.names.length; i++) {
    if (counters.values[i] !== before[i] && counters.names[i]!.startsWith('drop_'))
      moved.push(`${counters.names[i]} +${counters.values[i]! - before[i]!}`);
  }
  if (!dropped) {
    if (moved.length > 0) throw new UnnamedDrop(`a verdict other than DROP bumped ${moved.join(', ')}`);
    return 'accepted';
  }
  const name = counters.names[lastDrop];
  if (name === undefined || !name.startsWith('drop_'))
    throw new UnnamedDrop(`DROP with lastDrop ${lastDrop}, which names no drop counter (counters moved: ${moved.join(', ') || 'none'})`);
  if (name === 'drop_internal_error') throw new UnnamedDrop('DROP counted under the catch-all drop_internal_error, which names no reason');
  if (moved.length !== 1 || counters.values[lastDrop]! - before[lastDrop]! !== 1)
    throw new UnnamedDrop(`DROP named ${name}, but the drop counters moved: ${moved.join(', ') || 'none'}`);
  return name;
}

export function makeTargets(config: SlbxConfig, configText: string): Target[] {
  const client = [
    pkt().eth().ipv4({ src: '198.51.100.10', dst: '203.0.113.10' }).tcp({ sport: 40000, dport: 80, flags: TCP_SYN }).build(),
    pkt()
      .eth({ vlan: 7 })
      .ipv4({ src: '198.51.100.10', dst: '203.0.113.10', options: new Uint8Array(4) })
      .udp({ sport: 1, dport: 7003 })
      .payload(9)
      .build(),
    pkt().eth().ipv4({ src: '198.51.100.10', dst: '203.0.113.10', flags: 1 }).udp({ sport: 5, dport: 7, length: 900 }).payload(64).build(),
    pkt()
      .eth()
      .ipv6({ src: '2001:db8:c::10', dst: '2001:db8:ff::10' })
      .ext6({ type: 'hop' })
      .ext6({ type: 'fragment', more: true })
      .tcp({ sport: 1, dport: 80 })
      .build(),
    pkt()
      .eth()
      .ipv4({ src: '198.51.100.1', dst: '203.0.113.10' })
      .icmp({ type: 3, code: 4, rest: 1300 })
      .payload(pkt().ipv4({ src: '203.0.113.10', dst: '198.51.100.10' }).tcp({ sport: 80, dport: 4000 }).build())
      .build(),
    pkt()
      .eth()
      .ipv6({ src: '2001:db8:c::1', dst: '2001:db8:ff::10' })
      .icmpv6({ type: 2, rest: 1280 })
      .payload(pkt().ipv6({ src: '2001:db8:ff::10', dst: '2001:db8:c::10' }).udp({ sport: 7, dport: 4 }).build())
      .build(),
    pkt().eth().ipv4({ src: '198.51.100.10', dst: '203.0.113.10', flags: 2 }).tcp({ sport: 1, dport: 80 }).payload(1600).build(),
    pkt().eth().arp({ senderIp: '198.18.0.21', targetIp: '198.18.0.11' }).build(),
  ];
  const vx = (inner: Buffer, six = false) => {
    const e = pkt().eth();
    const outer = six
      ? e.ipv6({ src: '2001:db8:f::11', dst: '2001:db8:f::21' }).udp({ sport: 5, dport: 4789 })
      : e.ipv4({ src: '198.18.0.11', dst: '198.18.0.21' }).udp({ sport: 5, dport: 4789, checksum: 'zero' });
    return outer
      .vxlan({ vni: 5001 })
      .eth({ dst: '02:00:c0:00:02:0a', type: inner[0]! >>> 4 === 6 ? 0x86dd : 0x0800 })
      .payload(inner)
      .build();
  };
  const inbound = [
    vx(pkt().ipv4({ src: '198.51.100.10', dst: '203.0.113.10' }).tcp({ sport: 4, dport: 80 }).payload(10).build()),
    vx(pkt().ipv6({ src: '2001:db8:c::10', dst: '2001:db8:ff::10' }).udp({ sport: 4, dport: 7 }).build(), true),
    vx(
      pkt()
        .ipv4({ src: '198.51.100.1', dst: '203.0.113.10' })
        .icmp({ type: 11 })
        .payload(pkt().ipv4({ src: '203.0.113.10', dst: '198.51.100.10' }).tcp({ sport: 80, dport: 9 }).build())
        .build(),
    ),
  ];
  const outbound = [
    pkt()
      .eth({ src: '02:00:c0:00:02:0a' })
      .ipv4({ src: '192.0.2.10', dst: '198.51.100.10', flags: 2 })
      .tcp({ sport: 80, dport: 4 })
      .payload(1460)
      .build(),
    pkt().eth({ src: '02:00:c0:00:02:0a' }).ipv6({ src: '2001:db8:d::10', dst: '2001:db8:c::10' }).udp({ sport: 7, dport: 4 }).build(),
    pkt().eth({ src: '02:00:c0:00:02:0a', dst: 'ff:ff:ff:ff:ff:ff' }).arp({ senderIp: '192.0.2.10', targetIp: '192.0.2.1' }).build(),
    pkt()
      .eth({ src: '02:00:c0:00:02:0a' })
      .ipv6({ src: '2001:db8:d::10', dst: 'ff02::1:ff00:1' })
      .icmpv6({ type: 135 })
      .payload(new Uint8Array(24))
      .build(),
    pkt().eth({ src: '02:00:c0:00:02:0a' }).ipv4({ src: '192.0.2.10', dst: '192.0.2.1' }).tcp({ sport: 80, dport: 33000 }).build(),
  ];
  const l3 = (b: Buffer) => b.subarray(14);
  const tables = compileMuxTables(config, ALL_HEALTHY, null, 1);
  for (const h of tables.hosts.values()) h.macKnown = true;
  const mux = newMuxContext({
    tables,
    localMac: mac('02:00:00:00:00:11'),
    localPa4: config.muxes[0]!.address.words[0]!,
    localPa6: config.muxes[0]!.address6?.words ?? null,
    hashSeed: config.hashSeed,
    mtu: 1600,
    vxlanPort: 4789,
    flowTable: config.flowTable,
  });
  mux.icmpTokens = Number.MAX_SAFE_INTEGER;
  const hostIn = newHostContext(compileHostTables(config, config.hosts[0]!.name, 1), 4789, [
    mac('02:00:00:01:00:01'),
    mac('02:00:00:01:00:02'),
  ]);
  const hostOut = newHostContext(compileHostTables(config, config.hosts[0]!.name, 1), 4789, [
    mac('02:00:00:01:00:01'),
    mac('02:00:00:01:00:02'),
  ]);
  hostOut.dsrMtu = 1400;
  const rawConfig = parseYaml(configText) as unknown;
  const enc = new TextEncoder();
  return [
    bytesTarget('ethernet', client, (b) => parseEthernet(b, 0, newEthernetHeader())),
    bytesTarget('arp', client.map(l3), (b) => parseArp(b, 0, newArpPacket())),
    bytesTarget('ipv4', client.map(l3), (b) => parseIpv4(b, 0, newIpv4Header())),
    bytesTarget('ipv4-quoted', client.map(l3), (b) => parseIpv4(b, 0, newIpv4Header(), b.length, true)),
    bytesTarget('ipv6', client.map(l3), (b) => parseIpv6(b, 0, newIpv6Header())),
    bytesTarget('ipv6-quoted', client.map(l3), (b) => parseIpv6(b, 0, newIpv6Header(), b.length, true)),
    bytesTarget(
      'tcp',
      client.map((b) => b.subarray(34)),
      (b) => parseTcp(b, 0, newTcpHeader()),
    ),
    bytesTarget(
      'udp',
      client.map((b) => b.subarray(34)),
      (b) => parseUdp(b, 0, newUdpHeader()),
    ),
    bytesTarget(
      'icmp',
      client.map((b) => b.subarray(34)),
      (b) => parseIcmp(b, 0, newIcmpHeader()),
    ),
    bytesTarget(
      'nd',
      outbound.map((b) => b.subarray(54)),
      (b) => parseNd(b, 0, newNdMessage()),
    ),
    bytesTarget(
      'vxlan',
      inbound.map((b) => b.subarray(42)),
      (b) => parseVxlan(b, 0, newVxlanHeader()),
    ),
    bytesTarget('pcap-file', [], (b) => {
      const r = readPcap(b);
      return typeof r === 'number' ? r : 0;
    }),
    bytesTarget('dissect', [...client, ...inbound, ...outbound], (b) => {
      const d = dissect(b);
      return d.error ? -1 : 0;
    }),
    {
      name: 'mux-data-plane',
      make: (rng) => (rng.int(4) === 0 ? rng.bytes(rng.int(200)) : mutate(rng, rng.pick(client))),
      run: (x) => {
        const b = asBytes(x);
        const before = mux.counters.values.slice();
        return verdictOutcome(processPacket(b, b.length, mux) === VERDICT_DROP, mux.counters, mux.lastDrop, before);
      },
      ...RAW,
    },
    {
      name: 'host-inbound',
      make: (rng) => (rng.int(4) === 0 ? rng.bytes(rng.int(200)) : mutate(rng, rng.pick(inbound))),
      run: (x) => {
        const b = asBytes(x);
        const before = hostIn.counters.values.slice();
        return verdictOutcome(processInbound(b, b.length, hostIn) === HOST_DROP, hostIn.counters, hostIn.lastDrop, before);
      },
      ...RAW,
    },
    {
      name: 'host-outbound',
      make: (rng) => (rng.int(4) === 0 ? rng.bytes(rng.int(200)) : mutate(rng, rng.pick(outbound))),
      run: (x) => {
        const b = asBytes(x);
        const before = hostOut.counters.values.slice();
        return verdictOutcome(processOutbound(b, b.length, 0, hostOut) === HOST_DROP, hostOut.counters, hostOut.lastDrop, before);
      },
      ...RAW,
    },
    {
      name: 'bgp-message',
      make: (rng) => (rng.int(5) === 0 ? rng.bytes(rng.int(120)) : mutate(rng, rng.pick(bgpSeeds))),
      run: (x) => parseBgp(asBytes(x)),
      ...RAW,
    },
    {
      name: 'bgp-fsm',
      make: (rng) => Array.from({ length: 1 + rng.int(40) }, () => randomBgpEvent(rng)),
      run: (x) => runFsm(x as BgpEvent[]),
      bytes: (x) => enc.encode(JSON.stringify(x, (_k, v) => (v instanceof Uint8Array ? [...v] : v))),
      fromBytes: fromJson,
      raw: false,
    },
    {
      name: 'bfd',
      make: (rng) => (rng.int(4) === 0 ? rng.bytes(rng.int(64)) : mutate(rng, rng.pick(bfdSeeds))),
      run: (x) => {
        const r = parseBfdControl(asBytes(x), 0, newBfdControl());
        return r >= 0 ? 'accepted' : bfdErrorName(r);
      },
      ...RAW,
    },
    {
      name: 'api-write',
      make: (rng) => randomApiWrite(rng, rawConfig),
      run: (x) => runApiWrite(x as ApiWrite, rawConfig),
      bytes: (x) => enc.encode(JSON.stringify(x)),
      fromBytes: fromJson,
      raw: false,
    },
    {
      name: 'config-object',
      make: (rng) => mutateObject(rng, structuredClone(rawConfig)),
      run: (x) => {
        const r = validateConfig(x);
        if (r.ok) return 'accepted';
        if (r.errors.length === 0 || r.errors.some((e) => !e.message)) throw new Error('a refusal without a named error');
        return 'refused';
      },
      bytes: (x) => enc.encode(JSON.stringify(x)),
      fromBytes: fromJson,
      raw: false,
    },
    {
      name: 'config-yaml',
      make: (rng) => mutateText(rng, configText),
      run: (x) => {
        const r = parseConfig(x as string);
        if (r.ok) return 'accepted';
        if (r.errors.length === 0) throw new Error('a refusal without a named error');
        return 'refused';
      },
      bytes: (x) => enc.encode(x as string),
      fromBytes: (b) => dec.decode(b),
      raw: false,
    },
  ];
}

const SPECIAL: unknown[] = [
  null,
  true,
  false,
  0,
  -1,
  1.5,
  2 ** 32,
  '',
  'x',
  '80',
  [],
  {},
  '198.51.100.10',
  '2001:db8::1',
  '02:00:00:00:00:01',
  'tcp',
  1e308,
  NaN,
];

/** Changes 1..4 random places in a plain object tree: replace, delete, add a key, or wrap. */
export function mutateObject(rng: Rng, root: unknown): unknown {
  const n = 1 + rng.int(4);
  for (let k = 0; k < n; k++) {
    const paths: { parent: any; key: string | number }[] = [];
    const walk = (o: any, depth: number) => {
      if (o === null || typeof o !== 'object' || depth > 6) return;
      for (const key of Array.isArray(o) ? o.keys() : Object.keys(o)) {
        paths.push({ parent: o, key });
        walk(o[key], depth + 1);
      }
    };
    walk(root, 0);
    if (paths.length === 0) return rng.pick(SPECIAL);
    const { parent, key } = rng.pick(paths);
    const op = rng.int(5);
    if (op === 0) parent[key] = rng.pick(SPECIAL);
    else if (op === 1) {
      if (Array.isArray(parent)) parent.splice(Number(key), 1);
      else delete parent[key];
    } else if (op === 2 && !Array.isArray(parent)) parent[`k${rng.int(100)}`] = rng.pick(SPECIAL);
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
    else if (op === 1)
      t = t.slice(0, i) + rng.pick(['\n', ':', '- ', '{', '[', '"', '#', '&a', '*a', '  ', '\t', '0x', '---\n']) + t.slice(i);
    else if (op === 2) {
      const j = rng.int(t.length);
      t = t.slice(0, i) + t.slice(j, j + 1 + rng.int(20)) + t.slice(i);
    } else t = t.slice(0, i) + String.fromCharCode(rng.int(128)) + t.slice(i);
  }
  return t;
}

// ---------------------------------------------------------------------------------------------
// BGP, BFD and the controller's API: what a peer, a router or an API client can send

const bgpSeeds: Uint8Array[] = [
  encodeBgpOpen(newBgpOpen({ asn: 65001, holdTimeS: 3, bgpId: 0xc612000b, families: [BGP_IPV4_UNICAST, BGP_IPV6_UNICAST] })),
  encodeBgpOpen(newBgpOpen({ asn: 4200000001, holdTimeS: 90, bgpId: 1, families: [BGP_IPV4_UNICAST] })),
  encodeBgpKeepalive(),
  (() => {
    const n = newBgpNotification();
    n.code = 6;
    n.subcode = 2;
    return encodeBgpNotification(n);
  })(),
  ...buildBgpAnnouncements(4, [hostPrefix(ip('203.0.113.10')), hostPrefix(ip('203.0.113.20'))], [ip('198.18.0.11')], {
    origin: BGP_ORIGIN_IGP,
    asPath: [65001],
    as4: true,
  }),
  ...buildBgpAnnouncements(6, [hostPrefix(ip('2001:db8:ff::10'))], [ip('2001:db8:f::11')], {
    origin: BGP_ORIGIN_IGP,
    asPath: [65001],
    as4: true,
  }),
  ...buildBgpWithdrawals(4, [hostPrefix(ip('203.0.113.10'))]),
  ...buildBgpWithdrawals(6, [hostPrefix(ip('2001:db8:ff::10'))]),
  buildBgpEndOfRib(4),
  buildBgpEndOfRib(6),
];

/** A message as the speaker reads one from the peer: header, then its body by type. */
function parseBgp(b: Uint8Array): string {
  const h = newBgpHeader();
  const n = parseBgpHeader(b, 0, h);
  if (n < 0) return bgpErrorName(n);
  const end = Math.min(b.length, h.length);
  let r = 0;
  if (h.type === BGP_TYPE_OPEN) r = parseBgpOpen(b, 0, newBgpOpenRecord(), end);
  else if (h.type === BGP_TYPE_UPDATE) r = parseBgpUpdate(b, 0, newBgpUpdate(), end, { as4: (b.length & 1) === 0 });
  else if (h.type === BGP_TYPE_NOTIFICATION) r = parseBgpNotification(b, 0, newBgpNotification(), end);
  return r >= 0 ? 'accepted' : bgpErrorName(r);
}

const FSM_CONFIG = { holdTimeS: 3, keepaliveS: 1, connectRetryMs: 1000, backoffMinMs: 500, backoffMaxMs: 8000, shutdownMessage: 'fuzz' };

function randomBgpEvent(rng: Rng): BgpEvent {
  const data = rng.bytes(rng.int(6));
  const err = -(((1 + rng.int(6)) << 8) | rng.int(12));
  switch (rng.int(17)) {
    case 0:
      return { type: 'ManualStart' };
    case 1:
      return { type: 'ManualStop' };
    case 2:
      return { type: 'AutomaticStart' };
    case 3:
      return { type: 'ConnectRetryTimerExpires' };
    case 4:
      return { type: 'HoldTimerExpires' };
    case 5:
      return { type: 'KeepaliveTimerExpires' };
    case 6:
      return { type: 'IdleHoldTimerExpires' };
    case 7:
      return { type: 'TcpConnectionAcked' };
    case 8:
      return { type: 'TcpConnectionFails' };
    case 9:
      return { type: 'BgpOpen', peerHoldTimeS: rng.pick([0, 1, 2, 3, 90, 65535]) };
    case 10:
      return { type: 'BgpHeaderErr', error: err, data };
    case 11:
      return { type: 'BgpOpenMsgErr', error: err, data };
    case 12:
      return { type: 'NotifMsg', code: rng.int(8), subcode: rng.int(12) };
    case 13:
      return { type: 'KeepAliveMsg' };
    case 14:
      return { type: 'UpdateMsg' };
    case 15:
      return { type: 'UpdateMsgErr', error: err, data };
    default:
      return { type: 'BfdDown' };
  }
}

/** A sequence of events from Idle: every step names a reason, stays in a known state, and the timers it asks for are sane. */
function runFsm(events: readonly BgpEvent[]): string {
  let f: BgpFsm = newBgpFsm(FSM_CONFIG);
  for (const e of events) {
    const st = stepBgpFsm(f, e);
    if (typeof st.reason !== 'string' || st.reason === '') throw new Error(`no reason for ${e.type} in ${f.state}`);
    if (!(BGP_STATES as readonly string[]).includes(st.next.state)) throw new Error(`unknown state ${String(st.next.state)}`);
    for (const a of st.actions) {
      if (a.type === 'startTimer' && !(Number.isFinite(a.ms) && a.ms >= 0 && a.ms <= 3_600_000))
        throw new Error(`timer ${a.timer} for ${a.ms} ms`);
    }
    f = st.next;
  }
  return 'accepted'; // any sequence of events is legal input to the FSM; what is checked is every step
}

const bfdSeeds: Uint8Array[] = [1, 2, 3].map((state) => {
  const c = newBfdControl();
  c.state = state;
  c.detectMult = 3;
  c.myDiscriminator = 0x11223344;
  c.yourDiscriminator = state === 1 ? 0 : 0x55667788;
  c.desiredMinTxUs = 100_000;
  c.requiredMinRxUs = 100_000;
  const b = new Uint8Array(24);
  writeBfdControl(c, b, 0);
  return b;
});

interface ApiWrite {
  method: WriteMethod;
  target: ApiTarget;
  body: unknown;
}

const API_KEYS: Record<string, string[]> = {
  networks: ['tenant-a', 'nope'],
  muxes: ['mux1', 'mux2', 'mux9'],
  hosts: ['host1', 'host2'],
  nics: ['h1vm1', 'h2vm2', 'x'],
  probes: ['http80', 'tcp80'],
  pools: ['web', 'other'],
  vips: ['203.0.113.10', '2001:db8:ff::10', '2001:DB8:FF:0::10', '1.2.3'],
};

/** A random API call: a method on a collection, one object or a nested one, with a body mutated from a real object. */
function randomApiWrite(rng: Rng, raw: unknown): ApiWrite {
  const doc = raw as Record<string, unknown[]>;
  const coll = rng.pick(COLLECTIONS as readonly string[]) as ApiTarget['coll'];
  const t: ApiTarget = { coll };
  if (rng.int(3) > 0) t.key = rng.pick(API_KEYS[coll] ?? ['x']);
  if (t.key !== undefined && (coll === 'pools' || coll === 'vips') && rng.int(2) === 0) {
    t.sub = coll === 'pools' ? 'backends' : 'rules';
    if (rng.int(2) === 0) t.subKey = rng.pick(coll === 'pools' ? ['h1vm1', 'h2vm2', 'zz'] : ['web-http', 'echo', 'zz']);
  }
  const method = rng.pick(['POST', 'PUT', 'PATCH', 'DELETE'] as const);
  const list = doc[coll] ?? [];
  const sample = list.length > 0 ? structuredClone(rng.pick(list)) : {};
  const body = rng.int(6) === 0 ? rng.pick(SPECIAL) : (mutateObject(rng, { v: sample }) as { v: unknown });
  return { method, target: t, body: typeof body === 'object' && body !== null && 'v' in body ? (body as { v: unknown }).v : body };
}

/** applyWrite on a copy, then the whole-document validation the API runs: a 4xx with a message, or accepted. */
function runApiWrite(w: ApiWrite, raw: unknown): string {
  const doc = structuredClone(raw) as Record<string, unknown>;
  try {
    applyWrite(doc as never, w.method, w.target, w.body);
  } catch (e) {
    if (e instanceof ApiError) {
      if (!(e.status >= 400 && e.status < 500) || !e.message) throw new Error(`ApiError ${e.status} without a message`);
      return `refused_${e.status}`;
    }
    throw e;
  }
  const r = validateConfig(doc);
  if (r.ok) return 'accepted';
  if (r.errors.length === 0 || r.errors.some((x) => !x.message)) throw new Error('a refusal without a named error');
  return 'refused_400';
}
