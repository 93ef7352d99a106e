// The host agent's east-west data plane (docs/east-west.md), called from data-plane.ts:
//
// eastWestOut4/6: a frame from a VM's port that is no DSR reply:
//   - to an internal VIP of the port's network: a Fastpath entry sends it to the DIP's host (or NATs and
//     delivers it here when the DIP is local); otherwise it goes to a MUX picked by the flow hash from the
//     policy's MUXes, and the flow is recorded as sent to that MUX (what a redirect must be bound to);
//   - a DIP's reply under an internal VIP's rule: NAT DIP:backendPort -> VIP:frontendPort, then VXLAN
//     straight to the client's host (policy says where the client lives), or delivered here.
// redirectIn: a MUX's signed redirect; every refusal counted (the table in docs/east-west.md).
// Pure and synchronous like the rest of the data plane; the HMAC is a function the daemon provides.
import { copyBytes, readU32, writeU16, writeU32 } from '../shared/bytes.js';
import { finishChecksum, sumBytes } from '../shared/checksum.js';
import { hashFlowV4, hashFlowV6, vxlanSourcePort } from '../shared/flow-hash.js';
import { ipv6Equal } from '../shared/hot-path.js';
import { IPPROTO_TCP, isIpv4Fragment } from '../shared/ipv4.js';
import { TCP_FIN, TCP_RST } from '../shared/tcp.js';
import { VXLAN_FLAG_I, VXLAN_OVERHEAD_V4 } from '../shared/vxlan.js';
import {
  REDIRECT_MAC_LEN,
  REDIRECT_PORT,
  REDIRECT_SIGNED_LEN,
  newRedirect,
  parseRedirect,
  redirectMacEqual,
  type Redirect,
  type RedirectMac,
} from '../shared/redirect.js';
import {
  FASTPATH_CLOSING_S,
  FLOW_FASTPATH,
  FLOW_FASTPATH_CLOSING,
  FLOW_TO_MUX,
  HostFlowTable,
  flowAction,
  flowKind,
  type HostFlowQuotas,
} from './flow-table.js';
import { macKeyOf, type EwTarget, type EwVip } from './east-west-tables.js';
import type { FlowJournalSink } from './flow-journal.js';
import { macKey, type HostNic } from './tables.js';
import { VERDICT_CONSUMED, VERDICT_FORWARD, drop, natIpv4, natIpv6, snatOut, type HostContext } from './data-plane.js';
import { CONFIG_DEFAULTS, hostDsrQuota } from '../shared/config.js';

/** ctx.outPort value: outBuf[outOff .. outOff + outLen) is a whole Ethernet frame for the fabric interface. */
export const OUT_FABRIC = -2;
/** Outer Ethernet 14, IPv4 20, UDP 8, VXLAN 8, inner Ethernet 14. */
const EW_ENCAP_LEN = 64;
export const DEFAULT_MAX_FASTPATH_FLOWS = CONFIG_DEFAULTS.flowTable.maxFastpathFlows;

/** The host agent's east-west state: its flow table, clock, fabric identity and the redirect HMAC. */
export interface EwState {
  /** The host agent's one flow table: east-west, the return path and outbound NAT (host-agent/flow-table.ts). */
  readonly flows: HostFlowTable;
  /** Seconds, the daemon's coarse clock (flow expiry). */
  nowS: number;
  /** Unix seconds (a redirect's expiry). */
  unixS: number;
  tcpIdleS: number;
  udpIdleS: number;
  /**
   * The return path's changes go to the flow journal (host-agent/flow-journal.ts) through this: each new
   * or re-kinded entry (host-agent/dsr-flows.ts). null: none kept (no --state-dir, tests).
   */
  journal: FlowJournalSink | null;
  /** Entries carryEwState could not carry into this (smaller) table: return-path entries and outbound NAT flows. */
  notCarried: number;
  hashSeed: number;
  /** The fabric MTU: the largest outer IP packet. */
  mtu: number;
  /** The MAC of the host's fabric interface (outer source). */
  fabricMac: Uint8Array;
  /** HMAC-SHA256 under the policy key (runtime/redirect-mac.ts); null: every redirect is refused. */
  mac: RedirectMac | null;
  readonly out: Uint8Array;
  readonly macOut: Uint8Array;
  readonly redirect: Redirect;
  readonly w6a: Uint32Array;
  readonly w6b: Uint32Array;
}

