// MUX data plane: one captured frame in, one VXLAN frame out (or a named drop). Pure and synchronous:
// no awaits, timers, logs or allocation per packet; time comes in as ctx.nowS. The same function runs
// on live captures (mux/io) and on frames read from a pcap file (cli/replay, tests).
//
//   client frame -> eth -> IPv4/IPv6 (dst must be a VIP) -> TCP/UDP (protocol, dst port -> rule)
//     -> flow table (5-tuple -> nic) or Maglev slot of the rule's hash (5/3/2-tuple) -> nic -> host
//     -> out: eth(host MAC) / IPv4(mux PA -> host PA) / UDP(sport from flow hash, 4789) / VXLAN(VNI)
//             / eth(nic MAC) / the client's IP packet, byte for byte (TTL untouched)
import { Counters, codecDropIndex, codecDropNames } from '../shared/counters.js';
import { ETHERTYPE_ARP, ETHERTYPE_IPV4, ETHERTYPE_IPV6, newEthernetHeader, parseEthernet, writeEthernetRaw } from '../shared/ethernet.js';
import { IPPROTO_TCP, IPPROTO_UDP, IPV4_FLAG_MF, newIpv4Header, parseIpv4 } from '../shared/ipv4.js';
import { newIpv6Header, parseIpv6 } from '../shared/ipv6.js';
import { newTcpHeader, parseTcp } from '../shared/tcp.js';
import { newUdpHeader, parseUdp } from '../shared/udp.js';
import { sumBytes, finishChecksum } from '../shared/checksum.js';
import { readU16 } from '../shared/bytes.js';
import { ERR_TRUNCATED } from '../shared/codec-error.js';
import { hashFlowV4, hashFlowV6, vxlanSourcePort } from '../shared/flow-hash.js';
import { VXLAN_FLAG_I } from '../shared/vxlan.js';
import { MAGLEV_EMPTY } from '../shared/maglev.js';
import type { FlowTableConfig } from '../shared/config.js';
import { FlowTable, type FlowLimit } from './flow-table.js';
import { foldV6, type MuxNic, type MuxRule, type MuxTables, type MuxVip } from './tables.js';

export const VERDICT_DROP = 0;
export const VERDICT_FORWARD = 1;
/** Not for the data plane (ARP): hand it to the control plane. */
export const VERDICT_CONTROL = 2;

/** Outer headers the MUX writes: Ethernet 14, IPv4 20, UDP 8, VXLAN 8, inner Ethernet 14. */
export const MUX_ENCAP_LEN = 64;
const OUT_BUFFER_LEN = MUX_ENCAP_LEN + 65535;

export const MUX_COUNTER_NAMES = [
  'rx_packets', 'rx_bytes', 'tx_packets', 'tx_bytes',
  'flow_new', 'flow_hit', 'flow_replaced', 'flow_table_full', 'fragments', 'control_arp',
  'drop_not_ip', 'drop_not_vip', 'drop_no_rule', 'drop_fragment_no_rule', 'drop_no_backend', 'drop_no_neighbor',
  'drop_too_big', 'drop_ipv4_bad_checksum', 'drop_internal_error',
  ...codecDropNames('eth'), ...codecDropNames('ipv4'), ...codecDropNames('ipv6'), ...codecDropNames('tcp'), ...codecDropNames('udp'),
] as const;
export type MuxCounterName = (typeof MUX_COUNTER_NAMES)[number];

