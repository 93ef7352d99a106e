// What the host agent does with each of the data plane's verdicts (host-agent/data-plane.ts: processInbound,
// processOutbound), the same in the single-threaded daemon (host-agent/daemon.ts) and in each worker
// thread (host-agent/worker.ts): deliver to a VM port, send DSR, send on the fabric, hold, hand a latency
// echo or a probe answer on, and count what fails. The glue between the pure data plane and a thread's
// sockets: it imports no I/O; the thread's sockets and its hand-offs come in `io`.
import {
  processInbound,
  processOutbound,
  OUT_DSR,
  VERDICT_CONSUMED,
  VERDICT_FORWARD,
  VERDICT_HOLD,
  VERDICT_LOCAL,
  type HostContext,
} from './data-plane.js';
import { OUT_FABRIC } from './east-west.js';
import { HOST_TRAFFIC_STRIDE, type HostTrafficCounters } from './traffic-counters.js';

/** A socket the verdicts send on (a VM port's, the fabric's, a DSR sender). */
export interface VerdictSender {
  send(buf: Uint8Array, off: number, len: number): boolean;
}

/** A thread's sockets and what it does itself with the verdicts that leave the data path. */
export interface VerdictIo {
  /** The data plane threw (never expected): counted, the thread keeps serving. */
  internalError(e: unknown): void;
  /** VERDICT_HOLD: VXLAN of a peer whose MAC is not known yet, kept for later. */
  hold(frame: Buffer, len: number): void;
  /** VERDICT_LOCAL on the fabric: a MUX's latency echo request (the VXLAN payload in ctx.out*). */
  echo(frame: Buffer): void;
  /** A peer's VXLAN was dropped for an unknown or changed MAC: ask ARP/ND again. */
  expedite(peer: number): void;
  /** VERDICT_LOCAL on nic `port`: a backend's answer to a health probe (in ctx.out*). */
  local(port: number): void;
  /** The socket of nic `index`'s VM port, or null (not open). */
  port(index: number): VerdictSender | null;
  /** The fabric's socket, or null (not open). */
  fabric(): VerdictSender | null;
  /** The DSR sender of IPv6 (`v6`) or IPv4, or null (none of that family). */
  dsr(v6: boolean): VerdictSender | null;
}

/**
 * VERDICT_HOLD (only in the hold window after a start): a copy of the frame kept in `held` (at most
 * `max`, judged again once its peer's MAC is known); past that it is dropped, as
 * drop_in_source_unresolved (in_held undone, the frame counted in).
 */
export function holdFrame(ctx: HostContext, held: Buffer[], max: number, frame: Buffer, len: number): void {
  if (held.length < max) {
    held.push(Buffer.from(frame.subarray(0, len)));
    return;
  }
  const c = ctx.counters;
  c.values[c.index.in_held]!--;
  c.values[c.index.in_packets]!++;
  c.values[c.index.in_bytes]! += len;
  c.values[c.index.drop_in_source_unresolved]!++;
}

/** VXLAN (or anything else the fabric's socket took) through the data plane, and out of its VM port. */
export function handleInbound(ctx: HostContext, traffic: HostTrafficCounters, io: VerdictIo, frame: Buffer, len: number): void {
  let v: number;
  try {
    v = processInbound(frame, len, ctx);
  } catch (e) {
    io.internalError(e);
    return;
  }
  if (v === VERDICT_HOLD) {
    io.hold(frame, len);
    return;
  }
  if (v === VERDICT_CONSUMED) return; // a Fastpath redirect, installed (docs/east-west.md)
  if (v === VERDICT_LOCAL) {
    io.echo(frame);
    return;
  }
  if (v !== VERDICT_FORWARD) {
    const C = ctx.counters.index;
    if (ctx.lastDrop === C.drop_in_spoofed_source || ctx.lastDrop === C.drop_in_source_unresolved) io.expedite(ctx.lastPeer);
    return;
  }
  const port = io.port(ctx.outPort);
  if (port === null) {
    ctx.counters.values[ctx.counters.index.drop_internal_error]!++;
    return;
  }
  // in_delivered counted the verdict, and the nic's slot counts it (host-agent/traffic-counters.ts); a
  // send the kernel refuses is counted here
  const t = traffic.delivered;
  const k = ctx.outPort * HOST_TRAFFIC_STRIDE;
  t[k]!++;
  t[k + 1]! += ctx.outLen;
  if (!port.send(frame, ctx.outOff, ctx.outLen)) ctx.counters.values[ctx.counters.index.send_error_port]!++;
}

/**
 * One frame a backend sent on nic `port` through the data plane, and out: DSR, east-west on the fabric, or
 * a reply on the port. What it sends is counted when the send fails: send_error_dsr, _dsr_unavailable,
 * _fabric, _reply.
 */
export function handleOutbound(
  ctx: HostContext,
  traffic: HostTrafficCounters,
  io: VerdictIo,
  frame: Buffer,
  len: number,
  port: number,
): void {
  let v: number;
  try {
    v = processOutbound(frame, len, port, ctx);
  } catch (e) {
    io.internalError(e);
    return;
  }
  if (v !== VERDICT_FORWARD) {
    // a backend's answer to a health probe (sent to its gateway address): for the prober
    if (v === VERDICT_LOCAL) io.local(port);
    return;
  }
  // out_dsr counted the verdict; a send that fails (or has no socket of its family) is counted here
  const cv = ctx.counters.values;
  const C = ctx.counters.index;
  if (ctx.outPort === OUT_DSR) {
    const t = traffic.dsr; // the replying nic's slot (host-agent/traffic-counters.ts)
    const k = port * HOST_TRAFFIC_STRIDE;
    t[k]!++;
    t[k + 1]! += ctx.outLen;
    const raw = io.dsr(frame[ctx.outOff]! >>> 4 === 6);
    if (raw === null) cv[C.send_error_dsr_unavailable]!++;
    else if (!raw.send(frame, ctx.outOff, ctx.outLen)) cv[C.send_error_dsr]!++;
  } else if (ctx.outPort === OUT_FABRIC) {
    // east-west VXLAN to a MUX or, after a redirect, to the DIP's host (docs/east-west.md)
    const f = io.fabric();
    if (f === null || !f.send(ctx.outBuf, ctx.outOff, ctx.outLen)) cv[C.send_error_fabric]!++;
  } else {
    // an ARP reply, a neighbour advertisement or an ICMP error, back on the port it was asked on
    const p = io.port(ctx.outPort);
    if (p === null || !p.send(ctx.outBuf, ctx.outOff, ctx.outLen)) cv[C.send_error_reply]!++;
  }
}