/**
 * A fresh state with an empty host flow table of `maxFlows` entries and `quotas` per feature; neither
 * given: the config's defaults (flowTable.hostMaxFlows and its quotas); `maxFlows` alone: no quota.
 */
export function newEwState(maxFlows?: number, quotas?: HostFlowQuotas): EwState {
  const D = CONFIG_DEFAULTS.flowTable;
  const flows =
    maxFlows === undefined
      ? new HostFlowTable(D.hostMaxFlows, {
          eastWest: D.maxFastpathFlows,
          dsr: hostDsrQuota(D),
          snat: 2 * D.snatMaxFlows,
        })
      : new HostFlowTable(maxFlows, quotas);
  return {
    flows,
    nowS: 1,
    unixS: 0,
    tcpIdleS: 240,
    udpIdleS: 30,
    journal: null,
    notCarried: 0,
    hashSeed: 0x736c6278,
    mtu: 1600,
    fabricMac: new Uint8Array(6),
    mac: null,
    out: new Uint8Array(EW_ENCAP_LEN + 65535),
    macOut: new Uint8Array(REDIRECT_MAC_LEN),
    redirect: newRedirect(),
    w6a: new Uint32Array(4),
    w6b: new Uint32Array(4),
  };
}

// ---------------------------------------------------------------------------------------------
// Out of a VM's port

/**
 * A frame from `nic`'s port (IPv4 header in ctx.ip4, ports in ctx.ports) that is no public DSR reply: to
 * an internal VIP, or a DIP's reply under an internal VIP's rule (nic.ewOutbound). Returns a verdict. Kept
 * out of the data plane's hot functions (their size decides what V8 inlines): they only call it.
 */
export function eastWestOut4(frame: Uint8Array, l3: number, nic: HostNic, ctx: HostContext): number {
  const C = ctx.counters.index;
  const ew = ctx.tables.ew;
  const ip = ctx.ip4;
  const proto = ip.protocol;
  const l4 = l3 + ip.headerLen;
  const end = l3 + ip.totalLength;
  const rule = nic.ewOutbound.get(((4 << 24) | (proto << 16) | ctx.ports.srcPort) >>> 0);
  const vip = ew.vips4.get(ip.dst);
  if (vip !== undefined || (rule !== undefined && rule.internal)) {
    if (isIpv4Fragment(ip)) return drop(ctx, C.drop_out_ew_fragment); // east-west carries no fragments (README "Limits")
  }
  if (vip !== undefined) {
    const vni = nic.network.vni;
    if (vip.vni !== vni) return drop(ctx, C.drop_out_ew_other_network);
    const sport = ctx.ports.srcPort;
    const dport = ctx.ports.dstPort;
    const r = vip.rules.get((proto << 16) | dport);
    if (r === undefined) return drop(ctx, C.drop_out_ew_no_rule);
    const s = ctx.ew;
    s.flows.setKey4(vni, ip.src, ip.dst, proto, sport, dport);
    const hash = hashFlowV4(ip.src, ip.dst, proto, sport, dport, 5, s.hashSeed);
    const t = fastpathTarget(ctx, proto);
    if (t !== null) {
      if (t.local !== null) {
        natIpv4(frame, l3, l4, proto, 16, t.addr4, 2, r.backendPort);
        ctx.counters.values[C.ew_fastpath_local]!++;
        return deliverLocal(frame, l3, end, t.local, ctx);
      }
      ctx.counters.values[C.ew_fastpath_out]!++;
      return encap4(frame, l3, end, t.peer, t.pa4, t.mac, vni, hash, ctx);
    }
    return toMux(frame, l3, end, vni, hash, proto, ctx);
  }
  if (rule !== undefined && rule.internal) {
    // a DIP's reply: back to the client's host over the overlay
    const vni = nic.network.vni;
    const t = ew.byAddr4.get(vni)?.get(ip.dst);
    if (t === undefined) return drop(ctx, C.drop_out_ew_unknown_client);
    const hash = hashFlowV4(ip.dst, rule.vip.words[0]!, proto, ctx.ports.dstPort, rule.frontendPort, 5, ctx.ew.hashSeed);
    natIpv4(frame, l3, l4, proto, 12, rule.vip.words[0]!, 0, rule.frontendPort);
    ctx.lastRule = rule;
    if (t.local !== null) {
      ctx.counters.values[C.ew_return_local]!++;
      return deliverLocal(frame, l3, end, t.local, ctx);
    }
    ctx.counters.values[C.ew_return]!++;
    return encap4(frame, l3, end, t.peer, t.pa4, t.mac, vni, hash, ctx);
  }
  return snatOut(frame, l3, end, nic, ctx, C.drop_out_not_lb_reply); // a backend's own connection: outbound NAT, or not_lb_reply
}