export interface MuxContext {
  tables: MuxTables;
  readonly flows4: FlowTable;
  readonly flows6: FlowTable;
  readonly flowLimit: FlowLimit;
  readonly counters: Counters<MuxCounterName>;
  /** Seconds, from the daemon's coarse clock. */
  nowS: number;
  /** MAC and IPv4 provider address of the MUX's fabric interface. */
  readonly localMac: Uint8Array;
  readonly localPa4: number;
  readonly hashSeed: number;
  /** The fabric MTU: the largest outer IP packet. */
  readonly mtu: number;
  readonly vxlanPort: number;
  readonly tcpIdleS: number;
  readonly udpIdleS: number;
  /** The frame to send after VERDICT_FORWARD: out[0 .. outLen). Reused for every packet. */
  readonly out: Buffer;
  outLen: number;
  /** After a verdict: the drop counter index, or -1. */
  lastDrop: number;
  /** After VERDICT_FORWARD: the chosen nic. */
  lastNic: MuxNic | null;
  ipId: number;
  readonly eth: ReturnType<typeof newEthernetHeader>;
  readonly ip4: ReturnType<typeof newIpv4Header>;
  readonly ip6: ReturnType<typeof newIpv6Header>;
  readonly tcp: ReturnType<typeof newTcpHeader>;
  readonly udp: ReturnType<typeof newUdpHeader>;
  readonly ethDrop: Int32Array;
  readonly ip4Drop: Int32Array;
  readonly ip6Drop: Int32Array;
  readonly tcpDrop: Int32Array;
  readonly udpDrop: Int32Array;
}

export interface MuxContextOptions {
  tables: MuxTables;
  localMac: Uint8Array;
  localPa4: number;
  hashSeed: number;
  mtu: number;
  vxlanPort: number;
  flowTable: FlowTableConfig;
}

export function newMuxContext(o: MuxContextOptions): MuxContext {
  const counters = new Counters(MUX_COUNTER_NAMES);
  const flowLimit: FlowLimit = { max: o.flowTable.maxFlows, count: 0 };
  return {
    tables: o.tables,
    flows4: new FlowTable(4, flowLimit),
    flows6: new FlowTable(10, flowLimit),
    flowLimit,
    counters,
    nowS: 1,
    localMac: o.localMac,
    localPa4: o.localPa4,
    hashSeed: o.hashSeed,
    mtu: o.mtu,
    vxlanPort: o.vxlanPort,
    tcpIdleS: o.flowTable.tcpIdleTimeoutS,
    udpIdleS: o.flowTable.udpIdleTimeoutS,
    out: Buffer.alloc(OUT_BUFFER_LEN),
    outLen: 0,
    lastDrop: -1,
    lastNic: null,
    ipId: 0,
    eth: newEthernetHeader(),
    ip4: newIpv4Header(),
    ip6: newIpv6Header(),
    tcp: newTcpHeader(),
    udp: newUdpHeader(),
    ethDrop: codecDropIndex(counters, 'eth'),
    ip4Drop: codecDropIndex(counters, 'ipv4'),
    ip6Drop: codecDropIndex(counters, 'ipv6'),
    tcpDrop: codecDropIndex(counters, 'tcp'),
    udpDrop: codecDropIndex(counters, 'udp'),
  };
}

function drop(ctx: MuxContext, index: number): number {
  ctx.counters.values[index]!++;
  ctx.lastDrop = index;
  return VERDICT_DROP;
}

function codecDrop(ctx: MuxContext, map: Int32Array, code: number): number {
  const i = map[-code] ?? -1;
  return drop(ctx, i >= 0 ? i : ctx.counters.index.drop_internal_error);
}

/**
 * Processes the frame frame[0 .. len). On VERDICT_FORWARD the VXLAN frame is ctx.out[0 .. ctx.outLen).
 */
export function processPacket(frame: Uint8Array, len: number, ctx: MuxContext): number {
  const c = ctx.counters.values;
  const C = ctx.counters.index;
  c[C.rx_packets]!++;
  c[C.rx_bytes]! += len;
  ctx.lastDrop = -1;
  ctx.lastNic = null;
  if (len > frame.length) len = frame.length;
  const eth = ctx.eth;
  const l3 = parseEthernet(frame, 0, eth, len);
  if (l3 < 0) return codecDrop(ctx, ctx.ethDrop, l3);
  const etherType = eth.etherType;
  if (etherType === ETHERTYPE_IPV4) return processIpv4(frame, len, l3, ctx);
  if (etherType === ETHERTYPE_IPV6) return processIpv6(frame, len, l3, ctx);
  if (etherType === ETHERTYPE_ARP) {
    c[C.control_arp]!++;
    return VERDICT_CONTROL;
  }
  return drop(ctx, C.drop_not_ip);
}

