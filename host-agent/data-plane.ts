// Host agent data plane, two pure functions over one host's tables (no awaits, timers, logs or
// allocation per packet):
//
// processInbound: VXLAN from a MUX -> checks (our PA, trusted source, VNI we serve, a port with that inner
//   MAC in that VNI, a VIP rule of that nic) -> NAT VIP:frontendPort -> DIP:backendPort with RFC 1624
//   checksum updates -> the inner frame, re-sourced from the port's MAC, for the backend's port.
// processOutbound: a frame a backend sent on its port -> ARP / neighbour solicitation for its gateway is
//   answered on the port; a reply of a load-balanced flow is NATed DIP:backendPort -> VIP:frontendPort
//   and handed out as a bare IP packet for the raw socket toward the router (direct server return).
import { Counters, codecDropIndex, codecDropNames } from '../shared/counters.js';
import { readU16, readU32, writeU16, writeU32, copyBytes } from '../shared/bytes.js';
import {
  ETH_VLAN_TAG_LEN,
  ETHERTYPE_ARP,
  ETHERTYPE_IPV4,
  ETHERTYPE_IPV6,
  VLAN_NONE,
  newEthernetHeader,
  writeEthernetRaw,
} from '../shared/ethernet.js';
import { pushVlanTag, vlanMismatchReason, VLAN_TAG_MISSING, VLAN_TAG_WRONG } from './vlan.js';
import { ipv4ChecksumOk, ipv6Equal, newL4Ports, readEtherType, readL4Ports, type L4Ports } from '../shared/hot-path.js';
import { ARP_LEN, ARP_OP_REPLY, ARP_OP_REQUEST, newArpPacket, parseArp } from '../shared/arp.js';
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
import { ICMP_CODE_FRAG_NEEDED, ICMP_DEST_UNREACH, isIcmpError } from '../shared/icmp.js';
import { isIpv6Fragment, newIpv6Header, parseIpv6 } from '../shared/ipv6.js';
import { parseVxlan, newVxlanHeader, VXLAN_FLAG_I } from '../shared/vxlan.js';
import { LATENCY_ECHO_VNI } from '../shared/latency.js';
import { newUdpHeader, parseUdp } from '../shared/udp.js';
import {
  ICMPV6_NEIGHBOR_ADVERT,
  ICMPV6_NEIGHBOR_SOLICIT,
  ND_NA_FLAG_OVERRIDE,
  ND_NA_FLAG_ROUTER,
  ND_NA_FLAG_SOLICITED,
  ND_OPT_TARGET_LL,
  newNdMessage,
  parseNd,
  writeNdBody,
} from '../shared/icmpv6.js';
import {
  finishChecksum,
  l4Checksum,
  pseudoSumV6Bytes,
  sumBytes,
  updateChecksum16,
  updateChecksum32,
  updateChecksumBytes,
  verifyL4Checksum,
} from '../shared/checksum.js';
import { macKey, peerIndex6, type HostNetwork, type HostNic, type HostTables, type NatRule } from './tables.js';
import { EW_HOST_COUNTER_NAMES } from './east-west-counters.js';
import { eastWestOut4, eastWestOut6, newEwState, notVipOfNic4, notVipOfNic6, notVxlan4, type EwState } from './east-west.js';
import { dsrAllowed4, dsrAllowed6, dsrLearn4, dsrLearn6, dsrLearnRule6, dsrPeek4, dsrPeek6 } from './dsr-flows.js';
import { SNAT_DROP_REASONS, SNAT_ERR_NOT_OURS, type SnatEngine } from './snat.js';

export const VERDICT_DROP = 0;
export const VERDICT_FORWARD = 1;
/**
 * processOutbound: an IP packet from the backend to its gateway address (the host agent itself, e.g. the
 * answers to health probes, which the host agent sends from the gateway address): for the daemon, not
 * for DSR. ctx.outBuf[outOff .. outOff + outLen) is the IP packet; ctx.outPort the port it came from.
 * processInbound: a MUX's latency echo request (VXLAN with VNI 0 from a checked peer, docs/latency.md):
 * ctx.outBuf[outOff .. outOff + outLen) is the VXLAN payload, ctx.lastPeer the peer, ctx.udp its ports.
 */
export const VERDICT_LOCAL = 2;
/**
 * processInbound, only with ctx.holdUnresolved: VXLAN from a peer whose MAC is not known yet (the first
 * packets after a start). Not judged and not counted in in_packets (counted in in_held): the daemon keeps
 * a copy and hands it in again once the peer's MAC is learned (docs/security.md).
 */
export const VERDICT_HOLD = 3;
/** processInbound: a control message taken in by the data plane (a Fastpath redirect, docs/east-west.md); nothing to send. */
export const VERDICT_CONSUMED = 4;
/** ctx.outPort value: send the IP packet with the raw socket toward the router (DSR). */
export const OUT_DSR = -1;

/**
 * The hot paths' constants, as a const enum: tsc writes each use as its literal. An imported const is
 * a module cell V8 loads and checks for its temporal dead zone at every use (5-7 instructions each,
 * callgrind, host-in udp4).
 */
const enum In {
  TCP = IPPROTO_TCP,
  UDP = IPPROTO_UDP,
  IPV4 = ETHERTYPE_IPV4,
  IPV6 = ETHERTYPE_IPV6,
  NO_VLAN = VLAN_NONE,
  VXLAN_I = VXLAN_FLAG_I,
  FORWARD = VERDICT_FORWARD,
  ICMPV6 = IPPROTO_ICMPV6,
}

/** The layers whose codec errors have drop_<layer>_<error> counters (HOST_COUNTER_NAMES). */
const HOST_CODEC_LAYERS = [
  'in_eth',
  'in_ipv4',
  'in_ipv6',
  'in_udp',
  'in_vxlan',
  'in_inner_eth',
  'in_inner_ipv4',
  'in_inner_ipv6',
  'in_inner_tcp',
  'in_inner_udp',
  'out_eth',
  'out_arp',
  'out_ipv4',
  'out_ipv6',
  'out_tcp',
  'out_udp',
  'out_nd',
] as const;
type HostCodecLayer = (typeof HOST_CODEC_LAYERS)[number];

export const HOST_COUNTER_NAMES = [
  'in_packets',
  'in_bytes',
  'in_delivered',
  'in_held',
  // a latency echo request from a MUX (docs/latency.md): VXLAN with VNI 0 that passed every source check
  'in_latency_echo',
  // counted by the daemon: answered, or not (a request whose payload is not a valid echo request)
  'latency_echo_answered',
  'latency_echo_bad',
  'out_packets',
  'out_bytes',
  'out_dsr',
  'out_local',
  'arp_replies',
  'nd_replies',
  'fragments',
  'drop_in_not_ip',
  'drop_in_not_for_us',
  'drop_in_not_vxlan',
  'drop_in_outer_fragment',
  'drop_in_ipv4_bad_checksum',
  'drop_in_unknown_source',
  'drop_in_spoofed_source',
  'drop_in_source_unresolved',
  'drop_in_unknown_vni',
  'drop_in_unknown_mac',
  'drop_in_inner_vlan',
  'drop_in_inner_not_ip',
  'drop_in_inner_ipv4_bad_checksum',
  'drop_in_not_vip_of_vni',
  'drop_in_no_rule',
  'drop_in_inner_not_tcp_udp',
  'drop_in_bad_udp_checksum',
  'drop_in_icmp_bad_quote',
  'drop_in_icmp_unrelated',
  'icmp_errors_in',
  'icmp_too_big_sent',
  'drop_out_too_big',
  'drop_out_not_ip',
  'drop_out_arp_ignored',
  'drop_out_icmpv6_ignored',
  'drop_out_spoofed_source',
  'drop_out_not_lb_reply',
  // a backend packet from a public VIP rule's backend port that belongs to no recorded load-balanced
  // flow (host-agent/dsr-flows.ts): never sent from the VIP
  'drop_out_dsr_unsolicited',
  // outbound NAT (docs/outbound.md): a backend's own connection translated to frontend IP:port and sent
  // like a DSR reply, a reply from a MUX translated back and delivered; the engine's named drops
  // (host-agent/snat.ts SNAT_DROP_REASONS), a reply to a frontend IP from a host (not a MUX), and the
  // flows a policy ended (their nic or its range taken away; counted by the daemon)
  'out_snat',
  'in_snat',
  'drop_out_snat_exhausted',
  'drop_out_snat_no_range',
  'drop_out_snat_table_full',
  'drop_out_snat_protocol',
  'drop_out_snat_no_flow',
  'drop_in_snat_no_flow',
  'drop_in_snat_wrong_vni',
  'drop_in_snat_not_mux',
  // --workers: a new outbound NAT flow of another worker's share, met while that worker restarts
  'drop_out_snat_other_worker',
  'drop_snat_truncated',
  'drop_snat_fragment',
  'snat_flows_ended_by_policy',
  // tcpResetOnIdle: ESTABLISHED TCP flows its idle timeout ended with two RSTs, those past the engine's
  // queue bound (no RSTs), and an RST the kernel refused (or no DSR socket of its family)
  'snat_idle_resets',
  'snat_idle_resets_lost',
  'send_error_snat_reset',
  // an ICMP error from a backend whose quoted packet is not a client's packet to this backend's rule
  'drop_out_icmp_bad_quote',
  // an ICMP error from a backend about a recorded flow, sent from the VIP
  'icmp_errors_out',
  // load-balanced flows recorded for the return path (new entries), and inserts refused by a full host flow table
  'dsr_flows_learned',
  'dsr_flows_full',
  // of those, TCP flows learned from a segment without SYN: re-learned from the client after a restart (dsr-flows.ts)
  'dsr_flows_learned_midstream',
  // return-path entries restored from the flow snapshot at the agent's start (host-agent/flow-snapshot.ts)
  'dsr_flows_restored',
  // and from the flow journal replayed after it: entries the last snapshot did not have, or had in an older state (flow-journal.ts)
  'dsr_flows_replayed',
  'drop_out_fragment_no_rule',
  'drop_out_ipv4_bad_checksum',
  // a tagged frame on the port of a vxlan network's nic (an untagged port)
  'drop_out_vlan',
  // on the port of a vlan network's nic (an 802.1Q trunk, docs/config.md): an untagged frame, or another VLAN's
  'drop_out_vlan_missing_tag',
  'drop_out_vlan_wrong_tag',
  // a frame for a vlan network's port with no room in its buffer for the tag (not expected: the reply buffer has it)
  'drop_out_vlan_no_room',
  'drop_internal_error',
  // Sends the kernel refused (or that had no socket), counted by the daemon after the send
  // (docs/reliability.md); never expected, a scenario fails on any
  'send_error_port',
  'send_error_dsr',
  'send_error_dsr_unavailable',
  'send_error_reply',
  'send_error_probe',
  'send_error_latency_echo',
  'send_error_neighbor',
  'send_error_batch',
  ...EW_HOST_COUNTER_NAMES,
  ...HOST_CODEC_LAYERS.flatMap((layer) => codecDropNames(layer)),
] as const;
export type HostCounterName = (typeof HOST_COUNTER_NAMES)[number];

