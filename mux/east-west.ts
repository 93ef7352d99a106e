// The MUX's east-west path (docs/east-west.md): VXLAN from a host's PA to the MUX's PA carrying a VM's
// packet to an internal VIP. Checked (a host of the config, VXLAN I flag, an internal VIP whose network
// is the VNI), then placed exactly as public traffic (rule, flow tables, Maglev) and encapsulated to the
// DIP's host. Once the flow is in the trusted table (TCP: the client's ACK after the SYN; UDP: its second
// datagram) every packet that still reaches the MUX also yields a signed redirect to the source host
// (ctx.ew.out[0 .. ctx.ew.outLen), for the daemon to send after the VXLAN frame).
import { readU16, readU32, writeU16, writeU32, copyBytes } from '../shared/bytes.js';
import { finishChecksum, sumBytes } from '../shared/checksum.js';
import { ETHERTYPE_IPV4, ETHERTYPE_IPV6 } from '../shared/ethernet.js';
import { hashFlowV4, hashFlowV6 } from '../shared/flow-hash.js';
import { ipv4ChecksumOk, ipv6Equal } from '../shared/hot-path.js';
import { IPPROTO_TCP, IPPROTO_UDP, isIpv4Fragment, parseIpv4 } from '../shared/ipv4.js';
import { parseIpv6 } from '../shared/ipv6.js';
import { VXLAN_FLAG_I } from '../shared/vxlan.js';
import {
  REDIRECT_LEN,
  REDIRECT_PORT,
  REDIRECT_SIGNED_LEN,
  REDIRECT_VALID_S,
  newRedirect,
  writeRedirect,
  type Redirect,
  type RedirectMac,
} from '../shared/redirect.js';
import type { IpAddr } from '../shared/addr.js';
import type { SlbxConfig } from '../shared/config.js';
import {
  VERDICT_DROP,
  VERDICT_FORWARD,
  chooseWithFlow,
  codecDrop,
  drop,
  encapsulate,
  findRule,
  isSyn,
  setKey4,
  setKey6,
  type MuxContext,
} from './data-plane.js';
import { FlowTable } from './flow-table.js';
import { foldV6, type MuxHost, type MuxNic, type MuxVip } from './tables.js';

/** An internal VIP and the VNI of its network. */
export interface MuxEwVip {
  readonly vip: MuxVip;
  readonly vni: number;
}

export interface MuxEwTables {
  readonly vips4: ReadonlyMap<number, MuxEwVip>;
  readonly vips6: ReadonlyMap<number, readonly MuxEwVip[]>;
  /** Hosts by IPv4 provider address: VXLAN is accepted from these only. */
  readonly hostsByPa4: ReadonlyMap<number, MuxHost>;
  /** By nic id: the nic's addresses (the redirect names the DIP). */
  readonly nicAddr4: readonly number[];
  readonly nicAddr6: readonly (IpAddr | null)[];
  /** flowTable.fastpathUdpDatagrams: a UDP flow is redirected from this datagram on. */
  readonly udpDatagrams: number;
}

export function compileMuxEw(
  config: SlbxConfig,
  internal: readonly MuxEwVip[],
  hosts: ReadonlyMap<string, MuxHost>,
  nicIds: ReadonlyMap<string, number>,
): MuxEwTables {
  const vips4 = new Map<number, MuxEwVip>();
  const vips6 = new Map<number, MuxEwVip[]>();
  for (const e of internal) {
    const w = e.vip.addr.words;
    if (e.vip.addr.family === 4) vips4.set(w[0]!, e);
    else {
      const k = foldV6(w[0]!, w[1]!, w[2]!, w[3]!);
      vips6.set(k, [...(vips6.get(k) ?? []), e]);
    }
  }
  const hostsByPa4 = new Map<number, MuxHost>();
  for (const h of hosts.values()) hostsByPa4.set(h.pa4, h);
  const nicAddr4: number[] = [];
  const nicAddr6: (IpAddr | null)[] = [];
  for (const n of config.nics) {
    const id = nicIds.get(n.name);
    if (id === undefined) continue;
    nicAddr4[id] = n.address4 ? n.address4.words[0]! : -1;
    nicAddr6[id] = n.address6;
  }
  return { vips4, vips6, hostsByPa4, nicAddr4, nicAddr6, udpDatagrams: config.flowTable.fastpathUdpDatagrams };
}

