// The state of the direct server return (docs/design.md "Return path"): the host agent remembers each
// load-balanced flow it delivers to a local backend, in the host flow table (host-agent/flow-table.ts,
// kinds FLOW_DSR and FLOW_DSR_CLOSING, keyed by the reply's 5-tuple DIP:backendPort -> client:port), and
// a backend packet leaves from the VIP only when it belongs to one of them.
//
// dsrLearn4/6 (inbound, after the NAT): a TCP segment or UDP datagram of a public VIP's rule creates or
//   refreshes its entry. Any TCP segment does, not only a SYN (counted dsr_flows_learned_midstream when
//   no SYN): a flow a restarted agent did not get from its flow snapshot (host-agent/flow-snapshot.ts:
//   one opened after the last snapshot before a SIGKILL, or every flow without --state-dir) is re-learned
//   from the client's next segment or retransmission. A FIN or RST makes the entry closing (kept
//   DSR_CLOSING_S after the flow's last packet); a SYN without ACK on a closing entry (the tuple reused)
//   opens it again. A full table counts dsr_flows_full and the packet is still delivered: its reply
//   then finds no entry and is dropped as unsolicited (the flows already recorded are not touched).
// dsrAllowed4/6 (outbound, before the NAT): the reply's entry, or -1. TCP refreshes the entry (idle is
//   no packet either way) and follows FIN/RST; UDP only reads it: only the client's datagrams keep a UDP
//   flow alive, so a backend cannot stretch its permission to send from the VIP.
// Pure and synchronous like the rest of the data plane; the clock is ctx.ew.nowS (whole seconds).
import { IPPROTO_TCP } from '../shared/ipv4.js';
import { TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN } from '../shared/tcp.js';
import { DSR_CLOSING_S, FLOW_DSR, FLOW_DSR_CLOSING, KEY_SPACE_DSR, flowAction, flowKind } from './flow-table.js';
import type { HostContext } from './data-plane.js';

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
  ctx.ew.flows.setKey4(vni, dip, client, proto, bport, cport, KEY_SPACE_DSR);
  learn(ctx, proto, fport);
}

export function dsrLearn6(
  ctx: HostContext,
  vni: number,
  dip: ArrayLike<number>,
  client: ArrayLike<number>,
  proto: number,
  bport: number,
  cport: number,
  fport: number,
): void {
  ctx.ew.flows.setKey6(vni, dip, client, proto, bport, cport, KEY_SPACE_DSR);
  learn(ctx, proto, fport);
}

function learn(ctx: HostContext, proto: number, fport: number): void {
  const s = ctx.ew;
  const f = s.flows;
  const now = s.nowS;
  const tcp = proto === IPPROTO_TCP;
  const v = f.lookup(now, now + (tcp ? s.tcpIdleS : s.udpIdleS));
  const flags = tcp ? ctx.ports.tcpFlags : 0;
  const closing = (flags & (TCP_FIN | TCP_RST)) !== 0;
  if (v >= 0 && flowKind(v) === FLOW_DSR && !closing) return; // the common case: one lookup
  let kind = FLOW_DSR;
  if (closing || (v >= 0 && flowKind(v) === FLOW_DSR_CLOSING && (flags & (TCP_SYN | TCP_ACK)) !== TCP_SYN)) kind = FLOW_DSR_CLOSING;
  const c = ctx.counters;
  if (f.insert(kind, fport, now + (kind === FLOW_DSR ? (tcp ? s.tcpIdleS : s.udpIdleS) : DSR_CLOSING_S))) {
    if (v < 0) {
      c.values[c.index.dsr_flows_learned]!++;
      if (tcp && (flags & TCP_SYN) === 0) c.values[c.index.dsr_flows_learned_midstream]!++;
    }
  } else {
    c.values[c.index.dsr_flows_full]!++;
  }
}

/** Before a backend packet's NAT to the VIP: its flow's entry (the frontend port), or -1 when none. */
export function dsrAllowed4(
  ctx: HostContext,
  vni: number,
  src: number,
  dst: number,
  proto: number,
  sport: number,
  dport: number,
  fport: number,
): number {
  ctx.ew.flows.setKey4(vni, src, dst, proto, sport, dport, KEY_SPACE_DSR);
  return allowed(ctx, proto, fport);
}

export function dsrAllowed6(
  ctx: HostContext,
  vni: number,
  src: ArrayLike<number>,
  dst: ArrayLike<number>,
  proto: number,
  sport: number,
  dport: number,
  fport: number,
): number {
  ctx.ew.flows.setKey6(vni, src, dst, proto, sport, dport, KEY_SPACE_DSR);
  return allowed(ctx, proto, fport);
}

/**
 * Seconds after the host agent's start during which a backend's TCP segment with ACK (no SYN, no RST)
 * of no recorded flow still goes out and re-learns it: after a restart, a server whose client waits for
 * it (a response sent while the agent was down, retransmitted) would otherwise be dropped until the
 * client's own timeout, since such a client has nothing to send. Measured in scenario 19: 26 of 99
 * connections on the restarted host stalled that way without it. The flow snapshot restores nearly every
 * flow, but not one opened after its last write before a SIGKILL: under --load, 10 of 93 flows were
 * missed and 3 connections stalled without this window (docs/reliability.md).
 */
export const DSR_RELEARN_S = 60;

function allowed(ctx: HostContext, proto: number, fport: number): number {
  const s = ctx.ew;
  const f = s.flows;
  const now = s.nowS;
  if (proto !== IPPROTO_TCP) {
    const u = f.peek(now);
    return u < 0 ? -1 : flowAction(u);
  }
  const v = f.lookup(now, now + s.tcpIdleS);
  if (v < 0) return now < s.dsrRelearnUntilS ? relearnOut(ctx, fport) : -1;
  if (flowKind(v) === FLOW_DSR_CLOSING || (ctx.ports.tcpFlags & (TCP_FIN | TCP_RST)) !== 0)
    f.insert(FLOW_DSR_CLOSING, flowAction(v), now + DSR_CLOSING_S);
  return flowAction(v);
}

/** Within DSR_RELEARN_S of the start: a backend's established-looking TCP segment re-learns its flow. */
function relearnOut(ctx: HostContext, fport: number): number {
  const flags = ctx.ports.tcpFlags;
  if ((flags & (TCP_SYN | TCP_RST)) !== 0 || (flags & TCP_ACK) === 0) return -1;
  const s = ctx.ew;
  const closing = (flags & TCP_FIN) !== 0;
  const c = ctx.counters;
  if (s.flows.insert(closing ? FLOW_DSR_CLOSING : FLOW_DSR, fport, s.nowS + (closing ? DSR_CLOSING_S : s.tcpIdleS)))
    c.values[c.index.dsr_flows_relearned_out]!++;
  else c.values[c.index.dsr_flows_full]!++;
  return fport;
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
    const src = [w(l3 + 8), w(l3 + 12), w(l3 + 16), w(l3 + 20)];
    const dst = [w(l3 + 24), w(l3 + 28), w(l3 + 32), w(l3 + 36)];
    dsrLearn6(ctx, nic.network.vni, src, dst, proto, sport, dport, rule.frontendPort);
  }
  return true;
}