export interface HostContext {
  tables: HostTables;
  /** East-west and Fastpath: the host flow table, clocks, the redirect HMAC (host-agent/east-west.ts). */
  ew: EwState; // replaced by the daemon with the one it carries across policies (host-agent/east-west-io.ts)
  readonly counters: Counters<HostCounterName>;
  readonly vxlanPort: number;
  /** MAC of each port's host-side interface, by nic index (filled by the io layer). */
  portMacs: Uint8Array[];
  /**
   * Check that VXLAN from a fabric peer's provider address comes from that peer's MAC (a single-L2
   * fabric; docs/security.md). Off by default (a pcap replay has no neighbours); the daemon turns it
   * on for the capture receive path, where the frame's source MAC is the one on the wire.
   */
  sourceMacCheck: boolean;
  /** With sourceMacCheck: VXLAN from a peer not resolved yet gets VERDICT_HOLD instead of a drop. */
  holdUnresolved: boolean;
  /**
   * By tables.peers index: the MAC (macKey) the peer's provider address resolved to by ARP or ND, or
   * -1 while unknown. The control plane (host-agent/neighbors.ts) writes it.
   */
  peerMacs: Float64Array;
  /** After processInbound: the tables.peers index of the outer source, or -1 (not a peer, or not reached). */
  lastPeer: number;
  /**
   * The largest IP packet the DSR return can send (the MTU of the interface toward the router; the
   * daemon sets it). A larger reply is answered with ICMP to the backend so its path MTU discovery works.
   */
  dsrMtu: number;
  /** After VERDICT_FORWARD: send outBuf[outOff .. outOff + outLen) to outPort (a nic index, or OUT_DSR). */
  outBuf: Uint8Array;
  outOff: number;
  outLen: number;
  outPort: number;
  /** After a verdict: the drop counter index, or -1. */
  lastDrop: number;
  /** After an inbound VERDICT_FORWARD: the NAT rule applied. */
  lastRule: NatRule | null;
  /** Scratch buffer for generated replies (ARP, neighbour advertisements, ICMP too big). */
  readonly reply: Uint8Array;
  /** EtherType and VLAN tag of the frame (outer) and of the inner frame (the MAC fields are not filled). */
  readonly eth: ReturnType<typeof newEthernetHeader>;
  readonly ieth: ReturnType<typeof newEthernetHeader>;
  readonly ip4: ReturnType<typeof newIpv4Header>;
  readonly ip6: ReturnType<typeof newIpv6Header>;
  /** The packet an ICMP error quotes. */
  readonly qip4: ReturnType<typeof newIpv4Header>;
  readonly qip6: ReturnType<typeof newIpv6Header>;
  readonly udp: ReturnType<typeof newUdpHeader>;
  readonly vxlan: ReturnType<typeof newVxlanHeader>;
  readonly arp: ReturnType<typeof newArpPacket>;
  readonly nd: ReturnType<typeof newNdMessage>;
  /** The ports of the TCP or UDP header (readL4Ports). */
  readonly ports: L4Ports;
  /**
   * Outbound NAT (host-agent/snat.ts), or null: none configured. The daemon carries one engine across
   * policies (its flows live while their nics and ranges stay); its clock is ew.nowS.
   */
  snat: SnatEngine | null;
  /** By -result of the engine, the index of its drop counter (SNAT_DROP_REASONS), or -1. */
  readonly snatDrop: Int32Array;
  /**
   * By -code, the index of the counter drop_<layer>_<codec error> of each layer the host agent parses
   * (codecDropIndex), or -1: typed fields, a field load per drop, like the MUX's.
   */
  readonly inEthDrop: Int32Array;
  readonly inIp4Drop: Int32Array;
  readonly inIp6Drop: Int32Array;
  readonly inUdpDrop: Int32Array;
  readonly inVxlanDrop: Int32Array;
  readonly inInnerEthDrop: Int32Array;
  readonly inInnerIp4Drop: Int32Array;
  readonly inInnerIp6Drop: Int32Array;
  readonly inInnerTcpDrop: Int32Array;
  readonly inInnerUdpDrop: Int32Array;
  readonly outEthDrop: Int32Array;
  readonly outArpDrop: Int32Array;
  readonly outIp4Drop: Int32Array;
  readonly outIp6Drop: Int32Array;
  readonly outTcpDrop: Int32Array;
  readonly outUdpDrop: Int32Array;
  readonly outNdDrop: Int32Array;
}

export function newHostContext(tables: HostTables, vxlanPort: number, portMacs: Uint8Array[]): HostContext {
  const counters = new Counters(HOST_COUNTER_NAMES);
  const drops = (layer: HostCodecLayer): Int32Array => codecDropIndex(counters, layer);
  return {
    tables,
    ew: newEwState(),
    counters,
    vxlanPort,
    portMacs,
    sourceMacCheck: false,
    holdUnresolved: false,
    peerMacs: new Float64Array(tables.peers.length).fill(-1),
    lastPeer: -1,
    outBuf: new Uint8Array(0),
    outOff: 0,
    outLen: 0,
    outPort: 0,
    lastDrop: -1,
    lastRule: null,
    reply: new Uint8Array(1400),
    dsrMtu: 65535,
    eth: newEthernetHeader(),
    ieth: newEthernetHeader(),
    ip4: newIpv4Header(),
    ip6: newIpv6Header(),
    qip4: newIpv4Header(),
    qip6: newIpv6Header(),
    udp: newUdpHeader(),
    vxlan: newVxlanHeader(),
    arp: newArpPacket(),
    nd: newNdMessage(),
    ports: newL4Ports(),
    snat: null,
    snatDrop: snatDropIndex(counters),
    inEthDrop: drops('in_eth'),
    inIp4Drop: drops('in_ipv4'),
    inIp6Drop: drops('in_ipv6'),
    inUdpDrop: drops('in_udp'),
    inVxlanDrop: drops('in_vxlan'),
    inInnerEthDrop: drops('in_inner_eth'),
    inInnerIp4Drop: drops('in_inner_ipv4'),
    inInnerIp6Drop: drops('in_inner_ipv6'),
    inInnerTcpDrop: drops('in_inner_tcp'),
    inInnerUdpDrop: drops('in_inner_udp'),
    outEthDrop: drops('out_eth'),
    outArpDrop: drops('out_arp'),
    outIp4Drop: drops('out_ipv4'),
    outIp6Drop: drops('out_ipv6'),
    outTcpDrop: drops('out_tcp'),
    outUdpDrop: drops('out_udp'),
    outNdDrop: drops('out_nd'),
  };
}

function snatDropIndex(counters: Counters<HostCounterName>): Int32Array {
  const m = new Int32Array(16).fill(-1);
  for (const [code, name] of Object.entries(SNAT_DROP_REASONS)) m[-Number(code)] = counters.index[name as HostCounterName] ?? -1;
  return m;
}

export function drop(ctx: HostContext, index: number): number {
  ctx.counters.values[index]!++;
  ctx.lastDrop = index;
  return VERDICT_DROP;
}

function codecDrop(ctx: HostContext, map: Int32Array, code: number): number {
  const i = map[-code] ?? -1;
  return drop(ctx, i >= 0 ? i : ctx.counters.index.drop_internal_error);
}

// ---------------------------------------------------------------------------------------------
// Rewrites with incremental checksums (RFC 1624). `addrOff` is the offset of the address in the IP
// header (IPv4: 12 source, 16 destination; IPv6: 8, 24); `portOff` the offset of the port in the
// L4 header (0 source, 2 destination), or -1 for a fragment without an L4 header.

export function natIpv4(
  frame: Uint8Array,
  l3: number,
  l4: number,
  proto: number,
  addrOff: number,
  newAddr: number,
  portOff: number,
  newPort: number,
): void {
  const old = readU32(frame, l3 + addrOff);
  writeU32(frame, l3 + addrOff, newAddr);
  // RFC 1624 eqn. 3, HC' = ~(~HC + ~m + m'): the address's ~m + m' is summed once and serves both the
  // IP header's checksum and the L4 one (its pseudo-header holds the address), the port's added to it.
  const d = (~(old >>> 16) & 0xffff) + (~old & 0xffff) + (newAddr >>> 16) + (newAddr & 0xffff);
  writeU16(frame, l3 + 10, foldComplement((~readU16(frame, l3 + 10) & 0xffff) + d));
  if (portOff < 0) return;
  const oldPort = readU16(frame, l4 + portOff);
  writeU16(frame, l4 + portOff, newPort);
  const dp = d + (~oldPort & 0xffff) + newPort;
  if (proto === IPPROTO_TCP) {
    writeU16(frame, l4 + 16, foldComplement((~readU16(frame, l4 + 16) & 0xffff) + dp));
  } else {
    const c0 = readU16(frame, l4 + 6);
    if (c0 === 0) return; // RFC 768: no checksum; it stays none
    const c = foldComplement((~c0 & 0xffff) + dp);
    writeU16(frame, l4 + 6, c === 0 ? 0xffff : c);
  }
}

/** ~fold(s) & 0xffff for a sum of at most seven 16-bit words (two end-around folds are enough). */
function foldComplement(s: number): number {
  s = (s & 0xffff) + (s >>> 16);
  s = (s & 0xffff) + (s >>> 16);
  return ~s & 0xffff;
}

export function natIpv6(
  frame: Uint8Array,
  l3: number,
  l4: number,
  proto: number,
  addrOff: number,
  newWords: Uint32Array,
  portOff: number,
  newPort: number,
): void {
  const a = l3 + addrOff;
  // RFC 1624 eqn. 3 over the address's eight 16-bit words, read and written as four 32-bit words (the
  // new address as its words, IpAddr.words: no byte loop, no call; callgrind, host-out udp6 reply), then
  // the port's; IPv6 has no header checksum
  let d = 0;
  for (let i = 0; i < 4; i++) {
    const o = ~readU32(frame, a + i * 4);
    const n = newWords[i]!;
    d += (o >>> 16) + (o & 0xffff) + (n >>> 16) + (n & 0xffff);
    writeU32(frame, a + i * 4, n);
  }
  if (portOff < 0) return;
  const csumOff = proto === IPPROTO_TCP ? l4 + 16 : l4 + 6;
  const oldPort = readU16(frame, l4 + portOff);
  writeU16(frame, l4 + portOff, newPort);
  let s = (~readU16(frame, csumOff) & 0xffff) + d + (~oldPort & 0xffff) + newPort;
  s = (s & 0xffff) + (s >>> 16);
  s = (s & 0xffff) + (s >>> 16); // at most 19 words of 16 bits: two end-around folds are enough
  let c = ~s & 0xffff;
  if (proto === IPPROTO_UDP && c === 0) c = 0xffff; // RFC 8200 8.1: zero is not allowed over IPv6
  writeU16(frame, csumOff, c);
}

/**
 * natIpv6 of a reply's source DIP -> VIP when the frame's source is known to be the rule's DIP: the
 * address's checksum terms come precomputed (`sum`, NatRule.dsrSum), so the old address is not read.
 * The same bytes as natIpv6 (differential.js).
 */
function natIpv6Sum(frame: Uint8Array, l3: number, l4: number, proto: number, newWords: Uint32Array, sum: number, newPort: number): void {
  const a = l3 + 8;
  writeU32(frame, a, newWords[0]!);
  writeU32(frame, a + 4, newWords[1]!);
  writeU32(frame, a + 8, newWords[2]!);
  writeU32(frame, a + 12, newWords[3]!);
  const csumOff = proto === IPPROTO_TCP ? l4 + 16 : l4 + 6;
  const oldPort = readU16(frame, l4);
  writeU16(frame, l4, newPort);
  let s = (~readU16(frame, csumOff) & 0xffff) + sum + (~oldPort & 0xffff) + newPort;
  s = (s & 0xffff) + (s >>> 16);
  s = (s & 0xffff) + (s >>> 16); // at most 19 words of 16 bits: two end-around folds are enough
  let c = ~s & 0xffff;
  if (proto === IPPROTO_UDP && c === 0) c = 0xffff; // RFC 8200 8.1: zero is not allowed over IPv6
  writeU16(frame, csumOff, c);
}

