// MUX data plane: one captured frame in, one VXLAN frame out (or a reply, or a named drop). Pure and
// synchronous: no awaits, timers, logs or allocation per packet; time comes in as ctx.nowS. The same
// function runs on live captures (mux/daemon.ts) and on frames read from a pcap file (cli/replay, tests).
//
//   client frame -> eth -> IPv4/IPv6 (dst must be a VIP) -> TCP/UDP (protocol, dst port -> rule)
//     -> flow table (5-tuple -> nic) or Maglev slot of the rule's hash (5/3/2-tuple) -> nic -> host
//     -> out: eth(host MAC) / IPv4 or IPv6 (mux PA -> host PA) / UDP(sport from flow hash, 4789)
//             / VXLAN(VNI) / eth(nic MAC) / the client's IP packet, byte for byte (TTL untouched)
//
// An ICMP or ICMPv6 error sent to a VIP about one of its flows (destination unreachable, packet too big,
// time exceeded, parameter problem) quotes a packet VIP:port -> client:port; it is placed like the flow
// client:port -> VIP:port (flow table, else the rule's hash) and encapsulated to that flow's backend.
// A packet that would not fit the fabric after encapsulation is answered, when it may not be fragmented
// (IPv4 DF, or IPv6), with ICMP "fragmentation needed" / ICMPv6 "packet too big" from the VIP, so the
// client's path MTU discovery works (VERDICT_REPLY, rate limited).
//
// Outbound NAT's return path (docs/outbound.md): a TCP or UDP packet to a frontend IP:port is sent to the
// host of the nic that owns the port's range (the stateless range table, mux/snat-ranges.ts), in that
// nic's VNI, the inner packet unchanged; the flow table is not touched. This comes before the VIP rules;
// on a VIP that is also a frontend, a port no nic owns goes on to the VIP's rules when one has that port.
import { Counters, codecDropIndex, codecDropNames } from '../shared/counters.js';
import { ETHERTYPE_ARP, ETHERTYPE_IPV4, ETHERTYPE_IPV6, newEthernetHeader, writeEthernet } from '../shared/ethernet.js';
import {
  IPPROTO_ICMP,
  IPPROTO_ICMPV6,
  IPPROTO_TCP,
  IPPROTO_UDP,
  IPV4_FLAG_DF,
  isIpv4Fragment,
  newIpv4Header,
  parseIpv4,
} from '../shared/ipv4.js';
import { isIpv6Fragment, newIpv6Header, parseIpv6 } from '../shared/ipv6.js';
import { TCP_ACK, TCP_HEADER_LEN, TCP_SYN } from '../shared/tcp.js';
import { UDP_HEADER_LEN } from '../shared/udp.js';
import { ICMP_CODE_FRAG_NEEDED, ICMP_DEST_UNREACH, isIcmpError } from '../shared/icmp.js';
import { ICMPV6_NEIGHBOR_ADVERT, ICMPV6_NEIGHBOR_SOLICIT, ICMPV6_PACKET_TOO_BIG, ICMPV6_PARAM_PROBLEM } from '../shared/icmpv6.js';
import { sumBytes, finishChecksum, pseudoSumV6Bytes, l4Checksum } from '../shared/checksum.js';
import { readU16, readU32, writeU16, writeU32, copyBytes } from '../shared/bytes.js';
import { hashFlowV4, hashFlowV6, vxlanSourcePort } from '../shared/flow-hash.js';
import { copyShort, flowHash5v4, flowHash5v6Key } from '../shared/fused-parse-mux.js';
import { ipv4ChecksumOk, WORD_COPY_MAX_LEN, ipv6Equal, newL4Ports, readEtherType, readL4Ports, type L4Ports } from '../shared/hot-path.js';
import { VXLAN_FLAG_I, VXLAN_OVERHEAD_V4, VXLAN_OVERHEAD_V6 } from '../shared/vxlan.js';
import { MAGLEV_EMPTY } from '../shared/maglev.js';
import type { FlowTableConfig } from '../shared/config.js';
import { FlowTable, type FlowLimit } from './flow-table.js';
import { foldV6, type MuxNic, type MuxRule, type MuxTables, type MuxVip } from './tables.js';
import { snatChunks6 } from './snat-ranges.js';
import { SNAT_FIRST_PORT } from '../shared/config/outbound.js';
import { EW_MUX_COUNTER_NAMES } from './east-west-counters.js';
import { newMuxEwState, notVip4, type MuxEwState } from './east-west.js';

export const VERDICT_DROP = 0;
/** ctx.out[0 .. outLen) is a VXLAN frame for ctx.lastNic's host. */
export const VERDICT_FORWARD = 1;
/** Not for the data plane (ARP, neighbour discovery): hand it to the control plane. */
export const VERDICT_CONTROL = 2;
/** ctx.out[0 .. outLen) is a frame (an ICMP error) to send back out the interface it came in on. */
export const VERDICT_REPLY = 3;

/** Outer headers the MUX writes over IPv4: Ethernet 14, IPv4 20, UDP 8, VXLAN 8, inner Ethernet 14. */
export const MUX_ENCAP_LEN = 64;
/** The same over an IPv6 underlay: Ethernet 14, IPv6 40, UDP 8, VXLAN 8, inner Ethernet 14. */
export const MUX_ENCAP_LEN_V6 = 84;
const OUT_BUFFER_LEN = MUX_ENCAP_LEN_V6 + 65535;
/** The outer IPv4 header's fixed 16-bit words: 0x4500 (version 4, IHL 5, TOS 0), 0 (flags, offset), 0x4011 (TTL 64, UDP). */
const OUTER_IPV4_FIXED_SUM = 0x4500 + 0x0000 + 0x4011;
/** ICMP errors the MUX sends, per second (token bucket, burst the same). */
export const ICMP_RATE_PER_S = 1000;
/** RFC 1812 4.3.2.3: an ICMPv4 error carries as much of the packet as fits in 576 bytes. */
const ICMP4_MAX_LEN = 576;
/** RFC 4443 2.4(c): an ICMPv6 error fits the minimum IPv6 MTU. */
const ICMP6_MAX_LEN = 1280;

export const MUX_COUNTER_NAMES = [
  'rx_packets',
  'rx_bytes',
  'tx_packets',
  'tx_bytes',
  'flow_new',
  // new flows placed by a fail-open table (allDown: spread, every backend looked down), also in flow_new,
  // flow_replaced or flow_untrusted_full
  'flow_fail_open',
  'flow_promoted',
  'flow_hit',
  'flow_replaced',
  'flow_table_full',
  'flow_untrusted_full',
  'fragments',
  'control_arp',
  'control_nd',
  'icmp_errors_forwarded',
  'icmp_too_big_sent',
  // outbound NAT's return path (docs/outbound.md): a packet to a frontend IP:port sent to the port's
  // owning nic's host (never through the flow table or Maglev), or dropped with the reason
  'snat_forwarded',
  'drop_snat_no_owner',
  'drop_snat_fragment',
  'drop_snat_not_tcp_udp',
  'drop_not_ip',
  'drop_not_vip',
  'drop_no_rule',
  'drop_fragment_no_rule',
  'drop_no_backend',
  'drop_no_neighbor',
  'drop_too_big',
  'drop_icmp_rate_limited',
  'drop_ipv4_bad_checksum',
  'drop_icmp_truncated',
  'drop_icmp_bad_quote',
  'drop_icmp_unrelated',
  'drop_internal_error',
  // Sends the kernel refused, counted by the daemon after the send (tx_packets counts only the others):
  // one per send path and reason (docs/reliability.md); never expected, a scenario fails on any
  'send_error_cap',
  'send_error_raw',
  'send_error_udp',
  'send_error_udp_no_socket',
  'send_error_udp_not_connected',
  'send_error_udp_ring_full',
  'send_error_udp_too_big',
  'send_error_reply',
  'send_error_neighbor',
  'send_error_batch',
  ...EW_MUX_COUNTER_NAMES,
  ...codecDropNames('eth'),
  ...codecDropNames('ipv4'),
  ...codecDropNames('ipv6'),
  ...codecDropNames('tcp'),
  ...codecDropNames('udp'),
] as const;
export type MuxCounterName = (typeof MUX_COUNTER_NAMES)[number];

