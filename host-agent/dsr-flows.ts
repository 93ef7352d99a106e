// The state of the direct server return (docs/design.md "Return path"): the host agent remembers each
// load-balanced flow it delivers to a local backend, in the host flow table (host-agent/flow-table.ts,
// kinds FLOW_DSR and FLOW_DSR_CLOSING, keyed by the reply's 5-tuple DIP:backendPort -> client:port), and
// a backend packet leaves from the VIP only when it belongs to one of them. No backend packet ever
// creates an entry.
//
// dsrLearn4/6 (inbound, after the NAT): a TCP segment or UDP datagram of a public VIP's rule creates or
//   refreshes its entry. Any TCP segment does, not only a SYN (counted dsr_flows_learned_midstream when
//   no SYN): a flow a restarted agent has neither in its flow snapshot nor in its journal
//   (host-agent/flow-snapshot.ts, flow-journal.ts: every flow without --state-dir) is re-learned from
//   the client's next segment or retransmission.
// TCP state, as conntrack follows it: a FIN in one direction half-closes the entry (a bit per direction
//   in the action, DSR_FIN_IN / DSR_FIN_OUT; it keeps the full idle timeout: a client that sent its
//   request and FIN still gets a slow response); a FIN both ways or a RST either way makes it closing
//   (FLOW_DSR_CLOSING, kept DSR_CLOSING_S after the flow's last packet); a client's SYN without ACK on a
//   closing or half-closed entry (the tuple reused) opens it again. A full table counts dsr_flows_full
//   and the packet is still delivered: its reply then finds no entry and is dropped as unsolicited (the
//   flows already recorded are not touched).
// dsrAllowed4/6 (outbound, before the NAT): the reply's entry, or -1. TCP refreshes the entry (idle is
//   no packet either way) and follows FIN/RST; UDP only reads it: only the client's datagrams keep a UDP
//   flow alive, so a backend cannot stretch its permission to send from the VIP.
// Each new entry and each change of its value (kind, FIN bits) is handed to ctx.ew.journal (the flow
// journal, written at the end of the event-loop turn), so that a SIGKILL loses none.
// Pure and synchronous like the rest of the data plane; the clock is ctx.ew.nowS (whole seconds).
import { IPPROTO_TCP } from '../shared/ipv4.js';
import { TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN } from '../shared/tcp.js';
import { DSR_CLOSING_S, FLOW_DSR, FLOW_DSR_CLOSING, KEY_SPACE_DSR, flowAction, flowKind } from './flow-table.js';
import type { HostContext } from './data-plane.js';
import type { NatRule } from './tables.js';

/**
 * dsrLearn4/6's constants as a const enum, which tsc writes as literals: an imported const is a module
 * cell V8 loads and checks for its temporal dead zone at each use (callgrind, host-in udp4).
 */
const enum L {
  TCP = IPPROTO_TCP,
  DSR = FLOW_DSR,
  SPACE = KEY_SPACE_DSR,
  CHANGES = TCP_FIN | TCP_RST | TCP_SYN,
  FIN_RST = TCP_FIN | TCP_RST,
}

/** After an inbound VIP packet's NAT: record its flow (key: DIP:backendPort -> client:port). */
export function dsrLearn4(
  ctx: HostContext,
  vni: number,
  dip: number,
  client: number,
  proto: number,
  bport: number,
  cport: number,
  fport: number,
): void {
  const s = ctx.ew;
  const f = s.flows;
  const now = s.nowS;
  const tcp = proto === L.TCP;
  // the common case, an entry that stays as it is, writes no key (HostFlowTable.lookup4)
  const v = f.lookup4(vni, dip, client, proto, bport, cport, L.SPACE, now, now + (tcp ? s.tcpIdleS : s.udpIdleS));
  const flags = tcp ? ctx.ports.tcpFlags : 0;
  // v >>> 24 is flowKind(v): past the inbound path's inlining budget, its call showed in the profile
  if (v >= 0 && v >>> 24 === L.DSR && (flags & L.CHANGES) === 0) return;
  f.setKey4(vni, dip, client, proto, bport, cport, KEY_SPACE_DSR);
  learnChange(ctx, v, tcp, flags, fport);
}