function findRule4(nic: HostNic, proto: number, dport: number, vip: number): NatRule | undefined {
  const list = nic.inbound.get((proto << 16) | dport);
  if (list === undefined) return undefined;
  const v = vip | 0;
  for (let i = 0; i < list.length; i++) {
    const r = list[i]!;
    if (r.family === 4 && r.vip4 === v) return r;
  }
  return undefined;
}

/** The rule for an IPv6 VIP given as its four words (int32 or uint32: compared as int32). */
function findRule6(nic: HostNic, proto: number, dport: number, v0: number, v1: number, v2: number, v3: number): NatRule | undefined {
  const list = nic.inbound.get((proto << 16) | dport);
  if (list === undefined) return undefined;
  for (let i = 0; i < list.length; i++) {
    const r = list[i]!;
    if (r.family !== 6) continue;
    const w = r.vip.words;
    if ((w[0]! | 0) === (v0 | 0) && (w[1]! | 0) === (v1 | 0) && (w[2]! | 0) === (v2 | 0) && (w[3]! | 0) === (v3 | 0)) return r;
  }
  return undefined;
}

function hasVip6(nic: HostNic, d: Uint32Array): boolean {
  for (const v of nic.vips6) if (ipv6Equal(v.words, d)) return true;
  return false;
}

// ---------------------------------------------------------------------------------------------
// Inbound

/** Processes a frame captured on the fabric interface; see the file comment. */
export function processInbound(frame: Uint8Array, len: number, ctx: HostContext): number {
  const c = ctx.counters.values;
  const C = ctx.counters.index;
  c[C.in_packets]!++;
  c[C.in_bytes]! += len;
  const counted = len;
  ctx.lastDrop = -1;
  ctx.lastRule = null;
  ctx.lastPeer = -1;
  if (len > frame.length) len = frame.length;
  const t = ctx.tables;
  let peer = -1;
  let l4 = -1;
  let udpLen = 0;
  // The common frame, fused: untagged Ethernet, an IPv4 header without options or fragmentation, to our
  // PA, with a correct checksum, UDP to the VXLAN port from a known peer, each field read once from the
  // bytes into a local (no header objects filled and read back, no parser calls). Anything else, or any
  // check failing, takes the codecs' path below from the start: the same verdicts and drops.
  if (len >= 50 && frame[12] === 0x08 && frame[13] === 0x00 && frame[14] === 0x45 && frame[23] === In.UDP) {
    const total = (frame[16]! << 8) | frame[17]!;
    const ul = (frame[38]! << 8) | frame[39]!;
    if (
      ((frame[20]! & 0x3f) | frame[21]!) === 0 && // neither MF nor a fragment offset
      total <= len - 14 &&
      ul >= 8 &&
      ul <= total - 20 &&
      ((frame[36]! << 8) | frame[37]!) === ctx.vxlanPort &&
      ((frame[30]! << 24) | (frame[31]! << 16) | (frame[32]! << 8) | frame[33]!) === (t.pa4 | 0)
    ) {
      // the header's checksum (RFC 1071: the ten words sum to 0xffff), written out: a helper's call took
      // the inlining budget macKey needs below
      let sum =
        ((frame[14]! +
          frame[16]! +
          frame[18]! +
          frame[20]! +
          frame[22]! +
          frame[24]! +
          frame[26]! +
          frame[28]! +
          frame[30]! +
          frame[32]!) <<
          8) +
        frame[15]! +
        frame[17]! +
        frame[19]! +
        frame[21]! +
        frame[23]! +
        frame[25]! +
        frame[27]! +
        frame[29]! +
        frame[31]! +
        frame[33]!;
      sum = (sum & 0xffff) + (sum >>> 16);
      sum = (sum & 0xffff) + (sum >>> 16);
      const pi = sum === 0xffff ? t.peerIndex4i.get((frame[26]! << 24) | (frame[27]! << 16) | (frame[28]! << 8) | frame[29]!) : undefined;
      if (pi !== undefined) {
        // ctx.udp is not filled: only a latency echo's source port is read from it (set below)
        peer = pi;
        l4 = 34;
        udpLen = ul;
      }
    }
  }
  if (l4 < 0) {
    const l3 = readEtherType(frame, 0, ctx.eth, len); // the MACs are not needed
    if (l3 < 0) return codecDrop(ctx, ctx.inEthDrop, l3);
    if (ctx.eth.etherType === ETHERTYPE_IPV4) {
      const ip = ctx.ip4;
      const hl = parseIpv4(frame, l3, ip, len);
      if (hl < 0) return codecDrop(ctx, ctx.inIp4Drop, hl);
      if (!ipv4ChecksumOk(frame, l3, ip)) return drop(ctx, C.drop_in_ipv4_bad_checksum);
      if (ip.dst !== t.pa4) return drop(ctx, C.drop_in_not_for_us);
      if (ip.protocol !== IPPROTO_UDP) return drop(ctx, C.drop_in_not_vxlan);
      if (isIpv4Fragment(ip)) return drop(ctx, C.drop_in_outer_fragment);
      l4 = l3 + hl;
      const un = parseUdp(frame, l4, ctx.udp, l3 + ip.totalLength);
      if (un < 0) return codecDrop(ctx, ctx.inUdpDrop, un);
      if (ctx.udp.dstPort !== ctx.vxlanPort) return notVxlan4(frame, l4, ip.src, ctx); // a Fastpath redirect, or a drop
      const pi = t.peerIndex4i.get(ip.src | 0);
      if (pi === undefined) return drop(ctx, C.drop_in_unknown_source);
      peer = pi;
      udpLen = ctx.udp.length;
    } else if (ctx.eth.etherType === ETHERTYPE_IPV6) {
      // VXLAN over an IPv6 underlay
      const ip = ctx.ip6;
      const hl = parseIpv6(frame, l3, ip, len);
      if (hl < 0) return codecDrop(ctx, ctx.inIp6Drop, hl);
      if (t.pa6 === null || !ipv6Equal(ip.dst, t.pa6)) return drop(ctx, C.drop_in_not_for_us);
      if (ip.hasFragment) return drop(ctx, C.drop_in_outer_fragment);
      if (ip.protocol !== IPPROTO_UDP) return drop(ctx, C.drop_in_not_vxlan);
      l4 = l3 + hl;
      const l4Len = 40 + ip.payloadLength - hl;
      const un = parseUdp(frame, l4, ctx.udp, l3 + 40 + ip.payloadLength);
      if (un < 0) return codecDrop(ctx, ctx.inUdpDrop, un);
      if (ctx.udp.dstPort !== ctx.vxlanPort) return drop(ctx, C.drop_in_not_vxlan);
      peer = peerIndex6(t, ip.src);
      if (peer < 0) return drop(ctx, C.drop_in_unknown_source);
      // RFC 8200 8.1: the UDP checksum is mandatory over IPv6; a zero or wrong one is discarded
      if (ctx.udp.checksum === 0 || !verifyL4Checksum(frame, l4, l4Len, pseudoSumV6Bytes(frame, l3 + 8, l3 + 24, IPPROTO_UDP, l4Len))) {
        return drop(ctx, C.drop_in_bad_udp_checksum);
      }
      udpLen = ctx.udp.length;
    } else {
      return drop(ctx, C.drop_in_not_ip);
    }
  }
  ctx.lastPeer = peer;
  // A single-L2 fabric: a peer's VXLAN comes from the MAC its provider address resolves to, never from
  // a router's (a spoofed source routed in) or another node's on the segment (docs/security.md)
  if (ctx.sourceMacCheck) {
    const want = ctx.peerMacs[peer]!;
    if (want < 0) {
      if (!ctx.holdUnresolved) return drop(ctx, C.drop_in_source_unresolved);
      c[C.in_packets]!--; // counted when it is judged
      c[C.in_bytes]! -= counted;
      c[C.in_held]!++;
      return VERDICT_HOLD;
    }
    if (macKey(frame, 6) !== want) return drop(ctx, C.drop_in_spoofed_source);
  }
  const udpEnd = l4 + udpLen;
  // The VXLAN header and the inner EtherType, read here with parseVxlan's and readEtherType's checks (no
  // header objects filled and read back); anything else, a VLAN tag or an error, takes the codecs
  let vni: number;
  if (udpEnd - l4 >= 16 && udpEnd <= frame.length && (frame[l4 + 8]! & In.VXLAN_I) !== 0) {
    vni = (frame[l4 + 12]! << 16) | (frame[l4 + 13]! << 8) | frame[l4 + 14]!;
  } else {
    const vn = parseVxlan(frame, l4 + 8, ctx.vxlan, udpEnd);
    if (vn < 0) return codecDrop(ctx, ctx.inVxlanDrop, vn);
    vni = ctx.vxlan.vni;
  }
  const net = t.vnis.get(vni);
  if (net === undefined) {
    if (vni === LATENCY_ECHO_VNI) {
      // a MUX's latency echo (no network has VNI 0): its payload, for the daemon to answer
      ctx.udp.srcPort = (frame[l4]! << 8) | frame[l4 + 1]!; // the daemon answers to it
      ctx.outBuf = frame;
      ctx.outOff = l4 + 16;
      ctx.outLen = udpEnd - ctx.outOff;
      c[C.in_latency_echo]!++;
      return VERDICT_LOCAL;
    }
    return drop(ctx, C.drop_in_unknown_vni);
  }
  const ie = l4 + 16;
  let ien = 14;
  let type = udpEnd - ie >= 14 ? (frame[ie + 12]! << 8) | frame[ie + 13]! : -1;
  let vlanId: number = In.NO_VLAN;
  if (type !== In.IPV4 && type !== In.IPV6) {
    ien = readEtherType(frame, ie, ctx.ieth, udpEnd); // the destination MAC is read from the frame below
    if (ien < 0) return codecDrop(ctx, ctx.inInnerEthDrop, ien);
    type = ctx.ieth.etherType;
    vlanId = ctx.ieth.vlanId;
  }
  if (ctx.snat !== null && vlanId === In.NO_VLAN) {
    const v = snatIn(frame, ie, ie + ien, udpEnd, peer, net, type, vni, ctx); // outbound NAT's replies come before the VIP rules
    if (v >= 0) return v;
  }
  const nic = net.nicsByMac.get(frame, ie);
  if (nic === undefined) return drop(ctx, C.drop_in_unknown_mac);
  if (vlanId !== In.NO_VLAN) return drop(ctx, C.drop_in_inner_vlan);
  const il3 = ie + ien;
  let ipEnd: number;
  if (type === In.IPV4) {
    const n = inboundIpv4(frame, il3, udpEnd, nic, ctx);
    if (n < 0) return VERDICT_DROP;
    ipEnd = n;
  } else if (type === In.IPV6) {
    const n = inboundIpv6(frame, il3, udpEnd, nic, ctx);
    if (n < 0) return VERDICT_DROP;
    ipEnd = n;
  } else {
    return drop(ctx, C.drop_in_inner_not_ip);
  }
  // the frame leaves the port from the port's MAC (the backend's gateway), to the backend's MAC; written
  // out, not copyBytes's loop
  const pm = ctx.portMacs[nic.index]!;
  frame[ie + 6] = pm[0]!;
  frame[ie + 7] = pm[1]!;
  frame[ie + 8] = pm[2]!;
  frame[ie + 9] = pm[3]!;
  frame[ie + 10] = pm[4]!;
  frame[ie + 11] = pm[5]!;
  ctx.outBuf = frame;
  ctx.outOff = ie;
  ctx.outLen = ipEnd - ie;
  ctx.outPort = nic.index;
  if (nic.vlanId !== In.NO_VLAN) tagForPort(ctx, nic.vlanId); // a vlan network's trunk; the VXLAN header is the room
  c[C.in_delivered]!++;
  return In.FORWARD;
}