export function eastWestOut6(frame: Uint8Array, l3: number, nic: HostNic, ctx: HostContext): number {
  const C = ctx.counters.index;
  const ew = ctx.tables.ew;
  const ip = ctx.ip6;
  const proto = ip.protocol;
  const l4 = l3 + ip.headerLen;
  const end = l3 + 40 + ip.payloadLength;
  const rule = nic.ewOutbound.get(((6 << 24) | (proto << 16) | ctx.ports.srcPort) >>> 0);
  const vip = findVip6(ew.vips6, ip.dst);
  if (vip !== undefined || (rule !== undefined && rule.internal)) {
    if (ip.hasFragment) return drop(ctx, C.drop_out_ew_fragment);
  }
  if (vip !== undefined) {
    const vni = nic.network.vni;
    if (vip.vni !== vni) return drop(ctx, C.drop_out_ew_other_network);
    const sport = ctx.ports.srcPort;
    const dport = ctx.ports.dstPort;
    const r = vip.rules.get((proto << 16) | dport);
    if (r === undefined) return drop(ctx, C.drop_out_ew_no_rule);
    const s = ctx.ew;
    s.flows.setKey6(vni, ip.src, ip.dst, proto, sport, dport);
    const hash = hashFlowV6(ip.src, 0, ip.dst, 0, proto, sport, dport, 5, s.hashSeed);
    const t = fastpathTarget(ctx, proto);
    if (t !== null) {
      if (t.local !== null) {
        if (t.local.addr6 === null) return drop(ctx, C.drop_out_ew_unknown_client); // validation gives every member an address of the family
        natIpv6(frame, l3, l4, proto, 24, t.local.addr6, 2, r.backendPort);
        ctx.counters.values[C.ew_fastpath_local]!++;
        return deliverLocal(frame, l3, end, t.local, ctx);
      }
      ctx.counters.values[C.ew_fastpath_out]!++;
      return encap4(frame, l3, end, t.peer, t.pa4, t.mac, vni, hash, ctx);
    }
    return toMux(frame, l3, end, vni, hash, proto, ctx);
  }
  if (rule !== undefined && rule.internal) {
    const vni = nic.network.vni;
    const t = findTarget6(ew.byAddr6.get(vni), ip.dst);
    if (t === undefined) return drop(ctx, C.drop_out_ew_unknown_client);
    const hash = hashFlowV6(ip.dst, 0, rule.vip.words, 0, proto, ctx.ports.dstPort, rule.frontendPort, 5, ctx.ew.hashSeed);
    natIpv6(frame, l3, l4, proto, 8, rule.vip.words, 0, rule.frontendPort);
    ctx.lastRule = rule;
    if (t.local !== null) {
      ctx.counters.values[C.ew_return_local]!++;
      return deliverLocal(frame, l3, end, t.local, ctx);
    }
    ctx.counters.values[C.ew_return]!++;
    return encap4(frame, l3, end, t.peer, t.pa4, t.mac, vni, hash, ctx);
  }
  return snatOut(frame, l3, end, nic, ctx, C.drop_out_not_lb_reply); // a backend's own connection: outbound NAT, or not_lb_reply
}

function findVip6(list: readonly EwVip[], d: Uint32Array): EwVip | undefined {
  for (let i = 0; i < list.length; i++) if (ipv6Equal(list[i]!.addr.words, d)) return list[i];
  return undefined;
}

function findTarget6(list: readonly EwTarget[] | undefined, d: ArrayLike<number>): EwTarget | undefined {
  if (list === undefined) return undefined;
  for (let i = 0; i < list.length; i++) {
    const a = list[i]!.addr6;
    if (a !== null && a[0] === d[0] && a[1] === d[1] && a[2] === d[2] && a[3] === d[3]) return list[i];
  }
  return undefined;
}