function processIpv4(frame: Uint8Array, len: number, l3: number, ctx: MuxContext): number {
  const C = ctx.counters.index;
  const ip = ctx.ip4;
  const hl = parseIpv4(frame, l3, ip, len);
  if (hl < 0) return codecDrop(ctx, ctx.ip4Drop, hl);
  // RFC 791 3.1: a header with a wrong checksum is discarded
  if (finishChecksum(sumBytes(frame, l3, hl, 0)) !== 0) return drop(ctx, C.drop_ipv4_bad_checksum);
  const vip = ctx.tables.vips4.get(ip.dst);
  if (vip === undefined) return drop(ctx, C.drop_not_vip);
  const proto = ip.protocol;
  const fragment = (ip.flags & IPV4_FLAG_MF) !== 0 || ip.fragOffset !== 0;
  const l4 = l3 + hl;
  const end = l3 + ip.totalLength;
  let sport = 0;
  let dport = 0;
  let rule: MuxRule | null | undefined;
  if (fragment && ip.fragOffset !== 0) {
    ctx.counters.values[C.fragments]!++;
    rule = vip.fragmentRule.get(proto);
    if (rule == null) return drop(ctx, C.drop_fragment_no_rule);
  } else {
    if (proto === IPPROTO_TCP) {
      const n = parseTcp(frame, l4, ctx.tcp, end);
      if (n < 0) return codecDrop(ctx, ctx.tcpDrop, n);
      sport = ctx.tcp.srcPort; dport = ctx.tcp.dstPort;
    } else if (proto === IPPROTO_UDP) {
      if (fragment) {
        // a first fragment carries the UDP header but not the whole datagram its length field names
        if (end - l4 < 8) return codecDrop(ctx, ctx.udpDrop, ERR_TRUNCATED);
        sport = readU16(frame, l4); dport = readU16(frame, l4 + 2);
      } else {
        const n = parseUdp(frame, l4, ctx.udp, end);
        if (n < 0) return codecDrop(ctx, ctx.udpDrop, n);
        sport = ctx.udp.srcPort; dport = ctx.udp.dstPort;
      }
    } else {
      return drop(ctx, C.drop_no_rule);
    }
    if (fragment) ctx.counters.values[C.fragments]!++;
    rule = vip.rules.get((proto << 16) | dport);
    if (rule === undefined) return drop(ctx, C.drop_no_rule);
  }
  const seed = ctx.hashSeed;
  let nic: MuxNic | undefined;
  let flowHash: number;
  const table = rule.table;
  if (fragment) {
    // every fragment of a datagram, the first included, hashes on the 3-tuple so they meet at one backend
    flowHash = hashFlowV4(ip.src, ip.dst, proto, 0, 0, 3, seed);
    const slot = table.slots[flowHash % table.size]!;
    if (slot === MAGLEV_EMPTY) return drop(ctx, C.drop_no_backend);
    nic = table.members[slot]!;
  } else {
    flowHash = hashFlowV4(ip.src, ip.dst, proto, sport, dport, 5, seed);
    const flows = ctx.flows4;
    const k = flows.key;
    k[0] = ip.src; k[1] = ip.dst; k[2] = proto; k[3] = ((sport << 16) | dport) >>> 0;
    const now = ctx.nowS;
    const expires = now + (proto === IPPROTO_TCP ? ctx.tcpIdleS : ctx.udpIdleS);
    nic = chooseWithFlow(ctx, flows, rule, flowHash, now, expires,
      rule.mode === 5 ? flowHash : hashFlowV4(ip.src, ip.dst, proto, sport, dport, rule.mode, seed));
    if (nic === undefined) return drop(ctx, C.drop_no_backend);
  }
  return encapsulate(frame, l3, end - l3, ETHERTYPE_IPV4, nic, flowHash, ctx);
}

function findVip6(ctx: MuxContext, d: Uint32Array): MuxVip | undefined {
  const bucket = ctx.tables.vips6.get(foldV6(d[0]!, d[1]!, d[2]!, d[3]!));
  if (bucket === undefined) return undefined;
  for (let i = 0; i < bucket.length; i++) {
    const w = bucket[i]!.addr.words;
    if (w[0] === d[0] && w[1] === d[1] && w[2] === d[2] && w[3] === d[3]) return bucket[i];
  }
  return undefined;
}