/**
 * Returns the end offset of the NATed packet, or -1 after counting a drop. The common packet, fused: an
 * IPv4 header without options or fragmentation with a correct checksum, TCP or UDP to a VIP:port this nic
 * has a rule for, its fields read once from the bytes into locals and NATed here (no header object, no
 * parser or natIpv4 call: V8's inlining budget left natIpv4's own helpers as calls). Anything else takes
 * inboundIpv4Full from the start: the same verdicts and drops.
 */
function inboundIpv4(frame: Uint8Array, l3: number, end: number, nic: HostNic, ctx: HostContext): number {
  // o is l3 bounded by a mask that keeps its value (an offset inside a frame): V8 then adds the offsets
  // below without an int32 overflow check and its branch (callgrind: about 2 instructions a byte read)
  const o = l3 & 0xfffff;
  if (o === l3 && end - o >= 20 && frame[o] === 0x45 && nic.addr4 >= 0) {
    const total = (frame[o + 2]! << 8) | frame[o + 3]!;
    const proto = frame[o + 9]!;
    const avail = total - 20; // the L4 bytes
    const l4 = o + 20;
    if (
      total <= end - o &&
      ((frame[o + 6]! & 0x3f) | frame[o + 7]!) === 0 && // neither MF nor a fragment offset
      (proto === In.TCP
        ? avail >= 20 && frame[l4 + 12]! >>> 4 >= 5 && (frame[l4 + 12]! >>> 4) * 4 <= avail
        : proto === In.UDP &&
          avail >= 8 &&
          ((frame[l4 + 4]! << 8) | frame[l4 + 5]!) >= 8 &&
          ((frame[l4 + 4]! << 8) | frame[l4 + 5]!) <= avail)
    ) {
      // the header's checksum, as in processInbound
      let sum =
        ((frame[o]! +
          frame[o + 2]! +
          frame[o + 4]! +
          frame[o + 6]! +
          frame[o + 8]! +
          frame[o + 10]! +
          frame[o + 12]! +
          frame[o + 14]! +
          frame[o + 16]! +
          frame[o + 18]!) <<
          8) +
        frame[o + 1]! +
        frame[o + 3]! +
        frame[o + 5]! +
        frame[o + 7]! +
        frame[o + 9]! +
        frame[o + 11]! +
        frame[o + 13]! +
        frame[o + 15]! +
        frame[o + 17]! +
        frame[o + 19]!;
      sum = (sum & 0xffff) + (sum >>> 16);
      sum = (sum & 0xffff) + (sum >>> 16);
      const dst = (frame[o + 16]! << 24) | (frame[o + 17]! << 16) | (frame[o + 18]! << 8) | frame[o + 19]!;
      const dport = (frame[l4 + 2]! << 8) | frame[l4 + 3]!;
      // no nic.vips4.has(dst) first: a rule of this nic for dst exists only when dst is one of its VIPs
      // (compileHostTables adds every rule's VIP to vips4), and a miss goes to inboundIpv4Full, which asks
      const rule = sum === 0xffff ? findRule4(nic, proto, dport, dst) : undefined;
      if (rule !== undefined) {
        const sport = (frame[l4]! << 8) | frame[l4 + 1]!;
        // only the TCP flags go to ctx.ports (dsrLearn4 reads them): no reader of its ports follows
        ctx.ports.tcpFlags = proto === In.TCP ? frame[l4 + 13]! : 0;
        // natIpv4(frame, l3, l4, proto, 16, dip, 2, backendPort), written out with its folds and byte
        // stores: its helpers' calls were past V8's inlining budget here
        const dip = rule.dip4;
        const bport = rule.backendPort;
        frame[o + 16] = dip >>> 24;
        frame[o + 17] = dip >>> 16;
        frame[o + 18] = dip >>> 8;
        frame[o + 19] = dip;
        const d = rule.inSum; // ~dst and dip's terms: dst is the rule's VIP
        let x = (~((frame[o + 10]! << 8) | frame[o + 11]!) & 0xffff) + d;
        x = (x & 0xffff) + (x >>> 16);
        x = ~((x & 0xffff) + (x >>> 16)) & 0xffff;
        frame[o + 10] = x >>> 8;
        frame[o + 11] = x;
        frame[l4 + 2] = bport >>> 8;
        frame[l4 + 3] = bport;
        const co = proto === In.TCP ? l4 + 16 : l4 + 6; // the L4 checksum
        const c0 = (frame[co]! << 8) | frame[co + 1]!;
        if (proto === In.TCP || c0 !== 0) {
          // RFC 768: a UDP datagram without a checksum keeps none; a computed 0 is sent as 0xffff
          x = (~c0 & 0xffff) + d + (~dport & 0xffff) + bport;
          x = (x & 0xffff) + (x >>> 16);
          x = ~((x & 0xffff) + (x >>> 16)) & 0xffff;
          if (x === 0 && proto !== In.TCP) x = 0xffff;
          frame[co] = x >>> 8;
          frame[co + 1] = x;
        }
        ctx.lastRule = rule;
        const client = (frame[o + 12]! << 24) | (frame[o + 13]! << 16) | (frame[o + 14]! << 8) | frame[o + 15]!;
        if (!rule.internal) dsrLearn4(ctx, nic.network.vni, dip, client, proto, bport, sport, rule.frontendPort);
        return o + total;
      }
    }
  }
  return inboundIpv4Full(frame, l3, end, nic, ctx);
}

/** inboundIpv4 for every packet: the codecs' parse and checks. */
function inboundIpv4Full(frame: Uint8Array, l3: number, end: number, nic: HostNic, ctx: HostContext): number {
  const C = ctx.counters.index;
  const ip = ctx.ip4;
  const hl = parseIpv4(frame, l3, ip, end);
  if (hl < 0) {
    codecDrop(ctx, ctx.inInnerIp4Drop, hl);
    return -1;
  }
  if (!ipv4ChecksumOk(frame, l3, ip)) {
    drop(ctx, C.drop_in_inner_ipv4_bad_checksum);
    return -1;
  }
  const dst = ip.dst;
  const proto = ip.protocol;
  const l4 = l3 + hl;
  const pEnd = l3 + ip.totalLength;
  if (nic.addr4 < 0 || !nic.vips4.has(dst)) return notVipOfNic4(ctx, dst, ip.src, nic, pEnd); // an internal VIP's reply, or a drop
  const fragment = isIpv4Fragment(ip);
  if (proto === IPPROTO_ICMP && !fragment) return icmpErrorIn4(frame, l3, l4, pEnd, dst, nic, ctx);
  if (fragment) ctx.counters.values[C.fragments]!++;
  if (ip.fragOffset !== 0) {
    // a later fragment: only the address changes (its L4 checksum lives in the first fragment)
    natIpv4(frame, l3, l4, proto, 16, nic.addr4, -1, 0);
    return pEnd;
  }
  if (proto !== IPPROTO_TCP && proto !== IPPROTO_UDP) {
    drop(ctx, C.drop_in_inner_not_tcp_udp);
    return -1;
  }
  const n = readL4Ports(frame, l4, pEnd, proto, fragment, ctx.ports);
  if (n < 0) {
    codecDrop(ctx, proto === IPPROTO_TCP ? ctx.inInnerTcpDrop : ctx.inInnerUdpDrop, n);
    return -1;
  }
  const dport = ctx.ports.dstPort;
  const rule = findRule4(nic, proto, dport, dst);
  if (rule === undefined) {
    drop(ctx, C.drop_in_no_rule);
    return -1;
  }
  natIpv4(frame, l3, l4, proto, 16, rule.dip.words[0]! | 0, 2, rule.backendPort);
  ctx.lastRule = rule;
  if (!rule.internal)
    dsrLearn4(ctx, nic.network.vni, rule.dip.words[0]! | 0, ip.src | 0, proto, rule.backendPort, ctx.ports.srcPort, rule.frontendPort);
  return pEnd;
}

/**
 * inboundIpv4's twin. The common packet, fused: no extension header, TCP or UDP to a VIP:port this nic has
 * a rule for, read from the bytes (only the addresses go to ctx.ip6, as parseIpv6 would leave them: the
 * rule's and the flow's lookups take them as words). Anything else takes inboundIpv6Full from the start.
 */
function inboundIpv6(frame: Uint8Array, l3: number, end: number, nic: HostNic, ctx: HostContext): number {
  const o = l3 & 0xfffff; // as in inboundIpv4: the offsets' sums without an overflow check
  if (o === l3 && end - o >= 40 && frame[o]! >>> 4 === 6 && nic.addr6 !== null) {
    const plen = (frame[o + 4]! << 8) | frame[o + 5]!; // the L4 bytes: no extension header
    const proto = frame[o + 6]!;
    const l4 = o + 40;
    if (
      40 + plen <= end - o &&
      (proto === In.TCP
        ? plen >= 20 && frame[l4 + 12]! >>> 4 >= 5 && (frame[l4 + 12]! >>> 4) * 4 <= plen
        : proto === In.UDP &&
          plen >= 8 &&
          ((frame[l4 + 4]! << 8) | frame[l4 + 5]!) >= 8 &&
          ((frame[l4 + 4]! << 8) | frame[l4 + 5]!) <= plen)
    ) {
      const dport = (frame[l4 + 2]! << 8) | frame[l4 + 3]!;
      // no hasVip6 first: as in inboundIpv4, a rule of this nic for dst means dst is one of its VIPs; the
      // destination's words are compared as read, not stored in ctx.ip6 (nothing after reads it there)
      const v0 = (frame[o + 24]! << 24) | (frame[o + 25]! << 16) | (frame[o + 26]! << 8) | frame[o + 27]!;
      const v1 = (frame[o + 28]! << 24) | (frame[o + 29]! << 16) | (frame[o + 30]! << 8) | frame[o + 31]!;
      const v2 = (frame[o + 32]! << 24) | (frame[o + 33]! << 16) | (frame[o + 34]! << 8) | frame[o + 35]!;
      const v3 = (frame[o + 36]! << 24) | (frame[o + 37]! << 16) | (frame[o + 38]! << 8) | frame[o + 39]!;
      // findRule6(nic, proto, dport, v0, v1, v2, v3), written out: inlined, it took the inlining budget
      // that the flow's lookup below needs (dsrLearnRule6: its key compare was a call, callgrind)
      let rule: NatRule | undefined;
      const list = nic.inbound.get((proto << 16) | dport);
      if (list !== undefined) {
        for (let i = 0; i < list.length; i++) {
          const r = list[i]!;
          const w = r.vip.words;
          if (r.family === 6 && (w[0]! | 0) === v0 && (w[1]! | 0) === v1 && (w[2]! | 0) === v2 && (w[3]! | 0) === v3) {
            rule = r;
            break;
          }
        }
      }
      if (rule !== undefined) {
        const sport = (frame[l4]! << 8) | frame[l4 + 1]!;
        ctx.ports.tcpFlags = proto === In.TCP ? frame[l4 + 13]! : 0; // as in inboundIpv4
        // the client's address, for the flow's key, as four words in locals (dsrLearnRule6)
        const c0 = (frame[o + 8]! << 24) | (frame[o + 9]! << 16) | (frame[o + 10]! << 8) | frame[o + 11]!;
        const c1 = (frame[o + 12]! << 24) | (frame[o + 13]! << 16) | (frame[o + 14]! << 8) | frame[o + 15]!;
        const c2 = (frame[o + 16]! << 24) | (frame[o + 17]! << 16) | (frame[o + 18]! << 8) | frame[o + 19]!;
        const c3 = (frame[o + 20]! << 24) | (frame[o + 21]! << 16) | (frame[o + 22]! << 8) | frame[o + 23]!;
        // the flow is recorded before the rewrite, which cannot fail from here and which it does not read:
        // the table's loads (a cache miss over thousands of flows) then overlap the stores below
        if (!rule.internal) dsrLearnRule6(ctx, rule, nic.network.vni, c0, c1, c2, c3, sport);
        // natIpv6(frame, l3, l4, proto, 24, dip, 2, backendPort), written out (its call was not inlined);
        // dst is the rule's VIP, so the address's checksum terms are the rule's (inSum)
        const dip = rule.dip.words;
        const bport = rule.backendPort;
        const a = o + 24;
        let n = dip[0]!;
        frame[a] = n >>> 24;
        frame[a + 1] = n >>> 16;
        frame[a + 2] = n >>> 8;
        frame[a + 3] = n;
        n = dip[1]!;
        frame[a + 4] = n >>> 24;
        frame[a + 5] = n >>> 16;
        frame[a + 6] = n >>> 8;
        frame[a + 7] = n;
        n = dip[2]!;
        frame[a + 8] = n >>> 24;
        frame[a + 9] = n >>> 16;
        frame[a + 10] = n >>> 8;
        frame[a + 11] = n;
        n = dip[3]!;
        frame[a + 12] = n >>> 24;
        frame[a + 13] = n >>> 16;
        frame[a + 14] = n >>> 8;
        frame[a + 15] = n;
        let x = rule.inSum;
        frame[l4 + 2] = bport >>> 8;
        frame[l4 + 3] = bport;
        const co = proto === In.TCP ? l4 + 16 : l4 + 6; // the L4 checksum
        x += (~((frame[co]! << 8) | frame[co + 1]!) & 0xffff) + (~dport & 0xffff) + bport;
        x = (x & 0xffff) + (x >>> 16);
        x = ~((x & 0xffff) + (x >>> 16)) & 0xffff;
        if (x === 0 && proto === In.UDP) x = 0xffff; // RFC 8200 8.1: zero is not allowed over IPv6
        frame[co] = x >>> 8;
        frame[co + 1] = x;
        ctx.lastRule = rule;
        return l4 + plen;
      }
    }
  }
  return inboundIpv6Full(frame, l3, end, nic, ctx);
}