export interface MuxEwState {
  /** HMAC-SHA256 under the policy key (runtime/redirect-mac.ts); null: no redirects (everything through the MUX). */
  mac: RedirectMac | null;
  /** Unix seconds (the redirect's expiry). */
  unixS: number;
  /** After VERDICT_FORWARD of an east-west packet: a redirect frame out[0 .. outLen) to send too, or outLen 0. */
  readonly out: Uint8Array;
  outLen: number;
  readonly r: Redirect;
  /**
   * UDP east-west flows' datagrams so far, kept only while fastpathUdpDatagrams > 2 and until the
   * threshold (keyed like flows4/flows6; bounded by flowTable.untrustedMaxFlows, swept with the flows).
   */
  readonly udpSeen4: FlowTable;
  readonly udpSeen6: FlowTable;
}

export function newMuxEwState(udpSeenMax = 100_000): MuxEwState {
  const limit = { max: udpSeenMax, count: 0 };
  return {
    mac: null,
    unixS: 0,
    out: new Uint8Array(14 + 20 + 8 + REDIRECT_LEN),
    outLen: 0,
    r: newRedirect(),
    udpSeen4: new FlowTable(4, limit),
    udpSeen6: new FlowTable(10, limit),
  };
}

/**
 * Whether a packet of a trusted east-west flow gets a redirect. TCP: yes (the handshake is done). UDP:
 * from the flow's fastpathUdpDatagrams-th datagram on; a trusted flow has sent two, so at the default (2)
 * no count is kept. `key` is the flow's key as written into flows4/flows6.
 */
function redirectDue(tcp: boolean, seen: FlowTable, key: Uint32Array, flowHash: number, ctx: MuxContext): boolean {
  const n = ctx.tables.ew.udpDatagrams;
  if (tcp || n <= 2) return true;
  seen.key.set(key);
  const now = ctx.nowS;
  const expires = now + ctx.udpIdleS;
  const before = seen.lookup(flowHash, now, expires);
  const count = before < 0 ? 2 : Math.min(n, before + 1);
  if (count === before) return true; // at the threshold already (a datagram in flight before the host installed the redirect)
  if (!seen.insert(flowHash, count, expires)) {
    ctx.counters.values[ctx.counters.index.ew_udp_count_full]!++;
    return true;
  }
  return count >= n;
}

/**
 * IPv4 to no VIP: VXLAN from a host to the MUX's own PA, or drop_not_vip. Kept out of processIpv4 (its
 * size decides what V8 inlines into it): it only calls this.
 */
export function notVip4(frame: Uint8Array, l3: number, hl: number, ctx: MuxContext): number {
  return ctx.ip4.dst === ctx.localPa4 ? fromHost4(frame, l3, hl, ctx) : drop(ctx, ctx.counters.index.drop_not_vip);
}

function macEquals(frame: Uint8Array, off: number, mac: Uint8Array): boolean {
  return (
    frame[off] === mac[0] &&
    frame[off + 1] === mac[1] &&
    frame[off + 2] === mac[2] &&
    frame[off + 3] === mac[3] &&
    frame[off + 4] === mac[4] &&
    frame[off + 5] === mac[5]
  );
}

/** VXLAN to the MUX's own IPv4 PA (the outer header parsed in ctx.ip4, `hl` its length). */
export function fromHost4(frame: Uint8Array, l3: number, hl: number, ctx: MuxContext): number {
  const C = ctx.counters.index;
  const ip = ctx.ip4;
  ctx.ew.outLen = 0;
  if (ip.protocol !== IPPROTO_UDP || isIpv4Fragment(ip)) return drop(ctx, C.drop_not_vip);
  const l4 = l3 + hl;
  const end = l3 + ip.totalLength;
  if (end - l4 < 8) return drop(ctx, C.drop_ew_truncated);
  if (readU16(frame, l4 + 2) !== ctx.vxlanPort) return drop(ctx, C.drop_not_vip);
  const udpLen = readU16(frame, l4 + 4);
  if (udpLen < 8 + 8 + 14 || l4 + udpLen > end) return drop(ctx, C.drop_ew_truncated);
  const udpEnd = l4 + udpLen;
  const ew = ctx.tables.ew;
  const host = ew.hostsByPa4.get(ip.src);
  if (host === undefined) return drop(ctx, C.drop_ew_unknown_host);
  // the source MAC check of docs/security.md: the frame comes from the MAC the host's PA resolves to
  if (!host.macKnown) return drop(ctx, C.drop_ew_source_unresolved);
  if (!macEquals(frame, 6, host.mac)) return drop(ctx, C.drop_ew_spoofed_source);
  // RFC 7348 5: the I flag must be 1
  if ((frame[l4 + 8]! & VXLAN_FLAG_I) === 0) return drop(ctx, C.drop_ew_bad_vxlan);
  const vni = readU32(frame, l4 + 12) >>> 8;
  const ie = l4 + 16;
  const type = readU16(frame, ie + 12);
  if (type === ETHERTYPE_IPV4) return inner4(frame, ie + 14, udpEnd, vni, host, ctx);
  if (type === ETHERTYPE_IPV6) return inner6(frame, ie + 14, udpEnd, vni, host, ctx);
  return drop(ctx, C.drop_ew_inner_not_ip);
}