function processIpv6(frame: Uint8Array, len: number, l3: number, ctx: MuxContext): number {
  const C = ctx.counters.index;
  const ip = ctx.ip6;
  const hl = parseIpv6(frame, l3, ip, len);
  if (hl < 0) return codecDrop(ctx, ctx.ip6Drop, hl);
  const vip = findVip6(ctx, ip.dst);
  if (vip === undefined) return drop(ctx, C.drop_not_vip);
  const proto = ip.protocol;
  const fragment = ip.hasFragment && (ip.moreFragments || ip.fragOffset !== 0);
  const l4 = l3 + hl;
  const end = l3 + 40 + ip.payloadLength;
  let sport = 0;
  let dport = 0;
  let rule: MuxRule | null | undefined;
  if (fragment && ip.fragOffset !== 0) {
    ctx.counters.values[C.fragments]!++;
    rule = vip.fragmentRule.get(proto);
    if (rule == null) return drop(ctx, C.drop_fragment_no_rule);
  } else {
    if (proto === IPPROTO_TCP) {
      const n = parseTcp(frame, l4, ctx.tcp, end);
      if (n < 0) return codecDrop(ctx, ctx.tcpDrop, n);
      sport = ctx.tcp.srcPort; dport = ctx.tcp.dstPort;
    } else if (proto === IPPROTO_UDP) {
      if (fragment) {
        // a first fragment carries the UDP header but not the whole datagram its length field names
        if (end - l4 < 8) return codecDrop(ctx, ctx.udpDrop, ERR_TRUNCATED);
        sport = readU16(frame, l4); dport = readU16(frame, l4 + 2);
      } else {
        const n = parseUdp(frame, l4, ctx.udp, end);
        if (n < 0) return codecDrop(ctx, ctx.udpDrop, n);
        sport = ctx.udp.srcPort; dport = ctx.udp.dstPort;
      }
    } else {
      return drop(ctx, C.drop_no_rule);
    }
    if (fragment) ctx.counters.values[C.fragments]!++;
    rule = vip.rules.get((proto << 16) | dport);
    if (rule === undefined) return drop(ctx, C.drop_no_rule);
  }
  const seed = ctx.hashSeed;
  const table = rule.table;
  let nic: MuxNic | undefined;
  let flowHash: number;
  if (fragment) {
    flowHash = hashFlowV6(ip.src, 0, ip.dst, 0, proto, 0, 0, 3, seed);
    const slot = table.slots[flowHash % table.size]!;
    if (slot === MAGLEV_EMPTY) return drop(ctx, C.drop_no_backend);
    nic = table.members[slot]!;
  } else {
    flowHash = hashFlowV6(ip.src, 0, ip.dst, 0, proto, sport, dport, 5, seed);
    const flows = ctx.flows6;
    const k = flows.key;
    k[0] = ip.src[0]!; k[1] = ip.src[1]!; k[2] = ip.src[2]!; k[3] = ip.src[3]!;
    k[4] = ip.dst[0]!; k[5] = ip.dst[1]!; k[6] = ip.dst[2]!; k[7] = ip.dst[3]!;
    k[8] = proto; k[9] = ((sport << 16) | dport) >>> 0;
    const now = ctx.nowS;
    const expires = now + (proto === IPPROTO_TCP ? ctx.tcpIdleS : ctx.udpIdleS);
    nic = chooseWithFlow(ctx, flows, rule, flowHash, now, expires,
      rule.mode === 5 ? flowHash : hashFlowV6(ip.src, 0, ip.dst, 0, proto, sport, dport, rule.mode, seed));
    if (nic === undefined) return drop(ctx, C.drop_no_backend);
  }
  return encapsulate(frame, l3, end - l3, ETHERTYPE_IPV6, nic, flowHash, ctx);
}

/**
 * An existing flow keeps its nic while the rule's pool still lets it (member and enabled; health and
 * drain do not move established flows). Otherwise the Maglev slot of `selectHash` decides and the
 * choice is recorded. The flow table's key must already be in flows.key.
 */