/** inboundIpv6 for every packet: the codecs' parse and checks. */
function inboundIpv6Full(frame: Uint8Array, l3: number, end: number, nic: HostNic, ctx: HostContext): number {
  const C = ctx.counters.index;
  const ip = ctx.ip6;
  const hl = parseIpv6(frame, l3, ip, end);
  if (hl < 0) {
    codecDrop(ctx, ctx.inInnerIp6Drop, hl);
    return -1;
  }
  const proto = ip.protocol;
  const l4 = l3 + hl;
  const pEnd = l3 + 40 + ip.payloadLength;
  if (nic.addr6 === null || !hasVip6(nic, ip.dst)) return notVipOfNic6(ctx, nic, pEnd); // an internal VIP's reply, or a drop
  const fragment = isIpv6Fragment(ip);
  if (proto === IPPROTO_ICMPV6 && !ip.hasFragment) return icmpErrorIn6(frame, l3, l4, pEnd, nic, ctx);
  if (fragment) ctx.counters.values[C.fragments]!++;
  if (ip.hasFragment && ip.fragOffset !== 0) {
    // IPv6 has no header checksum: a later fragment only needs the new address
    for (let i = 0; i < 4; i++) writeU32(frame, l3 + 24 + i * 4, nic.addr6[i]!);
    return pEnd;
  }
  if (proto !== IPPROTO_TCP && proto !== IPPROTO_UDP) {
    drop(ctx, C.drop_in_inner_not_tcp_udp);
    return -1;
  }
  const n = readL4Ports(frame, l4, pEnd, proto, fragment, ctx.ports);
  if (n < 0) {
    codecDrop(ctx, proto === IPPROTO_TCP ? ctx.inInnerTcpDrop : ctx.inInnerUdpDrop, n);
    return -1;
  }
  const dport = ctx.ports.dstPort;
  const d = ip.dst;
  const rule = findRule6(nic, proto, dport, d[0]!, d[1]!, d[2]!, d[3]!);
  if (rule === undefined) {
    drop(ctx, C.drop_in_no_rule);
    return -1;
  }
  natIpv6(frame, l3, l4, proto, 24, rule.dip.words, 2, rule.backendPort);
  ctx.lastRule = rule;
  if (!rule.internal)
    dsrLearn6(ctx, nic.network.vni, rule.dip.words, ip.src, proto, rule.backendPort, ctx.ports.srcPort, rule.frontendPort);
  return pEnd;
}

/**
 * An ICMP error from the outside about a VIP flow (RFC 5508 4: NAT both the outer and the quoted headers).
 * The quoted packet is the DSR reply VIP:frontendPort -> client:port; it becomes DIP:backendPort ->
 * client:port, so the backend's stack finds its socket. Every rewrite updates the checksums it covers:
 * the outer IPv4 header's, the quoted IPv4 header's, the quoted TCP/UDP checksum when quoted, and the
 * ICMP checksum over all of them. Returns the end of the packet, or -1 after counting a drop.
 */
function icmpErrorIn4(frame: Uint8Array, l3: number, l4: number, end: number, vip: number, nic: HostNic, ctx: HostContext): number {
  const C = ctx.counters.index;
  if (end - l4 < 8 || !isIcmpError(frame[l4]!)) {
    drop(ctx, C.drop_in_inner_not_tcp_udp);
    return -1;
  }
  const q = ctx.qip4;
  const qoff = l4 + 8;
  const qhl = parseIpv4(frame, qoff, q, end, true);
  const ql4 = qoff + qhl;
  if (qhl < 0 || end - ql4 < 4 || q.fragOffset !== 0) {
    drop(ctx, C.drop_in_icmp_bad_quote);
    return -1;
  }
  if (q.src !== vip) {
    drop(ctx, C.drop_in_icmp_unrelated);
    return -1;
  }
  const qproto = q.protocol;
  if (qproto !== IPPROTO_TCP && qproto !== IPPROTO_UDP) {
    drop(ctx, C.drop_in_icmp_bad_quote);
    return -1;
  }
  const fport = readU16(frame, ql4);
  const rule = findRule4(nic, qproto, fport, vip);
  if (rule === undefined) {
    drop(ctx, C.drop_in_no_rule);
    return -1;
  }
  const dip = rule.dip.words[0]!;
  const bport = rule.backendPort;
  // the outer destination
  natIpv4(frame, l3, l4, IPPROTO_ICMP, 16, dip, -1, 0);
  // the quoted source address and its header checksum
  let icmpC = readU16(frame, l4 + 2);
  const qIpOld = readU16(frame, qoff + 10);
  const qIpNew = updateChecksum32(qIpOld, vip, dip);
  writeU32(frame, qoff + 12, dip);
  writeU16(frame, qoff + 10, qIpNew);
  icmpC = updateChecksum16(updateChecksum32(icmpC, vip, dip), qIpOld, qIpNew);
  // the quoted source port
  writeU16(frame, ql4, bport);
  icmpC = updateChecksum16(icmpC, fport, bport);
  // the quoted transport checksum, when the quote holds it
  const csOff = qproto === IPPROTO_TCP ? ql4 + 16 : ql4 + 6;
  if (end - csOff >= 2) {
    const old = readU16(frame, csOff);
    if (!(qproto === IPPROTO_UDP && old === 0)) {
      let n = updateChecksum16(updateChecksum32(old, vip, dip), fport, bport);
      if (qproto === IPPROTO_UDP && n === 0) n = 0xffff;
      writeU16(frame, csOff, n);
      icmpC = updateChecksum16(icmpC, old, n);
    }
  }
  writeU16(frame, l4 + 2, icmpC);
  ctx.counters.values[C.icmp_errors_in]!++;
  ctx.lastRule = rule;
  return end;
}

function icmpErrorIn6(frame: Uint8Array, l3: number, l4: number, end: number, nic: HostNic, ctx: HostContext): number {
  const C = ctx.counters.index;
  const type = end - l4 >= 8 ? frame[l4]! : 0;
  if (type < 1 || type > 4) {
    drop(ctx, C.drop_in_inner_not_tcp_udp);
    return -1;
  }
  const q = ctx.qip6;
  const qoff = l4 + 8;
  const qhl = parseIpv6(frame, qoff, q, end, true);
  const ql4 = qoff + qhl;
  if (qhl < 0 || end - ql4 < 4 || (q.hasFragment && q.fragOffset !== 0)) {
    drop(ctx, C.drop_in_icmp_bad_quote);
    return -1;
  }
  const vipw = ctx.ip6.dst;
  if (!ipv6Equal(q.src, vipw)) {
    drop(ctx, C.drop_in_icmp_unrelated);
    return -1;
  }
  const qproto = q.protocol;
  if (qproto !== IPPROTO_TCP && qproto !== IPPROTO_UDP) {
    drop(ctx, C.drop_in_icmp_bad_quote);
    return -1;
  }
  const fport = readU16(frame, ql4);
  const rule = findRule6(nic, qproto, fport, vipw[0]!, vipw[1]!, vipw[2]!, vipw[3]!);
  if (rule === undefined) {
    drop(ctx, C.drop_in_no_rule);
    return -1;
  }
  const dip = rule.dipBytes;
  const bport = rule.backendPort;
  // ICMPv6's checksum covers the pseudo-header: the outer destination, then every quoted word we change
  let icmpC = updateChecksumBytes(readU16(frame, l4 + 2), frame, l3 + 24, dip, 0, 16);
  copyBytes(dip, 0, frame, l3 + 24, 16);
  const csOff = qproto === IPPROTO_TCP ? ql4 + 16 : ql4 + 6;
  if (end - csOff >= 2) {
    const old = readU16(frame, csOff);
    let n = updateChecksum16(updateChecksumBytes(old, frame, qoff + 8, dip, 0, 16), fport, bport);
    if (qproto === IPPROTO_UDP && n === 0) n = 0xffff;
    writeU16(frame, csOff, n);
    icmpC = updateChecksum16(icmpC, old, n);
  }
  icmpC = updateChecksumBytes(icmpC, frame, qoff + 8, dip, 0, 16);
  copyBytes(dip, 0, frame, qoff + 8, 16);
  writeU16(frame, ql4, bport);
  icmpC = updateChecksum16(icmpC, fport, bport);
  writeU16(frame, l4 + 2, icmpC);
  ctx.counters.values[C.icmp_errors_in]!++;
  ctx.lastRule = rule;
  return end;
}

// ---------------------------------------------------------------------------------------------
// Outbound