function inner4(frame: Uint8Array, l3: number, udpEnd: number, vni: number, host: MuxHost, ctx: MuxContext): number {
  const C = ctx.counters.index;
  const ip = ctx.ip4;
  const hl = parseIpv4(frame, l3, ip, udpEnd);
  if (hl < 0) return codecDrop(ctx, ctx.ip4Drop, hl);
  if (!ipv4ChecksumOk(frame, l3, ip)) return drop(ctx, C.drop_ipv4_bad_checksum);
  const e = ctx.tables.ew.vips4.get(ip.dst);
  if (e === undefined) return drop(ctx, C.drop_ew_not_internal_vip);
  if (e.vni !== vni) return drop(ctx, C.drop_ew_wrong_vni);
  if (isIpv4Fragment(ip)) return drop(ctx, C.drop_ew_fragment);
  const proto = ip.protocol;
  const l4 = l3 + hl;
  const end = l3 + ip.totalLength;
  const rule = findRule(frame, l4, end, proto, false, false, e.vip, ctx);
  if (rule === null) return VERDICT_DROP;
  const sport = ctx.ports.srcPort;
  const dport = ctx.ports.dstPort;
  const seed = ctx.hashSeed;
  const flowHash = hashFlowV4(ip.src, ip.dst, proto, sport, dport, 5, seed);
  const selectHash = rule.mode === 5 ? flowHash : hashFlowV4(ip.src, ip.dst, proto, sport, dport, rule.mode, seed);
  setKey4(ctx.flows4, ip.src, ip.dst, proto, sport, dport);
  const now = ctx.nowS;
  const syn = proto === IPPROTO_TCP && isSyn(ctx.ports.tcpFlags);
  const tcp = proto === IPPROTO_TCP;
  const nic = chooseWithFlow(
    ctx,
    ctx.flows4,
    ctx.pending4,
    rule,
    flowHash,
    now,
    now + (tcp ? ctx.tcpIdleS : ctx.udpIdleS),
    selectHash,
    syn,
  );
  if (nic === undefined) return drop(ctx, C.drop_no_backend);
  if (nic.vni !== vni) return drop(ctx, C.drop_ew_wrong_vni);
  const src = ip.src;
  const dst = ip.dst;
  const v = encapsulate(frame, l3, end - l3, ETHERTYPE_IPV4, nic, flowHash, ctx);
  if (v !== VERDICT_FORWARD) return v;
  ctx.counters.values[C.ew_from_host]!++;
  if (!syn && ctx.flows4.peek(flowHash, now) >= 0 && redirectDue(tcp, ctx.ew.udpSeen4, ctx.flows4.key, flowHash, ctx)) {
    const r = ctx.ew.r;
    r.family = 4;
    r.src.fill(0);
    r.dst.fill(0);
    writeU32(r.src, 0, src);
    writeU32(r.dst, 0, dst);
    redirect(r, proto, vni, sport, dport, nic, host, ctx);
  }
  return v;
}