export interface MuxContext {
  tables: MuxTables;
  /** East-west: the redirect HMAC and the redirect frame to send after a VERDICT_FORWARD (mux/east-west.ts). */
  readonly ew: MuxEwState;
  /** Trusted flows: seen at least twice (the main flow table, bounded by flowTable.maxFlows). */
  readonly flows4: FlowTable;
  readonly flows6: FlowTable;
  readonly flowLimit: FlowLimit;
  /**
   * Untrusted flows: seen once (a SYN, one datagram). They wait here, in a smaller table with a short
   * timeout, for their second packet; a spoofed SYN flood fills this table and never evicts or blocks the
   * established flows of the main one (Ananta section 5.2's trusted/untrusted flows).
   */
  readonly pending4: FlowTable;
  readonly pending6: FlowTable;
  readonly pendingLimit: FlowLimit;
  readonly untrustedS: number;
  readonly counters: Counters<MuxCounterName>;
  /** Seconds, from the daemon's coarse clock. */
  nowS: number;
  /** MAC and provider addresses of the MUX's fabric interface. */
  readonly localMac: Uint8Array;
  readonly localPa4: number;
  /**
   * The MUX's share of the outer IPv4 header checksum: the fixed words (version and IHL, TOS 0, flags and
   * fragment offset 0, TTL 64, protocol UDP) and localPa4. Each host adds its own (MuxHost.outerSum4).
   */
  readonly outerSum4: number;
  /** IPv6 provider address (four words), or null; required when underlay6. */
  readonly localPa6: Uint32Array | null;
  /** VXLAN goes over IPv6 (from localPa6 to each host's pa6) instead of IPv4. */
  readonly underlay6: boolean;
  readonly hashSeed: number;
  /** The fabric MTU: the largest outer IP packet. */
  readonly mtu: number;
  readonly vxlanPort: number;
  readonly tcpIdleS: number;
  readonly udpIdleS: number;
  /** The frame to send after VERDICT_FORWARD or VERDICT_REPLY: out[0 .. outLen). Reused for every packet. */
  readonly out: Buffer;
  /** A DataView over exactly `out`, for word stores. */
  readonly outView: DataView;
  outLen: number;
  /**
   * encapsulate's headers per nic id, prebuilt at the nic's first packet (encapTemplate): MUX_ENCAP_LEN
   * bytes (MUX_ENCAP_LEN_V6 on an IPv6 underlay) as words, every byte but the per-packet ones (the host's
   * MAC, lengths, IP id and checksum, UDP source port, flow label, inner EtherType). They belong to the
   * tables encapFor; any other tables in ctx.tables (a new compile, whatever its cause) start them anew.
   */
  encapFor: MuxTables | null;
  encapT: (Int32Array | undefined)[];
  /** `out` as 32-bit words (its buffer is its own, at offset 0). */
  readonly out32: Int32Array;
  /** After a verdict: the drop counter index, or -1. */
  lastDrop: number;
  /** After VERDICT_FORWARD: the chosen nic. */
  lastNic: MuxNic | null;
  /** After VERDICT_FORWARD: the rule the packet fell under (the daemon counts per rule slot). */
  lastRule: MuxRule | null;
  ipId: number;
  icmpTokens: number;
  icmpRefillS: number;
  /**
   * The frame's EtherType and VLAN tag (its MAC fields are not filled). eth, ip4, ip6 and ports are filled
   * by the general path only: a packet fast4 or fast6 forwards leaves them as the last general one did
   * (nothing reads them after processPacket).
   */
  readonly eth: ReturnType<typeof newEthernetHeader>;
  readonly replyEth: ReturnType<typeof newEthernetHeader>;
  readonly ip4: ReturnType<typeof newIpv4Header>;
  readonly ip6: ReturnType<typeof newIpv6Header>;
  /** The packet an ICMP error quotes. */
  readonly qip4: ReturnType<typeof newIpv4Header>;
  readonly qip6: ReturnType<typeof newIpv6Header>;
  /** The ports (and TCP flags) of the TCP or UDP header (readL4Ports). */
  readonly ports: L4Ports;
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
  localPa6?: Uint32Array | null;
  underlay6?: boolean;
  hashSeed: number;
  mtu: number;
  vxlanPort: number;
  flowTable: FlowTableConfig;
}

export function newMuxContext(o: MuxContextOptions): MuxContext {
  const counters = new Counters(MUX_COUNTER_NAMES);
  const flowLimit: FlowLimit = { max: o.flowTable.maxFlows, count: 0 };
  const pendingLimit: FlowLimit = { max: o.flowTable.untrustedMaxFlows, count: 0 };
  const underlay6 = o.underlay6 ?? false;
  if (underlay6 && o.localPa6 == null) throw new Error("an IPv6 underlay needs the MUX's IPv6 provider address");
  const out = Buffer.alloc(OUT_BUFFER_LEN);
  return {
    tables: o.tables,
    ew: newMuxEwState(o.flowTable.untrustedMaxFlows),
    flows4: new FlowTable(4, flowLimit),
    flows6: new FlowTable(10, flowLimit),
    flowLimit,
    pending4: new FlowTable(4, pendingLimit),
    pending6: new FlowTable(10, pendingLimit),
    pendingLimit,
    untrustedS: o.flowTable.untrustedTimeoutS,
    counters,
    nowS: 1,
    localMac: o.localMac,
    localPa4: o.localPa4,
    outerSum4: OUTER_IPV4_FIXED_SUM + (o.localPa4 >>> 16) + (o.localPa4 & 0xffff),
    localPa6: o.localPa6 ?? null,
    underlay6,
    hashSeed: o.hashSeed,
    mtu: o.mtu,
    vxlanPort: o.vxlanPort,
    tcpIdleS: o.flowTable.tcpIdleTimeoutS,
    udpIdleS: o.flowTable.udpIdleTimeoutS,
    out,
    outView: new DataView(out.buffer, out.byteOffset, out.byteLength),
    outLen: 0,
    encapFor: null,
    encapT: [],
    out32: new Int32Array(out.buffer, out.byteOffset, out.byteLength >>> 2),
    lastDrop: -1,
    lastNic: null,
    lastRule: null,
    ipId: 0,
    icmpTokens: ICMP_RATE_PER_S,
    icmpRefillS: 0,
    eth: newEthernetHeader(),
    replyEth: newEthernetHeader(),
    ip4: newIpv4Header(),
    ip6: newIpv6Header(),
    qip4: newIpv4Header(),
    qip6: newIpv6Header(),
    ports: newL4Ports(),
    ethDrop: codecDropIndex(counters, 'eth'),
    ip4Drop: codecDropIndex(counters, 'ipv4'),
    ip6Drop: codecDropIndex(counters, 'ipv6'),
    tcpDrop: codecDropIndex(counters, 'tcp'),
    udpDrop: codecDropIndex(counters, 'udp'),
  };
}