/** Processes a frame the backend of nic `port` sent; see the file comment. */
export function processOutbound(frame: Uint8Array, len: number, port: number, ctx: HostContext): number {
  const c = ctx.counters.values;
  const C = ctx.counters.index;
  c[C.out_packets]!++;
  c[C.out_bytes]! += len;
  ctx.lastDrop = -1;
  ctx.lastRule = null;
  if (len > frame.length) len = frame.length;
  const nic = ctx.tables.nics[port];
  if (nic === undefined) return drop(ctx, C.drop_internal_error);
  // the common IPv4 reply, fused (outFast4): an untagged frame on an untagged port, from a port some public
  // VIP rule has as its backend port (read where it is without IP options). IPv6 has no such path: its
  // twin counted 23 % fewer instructions but timed 7-17 % slower (docs/performance.md)
  if (nic.vlanId === VLAN_NONE && len >= 42 && frame[12] === 0x08 && frame[13] === 0x00) {
    const p = (frame[34]! << 8) | frame[35]!;
    if ((nic.replyPorts[p >>> 5]! & (1 << (p & 31))) !== 0) {
      const f = outFast4(frame, len, nic, ctx);
      if (f !== FAST_MISS) return f === VERDICT_FORWARD && ctx.outPort >= 0 ? replyToPort(ctx) : f;
    }
  }
  const l3 = readEtherType(frame, 0, ctx.eth, len); // the MACs are not needed
  if (l3 < 0) return codecDrop(ctx, ctx.outEthDrop, l3);
  // the port's own VLAN (a vlan network's trunk) or none (VLAN_NONE); the headers after it start at l3
  if (ctx.eth.vlanId !== nic.vlanId) return dropVlanMismatch(ctx, nic.vlanId);
  const type = ctx.eth.etherType;
  let v: number;
  if (type === ETHERTYPE_IPV4) v = outboundIpv4(frame, len, l3, nic, ctx);
  else if (type === ETHERTYPE_IPV6) v = outboundIpv6(frame, len, l3, nic, ctx);
  else if (type === ETHERTYPE_ARP) v = answerArp(frame, len, l3, nic, ctx);
  else return drop(ctx, C.drop_out_not_ip);
  // a frame for a port (an ARP or ND answer, an ICMP error, a local delivery) carries that port's tag
  if (v === VERDICT_FORWARD && ctx.outPort >= 0) return replyToPort(ctx);
  return v;
}

/** outFast4: not the common reply; nothing was written or counted, the general path takes it. */
const FAST_MISS = -1;

/**
 * outboundIpv4 for the common reply, fused (as inboundIpv4): an IPv4 header without options or
 * fragmentation with a correct checksum, from the nic's own address, not to its gateway, TCP or UDP from
 * a public VIP rule's backend port, of a recorded flow (dsrAllowed4), its fields read once from the bytes
 * into locals and NATed DIP:backendPort -> VIP:frontendPort here with the rule's precomputed address terms
 * (NatRule.dsrSum: the source was checked to be the DIP). Anything else, or any check failing, returns
 * FAST_MISS having changed nothing (no header object filled, no counter), and outboundIpv4 takes the frame
 * from the start: the same verdicts and drops. A reply of no recorded flow is looked up there again; the
 * first lookup changed nothing the second sees (an expired entry it removed is absent either way).
 */
function outFast4(frame: Uint8Array, len: number, nic: HostNic, ctx: HostContext): number {
  const addr = nic.addr4;
  if (frame[14] !== 0x45 || addr < 0) return FAST_MISS;
  const total = (frame[16]! << 8) | frame[17]!;
  const proto = frame[23]!;
  const avail = total - 20; // the L4 bytes
  const l4 = 34;
  if (
    total > len - 14 ||
    ((frame[20]! & 0x3f) | frame[21]!) !== 0 || // MF or a fragment offset
    !(proto === In.TCP
      ? avail >= 20 && frame[l4 + 12]! >>> 4 >= 5 && (frame[l4 + 12]! >>> 4) * 4 <= avail
      : proto === In.UDP &&
        avail >= 8 &&
        ((frame[l4 + 4]! << 8) | frame[l4 + 5]!) >= 8 &&
        ((frame[l4 + 4]! << 8) | frame[l4 + 5]!) <= avail) ||
    readU32(frame, 26) !== addr
  )
    return FAST_MISS;
  const sport = (frame[l4]! << 8) | frame[l4 + 1]!;
  const rule = nic.outbound.get(((4 << 24) | (proto << 16) | sport) >>> 0);
  if (rule === undefined) return FAST_MISS; // a port of another protocol's or family's rule
  const dst = readU32(frame, 30);
  if (dst === nic.network.gateway4) return FAST_MISS; // local
  // the header's checksum (RFC 1071: the ten words sum to 0xffff), written out as in processInbound
  let sum =
    ((frame[14]! + frame[16]! + frame[18]! + frame[20]! + frame[22]! + frame[24]! + frame[26]! + frame[28]! + frame[30]! + frame[32]!) <<
      8) +
    frame[15]! +
    frame[17]! +
    frame[19]! +
    frame[21]! +
    frame[23]! +
    frame[25]! +
    frame[27]! +
    frame[29]! +
    frame[31]! +
    frame[33]!;
  sum = (sum & 0xffff) + (sum >>> 16);
  sum = (sum & 0xffff) + (sum >>> 16);
  if (sum !== 0xffff) return FAST_MISS;
  const dport = (frame[l4 + 2]! << 8) | frame[l4 + 3]!;
  const ports = ctx.ports;
  ports.srcPort = sport;
  ports.dstPort = dport;
  ports.tcpFlags = proto === In.TCP ? frame[l4 + 13]! : 0;
  if (dsrAllowed4(ctx, nic.network.vni, addr | 0, dst | 0, proto, sport, dport) < 0) return FAST_MISS;
  if (total > ctx.dsrMtu) return tooBigForDsr(frame, 14, 14 + total, true, nic, ctx);
  // natIpv4(frame, 14, 34, proto, 12, vip, 0, frontendPort), written out with the rule's address terms
  const vip = rule.vip.words[0]! | 0;
  const fport = rule.frontendPort;
  const d = rule.dsrSum;
  frame[26] = vip >>> 24;
  frame[27] = vip >>> 16;
  frame[28] = vip >>> 8;
  frame[29] = vip;
  let x = (~((frame[24]! << 8) | frame[25]!) & 0xffff) + d;
  x = (x & 0xffff) + (x >>> 16);
  x = ~((x & 0xffff) + (x >>> 16)) & 0xffff;
  frame[24] = x >>> 8;
  frame[25] = x;
  frame[l4] = fport >>> 8;
  frame[l4 + 1] = fport;
  const co = proto === In.TCP ? l4 + 16 : l4 + 6; // the L4 checksum
  const c0 = (frame[co]! << 8) | frame[co + 1]!;
  if (proto === In.TCP || c0 !== 0) {
    // RFC 768: a UDP datagram without a checksum keeps none; a computed 0 is sent as 0xffff
    x = (~c0 & 0xffff) + d + (~sport & 0xffff) + fport;
    x = (x & 0xffff) + (x >>> 16);
    x = ~((x & 0xffff) + (x >>> 16)) & 0xffff;
    if (x === 0 && proto !== In.TCP) x = 0xffff;
    frame[co] = x >>> 8;
    frame[co + 1] = x;
  }
  ctx.lastRule = rule;
  return dsr(ctx, frame, 14, 14 + total);
}

/** A frame on a port whose VLAN it does not match: a tag on an untagged port, none or another on a trunk. */
function dropVlanMismatch(ctx: HostContext, want: number): number {
  const C = ctx.counters.index;
  const why = vlanMismatchReason(want, ctx.eth.vlanId);
  return drop(
    ctx,
    why === VLAN_TAG_MISSING ? C.drop_out_vlan_missing_tag : why === VLAN_TAG_WRONG ? C.drop_out_vlan_wrong_tag : C.drop_out_vlan,
  );
}

/** Tags ctx.out* for its port when that port is a vlan network's trunk; false: no room for the tag. */
function tagForPort(ctx: HostContext, vid: number): boolean {
  const off = pushVlanTag(ctx.outBuf, ctx.outOff, ctx.outLen, vid);
  if (off < 0) return false;
  ctx.outOff = off;
  ctx.outLen += ETH_VLAN_TAG_LEN;
  return true;
}

function replyToPort(ctx: HostContext): number {
  const vid = ctx.tables.nics[ctx.outPort]?.vlanId ?? VLAN_NONE;
  if (vid === VLAN_NONE || tagForPort(ctx, vid)) return VERDICT_FORWARD;
  return drop(ctx, ctx.counters.index.drop_out_vlan_no_room);
}

function answerArp(frame: Uint8Array, len: number, l3: number, nic: HostNic, ctx: HostContext): number {
  const C = ctx.counters.index;
  const a = ctx.arp;
  const n = parseArp(frame, l3, a, len);
  if (n < 0) return codecDrop(ctx, ctx.outArpDrop, n);
  const gw = nic.network.gateway4;
  if (a.op !== ARP_OP_REQUEST || gw < 0 || a.targetIp !== gw) return drop(ctx, C.drop_out_arp_ignored);
  // RFC 826: the reply goes to the asker, with the gateway's address at the port's MAC
  const r = ctx.reply;
  const pm = ctx.portMacs[nic.index]!;
  writeEthernetRaw(a.senderMac, pm, ETHERTYPE_ARP, r, 0);
  writeU16(r, 14, 1);
  writeU16(r, 16, ETHERTYPE_IPV4);
  r[18] = 6;
  r[19] = 4;
  writeU16(r, 20, ARP_OP_REPLY);
  copyBytes(pm, 0, r, 22, 6);
  writeU32(r, 28, gw);
  copyBytes(a.senderMac, 0, r, 32, 6);
  writeU32(r, 38, a.senderIp);
  ctx.outBuf = r;
  ctx.outOff = 0;
  ctx.outLen = 14 + ARP_LEN;
  ctx.outPort = nic.index;
  ctx.counters.values[C.arp_replies]!++;
  return VERDICT_FORWARD;
}

function outboundIpv4(frame: Uint8Array, len: number, l3: number, nic: HostNic, ctx: HostContext): number {
  const C = ctx.counters.index;
  const ip = ctx.ip4;
  const hl = parseIpv4(frame, l3, ip, len);
  if (hl < 0) return codecDrop(ctx, ctx.outIp4Drop, hl);
  if (!ipv4ChecksumOk(frame, l3, ip)) return drop(ctx, C.drop_out_ipv4_bad_checksum);
  if (ip.src !== nic.addr4 || nic.addr4 < 0) return drop(ctx, C.drop_out_spoofed_source);
  const proto = ip.protocol;
  const l4 = l3 + hl;
  const end = l3 + ip.totalLength;
  if (ip.dst === nic.network.gateway4) return local(ctx, frame, l3, end, nic.index);
  const fragment = isIpv4Fragment(ip);
  if (fragment) ctx.counters.values[C.fragments]!++;
  if (ip.fragOffset !== 0) {
    const vip = nic.fragmentVip.get((4 << 8) | proto);
    if (vip == null) return drop(ctx, C.drop_out_fragment_no_rule);
    natIpv4(frame, l3, l4, proto, 12, vip.words[0]!, -1, 0);
    return dsr(ctx, frame, l3, end);
  }
  if (proto !== IPPROTO_TCP && proto !== IPPROTO_UDP) {
    if (proto === IPPROTO_ICMP && !fragment) return icmpErrorOut4(frame, l3, l4, end, nic, ctx);
    return drop(ctx, C.drop_out_not_lb_reply);
  }
  const n = readL4Ports(frame, l4, end, proto, fragment, ctx.ports);
  if (n < 0) return codecDrop(ctx, proto === IPPROTO_TCP ? ctx.outTcpDrop : ctx.outUdpDrop, n);
  const sport = ctx.ports.srcPort;
  const rule = nic.outbound.get(((4 << 24) | (proto << 16) | sport) >>> 0);
  if (rule === undefined) return eastWestOut4(frame, l3, nic, ctx); // east-west (docs/east-west.md), or not_lb_reply
  // addresses go to calls as int32 (`| 0`): an unsigned one from 128.0.0.0 up is a heap number in V8,
  // allocated for each call not inlined (callgrind, host-out udp4 reply: about 150 instructions fewer)
  if (dsrAllowed4(ctx, nic.network.vni, ip.src | 0, ip.dst | 0, proto, sport, ctx.ports.dstPort) < 0)
    return notRecordedFlow(frame, l3, end, nic, ctx);
  if (end - l3 > ctx.dsrMtu) return tooBigForDsr(frame, l3, end, true, nic, ctx);
  natIpv4(frame, l3, l4, proto, 12, rule.vip.words[0]! | 0, 0, rule.frontendPort);
  ctx.lastRule = rule;
  return dsr(ctx, frame, l3, end);
}