function chooseWithFlow(
  ctx: MuxContext, flows: FlowTable, rule: MuxRule, flowHash: number, now: number, expires: number, selectHash: number,
): MuxNic | undefined {
  const c = ctx.counters.values;
  const C = ctx.counters.index;
  const table = rule.table;
  const id = flows.lookup(flowHash, now, expires);
  let replaced = false;
  if (id >= 0) {
    if (id < table.keepFlow.length && table.keepFlow[id] === 1) {
      const nic = ctx.tables.nicsById[id];
      if (nic !== undefined) {
        c[C.flow_hit]!++;
        return nic;
      }
    }
    replaced = true;
  }
  const slot = table.slots[selectHash % table.size]!;
  if (slot === MAGLEV_EMPTY) return undefined;
  const nic = table.members[slot]!;
  if (flows.insert(flowHash, nic.id, expires)) c[replaced ? C.flow_replaced : C.flow_new]!++;
  else c[C.flow_table_full]!++; // stateless: the Maglev choice still holds while the pool is stable
  return nic;
}

function encapsulate(frame: Uint8Array, l3: number, ipLen: number, innerType: number, nic: MuxNic, flowHash: number, ctx: MuxContext): number {
  const C = ctx.counters.index;
  const host = nic.host;
  if (!host.macKnown) return drop(ctx, C.drop_no_neighbor);
  const outerIpLen = MUX_ENCAP_LEN - 14 + ipLen;
  if (outerIpLen > ctx.mtu) return drop(ctx, C.drop_too_big);
  const o = ctx.out;
  writeEthernetRaw(host.mac, ctx.localMac, ETHERTYPE_IPV4, o, 0);
  // outer IPv4 (RFC 791): no options, DF clear (the fabric may fragment), TTL 64, UDP
  o[14] = 0x45; o[15] = 0;
  o[16] = outerIpLen >>> 8; o[17] = outerIpLen & 0xff;
  const id = (ctx.ipId = (ctx.ipId + 1) & 0xffff);
  o[18] = id >>> 8; o[19] = id & 0xff;
  o[20] = 0; o[21] = 0; o[22] = 64; o[23] = 17; o[24] = 0; o[25] = 0;
  const s = ctx.localPa4;
  const d = host.pa4;
  o[26] = s >>> 24; o[27] = (s >>> 16) & 0xff; o[28] = (s >>> 8) & 0xff; o[29] = s & 0xff;
  o[30] = d >>> 24; o[31] = (d >>> 16) & 0xff; o[32] = (d >>> 8) & 0xff; o[33] = d & 0xff;
  const csum = finishChecksum(sumBytes(o, 14, 20, 0));
  o[24] = csum >>> 8; o[25] = csum & 0xff;
  // UDP: source port from the flow hash (RFC 7348 5), checksum zero over IPv4 (RFC 7348 5: SHOULD be 0)
  const sp = vxlanSourcePort(flowHash);
  const udpLen = ipLen + 30;
  const vp = ctx.vxlanPort;
  o[34] = sp >>> 8; o[35] = sp & 0xff; o[36] = vp >>> 8; o[37] = vp & 0xff;
  o[38] = udpLen >>> 8; o[39] = udpLen & 0xff; o[40] = 0; o[41] = 0;
  // VXLAN: I flag, VNI
  const vni = nic.vni;
  o[42] = VXLAN_FLAG_I; o[43] = 0; o[44] = 0; o[45] = 0;
  o[46] = vni >>> 16; o[47] = (vni >>> 8) & 0xff; o[48] = vni & 0xff; o[49] = 0;
  // inner Ethernet: to the backend's MAC, from ours
  writeEthernetRaw(nic.mac, ctx.localMac, innerType, o, 50);
  o.set(frame.subarray(l3, l3 + ipLen), MUX_ENCAP_LEN);
  ctx.outLen = MUX_ENCAP_LEN + ipLen;
  ctx.lastNic = nic;
  const c = ctx.counters.values;
  c[C.tx_packets]!++;
  c[C.tx_bytes]! += ctx.outLen;
  return VERDICT_FORWARD;
}

/** Expires idle flows: call a few times a second with a slot budget. */
export function sweepFlows(ctx: MuxContext, budget: number): number {
  return ctx.flows4.sweep(ctx.nowS, budget) + ctx.flows6.sweep(ctx.nowS, budget);
}