/**
 * The flow's Fastpath target (key already set), its entry refreshed; after a TCP FIN or RST the entry is
 * closing: this packet and the flow's last ones still take it, and it expires FASTPATH_CLOSING_S after
 * the last (the last ACKs never go back to a MUX). null: no Fastpath entry.
 */
function fastpathTarget(ctx: HostContext, proto: number): EwTarget | null {
  const s = ctx.ew;
  const tcp = proto === IPPROTO_TCP;
  const v = s.flows.lookup(s.nowS, s.nowS + (tcp ? s.tcpIdleS : s.udpIdleS));
  if (v < 0) return null;
  const kind = flowKind(v);
  if (kind !== FLOW_FASTPATH && kind !== FLOW_FASTPATH_CLOSING) return null;
  const t = ctx.tables.ew.targets[flowAction(v)];
  if (t === undefined) return null;
  if (kind === FLOW_FASTPATH_CLOSING || (tcp && (ctx.ports.tcpFlags & (TCP_FIN | TCP_RST)) !== 0))
    s.flows.insert(FLOW_FASTPATH_CLOSING, t.index, s.nowS + FASTPATH_CLOSING_S);
  return t;
}

/** The first packets: VXLAN to the MUX the flow hash picks among those whose MAC is resolved. */
function toMux(frame: Uint8Array, l3: number, end: number, vni: number, hash: number, proto: number, ctx: HostContext): number {
  const C = ctx.counters.index;
  const ew = ctx.tables.ew;
  const s = ctx.ew;
  const n = ew.muxPeers.length;
  let m = -1;
  for (let i = 0; i < n; i++) {
    const k = ((hash >>> 0) + i) % n;
    if (ctx.peerMacs[ew.muxPeers[k]!]! >= 0) {
      m = k;
      break;
    }
  }
  if (m < 0) return drop(ctx, C.drop_out_ew_no_mux);
  const expires = s.nowS + (proto === IPPROTO_TCP ? s.tcpIdleS : s.udpIdleS);
  if (!s.flows.insert(FLOW_TO_MUX, m, expires)) ctx.counters.values[C.ew_flow_table_full]!++;
  ctx.counters.values[C.ew_to_mux]!++;
  return encap4(frame, l3, end, ew.muxPeers[m]!, ew.muxPa4[m]!, null, vni, hash, ctx);
}

/** The frame, rewritten from the target port's MAC to the target's MAC, for the target's port. */
function deliverLocal(frame: Uint8Array, l3: number, end: number, t: HostNic, ctx: HostContext): number {
  const e = l3 - 14;
  copyBytes(t.mac, 0, frame, e, 6);
  copyBytes(ctx.portMacs[t.index]!, 0, frame, e + 6, 6);
  ctx.outBuf = frame;
  ctx.outOff = e;
  ctx.outLen = end - e;
  ctx.outPort = t.index;
  return VERDICT_FORWARD;
}

function writeMacKey(k: number, buf: Uint8Array, off: number): void {
  const hi = Math.floor(k / 0x100000000);
  const lo = k >>> 0;
  buf[off] = hi >>> 8;
  buf[off + 1] = hi & 0xff;
  writeU32(buf, off + 2, lo);
}

/**
 * VXLAN over the IPv4 underlay, host PA -> `pa4` (peer `peer`'s MAC as the outer destination), inner
 * destination `innerMac` (null: the peer's MAC, for a MUX), the IP packet frame[l3 .. end) byte for byte.
 */