function outboundIpv6(frame: Uint8Array, len: number, l3: number, nic: HostNic, ctx: HostContext): number {
  const C = ctx.counters.index;
  const ip = ctx.ip6;
  const hl = parseIpv6(frame, l3, ip, len);
  if (hl < 0) return codecDrop(ctx, ctx.outIp6Drop, hl);
  const proto = ip.protocol;
  const l4 = l3 + hl;
  const end = l3 + 40 + ip.payloadLength;
  if (proto === In.ICMPV6 && !ip.hasFragment) {
    // RFC 4443: types 1-4 are errors (a backend's about a flow goes out translated), the rest is ND or not ours
    const t = end - l4 >= 8 ? frame[l4]! : 0;
    if (t >= 1 && t <= 4 && nic.addr6 !== null && ipv6Equal(ip.src, nic.addr6)) return icmpErrorOut6(frame, l3, l4, end, nic, ctx);
    return answerNd(frame, l3, l4, end, nic, ctx);
  }
  if (nic.addr6 === null || !ipv6Equal(ip.src, nic.addr6)) return drop(ctx, C.drop_out_spoofed_source);
  const gw6 = nic.network.gateway6;
  if (gw6 !== null && ipv6Equal(ip.dst, gw6)) return local(ctx, frame, l3, end, nic.index);
  const fragment = isIpv6Fragment(ip);
  if (fragment) ctx.counters.values[C.fragments]!++;
  if (ip.hasFragment && ip.fragOffset !== 0) {
    const vip = nic.fragmentVip.get((6 << 8) | proto);
    if (vip == null) return drop(ctx, C.drop_out_fragment_no_rule);
    for (let i = 0; i < 4; i++) writeU32(frame, l3 + 8 + i * 4, vip.words[i]!);
    return dsr(ctx, frame, l3, end);
  }
  if (proto !== In.TCP && proto !== In.UDP) return drop(ctx, C.drop_out_not_lb_reply);
  const n = readL4Ports(frame, l4, end, proto, fragment, ctx.ports);
  if (n < 0) return codecDrop(ctx, proto === In.TCP ? ctx.outTcpDrop : ctx.outUdpDrop, n);
  const sport = ctx.ports.srcPort;
  const rule = nic.outbound.get(((6 << 24) | (proto << 16) | sport) >>> 0);
  if (rule === undefined) return eastWestOut6(frame, l3, nic, ctx);
  if (dsrAllowed6(ctx, nic.network.vni, ip.src, ip.dst, proto, sport, ctx.ports.dstPort) < 0)
    return notRecordedFlow(frame, l3, end, nic, ctx);
  if (end - l3 > ctx.dsrMtu) return tooBigForDsr(frame, l3, end, false, nic, ctx);
  natIpv6Sum(frame, l3, l4, proto, rule.vip.words, rule.dsrSum, rule.frontendPort); // the source checked: the DIP
  ctx.lastRule = rule;
  return dsr(ctx, frame, l3, end);
}

/**
 * A reply too big for the DSR return. The backend's own MTU is larger than the path to the router, so
 * answer it as its gateway router would: ICMP fragmentation needed (RFC 1191) or ICMPv6 packet too big
 * (RFC 8201) from the gateway address, quoting the packet as the backend sent it, on its port. Without DF
 * (IPv4) the packet could be fragmented, which the raw socket does not do: counted as out_too_big.
 */
function tooBigForDsr(frame: Uint8Array, l3: number, end: number, v4: boolean, nic: HostNic, ctx: HostContext): number {
  const C = ctx.counters.index;
  const len = end - l3;
  const r = ctx.reply;
  const pm = ctx.portMacs[nic.index]!;
  writeEthernetRaw(nic.mac, pm, v4 ? ETHERTYPE_IPV4 : ETHERTYPE_IPV6, r, 0);
  const e = 14;
  if (v4) {
    const gw = nic.network.gateway4;
    if ((frame[l3 + 6]! & (IPV4_FLAG_DF << 5)) === 0 || gw < 0) return drop(ctx, C.drop_out_too_big);
    const quote = Math.min(len, 576 - 28);
    r[e] = 0x45;
    r[e + 1] = 0;
    writeU16(r, e + 2, 28 + quote);
    writeU32(r, e + 4, 0);
    r[e + 8] = 64;
    r[e + 9] = IPPROTO_ICMP;
    writeU16(r, e + 10, 0);
    writeU32(r, e + 12, gw);
    copyBytes(frame, l3 + 12, r, e + 16, 4);
    writeU16(r, e + 10, finishChecksum(sumBytes(r, e, 20, 0)));
    const icmp = e + 20;
    r[icmp] = ICMP_DEST_UNREACH;
    r[icmp + 1] = ICMP_CODE_FRAG_NEEDED;
    writeU16(r, icmp + 2, 0);
    writeU16(r, icmp + 4, 0);
    writeU16(r, icmp + 6, ctx.dsrMtu);
    copyBytes(frame, l3, r, icmp + 8, quote);
    writeU16(r, icmp + 2, l4Checksum(r, icmp, 8 + quote, 2, 0));
    ctx.outLen = e + 28 + quote;
  } else {
    const gw = nic.network.gateway6;
    if (gw === null) return drop(ctx, C.drop_out_too_big);
    const quote = Math.min(len, 1280 - 48);
    writeU32(r, e, 0x60000000);
    writeU16(r, e + 4, 8 + quote);
    r[e + 6] = IPPROTO_ICMPV6;
    r[e + 7] = 64;
    for (let i = 0; i < 4; i++) writeU32(r, e + 8 + i * 4, gw[i]!);
    copyBytes(frame, l3 + 8, r, e + 24, 16);
    const icmp = e + 40;
    r[icmp] = 2;
    r[icmp + 1] = 0;
    writeU16(r, icmp + 2, 0);
    writeU32(r, icmp + 4, ctx.dsrMtu);
    copyBytes(frame, l3, r, icmp + 8, quote);
    writeU16(r, icmp + 2, l4Checksum(r, icmp, 8 + quote, 2, pseudoSumV6Bytes(r, e + 8, e + 24, IPPROTO_ICMPV6, 8 + quote)));
    ctx.outLen = e + 48 + quote;
  }
  ctx.outBuf = r;
  ctx.outOff = 0;
  ctx.outPort = nic.index;
  ctx.counters.values[C.icmp_too_big_sent]!++;
  return VERDICT_FORWARD;
}

/**
 * A backend packet from a public VIP rule's backend port (or an ICMP error about one) that belongs to no
 * recorded load-balanced flow (host-agent/dsr-flows.ts): it never leaves from the VIP. The one place
 * where outbound NAT (a backend's own connections, from its outbound frontend) takes such a packet over;
 * without it, dropped and counted. frame[l3 .. end) is the IP packet as the backend sent it (ctx.ip4 or
 * ctx.ip6 and ctx.ports parsed).
 */
function notRecordedFlow(frame: Uint8Array, l3: number, end: number, nic: HostNic, ctx: HostContext): number {
  return snatOut(frame, l3, end, nic, ctx, ctx.counters.index.drop_out_dsr_unsolicited);
}

/**
 * Outbound NAT, out (docs/outbound.md): a backend's packet that is no reply to a load-balanced flow. On
 * a nic an outbound rule serves, the engine gives it the nic's frontend IP:port (a new flow on a TCP SYN
 * or any UDP datagram) and it leaves toward the router like a DSR reply; refused, dropped under the
 * engine's reason. On another nic: dropped under `otherwise` (drop_out_dsr_unsolicited or
 * drop_out_not_lb_reply, as without outbound NAT). ICMP errors are never translated (not_lb_reply).
 */
export function snatOut(frame: Uint8Array, l3: number, end: number, nic: HostNic, ctx: HostContext, otherwise: number): number {
  const s = ctx.snat;
  if (s === null || !s.serves(nic.index)) return drop(ctx, otherwise);
  const v4 = frame[l3]! >>> 4 === 4;
  const proto = v4 ? ctx.ip4.protocol : ctx.ip6.protocol;
  if (proto !== IPPROTO_TCP && proto !== IPPROTO_UDP) return drop(ctx, otherwise);
  if (end - l3 > ctx.dsrMtu) return tooBigForDsr(frame, l3, end, v4, nic, ctx);
  const r = v4 ? s.out4(frame, l3, end, nic.index, ctx.ew.nowS) : s.out6(frame, l3, end, nic.index, ctx.ew.nowS);
  if (r < 0) return drop(ctx, snatDropOf(ctx, r));
  ctx.outBuf = frame;
  ctx.outOff = l3;
  ctx.outLen = end - l3;
  ctx.outPort = OUT_DSR;
  ctx.counters.values[ctx.counters.index.out_snat]!++;
  return VERDICT_FORWARD;
}

function snatDropOf(ctx: HostContext, r: number): number {
  const i = ctx.snatDrop[-r] ?? -1;
  return i >= 0 ? i : ctx.counters.index.drop_internal_error;
}

/**
 * Outbound NAT, back: the inner frame at ie (IP header at il3, EtherType `type`) of VXLAN from `peer` in
 * network `net` (VNI `vni`).
 * Its destination is no frontend IP: -1 (not ours; the VIP rules judge it). A frontend IP: the engine
 * finds the flow by (remote, frontend IP:port), checks that the VXLAN VNI is the flow's, rewrites the
 * destination to DIP:port, and the frame is delivered on the flow's nic's port. A frontend IP that is
 * also a VIP of a nic in this VNI (the inner MAC names it) and has no flow: -1, the VIP rules judge it.
 */
function snatIn(
  frame: Uint8Array,
  ie: number,
  il3: number,
  end: number,
  peer: number,
  net: HostNetwork,
  type: number,
  vni: number,
  ctx: HostContext,
): number {
  const t = ctx.tables;
  const C = ctx.counters.index;
  const s = ctx.snat!;
  let r: number;
  if (type === ETHERTYPE_IPV4) {
    if (t.snatFrontends4.size === 0 || end - il3 < 20 || !t.snatFrontends4.has(readU32(frame, il3 + 16))) return -1;
    const ip = ctx.ip4;
    const hl = parseIpv4(frame, il3, ip, end);
    if (hl < 0) return codecDrop(ctx, ctx.inInnerIp4Drop, hl);
    if (!ipv4ChecksumOk(frame, il3, ip)) return drop(ctx, C.drop_in_inner_ipv4_bad_checksum);
    if (t.peers[peer]?.kind !== 'mux') return drop(ctx, C.drop_in_snat_not_mux);
    end = il3 + ip.totalLength;
    r = s.in4(frame, il3, end, ctx.ew.nowS, vni);
  } else if (type === ETHERTYPE_IPV6) {
    if (t.snatFrontends6.length === 0 || end - il3 < 40 || !isSnatFrontend6(t.snatFrontends6, frame, il3 + 24)) return -1;
    const ip = ctx.ip6;
    const hl = parseIpv6(frame, il3, ip, end);
    if (hl < 0) return codecDrop(ctx, ctx.inInnerIp6Drop, hl);
    if (t.peers[peer]?.kind !== 'mux') return drop(ctx, C.drop_in_snat_not_mux);
    if (ip.hasFragment) return drop(ctx, C.drop_snat_fragment);
    end = il3 + 40 + ip.payloadLength;
    r = s.in6(frame, il3, end, ctx.ew.nowS, vni);
  } else return -1;
  if (r === SNAT_ERR_NOT_OURS) {
    // a frontend IP that is also a VIP of the nic the inner MAC names: its rules' traffic (their ports lie
    // outside every range). The MUX writes the nic's MAC into every reply it forwards by the range table,
    // so the MAC alone would send every reply without a flow to the VIP rules (drop_in_not_vip_of_vni).
    const vn = net.nicsByMac.get(frame, ie);
    if (vn !== undefined && (type === ETHERTYPE_IPV4 ? vn.vips4.has(ctx.ip4.dst) : hasVip6(vn, ctx.ip6.dst))) return -1;
  }
  if (r < 0) return drop(ctx, snatDropOf(ctx, r));
  const nic = t.nics[s.slotNic(r)];
  if (nic === undefined) return drop(ctx, C.drop_internal_error);
  // to the backend's MAC, from the port's MAC (its gateway)
  copyBytes(nic.mac, 0, frame, ie, 6);
  copyBytes(ctx.portMacs[nic.index]!, 0, frame, ie + 6, 6);
  ctx.outBuf = frame;
  ctx.outOff = ie;
  ctx.outLen = end - ie;
  ctx.outPort = nic.index;
  if (nic.vlanId !== VLAN_NONE) tagForPort(ctx, nic.vlanId);
  ctx.counters.values[C.in_snat]!++;
  ctx.counters.values[C.in_delivered]!++;
  return VERDICT_FORWARD;
}