export function dsrLearn6(
  ctx: HostContext,
  vni: number,
  dip: Uint32Array,
  client: Uint32Array,
  proto: number,
  bport: number,
  cport: number,
  fport: number,
): void {
  const s = ctx.ew;
  const f = s.flows;
  const now = s.nowS;
  const tcp = proto === L.TCP;
  // as dsrLearn4: the common case writes no key (HostFlowTable.lookup6)
  const v = f.lookup6(vni, dip, client, proto, bport, cport, L.SPACE, now, now + (tcp ? s.tcpIdleS : s.udpIdleS));
  const flags = tcp ? ctx.ports.tcpFlags : 0;
  if (v >= 0 && v >>> 24 === L.DSR && (flags & L.CHANGES) === 0) return;
  f.setKey6(vni, dip, client, proto, bport, cport, KEY_SPACE_DSR);
  learnChange(ctx, v, tcp, flags, fport);
}

/**
 * dsrLearn6 for inboundIpv6's packet of an IPv6 `rule` (not internal) of a nic on `vni`, the client's
 * address as four int32 words (c0..c3, read from the frame) and its port `cport`. The rule's share of the
 * key's hash comes precomputed (NatRule.dsrKeyPart), and the client's words are stored only when the entry
 * changes (in ctx.ip6.src, for setKey6): the common packet hashes five words, not eleven, and its lookup
 * (HostFlowTable.lookup6Part) is inlined where dsrLearn6's hash was a call.
 */
export function dsrLearnRule6(
  ctx: HostContext,
  rule: NatRule,
  vni: number,
  c0: number,
  c1: number,
  c2: number,
  c3: number,
  cport: number,
): void {
  const s = ctx.ew;
  const f = s.flows;
  const now = s.nowS;
  const proto = rule.protocol;
  const tcp = proto === L.TCP;
  const bport = rule.backendPort;
  const dip = rule.dip.words;
  const v = f.lookup6Part(
    rule.dsrKeyPart,
    (vni << 8) | 6,
    dip,
    c0,
    c1,
    c2,
    c3,
    proto | (L.SPACE << 8),
    (bport << 16) | cport,
    now,
    now + (tcp ? s.tcpIdleS : s.udpIdleS),
  );
  const flags = tcp ? ctx.ports.tcpFlags : 0;
  if (v >= 0 && v >>> 24 === L.DSR && (flags & L.CHANGES) === 0) return;
  learnRuleChange6(ctx, rule, vni, c0, c1, c2, c3, cport, v, flags);
}

/**
 * dsrLearnRule6's entry that is new or changes, apart: its code then leaves inboundIpv6's inlining budget
 * to the common packet's lookup (FlowTable.findWords6Dst inlined, callgrind).
 */
function learnRuleChange6(
  ctx: HostContext,
  rule: NatRule,
  vni: number,
  c0: number,
  c1: number,
  c2: number,
  c3: number,
  cport: number,
  v: number,
  flags: number,
): void {
  const client = ctx.ip6.src;
  client[0] = c0;
  client[1] = c1;
  client[2] = c2;
  client[3] = c3;
  ctx.ew.flows.setKey6(vni, rule.dip.words, client, rule.protocol, rule.backendPort, cport, KEY_SPACE_DSR);
  learnChange(ctx, v, rule.protocol === L.TCP, flags, rule.frontendPort);
}

/** The action's bits beside the frontend port (low 16 bits): a FIN seen from the client, from the backend. */
export const DSR_FIN_IN = 0x10000;
export const DSR_FIN_OUT = 0x20000;

/**
 * The entry's next value (kind << 24 | action) after a TCP segment with `flags`, from the client
 * (`fromClient`) or the backend; `v` the entry's value (-1: none, the client's segment creates it).
 */