function inner6(frame: Uint8Array, l3: number, udpEnd: number, vni: number, host: MuxHost, ctx: MuxContext): number {
  const C = ctx.counters.index;
  const ip = ctx.ip6;
  const hl = parseIpv6(frame, l3, ip, udpEnd);
  if (hl < 0) return codecDrop(ctx, ctx.ip6Drop, hl);
  const d = ip.dst;
  const bucket = ctx.tables.ew.vips6.get(foldV6(d[0]!, d[1]!, d[2]!, d[3]!));
  let e: MuxEwVip | undefined;
  if (bucket !== undefined) for (const b of bucket) if (ipv6Equal(b.vip.addr.words, d)) e = b;
  if (e === undefined) return drop(ctx, C.drop_ew_not_internal_vip);
  if (e.vni !== vni) return drop(ctx, C.drop_ew_wrong_vni);
  if (ip.hasFragment) return drop(ctx, C.drop_ew_fragment);
  const proto = ip.protocol;
  const l4 = l3 + hl;
  const end = l3 + 40 + ip.payloadLength;
  const rule = findRule(frame, l4, end, proto, false, false, e.vip, ctx);
  if (rule === null) return VERDICT_DROP;
  const sport = ctx.ports.srcPort;
  const dport = ctx.ports.dstPort;
  const seed = ctx.hashSeed;
  const flowHash = hashFlowV6(ip.src, 0, ip.dst, 0, proto, sport, dport, 5, seed);
  const selectHash = rule.mode === 5 ? flowHash : hashFlowV6(ip.src, 0, ip.dst, 0, proto, sport, dport, rule.mode, seed);
  setKey6(ctx.flows6, ip.src, ip.dst, proto, sport, dport);
  const now = ctx.nowS;
  const tcp = proto === IPPROTO_TCP;
  const syn = tcp && isSyn(ctx.ports.tcpFlags);
  const nic = chooseWithFlow(
    ctx,
    ctx.flows6,
    ctx.pending6,
    rule,
    flowHash,
    now,
    now + (tcp ? ctx.tcpIdleS : ctx.udpIdleS),
    selectHash,
    syn,
  );
  if (nic === undefined) return drop(ctx, C.drop_no_backend);
  if (nic.vni !== vni) return drop(ctx, C.drop_ew_wrong_vni);
  const r = ctx.ew.r;
  r.family = 6;
  for (let i = 0; i < 4; i++) {
    writeU32(r.src, i * 4, ip.src[i]!);
    writeU32(r.dst, i * 4, ip.dst[i]!);
  }
  const v = encapsulate(frame, l3, end - l3, ETHERTYPE_IPV6, nic, flowHash, ctx);
  if (v !== VERDICT_FORWARD) return v;
  ctx.counters.values[C.ew_from_host]!++;
  if (!syn && ctx.flows6.peek(flowHash, now) >= 0 && redirectDue(tcp, ctx.ew.udpSeen6, ctx.flows6.key, flowHash, ctx))
    redirect(r, proto, vni, sport, dport, nic, host, ctx);
  return v;
}

/** Writes the redirect for the flow in `r` (family and addresses set) into ctx.ew.out. */
function redirect(
  r: Redirect,
  proto: number,
  vni: number,
  sport: number,
  dport: number,
  nic: MuxNic,
  host: MuxHost,
  ctx: MuxContext,
): void {
  const s = ctx.ew;
  const C = ctx.counters.index;
  if (s.mac === null || !host.macKnown) {
    ctx.counters.values[C.redirects_skipped]!++;
    return;
  }
  const ew = ctx.tables.ew;
  r.protocol = proto;
  r.vni = vni;
  r.expiresS = s.unixS + REDIRECT_VALID_S;
  r.srcPort = sport;
  r.dstPort = dport;
  r.dip.fill(0);
  if (r.family === 4) writeU32(r.dip, 0, ew.nicAddr4[nic.id] ?? 0);
  else {
    const a = ew.nicAddr6[nic.id];
    if (a != null) for (let i = 0; i < 4; i++) writeU32(r.dip, i * 4, a.words[i]!);
  }
  r.dipHostPa.fill(0);
  writeU32(r.dipHostPa, 0, nic.host.pa4);
  copyBytes(nic.mac, 0, r.dipMac, 0, 6);
  const o = s.out;
  copyBytes(host.mac, 0, o, 0, 6);
  copyBytes(ctx.localMac, 0, o, 6, 6);
  writeU16(o, 12, ETHERTYPE_IPV4);
  const total = 20 + 8 + REDIRECT_LEN;
  o[14] = 0x45;
  o[15] = 0;
  writeU16(o, 16, total);
  writeU16(o, 18, 0);
  writeU16(o, 20, 0);
  o[22] = 64;
  o[23] = IPPROTO_UDP;
  writeU16(o, 24, 0);
  writeU32(o, 26, ctx.localPa4);
  writeU32(o, 30, host.pa4);
  writeU16(o, 24, finishChecksum(sumBytes(o, 14, 20, 0)));
  writeU16(o, 34, REDIRECT_PORT);
  writeU16(o, 36, REDIRECT_PORT);
  writeU16(o, 38, 8 + REDIRECT_LEN);
  writeU16(o, 40, 0); // RFC 768: no checksum (the HMAC covers the message)
  writeRedirect(r, o, 42);
  s.mac(o, 42, REDIRECT_SIGNED_LEN, o, 42 + REDIRECT_SIGNED_LEN);
  s.outLen = 14 + total;
  ctx.counters.values[C.redirects_sent]!++;
}