function isSnatFrontend6(list: readonly Uint32Array[], frame: Uint8Array, off: number): boolean {
  const a = readU32(frame, off);
  for (const w of list)
    if (w[0] === a && w[1] === readU32(frame, off + 4) && w[2] === readU32(frame, off + 8) && w[3] === readU32(frame, off + 12))
      return true;
  return false;
}

/**
 * An ICMP error a backend sends to a client about a packet of a recorded flow (RFC 5508 4, the mirror of
 * icmpErrorIn4): the outer source DIP -> VIP, the quoted destination DIP:backendPort -> VIP:frontendPort,
 * the quoted IP and transport checksums and the ICMP checksum updated, then out by DSR. An error about
 * no recorded flow is unsolicited like any other backend packet.
 */
function icmpErrorOut4(frame: Uint8Array, l3: number, l4: number, end: number, nic: HostNic, ctx: HostContext): number {
  const C = ctx.counters.index;
  if (end - l4 < 8 || !isIcmpError(frame[l4]!)) return drop(ctx, C.drop_out_not_lb_reply);
  const q = ctx.qip4;
  const qoff = l4 + 8;
  const qhl = parseIpv4(frame, qoff, q, end, true);
  const ql4 = qoff + qhl;
  if (qhl < 0 || end - ql4 < 4 || q.fragOffset !== 0) return drop(ctx, C.drop_out_icmp_bad_quote);
  const qproto = q.protocol;
  const dip = nic.addr4;
  if ((qproto !== IPPROTO_TCP && qproto !== IPPROTO_UDP) || q.dst !== dip || q.src !== ctx.ip4.dst)
    return drop(ctx, C.drop_out_icmp_bad_quote);
  const cport = readU16(frame, ql4);
  const bport = readU16(frame, ql4 + 2);
  const rule = nic.outbound.get(((4 << 24) | (qproto << 16) | bport) >>> 0);
  if (rule === undefined) return drop(ctx, C.drop_out_not_lb_reply);
  if (dsrPeek4(ctx, nic.network.vni, dip, q.src, qproto, bport, cport) < 0) return notRecordedFlow(frame, l3, end, nic, ctx);
  const vip = rule.vip.words[0]!;
  const fport = rule.frontendPort;
  // the outer source (ICMP's checksum has no pseudo-header)
  natIpv4(frame, l3, l4, IPPROTO_ICMP, 12, vip, -1, 0);
  // the quoted destination address and its header checksum
  let icmpC = readU16(frame, l4 + 2);
  const qIpOld = readU16(frame, qoff + 10);
  const qIpNew = updateChecksum32(qIpOld, dip, vip);
  writeU32(frame, qoff + 16, vip);
  writeU16(frame, qoff + 10, qIpNew);
  icmpC = updateChecksum16(updateChecksum32(icmpC, dip, vip), qIpOld, qIpNew);
  // the quoted destination port
  writeU16(frame, ql4 + 2, fport);
  icmpC = updateChecksum16(icmpC, bport, fport);
  // the quoted transport checksum, when the quote holds it
  const csOff = qproto === IPPROTO_TCP ? ql4 + 16 : ql4 + 6;
  if (end - csOff >= 2) {
    const old = readU16(frame, csOff);
    if (!(qproto === IPPROTO_UDP && old === 0)) {
      let n = updateChecksum16(updateChecksum32(old, dip, vip), bport, fport);
      if (qproto === IPPROTO_UDP && n === 0) n = 0xffff;
      writeU16(frame, csOff, n);
      icmpC = updateChecksum16(icmpC, old, n);
    }
  }
  writeU16(frame, l4 + 2, icmpC);
  ctx.counters.values[C.icmp_errors_out]!++;
  ctx.lastRule = rule;
  return dsr(ctx, frame, l3, end);
}

function icmpErrorOut6(frame: Uint8Array, l3: number, l4: number, end: number, nic: HostNic, ctx: HostContext): number {
  const C = ctx.counters.index;
  const q = ctx.qip6;
  const qoff = l4 + 8;
  const qhl = parseIpv6(frame, qoff, q, end, true);
  const ql4 = qoff + qhl;
  if (qhl < 0 || end - ql4 < 4 || (q.hasFragment && q.fragOffset !== 0)) return drop(ctx, C.drop_out_icmp_bad_quote);
  const qproto = q.protocol;
  const dipw = nic.addr6!;
  if ((qproto !== IPPROTO_TCP && qproto !== IPPROTO_UDP) || !ipv6Equal(q.dst, dipw) || !ipv6Equal(q.src, ctx.ip6.dst)) {
    return drop(ctx, C.drop_out_icmp_bad_quote);
  }
  const cport = readU16(frame, ql4);
  const bport = readU16(frame, ql4 + 2);
  const rule = nic.outbound.get(((6 << 24) | (qproto << 16) | bport) >>> 0);
  if (rule === undefined) return drop(ctx, C.drop_out_not_lb_reply);
  if (dsrPeek6(ctx, nic.network.vni, dipw, q.src, qproto, bport, cport) < 0) return notRecordedFlow(frame, l3, end, nic, ctx);
  const vip = rule.vipBytes;
  const fport = rule.frontendPort;
  // ICMPv6's checksum covers the pseudo-header: the outer source, then every quoted word we change
  let icmpC = updateChecksumBytes(readU16(frame, l4 + 2), frame, l3 + 8, vip, 0, 16);
  copyBytes(vip, 0, frame, l3 + 8, 16);
  const csOff = qproto === IPPROTO_TCP ? ql4 + 16 : ql4 + 6;
  if (end - csOff >= 2) {
    const old = readU16(frame, csOff);
    let n = updateChecksum16(updateChecksumBytes(old, frame, qoff + 24, vip, 0, 16), bport, fport);
    if (qproto === IPPROTO_UDP && n === 0) n = 0xffff;
    writeU16(frame, csOff, n);
    icmpC = updateChecksum16(icmpC, old, n);
  }
  icmpC = updateChecksumBytes(icmpC, frame, qoff + 24, vip, 0, 16);
  copyBytes(vip, 0, frame, qoff + 24, 16);
  writeU16(frame, ql4 + 2, fport);
  icmpC = updateChecksum16(icmpC, bport, fport);
  writeU16(frame, l4 + 2, icmpC);
  ctx.counters.values[C.icmp_errors_out]!++;
  ctx.lastRule = rule;
  return dsr(ctx, frame, l3, end);
}

function local(ctx: HostContext, frame: Uint8Array, l3: number, end: number, port: number): number {
  ctx.outBuf = frame;
  ctx.outOff = l3;
  ctx.outLen = end - l3;
  ctx.outPort = port;
  ctx.counters.values[ctx.counters.index.out_local]!++;
  return VERDICT_LOCAL;
}

function dsr(ctx: HostContext, frame: Uint8Array, l3: number, end: number): number {
  ctx.outBuf = frame;
  ctx.outOff = l3;
  ctx.outLen = end - l3;
  ctx.outPort = OUT_DSR;
  ctx.counters.values[ctx.counters.index.out_dsr]!++;
  return VERDICT_FORWARD;
}

/** RFC 4861 7.2.4: a neighbour solicitation for the network's IPv6 gateway gets an advertisement from the port. */
function answerNd(frame: Uint8Array, l3: number, l4: number, end: number, nic: HostNic, ctx: HostContext): number {
  const C = ctx.counters.index;
  const gw = nic.network.gateway6;
  if (end - l4 < 8 || frame[l4] !== ICMPV6_NEIGHBOR_SOLICIT || gw === null) return drop(ctx, C.drop_out_icmpv6_ignored);
  const nd = ctx.nd;
  const n = parseNd(frame, l4, nd, end);
  if (n < 0) return codecDrop(ctx, ctx.outNdDrop, n);
  if (!ipv6Equal(nd.target, gw)) return drop(ctx, C.drop_out_icmpv6_ignored);
  const r = ctx.reply;
  const pm = ctx.portMacs[nic.index]!;
  // to the solicitor's MAC (Ethernet source), from the port
  copyBytes(frame, 6, r, 0, 6);
  copyBytes(pm, 0, r, 6, 6);
  writeU16(r, 12, ETHERTYPE_IPV6);
  const ip = 14;
  const unspecified =
    readU32(frame, l3 + 8) === 0 && readU32(frame, l3 + 12) === 0 && readU32(frame, l3 + 16) === 0 && readU32(frame, l3 + 20) === 0;
  writeU32(r, ip, 0x60000000);
  writeU16(r, ip + 4, 32);
  r[ip + 6] = IPPROTO_ICMPV6;
  r[ip + 7] = 255; // RFC 4861 7.1.2: hop limit 255
  for (let i = 0; i < 4; i++) writeU32(r, ip + 8 + i * 4, gw[i]!);
  if (unspecified) {
    // RFC 4861 7.2.4: a solicitation from :: (DAD) is answered to all-nodes, not solicited
    writeU32(r, ip + 24, 0xff020000);
    writeU32(r, ip + 28, 0);
    writeU32(r, ip + 32, 0);
    writeU32(r, ip + 36, 1);
  } else {
    copyBytes(frame, l3 + 8, r, ip + 24, 16);
  }
  const icmp = ip + 40;
  r[icmp] = ICMPV6_NEIGHBOR_ADVERT;
  r[icmp + 1] = 0;
  writeU16(r, icmp + 2, 0);
  writeU32(r, icmp + 4, (ND_NA_FLAG_ROUTER | (unspecified ? 0 : ND_NA_FLAG_SOLICITED) | ND_NA_FLAG_OVERRIDE) >>> 0);
  writeNdBody(gw, ND_OPT_TARGET_LL, pm, r, icmp);
  writeU16(r, icmp + 2, l4Checksum(r, icmp, 32, 2, pseudoSumV6Bytes(r, ip + 8, ip + 24, IPPROTO_ICMPV6, 32)));
  ctx.outBuf = r;
  ctx.outOff = 0;
  ctx.outLen = 14 + 40 + 32;
  ctx.outPort = nic.index;
  ctx.counters.values[C.nd_replies]!++;
  return VERDICT_FORWARD;
}