export function dsrNextValue(v: number, flags: number, fromClient: boolean, fport: number): number {
  const reuse = fromClient && (flags & (TCP_SYN | TCP_ACK)) === TCP_SYN;
  if (v < 0 || (reuse && (v >>> 24 === FLOW_DSR_CLOSING || (v & (DSR_FIN_IN | DSR_FIN_OUT)) !== 0))) v = (FLOW_DSR << 24) | fport;
  if (v >>> 24 === FLOW_DSR_CLOSING) return v;
  if ((flags & TCP_RST) !== 0) return ((FLOW_DSR_CLOSING << 24) | (v & 0xffffff)) >>> 0;
  if ((flags & TCP_FIN) !== 0) {
    const fins = (v & (DSR_FIN_IN | DSR_FIN_OUT)) | (fromClient ? DSR_FIN_IN : DSR_FIN_OUT);
    const kind = fins === (DSR_FIN_IN | DSR_FIN_OUT) ? FLOW_DSR_CLOSING : FLOW_DSR;
    return ((kind << 24) | (v & 0xffff) | fins) >>> 0;
  }
  return v >>> 0;
}

/** A client packet whose entry is new or changes (`v`: its value after the lookup, -1: none); the key is set. */
function learnChange(ctx: HostContext, v: number, tcp: boolean, flags: number, fport: number): void {
  const s = ctx.ew;
  const f = s.flows;
  const now = s.nowS;
  const next = tcp ? dsrNextValue(v, flags, true, fport) : (FLOW_DSR << 24) | fport;
  if (next === v) {
    // unchanged (a SYN retransmitted, a FIN again): only a closing entry's time is put back to DSR_CLOSING_S
    if (flowKind(v) === FLOW_DSR_CLOSING) f.insert(FLOW_DSR_CLOSING, flowAction(v), now + DSR_CLOSING_S);
    return;
  }
  const kind = flowKind(next);
  const expiresAt = now + (kind === FLOW_DSR ? (tcp ? s.tcpIdleS : s.udpIdleS) : DSR_CLOSING_S);
  const c = ctx.counters;
  if (f.insert(kind, flowAction(next), expiresAt)) {
    s.journal?.addDsr(f.table.key, next, expiresAt);
    if (v < 0) {
      c.values[c.index.dsr_flows_learned]!++;
      if (tcp && (flags & TCP_SYN) === 0) c.values[c.index.dsr_flows_learned_midstream]!++;
    }
  } else {
    c.values[c.index.dsr_flows_full]!++;
  }
}

/** Before a backend packet's NAT to the VIP: its flow's entry (the frontend port), or -1 when none. */
export function dsrAllowed4(ctx: HostContext, vni: number, src: number, dst: number, proto: number, sport: number, dport: number): number {
  const s = ctx.ew;
  const f = s.flows;
  const now = s.nowS;
  // no key written unless the entry changes (HostFlowTable.lookup4, peek4)
  if (proto !== L.TCP) {
    const u = f.peek4(vni, src, dst, proto, sport, dport, L.SPACE, now);
    return u < 0 ? -1 : flowAction(u) & 0xffff;
  }
  const v = f.lookup4(vni, src, dst, proto, sport, dport, L.SPACE, now, now + s.tcpIdleS);
  if (v < 0) return -1;
  const flags = ctx.ports.tcpFlags;
  if (v >>> 24 === L.DSR && (flags & L.FIN_RST) === 0) return flowAction(v) & 0xffff;
  f.setKey4(vni, src, dst, proto, sport, dport, L.SPACE);
  return allowedChange(ctx, v, flags);
}

export function dsrAllowed6(
  ctx: HostContext,
  vni: number,
  src: Uint32Array,
  dst: Uint32Array,
  proto: number,
  sport: number,
  dport: number,
): number {
  const s = ctx.ew;
  const f = s.flows;
  const now = s.nowS;
  // no key written unless the entry changes (HostFlowTable.lookup6, peek6)
  if (proto !== L.TCP) {
    const u = f.peek6(vni, src, dst, proto, sport, dport, L.SPACE, now);
    return u < 0 ? -1 : flowAction(u) & 0xffff;
  }
  const v = f.lookup6(vni, src, dst, proto, sport, dport, L.SPACE, now, now + s.tcpIdleS);
  if (v < 0) return -1;
  const flags = ctx.ports.tcpFlags;
  if (v >>> 24 === L.DSR && (flags & L.FIN_RST) === 0) return flowAction(v) & 0xffff;
  f.setKey6(vni, src, dst, proto, sport, dport, L.SPACE);
  return allowedChange(ctx, v, flags);
}