function encap4(
  frame: Uint8Array,
  l3: number,
  end: number,
  peer: number,
  pa4: number,
  innerMac: Uint8Array | null,
  vni: number,
  hash: number,
  ctx: HostContext,
): number {
  const C = ctx.counters.index;
  const s = ctx.ew;
  const ipLen = end - l3;
  if (ipLen + VXLAN_OVERHEAD_V4 > s.mtu) return drop(ctx, C.drop_out_ew_too_big);
  const pm = peer >= 0 ? ctx.peerMacs[peer]! : -1;
  if (pm < 0) return drop(ctx, C.drop_out_ew_peer_unresolved);
  const o = s.out;
  writeMacKey(pm, o, 0);
  copyBytes(s.fabricMac, 0, o, 6, 6);
  writeU16(o, 12, 0x0800);
  // outer IPv4 (RFC 791): no options, DF clear, TTL 64, UDP; a fresh header checksum
  const total = 20 + 8 + 8 + 14 + ipLen;
  o[14] = 0x45;
  o[15] = 0;
  writeU16(o, 16, total);
  writeU16(o, 18, 0);
  writeU16(o, 20, 0);
  o[22] = 64;
  o[23] = 17;
  writeU16(o, 24, 0);
  writeU32(o, 26, ctx.tables.pa4);
  writeU32(o, 30, pa4);
  writeU16(o, 24, finishChecksum(sumBytes(o, 14, 20, 0)));
  // UDP: source port from the flow hash (RFC 7348 5), no checksum
  writeU16(o, 34, vxlanSourcePort(hash));
  writeU16(o, 36, ctx.vxlanPort);
  writeU16(o, 38, total - 20);
  writeU16(o, 40, 0);
  // VXLAN: I flag, VNI
  writeU32(o, 42, (VXLAN_FLAG_I << 24) >>> 0);
  writeU32(o, 46, ((vni & 0xffffff) << 8) >>> 0);
  // inner Ethernet
  if (innerMac === null) writeMacKey(pm, o, 50);
  else copyBytes(innerMac, 0, o, 50, 6);
  copyBytes(s.fabricMac, 0, o, 56, 6);
  writeU16(o, 62, frame[l3]! >> 4 === 4 ? 0x0800 : 0x86dd);
  copyBytes(frame, l3, o, EW_ENCAP_LEN, ipLen);
  ctx.outBuf = o;
  ctx.outOff = 0;
  ctx.outLen = EW_ENCAP_LEN + ipLen;
  ctx.outPort = OUT_FABRIC;
  return VERDICT_FORWARD;
}

// ---------------------------------------------------------------------------------------------
// Into a VM's port

/** UDP to our PA that is not VXLAN: a Fastpath redirect, or drop_in_not_vxlan. */
export function notVxlan4(frame: Uint8Array, l4: number, src: number, ctx: HostContext): number {
  if (ctx.udp.dstPort === REDIRECT_PORT) return redirectIn(frame, l4, l4 + ctx.udp.length, src, ctx);
  return drop(ctx, ctx.counters.index.drop_in_not_vxlan);
}

/** An inner IPv4 packet whose destination is no VIP of the nic: a reply from an internal VIP to the nic (its end), or -1 after the drop. */
export function notVipOfNic4(ctx: HostContext, dst: number, src: number, nic: HostNic, end: number): number {
  if (dst === nic.addr4 && nic.addr4 >= 0 && isEwReply4(ctx, src, nic)) return end;
  drop(ctx, ctx.counters.index.drop_in_not_vip_of_vni);
  return -1;
}

/** The same for IPv6 (addresses in ctx.ip6). */
export function notVipOfNic6(ctx: HostContext, nic: HostNic, end: number): number {
  const ip = ctx.ip6;
  if (nic.addr6 !== null && ipv6Equal(ip.dst, nic.addr6) && isEwReply6(ctx, ip.src, nic)) return end;
  drop(ctx, ctx.counters.index.drop_in_not_vip_of_vni);
  return -1;
}

/** A packet from `src` to the nic's own address: a reply from an internal VIP of the nic's network? */
export function isEwReply4(ctx: HostContext, src: number, nic: HostNic): boolean {
  const v = ctx.tables.ew.vips4.get(src);
  if (v === undefined || v.vni !== nic.network.vni) return false;
  ctx.counters.values[ctx.counters.index.ew_reply_in]!++;
  return true;
}

export function isEwReply6(ctx: HostContext, src: Uint32Array, nic: HostNic): boolean {
  const v = findVip6(ctx.tables.ew.vips6, src);
  if (v === undefined || v.vni !== nic.network.vni) return false;
  ctx.counters.values[ctx.counters.index.ew_reply_in]!++;
  return true;
}

// ---------------------------------------------------------------------------------------------
// Redirects

/**
 * A redirect in the UDP datagram frame[l4 .. udpEnd) from the IPv4 provider address `src`. The source is
 * checked like VXLAN's (a MUX of the config, from the MAC its address resolves to), then the message,
 * its HMAC, its expiry, its binding to a flow this host sent to that MUX, and its target in policy.
 */