/** The inner packet MTU the fabric leaves: the fabric MTU minus what VXLAN adds. */
export function innerMtu(ctx: MuxContext): number {
  return ctx.mtu - (ctx.underlay6 ? VXLAN_OVERHEAD_V6 : VXLAN_OVERHEAD_V4);
}

export function drop(ctx: MuxContext, index: number): number {
  ctx.counters.values[index]!++;
  ctx.lastDrop = index;
  return VERDICT_DROP;
}

export function codecDrop(ctx: MuxContext, map: Int32Array, code: number): number {
  const i = map[-code] ?? -1;
  return drop(ctx, i >= 0 ? i : ctx.counters.index.drop_internal_error);
}

/**
 * Processes the frame frame[0 .. len). On VERDICT_FORWARD the VXLAN frame, on VERDICT_REPLY the reply
 * frame, is ctx.out[0 .. ctx.outLen).
 */
export function processPacket(frame: Uint8Array, len: number, ctx: MuxContext): number {
  const c = ctx.counters.values;
  const C = ctx.counters.index;
  c[C.rx_packets]!++;
  c[C.rx_bytes]! += len;
  ctx.lastDrop = -1;
  ctx.lastNic = null;
  ctx.lastRule = null;
  if (len > frame.length) len = frame.length;
  // the common case first, fused (fast4, fast6); anything else, or any doubt, takes the general path below
  if (len >= 34 && frame[12] === 0x08 && frame[13] === 0x00) {
    const v = fast4(frame, len, ctx);
    if (v !== FAST_MISS) return v;
  } else if (len >= 54 && frame[12] === 0x86 && frame[13] === 0xdd) {
    const v = fast6(frame, len, ctx);
    if (v !== FAST_MISS) return v;
  }
  const eth = ctx.eth;
  const l3 = readEtherType(frame, 0, eth, len); // the MACs are not needed
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

/** fast4 and fast6: not this path's packet; nothing was changed, the general path takes it from the start. */
const FAST_MISS = -1;

/**
 * The main path of an untagged IPv4 frame in one pass (processPacket's fast path): Ethernet type, an IPv4
 * header without options, not a fragment, a correct checksum, to a VIP without outbound NAT, TCP or UDP
 * with a valid header, to a port with a rule, and a packet that fits the fabric after encapsulation. The
 * fields are read into locals, not into ctx.eth, ctx.ip4 and ctx.ports, and the addresses are int32 (no
 * heap numbers). Every check is the general path's (parseIpv4, ipv4ChecksumOk, findRule, readL4Ports,
 * encapsulate's MTU check), and nothing is written before they all pass: on any other packet it returns
 * FAST_MISS having changed nothing, and the general path gives the same verdict as before, drop counter
 * included. Past the checks it is the general path's placement and encapsulation, with the same values.
 */
function fast4(frame: Uint8Array, len: number, ctx: MuxContext): number {
  // IPv4 at 14: version 4 and IHL 5 (options: the general path)
  if (frame[14] !== 0x45) return FAST_MISS;
  const total = (frame[16]! << 8) | frame[17]!;
  if (total < 20 || total > len - 14) return FAST_MISS;
  const ff = (frame[20]! << 8) | frame[21]!;
  if ((ff & 0x3fff) !== 0) return FAST_MISS; // MF or an offset: a fragment
  const proto = frame[23]!;
  if (proto !== IPPROTO_TCP && proto !== IPPROTO_UDP) return FAST_MISS;
  const src = (frame[26]! << 24) | (frame[27]! << 16) | (frame[28]! << 8) | frame[29]!;
  const dst = (frame[30]! << 24) | (frame[31]! << 16) | (frame[32]! << 8) | frame[33]!;
  // RFC 1071: the header (its checksum included) sums to 0xffff; as ipv4ChecksumOk
  const sum =
    0x4500 +
    frame[15]! +
    total +
    ((frame[18]! << 8) | frame[19]!) +
    ff +
    ((frame[22]! << 8) | proto) +
    ((frame[24]! << 8) | frame[25]!) +
    (src >>> 16) +
    (src & 0xffff) +
    (dst >>> 16) +
    (dst & 0xffff);
  if (finishChecksum(sum) !== 0) return FAST_MISS;
  const vip = ctx.tables.vips4i.get(dst);
  if (vip === undefined || vip.snat !== undefined) return FAST_MISS;
  const avail = total - 20;
  let flags = 0;
  if (proto === IPPROTO_TCP) {
    if (avail < TCP_HEADER_LEN) return FAST_MISS;
    const hlen = (frame[46]! >>> 4) * 4;
    if (hlen < TCP_HEADER_LEN || hlen > avail) return FAST_MISS;
    flags = frame[47]!;
  } else {
    if (avail < UDP_HEADER_LEN) return FAST_MISS;
    const ulen = (frame[38]! << 8) | frame[39]!;
    if (ulen < UDP_HEADER_LEN || ulen > avail) return FAST_MISS;
  }
  const sport = (frame[34]! << 8) | frame[35]!;
  const dport = (frame[36]! << 8) | frame[37]!;
  const rule = vip.rules.get((proto << 16) | dport);
  if (rule === undefined) return FAST_MISS;
  if ((ctx.underlay6 === true ? MUX_ENCAP_LEN_V6 : MUX_ENCAP_LEN) - 14 + total > ctx.mtu) return FAST_MISS;
  // the general path's from here on (processIpv4 after findRule)
  ctx.lastRule = rule;
  const seed = ctx.hashSeed;
  const ports = (sport << 16) | dport;
  const flowHash = flowHash5v4(src, dst, proto, ports, seed);
  const selectHash = rule.mode === 5 ? flowHash : hashFlowV4(src, dst, proto, sport, dport, rule.mode, seed);
  const k = ctx.flows4.key;
  k[0] = src;
  k[1] = dst;
  k[2] = proto;
  k[3] = ports;
  const now = ctx.nowS;
  // the hashes as int32 into calls V8 does not inline: an unsigned value from 2^31 up would be boxed
  const nic = chooseWithFlow(
    ctx,
    ctx.flows4,
    ctx.pending4,
    rule,
    flowHash | 0,
    now,
    now + (proto === IPPROTO_TCP ? ctx.tcpIdleS : ctx.udpIdleS),
    selectHash | 0,
    proto === IPPROTO_TCP && isSyn(flags),
  );
  if (nic === undefined) return drop(ctx, ctx.counters.index.drop_no_backend);
  return encapsulate(frame, 14, total, ETHERTYPE_IPV4, nic, flowHash | 0, ctx);
}

/**
 * fast4's IPv6 twin: an untagged frame, the fixed header followed at once by TCP or UDP (any extension
 * header: the general path), to a VIP without outbound NAT, a valid TCP or UDP header, a port with a
 * rule, a packet that fits the fabric after encapsulation. The same contract: FAST_MISS having changed
 * nothing, or the general path's verdict and output.
 */
function fast6(frame: Uint8Array, len: number, ctx: MuxContext): number {
  if (frame[14]! >>> 4 !== 6) return FAST_MISS;
  const plen = (frame[18]! << 8) | frame[19]!;
  if (40 + plen > len - 14) return FAST_MISS;
  const proto = frame[20]!;
  if (proto !== IPPROTO_TCP && proto !== IPPROTO_UDP) return FAST_MISS;
  const d0 = (frame[38]! << 24) | (frame[39]! << 16) | (frame[40]! << 8) | frame[41]!;
  const d1 = (frame[42]! << 24) | (frame[43]! << 16) | (frame[44]! << 8) | frame[45]!;
  const d2 = (frame[46]! << 24) | (frame[47]! << 16) | (frame[48]! << 8) | frame[49]!;
  const d3 = (frame[50]! << 24) | (frame[51]! << 16) | (frame[52]! << 8) | frame[53]!;
  const bucket = ctx.tables.vips6.get(foldV6(d0, d1, d2, d3));
  if (bucket === undefined) return FAST_MISS;
  let vip: MuxVip | undefined;
  for (let i = 0; i < bucket.length; i++) {
    const w = bucket[i]!.addr.words;
    if ((w[0]! | 0) === d0 && (w[1]! | 0) === d1 && (w[2]! | 0) === d2 && (w[3]! | 0) === d3) {
      vip = bucket[i];
      break;
    }
  }
  if (vip === undefined || vip.snat !== undefined) return FAST_MISS;
  let flags = 0;
  if (proto === IPPROTO_TCP) {
    if (plen < TCP_HEADER_LEN) return FAST_MISS;
    const hlen = (frame[66]! >>> 4) * 4;
    if (hlen < TCP_HEADER_LEN || hlen > plen) return FAST_MISS;
    flags = frame[67]!;
  } else {
    if (plen < UDP_HEADER_LEN) return FAST_MISS;
    const ulen = (frame[58]! << 8) | frame[59]!;
    if (ulen < UDP_HEADER_LEN || ulen > plen) return FAST_MISS;
  }
  const sport = (frame[54]! << 8) | frame[55]!;
  const dport = (frame[56]! << 8) | frame[57]!;
  const rule = vip.rules.get((proto << 16) | dport);
  if (rule === undefined) return FAST_MISS;
  if ((ctx.underlay6 === true ? MUX_ENCAP_LEN_V6 : MUX_ENCAP_LEN) - 14 + 40 + plen > ctx.mtu) return FAST_MISS;
  // the general path's from here on (processIpv6 after findRule); the key holds the hash's words in order
  ctx.lastRule = rule;
  const k = ctx.flows6.key;
  k[0] = (frame[22]! << 24) | (frame[23]! << 16) | (frame[24]! << 8) | frame[25]!;
  k[1] = (frame[26]! << 24) | (frame[27]! << 16) | (frame[28]! << 8) | frame[29]!;
  k[2] = (frame[30]! << 24) | (frame[31]! << 16) | (frame[32]! << 8) | frame[33]!;
  k[3] = (frame[34]! << 24) | (frame[35]! << 16) | (frame[36]! << 8) | frame[37]!;
  k[4] = d0;
  k[5] = d1;
  k[6] = d2;
  k[7] = d3;
  k[8] = proto;
  k[9] = (sport << 16) | dport;
  const seed = ctx.hashSeed;
  const flowHash = flowHash5v6Key(k, seed);
  const selectHash = rule.mode === 5 ? flowHash : hashFlowV6(k, 0, k, 4, proto, sport, dport, rule.mode, seed);
  const now = ctx.nowS;
  const nic = chooseWithFlow(
    ctx,
    ctx.flows6,
    ctx.pending6,
    rule,
    flowHash | 0,
    now,
    now + (proto === IPPROTO_TCP ? ctx.tcpIdleS : ctx.udpIdleS),
    selectHash | 0,
    proto === IPPROTO_TCP && isSyn(flags),
  );
  if (nic === undefined) return drop(ctx, ctx.counters.index.drop_no_backend);
  return encapsulate(frame, 14, 40 + plen, ETHERTYPE_IPV6, nic, flowHash | 0, ctx);
}

function processIpv4(frame: Uint8Array, len: number, l3: number, ctx: MuxContext): number {
  const C = ctx.counters.index;
  const ip = ctx.ip4;
  const hl = parseIpv4(frame, l3, ip, len);
  if (hl < 0) return codecDrop(ctx, ctx.ip4Drop, hl);
  // RFC 791 3.1: a header with a wrong checksum is discarded
  if (!ipv4ChecksumOk(frame, l3, ip)) return drop(ctx, C.drop_ipv4_bad_checksum);
  const vip = ctx.tables.vips4.get(ip.dst);
  if (vip === undefined) {
    const chunks = ctx.tables.snat.table.v4.get(ip.dst);
    if (chunks !== undefined)
      return snatReturn(frame, l3, l3 + hl, l3 + ip.totalLength, ip.protocol, isIpv4Fragment(ip), chunks, null, ctx);
    return notVip4(frame, l3, hl, ctx); // VXLAN from a host (east-west), or not_vip
  }
  if (vip.snat !== undefined) {
    const v = snatReturn(frame, l3, l3 + hl, l3 + ip.totalLength, ip.protocol, isIpv4Fragment(ip), vip.snat, vip, ctx);
    if (v !== SNAT_TO_RULES) return v;
  }
  const proto = ip.protocol;
  const fragment = isIpv4Fragment(ip);
  const l4 = l3 + hl;
  const end = l3 + ip.totalLength;
  if (proto === IPPROTO_ICMP && !fragment) return icmpError4(frame, l3, l4, end, vip, ctx);
  const rule = findRule(frame, l4, end, proto, fragment, fragment && ip.fragOffset !== 0, vip, ctx);
  if (rule === null) return VERDICT_DROP;
  const seed = ctx.hashSeed;
  let flowHash: number;
  let selectHash: number;
  if (fragment) {
    // every fragment of a datagram, the first included, hashes on the 3-tuple so they meet at one backend
    flowHash = selectHash = hashFlowV4(ip.src, ip.dst, proto, 0, 0, 3, seed);
  } else {
    const sport = ctx.ports.srcPort;
    const dport = ctx.ports.dstPort;
    flowHash = hashFlowV4(ip.src, ip.dst, proto, sport, dport, 5, seed);
    selectHash = rule.mode === 5 ? flowHash : hashFlowV4(ip.src, ip.dst, proto, sport, dport, rule.mode, seed);
    setKey4(ctx.flows4, ip.src, ip.dst, proto, sport, dport);
  }
  let nic: MuxNic | undefined;
  if (fragment) {
    const table = rule.table;
    const slot = table.slots[flowHash % table.size]!;
    nic = slot === MAGLEV_EMPTY ? undefined : table.members[slot]!;
  } else {
    const now = ctx.nowS;
    nic = chooseWithFlow(
      ctx,
      ctx.flows4,
      ctx.pending4,
      rule,
      flowHash,
      now,
      now + (proto === IPPROTO_TCP ? ctx.tcpIdleS : ctx.udpIdleS),
      selectHash,
      proto === IPPROTO_TCP && isSyn(ctx.ports.tcpFlags),
    );
  }
  if (nic === undefined) return drop(ctx, C.drop_no_backend);
  return encapsulate(frame, l3, end - l3, ETHERTYPE_IPV4, nic, flowHash, ctx);
}

export function setKey4(flows: FlowTable, src: number, dst: number, proto: number, sport: number, dport: number): void {
  const k = flows.key;
  k[0] = src;
  k[1] = dst;
  k[2] = proto;
  k[3] = ((sport << 16) | dport) >>> 0;
}

export function setKey6(flows: FlowTable, src: Uint32Array, dst: Uint32Array, proto: number, sport: number, dport: number): void {
  const k = flows.key;
  k[0] = src[0]!;
  k[1] = src[1]!;
  k[2] = src[2]!;
  k[3] = src[3]!;
  k[4] = dst[0]!;
  k[5] = dst[1]!;
  k[6] = dst[2]!;
  k[7] = dst[3]!;
  k[8] = proto;
  k[9] = ((sport << 16) | dport) >>> 0;
}

/**
 * An ICMPv4 message to a VIP: errors about a VIP flow go to that flow's backend; anything else (echo)
 * is not load balanced.
 */
function icmpError4(frame: Uint8Array, l3: number, l4: number, end: number, vip: MuxVip, ctx: MuxContext): number {
  const C = ctx.counters.index;
  if (end - l4 < 8) return drop(ctx, C.drop_icmp_truncated);
  if (!isIcmpError(frame[l4]!)) return drop(ctx, C.drop_no_rule);
  // the quoted packet: VIP:frontendPort -> client:port (a reply the backend sent by DSR)
  const q = ctx.qip4;
  const qoff = l4 + 8;
  const qhl = parseIpv4(frame, qoff, q, end, true);
  if (qhl < 0 || end - (qoff + qhl) < 4 || q.fragOffset !== 0) return drop(ctx, C.drop_icmp_bad_quote);
  if (q.src !== vip.addr.words[0]) return drop(ctx, C.drop_icmp_unrelated);
  const proto = q.protocol;
  if (proto !== IPPROTO_TCP && proto !== IPPROTO_UDP) return drop(ctx, C.drop_no_rule);
  const fport = readU16(frame, qoff + qhl);
  const cport = readU16(frame, qoff + qhl + 2);
  const rule = vip.rules.get((proto << 16) | fport);
  if (rule === undefined) return drop(ctx, C.drop_no_rule);
  ctx.lastRule = rule;
  // the flow it belongs to: client:port -> VIP:frontendPort
  const client = q.dst;
  const flowHash = hashFlowV4(client, q.src, proto, cport, fport, 5, ctx.hashSeed);
  setKey4(ctx.flows4, client, q.src, proto, cport, fport);
  const nic = peekOrHash(
    ctx,
    ctx.flows4,
    rule,
    flowHash,
    rule.mode === 5 ? flowHash : hashFlowV4(client, q.src, proto, cport, fport, rule.mode, ctx.hashSeed),
  );
  if (nic === undefined) return drop(ctx, C.drop_no_backend);
  ctx.counters.values[C.icmp_errors_forwarded]!++;
  return encapsulate(frame, l3, end - l3, ETHERTYPE_IPV4, nic, flowHash, ctx);
}

/** RFC 4443 2.1: error messages are types 1..127; the ones that quote a packet of a flow are 1..4. */
function isIcmpv6FlowError(type: number): boolean {
  return type >= 1 && type <= ICMPV6_PARAM_PROBLEM;
}

function icmpError6(frame: Uint8Array, l3: number, l4: number, end: number, vip: MuxVip, ctx: MuxContext): number {
  const C = ctx.counters.index;
  if (end - l4 < 8) return drop(ctx, C.drop_icmp_truncated);
  if (!isIcmpv6FlowError(frame[l4]!)) return drop(ctx, C.drop_no_rule);
  const q = ctx.qip6;
  const qoff = l4 + 8;
  const qhl = parseIpv6(frame, qoff, q, end, true);
  if (qhl < 0 || end - (qoff + qhl) < 4 || (q.hasFragment && q.fragOffset !== 0)) return drop(ctx, C.drop_icmp_bad_quote);
  if (!ipv6Equal(q.src, vip.addr.words)) return drop(ctx, C.drop_icmp_unrelated);
  const proto = q.protocol;
  if (proto !== IPPROTO_TCP && proto !== IPPROTO_UDP) return drop(ctx, C.drop_no_rule);
  const fport = readU16(frame, qoff + qhl);
  const cport = readU16(frame, qoff + qhl + 2);
  const rule = vip.rules.get((proto << 16) | fport);
  if (rule === undefined) return drop(ctx, C.drop_no_rule);
  ctx.lastRule = rule;
  const flowHash = hashFlowV6(q.dst, 0, q.src, 0, proto, cport, fport, 5, ctx.hashSeed);
  setKey6(ctx.flows6, q.dst, q.src, proto, cport, fport);
  const nic = peekOrHash(
    ctx,
    ctx.flows6,
    rule,
    flowHash,
    rule.mode === 5 ? flowHash : hashFlowV6(q.dst, 0, q.src, 0, proto, cport, fport, rule.mode, ctx.hashSeed),
  );
  if (nic === undefined) return drop(ctx, C.drop_no_backend);
  ctx.counters.values[C.icmp_errors_forwarded]!++;
  return encapsulate(frame, l3, end - l3, ETHERTYPE_IPV6, nic, flowHash, ctx);
}

/** The flow's backend if the flow table knows it (not refreshed: an ICMP error is not flow activity), else the hash's. */
function peekOrHash(ctx: MuxContext, flows: FlowTable, rule: MuxRule, flowHash: number, selectHash: number): MuxNic | undefined {
  const table = rule.table;
  const id = flows.peek(flowHash, ctx.nowS);
  // (an ICMP error about a flow seen once finds the same backend by the hash, unless the pool changed)
  if (id >= 0 && id < table.keepFlow.length && table.keepFlow[id] === 1) {
    const nic = ctx.tables.nicsById[id];
    if (nic !== undefined) return nic;
  }
  const slot = table.slots[selectHash % table.size]!;
  return slot === MAGLEV_EMPTY ? undefined : table.members[slot]!;
}

function findVip6(ctx: MuxContext, d: Uint32Array): MuxVip | undefined {
  const bucket = ctx.tables.vips6.get(foldV6(d[0]!, d[1]!, d[2]!, d[3]!));
  if (bucket === undefined) return undefined;
  for (let i = 0; i < bucket.length; i++) if (ipv6Equal(bucket[i]!.addr.words, d)) return bucket[i];
  return undefined;
}

function processIpv6(frame: Uint8Array, len: number, l3: number, ctx: MuxContext): number {
  const C = ctx.counters.index;
  const ip = ctx.ip6;
  const hl = parseIpv6(frame, l3, ip, len);
  if (hl < 0) return codecDrop(ctx, ctx.ip6Drop, hl);
  const proto = ip.protocol;
  const l4 = l3 + hl;
  const end = l3 + 40 + ip.payloadLength;
  const vip = findVip6(ctx, ip.dst);
  if (vip === undefined && ctx.tables.snat.table.v6.length !== 0) {
    const chunks = snatChunks6(ctx.tables.snat.table, ip.dst);
    if (chunks !== undefined) return snatReturn(frame, l3, l4, end, proto, isIpv6Fragment(ip), chunks, null, ctx);
  }
  if (vip !== undefined && vip.snat !== undefined) {
    const v = snatReturn(frame, l3, l4, end, proto, isIpv6Fragment(ip), vip.snat, vip, ctx);
    if (v !== SNAT_TO_RULES) return v;
  }
  if (vip === undefined) {
    // neighbour discovery for our own resolution of hosts on an IPv6 underlay
    if (proto === IPPROTO_ICMPV6 && end - l4 >= 8 && (frame[l4] === ICMPV6_NEIGHBOR_ADVERT || frame[l4] === ICMPV6_NEIGHBOR_SOLICIT)) {
      ctx.counters.values[C.control_nd]!++;
      return VERDICT_CONTROL;
    }
    return drop(ctx, C.drop_not_vip);
  }
  const fragment = isIpv6Fragment(ip);
  if (proto === IPPROTO_ICMPV6 && !fragment) return icmpError6(frame, l3, l4, end, vip, ctx);
  const rule = findRule(frame, l4, end, proto, fragment, fragment && ip.fragOffset !== 0, vip, ctx);
  if (rule === null) return VERDICT_DROP;
  const seed = ctx.hashSeed;
  let flowHash: number;
  let selectHash: number;
  if (fragment) {
    flowHash = selectHash = hashFlowV6(ip.src, 0, ip.dst, 0, proto, 0, 0, 3, seed);
  } else {
    const sport = ctx.ports.srcPort;
    const dport = ctx.ports.dstPort;
    flowHash = hashFlowV6(ip.src, 0, ip.dst, 0, proto, sport, dport, 5, seed);
    selectHash = rule.mode === 5 ? flowHash : hashFlowV6(ip.src, 0, ip.dst, 0, proto, sport, dport, rule.mode, seed);
    setKey6(ctx.flows6, ip.src, ip.dst, proto, sport, dport);
  }
  let nic: MuxNic | undefined;
  if (fragment) {
    const table = rule.table;
    const slot = table.slots[flowHash % table.size]!;
    nic = slot === MAGLEV_EMPTY ? undefined : table.members[slot]!;
  } else {
    const now = ctx.nowS;
    nic = chooseWithFlow(
      ctx,
      ctx.flows6,
      ctx.pending6,
      rule,
      flowHash,
      now,
      now + (proto === IPPROTO_TCP ? ctx.tcpIdleS : ctx.udpIdleS),
      selectHash,
      proto === IPPROTO_TCP && isSyn(ctx.ports.tcpFlags),
    );
  }
  if (nic === undefined) return drop(ctx, C.drop_no_backend);
  return encapsulate(frame, l3, end - l3, ETHERTYPE_IPV6, nic, flowHash, ctx);
}

/** snatReturn's answer for a VIP that is also a frontend: the port is no nic's, the VIP's rule for it decides. */
const SNAT_TO_RULES = -1;

/**
 * A packet to an outbound NAT frontend IP (docs/outbound.md): TCP or UDP to a port whose range a nic owns
 * goes to that nic's host in the nic's VNI (encapsulate, the inner packet unchanged), hashed on its 5-tuple
 * for the outer source port only; the flow table is not touched. `chunks`: the IP's owners. `vip`: the VIP
 * at that address, if any: a port no nic owns then goes on to its rules when one has that port (the
 * allocator keeps rule ports out of every range), and ICMP and fragments go to its rules as before.
 */
function snatReturn(
  frame: Uint8Array,
  l3: number,
  l4: number,
  end: number,
  proto: number,
  fragment: boolean,
  chunks: Uint16Array,
  vip: MuxVip | null,
  ctx: MuxContext,
): number {
  const C = ctx.counters.index;
  if (proto !== IPPROTO_TCP && proto !== IPPROTO_UDP) return vip !== null ? SNAT_TO_RULES : drop(ctx, C.drop_snat_not_tcp_udp);
  // a fragment's later parts carry no ports: the datagram could not be placed whole (the host reassembles none)
  if (fragment) return vip !== null ? SNAT_TO_RULES : drop(ctx, C.drop_snat_fragment);
  const n = readL4Ports(frame, l4, end, proto, false, ctx.ports);
  if (n < 0) return codecDrop(ctx, proto === IPPROTO_TCP ? ctx.tcpDrop : ctx.udpDrop, n);
  const port = ctx.ports.dstPort;
  const owner = port < SNAT_FIRST_PORT ? 0 : chunks[(port - SNAT_FIRST_PORT) >>> 3]!;
  if (owner === 0) return vip !== null && vip.rules.has((proto << 16) | port) ? SNAT_TO_RULES : drop(ctx, C.drop_snat_no_owner);
  const nic = ctx.tables.nicsById[owner - 1];
  if (nic === undefined) return drop(ctx, C.drop_internal_error); // the table is built from configured nics only
  const seed = ctx.hashSeed;
  const ip6 = frame[l3]! >>> 4 === 6;
  const flowHash = ip6
    ? hashFlowV6(ctx.ip6.src, 0, ctx.ip6.dst, 0, proto, ctx.ports.srcPort, port, 5, seed)
    : hashFlowV4(ctx.ip4.src, ctx.ip4.dst, proto, ctx.ports.srcPort, port, 5, seed);
  const v = encapsulate(frame, l3, end - l3, ip6 ? ETHERTYPE_IPV6 : ETHERTYPE_IPV4, nic, flowHash, ctx);
  if (v === VERDICT_FORWARD) ctx.counters.values[C.snat_forwarded]!++;
  return v;
}

/**
 * The rule a packet to `vip` falls under, either family: a later fragment (no L4 header) by its protocol
 * alone; any other packet by protocol and destination port, its ports left in ctx.ports (readL4Ports).
 * null after counting the drop.
 */
export function findRule(
  frame: Uint8Array,
  l4: number,
  end: number,
  proto: number,
  fragment: boolean,
  laterFragment: boolean,
  vip: MuxVip,
  ctx: MuxContext,
): MuxRule | null {
  const C = ctx.counters.index;
  if (laterFragment) {
    ctx.counters.values[C.fragments]!++;
    const rule = vip.fragmentRule.get(proto);
    if (rule == null) {
      drop(ctx, C.drop_fragment_no_rule);
      return null;
    }
    return (ctx.lastRule = rule);
  }
  if (proto !== IPPROTO_TCP && proto !== IPPROTO_UDP) {
    drop(ctx, C.drop_no_rule);
    return null;
  }
  const n = readL4Ports(frame, l4, end, proto, fragment, ctx.ports);
  if (n < 0) {
    codecDrop(ctx, proto === IPPROTO_TCP ? ctx.tcpDrop : ctx.udpDrop, n);
    return null;
  }
  if (fragment) ctx.counters.values[C.fragments]!++;
  const rule = vip.rules.get((proto << 16) | ctx.ports.dstPort);
  if (rule === undefined) {
    drop(ctx, C.drop_no_rule);
    return null;
  }
  return (ctx.lastRule = rule);
}

/** A TCP SYN without ACK: the first packet of a connection. */
export function isSyn(flags: number): boolean {
  return (flags & (TCP_SYN | TCP_ACK)) === TCP_SYN;
}

/**
 * An existing flow keeps its nic while the rule's pool still lets it (member and enabled; health and
 * drain do not move established flows). A flow whose nic was removed from the pool (or disabled) is
 * re-placed at its next packet by the rule's current table, as any MUX without the entry would place it:
 * a removed backend is gone (its VM may be deleted, and its host agent stops delivering to it at once),
 * so its TCP connections end at the new backend's reset instead of waiting out their timeouts, and UDP
 * flows go on elsewhere; drain is the way out that keeps them (docs/reliability.md, scenario 23).
 * A flow seen once waits in the untrusted table; its second packet
 * moves it to the main table. A new flow takes the Maglev slot of `selectHash`, and so does a TCP SYN
 * whatever the tables hold: a SYN opens a new connection, which must not follow an old entry of a reused
 * 5-tuple to a backend that has since gone down (Katran does not look SYNs up either). The key must
 * already be in flows.key (the two tables share the key layout; the untrusted table gets a copy when it
 * is needed: a SYN, or a miss of the main table).
 */
export function chooseWithFlow(
  ctx: MuxContext,
  flows: FlowTable,
  pending: FlowTable,
  rule: MuxRule,
  flowHash: number,
  now: number,
  expires: number,
  selectHash: number,
  syn: boolean,
): MuxNic | undefined {
  const c = ctx.counters.values;
  const C = ctx.counters.index;
  const table = rule.table;
  if (syn) {
    if (flows.remove(flowHash)) c[C.flow_replaced]!++;
    copyKey(flows, pending);
    return placeNew(ctx, pending, table, flowHash, now, selectHash, false);
  }
  let id = flows.lookup(flowHash, now, expires);
  let trusted = true;
  if (id < 0) {
    // only a miss of the main table needs the untrusted one (and the key there)
    copyKey(flows, pending);
    id = pending.peek(flowHash, now);
    trusted = false;
  }
  let replaced = false;
  if (id >= 0) {
    if (id < table.keepFlow.length && table.keepFlow[id] === 1) {
      const nic = ctx.tables.nicsById[id];
      if (nic !== undefined) {
        if (trusted) c[C.flow_hit]!++;
        else {
          // the second packet: the flow is real; promote it to the main table
          pending.remove(flowHash);
          if (flows.insert(flowHash, id, expires)) c[C.flow_promoted]!++;
          else c[C.flow_table_full]!++; // stateless: the Maglev choice still holds while the pool is stable
        }
        return nic;
      }
    }
    replaced = true;
    if (!trusted) pending.remove(flowHash);
  }
  if (replaced && trusted) {
    // an established flow whose backend left the pool (removed or disabled): re-placed, and stays trusted
    const slot = table.slots[(selectHash >>> 0) % table.size]!;
    if (slot === MAGLEV_EMPTY) return undefined;
    const nic = table.members[slot]!;
    if (flows.insert(flowHash, nic.id, expires)) c[C.flow_replaced]!++;
    else c[C.flow_table_full]!++;
    return nic;
  }
  return placeNew(ctx, pending, table, flowHash, now, selectHash, replaced);
}

/** The key written into `from.key` into `to.key` (same layout); a word loop, no TypedArray.set call. */
function copyKey(from: FlowTable, to: FlowTable): void {
  const a = from.key;
  const b = to.key;
  for (let i = 0; i < a.length; i++) b[i] = a[i]!;
}

/** A flow seen for the first time (or re-placed before its second packet): the hash's slot, recorded as untrusted. */
function placeNew(
  ctx: MuxContext,
  pending: FlowTable,
  table: MuxRule['table'],
  flowHash: number,
  now: number,
  selectHash: number,
  replaced: boolean,
): MuxNic | undefined {
  const c = ctx.counters.values;
  const C = ctx.counters.index;
  const slot = table.slots[(selectHash >>> 0) % table.size]!;
  if (slot === MAGLEV_EMPTY) return undefined;
  const nic = table.members[slot]!;
  if (table.failOpen) c[C.flow_fail_open]!++;
  if (pending.insert(flowHash, nic.id, now + ctx.untrustedS)) c[replaced ? C.flow_replaced : C.flow_new]!++;
  else c[C.flow_untrusted_full]!++; // a flood: the flow still gets the stateless Maglev choice
  return nic;
}

export function encapsulate(
  frame: Uint8Array,
  l3: number,
  ipLen: number,
  innerType: number,
  nic: MuxNic,
  flowHash: number,
  ctx: MuxContext,
): number {
  const C = ctx.counters.index;
  const host = nic.host;
  // the booleans compared with true: a plain test of the field compiled to V8's generic truth test
  if (host.macKnown !== true) return drop(ctx, C.drop_no_neighbor);
  const six = ctx.underlay6 === true;
  const encap = six ? MUX_ENCAP_LEN_V6 : MUX_ENCAP_LEN;
  const outerIpLen = encap - 14 + ipLen;
  if (outerIpLen > ctx.mtu) return tooBig(frame, l3, ipLen, innerType, ctx);
  if (six && host.pa6 === null) return drop(ctx, C.drop_no_neighbor); // config validation requires address6 on an IPv6 underlay
  // the nic's headers, prebuilt (encapTemplate), go in as 32-bit words; then the bytes of this packet
  if (ctx.encapFor !== ctx.tables) newEncapTables(ctx);
  const t = ctx.encapT[nic.id] ?? encapTemplate(ctx, nic);
  const w = ctx.out32;
  w[0] = t[0]!;
  w[1] = t[1]!;
  w[2] = t[2]!;
  w[3] = t[3]!;
  w[4] = t[4]!;
  w[5] = t[5]!;
  w[6] = t[6]!;
  w[7] = t[7]!;
  w[8] = t[8]!;
  w[9] = t[9]!;
  w[10] = t[10]!;
  w[11] = t[11]!;
  w[12] = t[12]!;
  w[13] = t[13]!;
  w[14] = t[14]!;
  w[15] = t[15]!;
  if (six) {
    w[16] = t[16]!;
    w[17] = t[17]!;
    w[18] = t[18]!;
    w[19] = t[19]!;
    w[20] = t[20]!;
  }
  const o = ctx.out;
  // the next hop's MAC: read at every packet, as the neighbour resolution rewrites it in place
  const hm = host.mac;
  o[0] = hm[0]!;
  o[1] = hm[1]!;
  o[2] = hm[2]!;
  o[3] = hm[3]!;
  o[4] = hm[4]!;
  o[5] = hm[5]!;
  const udpLen = ipLen + 30;
  let u: number; // offset of the UDP header
  if (!six) {
    o[16] = outerIpLen >>> 8;
    o[17] = outerIpLen & 0xff;
    const id = (ctx.ipId = (ctx.ipId + 1) & 0xffff);
    o[18] = id >>> 8;
    o[19] = id & 0xff;
    // RFC 1071: the header's sum is the fixed and per-host shares, summed in advance, plus two words
    const csum = finishChecksum(ctx.outerSum4 + host.outerSum4 + outerIpLen + id);
    o[24] = csum >>> 8;
    o[25] = csum & 0xff;
    u = 34;
  } else {
    // outer IPv6 (RFC 8200): the flow label from the flow hash (RFC 6438)
    o[15] = (flowHash >>> 16) & 0x0f;
    o[16] = (flowHash >>> 8) & 0xff;
    o[17] = flowHash & 0xff;
    o[18] = udpLen >>> 8;
    o[19] = udpLen & 0xff;
    u = 54;
  }
  // UDP: source port from the flow hash (RFC 7348 5)
  const sp = vxlanSourcePort(flowHash);
  o[u] = sp >>> 8;
  o[u + 1] = sp & 0xff;
  o[u + 4] = udpLen >>> 8;
  o[u + 5] = udpLen & 0xff;
  o[u + 28] = innerType >>> 8;
  o[u + 29] = innerType & 0xff;
  // copyShort: copyPayload's bytes, in fewer instructions (shared/fused-parse-mux.ts)
  if (ipLen < WORD_COPY_MAX_LEN) copyShort(frame, l3, o, ctx.outView, encap, ipLen);
  else o.set(frame.subarray(l3, l3 + ipLen), encap);
  if (six) {
    // RFC 8200 8.1: the UDP checksum is mandatory over IPv6 (a zero result is sent as 0xffff)
    const c = l4Checksum(o, u, udpLen, 6, pseudoSumV6Bytes(o, 22, 38, 17, udpLen));
    writeU16(o, u + 6, c === 0 ? 0xffff : c);
  }
  ctx.outLen = encap + ipLen;
  ctx.lastNic = nic;
  // tx_packets and tx_bytes: counted by the daemon once the kernel took the frame (mux/daemon.ts)
  return VERDICT_FORWARD;
}

/**
 * New tables are in force (a compile, whatever its cause): every nic's template is built again at its
 * next packet. The tables make new nic objects, and a nic's VNI, MAC or host (its provider address) may
 * have changed with them.
 */
function newEncapTables(ctx: MuxContext): void {
  const tables = ctx.tables;
  ctx.encapT = new Array<Int32Array | undefined>(tables.nicsById.length).fill(undefined);
  ctx.encapFor = tables;
}

/**
 * The nic's headers as encapsulate writes them, its template: outer Ethernet from the MUX's MAC (the
 * destination, the host's MAC, comes at every packet), the outer IP header from the MUX's provider
 * address to the host's, the UDP header to the VXLAN port, VXLAN with the nic's VNI, and the inner
 * Ethernet header from the MUX's MAC to the nic's. The per-packet fields are left zero.
 */
function encapTemplate(ctx: MuxContext, nic: MuxNic): Int32Array {
  const six = ctx.underlay6;
  const words = new Int32Array((six ? MUX_ENCAP_LEN_V6 : MUX_ENCAP_LEN) >>> 2);
  const t = new DataView(words.buffer);
  const m = ctx.localMac;
  for (let i = 0; i < 6; i++) t.setUint8(6 + i, m[i]!);
  let u: number; // offset of the UDP header
  if (!six) {
    t.setUint16(12, ETHERTYPE_IPV4);
    // outer IPv4 (RFC 791): no options, DF clear (the fabric may fragment), TTL 64, UDP
    t.setUint8(14, 0x45);
    t.setUint8(22, 64);
    t.setUint8(23, 17);
    t.setUint32(26, ctx.localPa4 >>> 0);
    t.setUint32(30, nic.host.pa4 >>> 0);
    u = 34;
  } else {
    t.setUint16(12, ETHERTYPE_IPV6);
    // outer IPv6 (RFC 8200): version 6 (the flow label comes at every packet), hop limit 64, UDP
    t.setUint8(14, 0x60);
    t.setUint8(20, 17);
    t.setUint8(21, 64);
    const s6 = ctx.localPa6!;
    const d6 = nic.host.pa6!;
    for (let i = 0; i < 4; i++) {
      t.setUint32(22 + i * 4, s6[i]!);
      t.setUint32(38 + i * 4, d6[i]!);
    }
    u = 54;
  }
  t.setUint16(u + 2, ctx.vxlanPort);
  // VXLAN: I flag, VNI
  t.setUint8(u + 8, VXLAN_FLAG_I);
  t.setUint32(u + 12, (nic.vni << 8) >>> 0);
  // inner Ethernet: to the backend's MAC, from ours
  for (let i = 0; i < 6; i++) {
    t.setUint8(u + 16 + i, nic.mac[i]!);
    t.setUint8(u + 22 + i, m[i]!);
  }
  ctx.encapT[nic.id] = words;
  return words;
}

function takeIcmpToken(ctx: MuxContext): boolean {
  if (ctx.nowS !== ctx.icmpRefillS) {
    const add = (ctx.nowS - ctx.icmpRefillS) * ICMP_RATE_PER_S;
    ctx.icmpTokens = Math.min(ICMP_RATE_PER_S, ctx.icmpTokens + (add > 0 ? add : ICMP_RATE_PER_S));
    ctx.icmpRefillS = ctx.nowS;
  }
  if (ctx.icmpTokens < 1) return false;
  ctx.icmpTokens--;
  return true;
}

/**
 * The packet does not fit the fabric after encapsulation. When the sender allows no fragmentation (IPv4
 * DF, or IPv6), answer it as the router a VIP is: ICMP fragmentation needed (RFC 1191) / ICMPv6 packet
 * too big (RFC 8201) from the VIP to the client, carrying the inner MTU the fabric leaves. Never about an
 * ICMP error (RFC 1122 3.2.2).
 */
function tooBig(frame: Uint8Array, l3: number, ipLen: number, innerType: number, ctx: MuxContext): number {
  const C = ctx.counters.index;
  const v4 = innerType === ETHERTYPE_IPV4;
  if (v4) {
    if ((frame[l3 + 6]! & (IPV4_FLAG_DF << 5)) === 0) return drop(ctx, C.drop_too_big);
    if (frame[l3 + 9] === IPPROTO_ICMP) return drop(ctx, C.drop_too_big);
  } else if (ctx.ip6.protocol === IPPROTO_ICMPV6) {
    return drop(ctx, C.drop_too_big);
  }
  if (!takeIcmpToken(ctx)) return drop(ctx, C.drop_icmp_rate_limited);
  const o = ctx.out;
  // back to the previous hop (the router that sent us the packet), keeping its VLAN tag if any
  const re = ctx.replyEth;
  copyBytes(frame, 6, re.dst, 0, 6);
  re.src.set(ctx.localMac);
  re.etherType = innerType;
  re.vlanId = ctx.eth.vlanId;
  re.vlanPcp = ctx.eth.vlanPcp;
  const e = writeEthernet(re, o, 0);
  const mtu = innerMtu(ctx);
  if (v4) {
    const quote = Math.min(ipLen, ICMP4_MAX_LEN - 28);
    const total = 28 + quote;
    o[e] = 0x45;
    o[e + 1] = 0;
    writeU16(o, e + 2, total);
    const id = (ctx.ipId = (ctx.ipId + 1) & 0xffff);
    writeU16(o, e + 4, id);
    writeU16(o, e + 6, 0);
    o[e + 8] = 64;
    o[e + 9] = IPPROTO_ICMP;
    writeU16(o, e + 10, 0);
    writeU32(o, e + 12, readU32(frame, l3 + 16)); // from the VIP
    writeU32(o, e + 16, readU32(frame, l3 + 12)); // to the client
    writeU16(o, e + 10, finishChecksum(sumBytes(o, e, 20, 0)));
    const icmp = e + 20;
    o[icmp] = ICMP_DEST_UNREACH;
    o[icmp + 1] = ICMP_CODE_FRAG_NEEDED;
    writeU16(o, icmp + 2, 0);
    writeU16(o, icmp + 4, 0);
    writeU16(o, icmp + 6, mtu); // RFC 1191: next-hop MTU in the low 16 bits
    o.set(frame.subarray(l3, l3 + quote), icmp + 8);
    writeU16(o, icmp + 2, l4Checksum(o, icmp, 8 + quote, 2, 0));
    ctx.outLen = e + total;
  } else {
    const quote = Math.min(ipLen, ICMP6_MAX_LEN - 48);
    const plen = 8 + quote;
    writeU32(o, e, 0x60000000);
    writeU16(o, e + 4, plen);
    o[e + 6] = IPPROTO_ICMPV6;
    o[e + 7] = 64;
    copyBytes(frame, l3 + 24, o, e + 8, 16); // from the VIP
    copyBytes(frame, l3 + 8, o, e + 24, 16); // to the client
    const icmp = e + 40;
    o[icmp] = ICMPV6_PACKET_TOO_BIG;
    o[icmp + 1] = 0;
    writeU16(o, icmp + 2, 0);
    writeU32(o, icmp + 4, mtu);
    o.set(frame.subarray(l3, l3 + quote), icmp + 8);
    writeU16(o, icmp + 2, l4Checksum(o, icmp, plen, 2, pseudoSumV6Bytes(o, e + 8, e + 24, IPPROTO_ICMPV6, plen)));
    ctx.outLen = e + 40 + plen;
  }
  ctx.counters.values[C.icmp_too_big_sent]!++;
  return VERDICT_REPLY;
}

/** Expires idle flows: call a few times a second with a slot budget. */
export function sweepFlows(ctx: MuxContext, budget: number): number {
  const now = ctx.nowS;
  return (
    ctx.flows4.sweep(now, budget) +
    ctx.flows6.sweep(now, budget) +
    ctx.pending4.sweep(now, budget) +
    ctx.pending6.sweep(now, budget) +
    ctx.ew.udpSeen4.sweep(now, budget) +
    ctx.ew.udpSeen6.sweep(now, budget)
  );
}