/** A backend's TCP segment with FIN or RST, or on a closing entry (`v`, found and refreshed); the key is set. */
function allowedChange(ctx: HostContext, v: number, flags: number): number {
  const s = ctx.ew;
  const f = s.flows;
  const now = s.nowS;
  const next = dsrNextValue(v, flags, false, v & 0xffff);
  const kind = flowKind(next);
  // the lookup gave it the idle timeout: a closing entry gets DSR_CLOSING_S again, a changed one its new value
  const expiresAt = now + (kind === FLOW_DSR ? s.tcpIdleS : DSR_CLOSING_S);
  if (kind === FLOW_DSR_CLOSING || next !== v) f.insert(kind, flowAction(next), expiresAt);
  if (next !== v) s.journal?.addDsr(f.table.key, next, expiresAt);
  return flowAction(v) & 0xffff;
}

/** For an ICMP error a backend sends about a flow: the entry, read only (no refresh, no state change). */
export function dsrPeek4(ctx: HostContext, vni: number, src: number, dst: number, proto: number, sport: number, dport: number): number {
  ctx.ew.flows.setKey4(vni, src, dst, proto, sport, dport, KEY_SPACE_DSR);
  return ctx.ew.flows.peek(ctx.ew.nowS);
}

export function dsrPeek6(
  ctx: HostContext,
  vni: number,
  src: ArrayLike<number>,
  dst: ArrayLike<number>,
  proto: number,
  sport: number,
  dport: number,
): number {
  ctx.ew.flows.setKey6(vni, src, dst, proto, sport, dport, KEY_SPACE_DSR);
  return ctx.ew.flows.peek(ctx.ew.nowS);
}

/**
 * Records the flow a backend's frame (on port `port`) replies to, as if its client's packet had come in
 * through a MUX first. Not used by the daemon: for offline tools that replay backend replies alone
 * (slbx-replay --assume-flows) and for tests of other parts (counters, send errors). False when the
 * frame is no TCP/UDP reply of a public VIP rule of that port (IPv4, or IPv6 without extension headers).
 */
export function learnReplyFlow(frame: Uint8Array, len: number, port: number, ctx: HostContext): boolean {
  const nic = ctx.tables.nics[port];
  if (nic === undefined || len < 14) return false;
  const type = (frame[12]! << 8) | frame[13]!;
  const l3 = 14;
  let proto: number;
  let l4: number;
  if (type === 0x0800 && len >= l3 + 20) {
    proto = frame[l3 + 9]!;
    l4 = l3 + (frame[l3]! & 0x0f) * 4;
  } else if (type === 0x86dd && len >= l3 + 40) {
    proto = frame[l3 + 6]!;
    l4 = l3 + 40;
  } else {
    return false;
  }
  if ((proto !== IPPROTO_TCP && proto !== 17) || len < l4 + 4) return false;
  const sport = (frame[l4]! << 8) | frame[l4 + 1]!;
  const dport = (frame[l4 + 2]! << 8) | frame[l4 + 3]!;
  const family = type === 0x0800 ? 4 : 6;
  const rule = nic.outbound.get(((family << 24) | (proto << 16) | sport) >>> 0);
  if (rule === undefined) return false;
  const w = (o: number) => ((frame[o]! << 24) | (frame[o + 1]! << 16) | (frame[o + 2]! << 8) | frame[o + 3]!) >>> 0;
  ctx.ports.tcpFlags = TCP_ACK;
  if (family === 4) {
    dsrLearn4(ctx, nic.network.vni, w(l3 + 12), w(l3 + 16), proto, sport, dport, rule.frontendPort);
  } else {
    const src = Uint32Array.of(w(l3 + 8), w(l3 + 12), w(l3 + 16), w(l3 + 20));
    const dst = Uint32Array.of(w(l3 + 24), w(l3 + 28), w(l3 + 32), w(l3 + 36));
    dsrLearn6(ctx, nic.network.vni, src, dst, proto, sport, dport, rule.frontendPort);
  }
  return true;
}