export function redirectIn(frame: Uint8Array, l4: number, udpEnd: number, src: number, ctx: HostContext): number {
  const C = ctx.counters.index;
  const t = ctx.tables;
  const pi = t.peerIndex4.get(src);
  const peer = pi === undefined ? undefined : t.peers[pi];
  if (pi === undefined || peer === undefined || peer.kind !== 'mux') return drop(ctx, C.drop_redirect_not_mux);
  ctx.lastPeer = pi;
  if (ctx.sourceMacCheck) {
    const want = ctx.peerMacs[pi]!;
    if (want < 0) return drop(ctx, C.drop_in_source_unresolved);
    if (macKey(frame, 6) !== want) return drop(ctx, C.drop_in_spoofed_source);
  }
  const s = ctx.ew;
  const r = s.redirect;
  const p = l4 + 8;
  if (parseRedirect(frame, p, r, udpEnd) < 0) return drop(ctx, C.drop_redirect_malformed);
  if (s.mac === null) return drop(ctx, C.drop_redirect_bad_signature);
  s.mac(frame, p, REDIRECT_SIGNED_LEN, s.macOut, 0);
  if (!redirectMacEqual(frame, p + REDIRECT_SIGNED_LEN, s.macOut, 0)) return drop(ctx, C.drop_redirect_bad_signature);
  if (r.expiresS <= s.unixS) return drop(ctx, C.drop_redirect_expired);
  // the flow it names must be one this host sent to this MUX (or already redirected to the same target)
  const ew = t.ew;
  let vip: EwVip | undefined;
  if (r.family === 4) {
    vip = ew.vips4.get(readU32(r.dst, 0));
    s.flows.setKey4(r.vni, readU32(r.src, 0), readU32(r.dst, 0), r.protocol, r.srcPort, r.dstPort);
  } else {
    for (let i = 0; i < 4; i++) {
      s.w6a[i] = readU32(r.src, i * 4);
      s.w6b[i] = readU32(r.dst, i * 4);
    }
    vip = findVip6(ew.vips6, s.w6b);
    s.flows.setKey6(r.vni, s.w6a, s.w6b, r.protocol, r.srcPort, r.dstPort);
  }
  const v = s.flows.peek(s.nowS);
  const muxIndex = ew.muxPeers.indexOf(pi);
  const fast = v >= 0 && (flowKind(v) === FLOW_FASTPATH || flowKind(v) === FLOW_FASTPATH_CLOSING);
  const bound = v >= 0 && ((flowKind(v) === FLOW_TO_MUX && flowAction(v) === muxIndex) || fast);
  if (!bound) return drop(ctx, C.drop_redirect_unbound);
  // the target: a member of the rule's pool in policy, in the flow's VNI, where the redirect says it is
  const rule = vip !== undefined && vip.vni === r.vni ? vip.rules.get((r.protocol << 16) | r.dstPort) : undefined;
  const target = ew.byMac.get(r.vni)?.get(macKeyOf(r.dipMac));
  if (
    rule === undefined ||
    target === undefined ||
    !rule.members.has(target.index) ||
    target.pa4 !== readU32(r.dipHostPa, 0) ||
    !targetHasDip(target, r)
  ) {
    return drop(ctx, C.drop_redirect_bad_target);
  }
  if (fast) {
    if (flowAction(v) !== target.index) return drop(ctx, C.drop_redirect_unbound);
    ctx.counters.values[C.redirects_repeated]!++;
    return VERDICT_CONSUMED;
  }
  const expires = s.nowS + (r.protocol === IPPROTO_TCP ? s.tcpIdleS : s.udpIdleS);
  if (!s.flows.insert(FLOW_FASTPATH, target.index, expires)) ctx.counters.values[C.ew_flow_table_full]!++;
  ctx.counters.values[C.redirects_accepted]!++;
  return VERDICT_CONSUMED;
}

function targetHasDip(t: EwTarget, r: Redirect): boolean {
  if (r.family === 4) return t.addr4 >= 0 && t.addr4 === readU32(r.dip, 0);
  const a = t.addr6;
  return (
    a !== null && a[0] === readU32(r.dip, 0) && a[1] === readU32(r.dip, 4) && a[2] === readU32(r.dip, 8) && a[3] === readU32(r.dip, 12)
  );
}
