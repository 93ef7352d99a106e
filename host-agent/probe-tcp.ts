// A minimal userspace TCP client for health probes, spoken through a backend's port (docs/probes.md).
//
// The host agent is the backends' gateway (it answers ARP/ND for the gateway address on every port), so
// it probes like a virtual switch's built-in prober: it sends the probe's segments itself, from the
// network's gateway address and the port's MAC to the nic's MAC, and the backend's own TCP stack answers.
// Its answers come back through the port's capture as VERDICT_LOCAL (host-agent/data-plane.ts) and are
// handed to onPacket(). No kernel socket is involved: the host namespace has no address in the tenants'
// networks (and tenants may reuse one address space on one host).
//
//   tcp   SYN -> SYN-ACK: success, then RST (the backend's application never sees an accept);
//         RST: failure "refused"; nothing within the timeout: failure "timeout".
//   http  SYN -> SYN-ACK -> ACK + one segment "GET PATH HTTP/1.1 ..." -> in-order data is acknowledged
//         until the status line is complete: "200" is a success, anything else a failure ("http 503");
//         then RST. A RST, FIN before the status line, or the timeout fail the probe.
//
// Closing with RST rather than FIN: the probe is over once it has its answer; a RST frees the backend's
// connection at once (no FIN_WAIT/TIME_WAIT there), leaves the prober no state to keep or retransmit, and
// a TCP probe's half-open connection never reaches the backend's accept queue. No retransmissions at all:
// a probe is one attempt, a lost segment fails that probe, and the thresholds absorb single losses.
//
// Connections are keyed by (nic, local port); local ports come from 49152-65535 per nic, in sequence from a
// random start, skipping ports in use, so concurrent probes on one nic never share a port and a port is
// reused only after 16384 probes of that nic. A segment for no live connection (late, after a timeout, or
// unexpected) gets an RST as RFC 9293 3.10.7.1 says (never for an RST), except the segments of a
// connection we reset ourselves in the last 3 s (they crossed our RST; the backend has already forgotten
// the connection): those are counted as late and dropped. Not per-packet on the DSR path:
// this only sees packets a backend sends to its gateway address. Frames are written with the project's
// codecs into one reused buffer, with full checksums.
import { randomInt } from 'node:crypto';
import { writeIpAddr, type IpAddr } from '../shared/addr.js';
import { ipv6Equal } from '../shared/hot-path.js';
import { readU32, writeU16 } from '../shared/bytes.js';
import { l4Checksum, pseudoSumV4, pseudoSumV6Bytes, verifyL4Checksum } from '../shared/checksum.js';
import { Counters } from '../shared/counters.js';
import { ETH_HEADER_LEN, ETHERTYPE_IPV4, ETHERTYPE_IPV6, writeEthernetRaw } from '../shared/ethernet.js';
import { IPPROTO_TCP, IPV4_FLAG_DF, IPV4_FLAG_MF, IPV4_HEADER_LEN, newIpv4Header, parseIpv4, writeIpv4 } from '../shared/ipv4.js';
import { IPV6_HEADER_LEN, newIpv6Header, parseIpv6, writeIpv6 } from '../shared/ipv6.js';
import { TCP_ACK, TCP_FIN, TCP_HEADER_LEN, TCP_PSH, TCP_RST, TCP_SYN, newTcpHeader, parseTcp, writeTcp } from '../shared/tcp.js';

export const PROBE_PORT_MIN = 49152;
export const PROBE_PORT_MAX = 65535;
/** The window we advertise (no scaling): far more than a status line needs. */
export const PROBE_WINDOW = 65535;
/** The most response bytes kept while looking for the end of the status line. */
export const PROBE_HTTP_MAX_STATUS_BYTES = 4096;
export const PROBE_TTL = 64;
/** How long segments of a connection we reset are dropped silently (they crossed our RST). */
export const PROBE_LATE_WINDOW_MS = 3000;
const FRAME_BUF_BYTES = 2048;

export const PROBE_TCP_COUNTER_NAMES = [
  'probes_started',
  'probes_succeeded',
  'probes_failed',
  'segments_sent',
  'segments_in',
  'rst_sent',
  'send_errors',
  'segments_no_connection',
  'segments_late',
  'segments_out_of_order',
  'segments_duplicate',
  'segments_bad_checksum',
  'local_not_tcp',
  'local_fragment',
  'local_malformed',
] as const;
export type ProbeTcpCounterName = (typeof PROBE_TCP_COUNTER_NAMES)[number];

/** One probe to run: where it goes and what it asks. */
export interface ProbeSpec {
  /** The nic probed: the port its frames leave on and its connections are keyed by. */
  readonly nic: string;
  /** Source MAC: the port's (host side of the veth). Destination MAC: the nic's. */
  readonly srcMac: Uint8Array;
  readonly dstMac: Uint8Array;
  /** Source: the network's gateway address; destination: the nic's address (same family). */
  readonly src: IpAddr;
  readonly dst: IpAddr;
  readonly dstPort: number;
  /** null: a TCP probe; otherwise an HTTP GET of `path`. */
  readonly http: { readonly path: string } | null;
  readonly timeoutMs: number;
}

export interface ProbeOutcome {
  readonly ok: boolean;
  /** `syn-ack`, `http 200`; `refused`, `reset`, `timeout`, `timeout (no syn-ack)`, `http 503`, ... */
  readonly detail: string;
  /** From the SYN to the result, ms. */
  readonly rttMs: number;
  /**
   * From the SYN to the backend's SYN-ACK, ms: one network round trip (an HTTP probe's rttMs holds two
   * and the server's time); null when no SYN-ACK came. Latency routing uses it (docs/latency.md).
   */
  readonly connectMs?: number | null;
}

export type ProbeDone = (o: ProbeOutcome) => void;

export interface ProbeTcpIo {
  /** Sends a whole Ethernet frame out of the nic's port; false when it cannot (port not open, refused). */
  send(nic: string, frame: Buffer, len: number): boolean;
  /** (port MAC, nic MAC) of a nic, to answer segments that belong to no connection; null if unknown. */
  macs(nic: string): { readonly src: Uint8Array; readonly dst: Uint8Array } | null;
  now?(): number;
  setTimer?(fn: () => void, ms: number): unknown;
  clearTimer?(t: unknown): void;
  /** A uniform integer in [0, n). */
  randomInt?(n: number): number;
}

const enum Phase {
  SynSent,
  RequestSent,
  Done,
}

interface Conn {
  readonly spec: ProbeSpec;
  readonly lport: number;
  readonly iss: number;
  readonly request: Uint8Array | null;
  readonly startedAt: number;
  readonly done: ProbeDone;
  /** When the SYN-ACK came (this.now()), or -1. */
  synAckAt: number;
  phase: Phase;
  sndNxt: number;
  rcvNxt: number;
  timer: unknown;
  rx: Uint8Array | null;
  rxLen: number;
  badChecksums: number;
  /** We sent an RST on this connection: the backend has forgotten it. */
  resetSent: boolean;
}

/** a < b in sequence space (RFC 9293 3.4: arithmetic modulo 2^32). */
function seqLt(a: number, b: number): boolean {
  return ((a - b) | 0) < 0;
}

function seqAdd(a: number, n: number): number {
  return (a + n) >>> 0;
}

/** The request line and headers of an HTTP probe (RFC 9112 3, RFC 9110 7.2: Host carries a non-default port). */
export function buildProbeRequest(path: string, dst: IpAddr, port: number): Uint8Array {
  const host = dst.family === 6 ? `[${dst.text}]` : dst.text;
  const hostHeader = port === 80 ? host : `${host}:${port}`;
  return Buffer.from(`GET ${path} HTTP/1.1\r\nHost: ${hostHeader}\r\nConnection: close\r\nUser-Agent: slbx-probe\r\n\r\n`, 'latin1');
}

/**
 * The status code of a complete HTTP/1.x status line at the start of buf[0..len) (RFC 9112 4), -1 while
 * the line is incomplete, -2 when it is malformed.
 */
export function parseStatusLine(buf: Uint8Array, len: number): number {
  let eol = -1;
  for (let i = 0; i < len; i++)
    if (buf[i] === 0x0a) {
      eol = i;
      break;
    }
  if (eol < 0) return len >= PROBE_HTTP_MAX_STATUS_BYTES ? -2 : -1;
  const line = Buffer.from(buf.buffer, buf.byteOffset, eol).toString('latin1').replace(/\r$/, '');
  const m = /^HTTP\/1\.[0-9] ([0-9]{3})(?: .*)?$/.exec(line);
  return m === null ? -2 : Number(m[1]);
}

export function formatTarget(dst: IpAddr, port: number): string {
  return dst.family === 6 ? `[${dst.text}]:${port}` : `${dst.text}:${port}`;
}

export class ProbeTcp {
  readonly counters = new Counters(PROBE_TCP_COUNTER_NAMES);
  private readonly io: ProbeTcpIo;
  private readonly conns = new Map<string, Map<number, Conn>>();
  /** `${nic}/${local port}` of connections we reset lately -> until when their segments are dropped. */
  private readonly recentlyReset = new Map<string, number>();
  private readonly nextPort = new Map<string, number>();
  private readonly frame = Buffer.alloc(FRAME_BUF_BYTES);
  private readonly ip4 = newIpv4Header();
  private readonly ip6 = newIpv6Header();
  private readonly tcp = newTcpHeader();
  private readonly rip4 = newIpv4Header();
  private readonly rip6 = newIpv6Header();
  private readonly rtcp = newTcpHeader();
  private readonly srcScratch = new Uint32Array(4);
  private readonly addrScratch = new Uint8Array(32);
  private ipId: number;
  private readonly now: () => number;
  private readonly setTimer: (fn: () => void, ms: number) => unknown;
  private readonly clearTimer: (t: unknown) => void;
  private readonly random: (n: number) => number;

  constructor(io: ProbeTcpIo) {
    this.io = io;
    this.now = io.now ?? (() => performance.now());
    this.setTimer = io.setTimer ?? ((fn, ms) => setTimeout(fn, ms));
    this.clearTimer = io.clearTimer ?? ((t) => clearTimeout(t as NodeJS.Timeout));
    this.random = io.randomInt ?? ((n) => randomInt(n));
    this.ipId = this.random(0x10000);
  }

  /** Connections in progress (all nics). */
  get active(): number {
    let n = 0;
    for (const m of this.conns.values()) n += m.size;
    return n;
  }

  /**
   * Starts one probe; `done` is called exactly once, with the outcome (possibly before start returns,
   * when the SYN cannot be sent).
   */
  start(spec: ProbeSpec, done: ProbeDone): void {
    if (spec.src.family !== spec.dst.family) throw new Error(`probe of ${spec.dst.text} from ${spec.src.text}: families differ`);
    const c = this.counters.values;
    c[this.counters.index.probes_started]!++;
    let byPort = this.conns.get(spec.nic);
    if (byPort === undefined) {
      byPort = new Map();
      this.conns.set(spec.nic, byPort);
    }
    const lport = this.allocatePort(spec.nic, byPort);
    if (lport < 0) {
      this.report(done, false, 'no free local port', 0);
      return;
    }
    const iss = this.random(0x100000000) >>> 0;
    const conn: Conn = {
      spec,
      lport,
      iss,
      request: spec.http === null ? null : buildProbeRequest(spec.http.path, spec.dst, spec.dstPort),
      startedAt: this.now(),
      done,
      synAckAt: -1,
      phase: Phase.SynSent,
      sndNxt: seqAdd(iss, 1),
      rcvNxt: 0,
      timer: null,
      rx: null,
      rxLen: 0,
      badChecksums: 0,
      resetSent: false,
    };
    byPort.set(lport, conn);
    conn.timer = this.setTimer(() => this.onTimeout(conn), spec.timeoutMs);
    if (!this.sendConn(conn, iss, 0, TCP_SYN, null)) this.finish(conn, false, 'send failed (port not open?)');
  }

  /** Ends every probe in progress on a nic (or all), without calling their callbacks. */
  cancel(nic?: string): void {
    for (const [n, byPort] of this.conns) {
      if (nic !== undefined && n !== nic) continue;
      for (const conn of byPort.values()) {
        conn.phase = Phase.Done;
        this.clearTimer(conn.timer);
      }
      byPort.clear();
    }
  }

  private allocatePort(nic: string, byPort: Map<number, Conn>): number {
    const span = PROBE_PORT_MAX - PROBE_PORT_MIN + 1;
    let p = this.nextPort.get(nic) ?? PROBE_PORT_MIN + this.random(span);
    for (let i = 0; i < span; i++) {
      const cand = p;
      p = p === PROBE_PORT_MAX ? PROBE_PORT_MIN : p + 1;
      if (!byPort.has(cand)) {
        this.nextPort.set(nic, p);
        return cand;
      }
    }
    return -1;
  }

  private onTimeout(conn: Conn): void {
    if (conn.phase === Phase.Done) return;
    let detail = conn.phase === Phase.SynSent ? 'timeout (no syn-ack)' : 'timeout (no status line)';
    if (conn.badChecksums > 0)
      detail += ` (${conn.badChecksums} segments with a bad TCP checksum: checksum offload on the backend's interface?)`;
    // the backend may hold a half-open connection: end it
    if (conn.phase === Phase.RequestSent) this.sendConn(conn, conn.sndNxt, 0, TCP_RST, null);
    this.finish(conn, false, detail, false);
  }

  private finish(conn: Conn, ok: boolean, detail: string, clear = true): void {
    if (conn.phase === Phase.Done) return;
    conn.phase = Phase.Done;
    if (clear) this.clearTimer(conn.timer);
    this.conns.get(conn.spec.nic)?.delete(conn.lport);
    if (conn.resetSent) {
      // the backend may still have segments in flight that crossed our RST: drop those quietly
      const now = this.now();
      for (const [k, until] of this.recentlyReset) {
        if (until > now) break;
        this.recentlyReset.delete(k);
      }
      this.recentlyReset.set(`${conn.spec.nic}/${conn.lport}`, now + PROBE_LATE_WINDOW_MS);
    }
    this.report(conn.done, ok, detail, this.now() - conn.startedAt, conn.synAckAt < 0 ? null : conn.synAckAt - conn.startedAt);
  }

  private report(done: ProbeDone, ok: boolean, detail: string, rttMs: number, connectMs: number | null = null): void {
    this.counters.values[ok ? this.counters.index.probes_succeeded : this.counters.index.probes_failed]!++;
    const r = (x: number) => Math.round(x * 1000) / 1000;
    done({ ok, detail, rttMs: r(rttMs), connectMs: connectMs === null ? null : r(connectMs) });
  }

  /**
   * An IP packet a backend sent to its gateway address, seen on the port of `nic`: buf[off .. off+len)
   * (the data plane's VERDICT_LOCAL). Handled synchronously; the buffer may be reused afterwards.
   */
  onPacket(nic: string, buf: Uint8Array, off: number, len: number): void {
    const C = this.counters.index;
    const c = this.counters.values;
    const end = off + len;
    if (len < 1 || end > buf.length) {
      c[C.local_malformed]!++;
      return;
    }
    const version = buf[off]! >>> 4;
    const src = this.srcScratch;
    if (version === 4) {
      const ip = this.rip4;
      const hl = parseIpv4(buf, off, ip, end);
      if (hl < 0) {
        c[C.local_malformed]!++;
        return;
      }
      if (ip.protocol !== IPPROTO_TCP) {
        c[C.local_not_tcp]!++;
        return;
      }
      if ((ip.flags & IPV4_FLAG_MF) !== 0 || ip.fragOffset !== 0) {
        c[C.local_fragment]!++;
        return;
      }
      const l4 = off + hl;
      const segEnd = off + ip.totalLength;
      src[0] = ip.src;
      this.onSegment(nic, 4, buf, off, l4, segEnd, pseudoSumV4(ip.src, ip.dst, IPPROTO_TCP, segEnd - l4), src);
      return;
    }
    if (version === 6) {
      const ip = this.rip6;
      const hl = parseIpv6(buf, off, ip, end);
      if (hl < 0) {
        c[C.local_malformed]!++;
        return;
      }
      if (ip.hasFragment) {
        c[C.local_fragment]!++;
        return;
      }
      if (ip.protocol !== IPPROTO_TCP) {
        c[C.local_not_tcp]!++;
        return;
      }
      const l4 = off + hl;
      const segEnd = off + IPV6_HEADER_LEN + ip.payloadLength;
      src.set(ip.src);
      this.onSegment(nic, 6, buf, off, l4, segEnd, pseudoSumV6Bytes(buf, off + 8, off + 24, IPPROTO_TCP, segEnd - l4), src);
      return;
    }
    c[C.local_malformed]!++;
  }

  private onSegment(
    nic: string,
    family: 4 | 6,
    buf: Uint8Array,
    l3: number,
    l4: number,
    end: number,
    pseudo: number,
    src: Uint32Array,
  ): void {
    const C = this.counters.index;
    const c = this.counters.values;
    const t = this.rtcp;
    const hl = parseTcp(buf, l4, t, end);
    if (hl < 0) {
      c[C.local_malformed]!++;
      return;
    }
    c[C.segments_in]!++;
    const conn = this.conns.get(nic)?.get(t.dstPort);
    const mine = conn !== undefined && conn.spec.dst.family === family && t.srcPort === conn.spec.dstPort && sameAddr(conn.spec.dst, src);
    if (!verifyL4Checksum(buf, l4, end - l4, pseudo)) {
      // RFC 9293 3.10.7: a segment with a bad checksum is discarded, never answered
      c[C.segments_bad_checksum]!++;
      if (mine) conn!.badChecksums++;
      return;
    }
    const dataLen = end - l4 - hl;
    if (!mine) {
      const until = this.recentlyReset.get(`${nic}/${t.dstPort}`);
      if (until !== undefined && until > this.now()) {
        c[C.segments_late]!++;
        return;
      }
      this.resetUnknown(nic, family, buf, l3, dataLen);
      return;
    }
    this.onConnSegment(conn!, buf, l4 + hl, dataLen);
  }

  private onConnSegment(conn: Conn, buf: Uint8Array, data: number, dataLen: number): void {
    const C = this.counters.index;
    const c = this.counters.values;
    const t = this.rtcp;
    const f = t.flags;
    if (conn.phase === Phase.SynSent) {
      // RFC 9293 3.10.7.3 SYN-SENT
      const ackOk = (f & TCP_ACK) !== 0 && t.ack === conn.sndNxt;
      if ((f & TCP_ACK) !== 0 && !ackOk) {
        if ((f & TCP_RST) === 0) this.sendConn(conn, t.ack, 0, TCP_RST, null);
        return;
      }
      if ((f & TCP_RST) !== 0) {
        if (ackOk) this.finish(conn, false, 'refused');
        return;
      }
      if ((f & TCP_SYN) === 0 || !ackOk) return;
      conn.synAckAt = this.now();
      conn.rcvNxt = seqAdd(t.seq, 1);
      if (conn.request === null) {
        this.sendConn(conn, conn.sndNxt, 0, TCP_RST, null);
        this.finish(conn, true, 'syn-ack');
        return;
      }
      conn.phase = Phase.RequestSent;
      conn.rx = new Uint8Array(PROBE_HTTP_MAX_STATUS_BYTES);
      const seq = conn.sndNxt;
      conn.sndNxt = seqAdd(seq, conn.request.length);
      this.sendConn(conn, seq, conn.rcvNxt, TCP_ACK | TCP_PSH, conn.request);
      return;
    }
    if (conn.phase !== Phase.RequestSent) return;
    // RFC 9293 3.10.7.4 (simplified: one window, in-order data only)
    if ((f & TCP_RST) !== 0) {
      // RFC 5961 3: only an RST at exactly the next expected sequence number ends the connection
      if (t.seq === conn.rcvNxt) this.finish(conn, false, 'reset');
      else this.sendConn(conn, conn.sndNxt, conn.rcvNxt, TCP_ACK, null);
      return;
    }
    if ((f & TCP_SYN) !== 0) {
      // a retransmitted SYN-ACK: our ACK with the request was lost; send the request again
      if ((f & TCP_ACK) !== 0 && seqAdd(t.seq, 1) === conn.rcvNxt) {
        this.sendConn(conn, seqAdd(conn.iss, 1), conn.rcvNxt, TCP_ACK | TCP_PSH, conn.request);
      }
      return;
    }
    const fin = (f & TCP_FIN) !== 0;
    const segLen = dataLen + (fin ? 1 : 0);
    if (segLen === 0) return; // a bare ACK (of our request)
    if (seqLt(conn.rcvNxt, t.seq)) {
      // a gap before this segment: say what we expect (a duplicate ACK) and drop it
      c[C.segments_out_of_order]!++;
      this.sendConn(conn, conn.sndNxt, conn.rcvNxt, TCP_ACK, null);
      return;
    }
    const skip = (conn.rcvNxt - t.seq) >>> 0; // bytes of this segment we already have
    if (skip >= segLen) {
      c[C.segments_duplicate]!++;
      this.sendConn(conn, conn.sndNxt, conn.rcvNxt, TCP_ACK, null);
      return;
    }
    const fresh = dataLen > skip ? dataLen - skip : 0;
    const rx = conn.rx!;
    const keep = Math.min(fresh, rx.length - conn.rxLen);
    rx.set(buf.subarray(data + skip, data + skip + keep), conn.rxLen);
    conn.rxLen += keep;
    conn.rcvNxt = seqAdd(conn.rcvNxt, fresh + (fin ? 1 : 0));
    const status = parseStatusLine(rx, conn.rxLen);
    if (status >= 0) {
      this.sendConn(conn, conn.sndNxt, 0, TCP_RST, null);
      this.finish(conn, status === 200, `http ${status}`);
      return;
    }
    if (status === -2) {
      this.sendConn(conn, conn.sndNxt, 0, TCP_RST, null);
      this.finish(conn, false, 'bad status line');
      return;
    }
    if (fin) {
      this.sendConn(conn, conn.sndNxt, 0, TCP_RST, null);
      this.finish(conn, false, 'closed before the status line');
      return;
    }
    this.sendConn(conn, conn.sndNxt, conn.rcvNxt, TCP_ACK, null);
  }

  /** RFC 9293 3.10.7.1: a segment for no connection gets an RST (never one for an RST). */
  private resetUnknown(nic: string, family: 4 | 6, buf: Uint8Array, l3: number, dataLen: number): void {
    const c = this.counters.values;
    c[this.counters.index.segments_no_connection]!++;
    const t = this.rtcp;
    if ((t.flags & TCP_RST) !== 0) return;
    const macs = this.io.macs(nic);
    if (macs === null) return;
    let seq: number;
    let ack: number;
    let flags: number;
    if ((t.flags & TCP_ACK) !== 0) {
      seq = t.ack;
      ack = 0;
      flags = TCP_RST;
    } else {
      seq = 0;
      ack = seqAdd(t.seq, dataLen + ((t.flags & TCP_SYN) !== 0 ? 1 : 0) + ((t.flags & TCP_FIN) !== 0 ? 1 : 0));
      flags = TCP_RST | TCP_ACK;
    }
    // answer from the address it was sent to (the gateway) back to its source
    const dstOff = family === 4 ? 16 : 24;
    const srcOff = family === 4 ? 12 : 8;
    this.sendRaw(nic, family, macs.src, macs.dst, buf, l3 + dstOff, buf, l3 + srcOff, t.dstPort, t.srcPort, seq, ack, flags, null);
  }

  private sendConn(conn: Conn, seq: number, ack: number, flags: number, payload: Uint8Array | null): boolean {
    const s = conn.spec;
    if ((flags & TCP_RST) !== 0) conn.resetSent = true;
    const a = this.addrScratch;
    writeIpAddr(s.src, a, 0);
    writeIpAddr(s.dst, a, 16);
    return this.sendRaw(s.nic, s.dst.family, s.srcMac, s.dstMac, a, 0, a, 16, conn.lport, s.dstPort, seq, ack, flags, payload);
  }

  /** Writes Ethernet / IPv4|IPv6 / TCP (+ payload) with full checksums into the frame buffer and sends it. */
  private sendRaw(
    nic: string,
    family: 4 | 6,
    srcMac: Uint8Array,
    dstMac: Uint8Array,
    srcBuf: Uint8Array,
    srcOff: number,
    dstBuf: Uint8Array,
    dstOff: number,
    sport: number,
    dport: number,
    seq: number,
    ack: number,
    flags: number,
    payload: Uint8Array | null,
  ): boolean {
    const C = this.counters.index;
    const c = this.counters.values;
    const b = this.frame;
    const plen = payload === null ? 0 : payload.length;
    const tcpLen = TCP_HEADER_LEN + plen;
    let l4: number;
    let pseudo: number;
    if (family === 4) {
      writeEthernetRaw(dstMac, srcMac, ETHERTYPE_IPV4, b, 0);
      const h = this.ip4;
      h.tos = 0;
      h.totalLength = IPV4_HEADER_LEN + tcpLen;
      h.id = this.ipId;
      h.flags = IPV4_FLAG_DF;
      h.fragOffset = 0;
      h.ttl = PROBE_TTL;
      h.protocol = IPPROTO_TCP;
      h.src = readU32(srcBuf, srcOff);
      h.dst = readU32(dstBuf, dstOff);
      this.ipId = (this.ipId + 1) & 0xffff;
      writeIpv4(h, b, ETH_HEADER_LEN);
      l4 = ETH_HEADER_LEN + IPV4_HEADER_LEN;
      pseudo = pseudoSumV4(h.src, h.dst, IPPROTO_TCP, tcpLen);
    } else {
      writeEthernetRaw(dstMac, srcMac, ETHERTYPE_IPV6, b, 0);
      const h = this.ip6;
      h.trafficClass = 0;
      h.flowLabel = 0;
      h.payloadLength = tcpLen;
      h.nextHeader = IPPROTO_TCP;
      h.hopLimit = PROBE_TTL;
      for (let i = 0; i < 4; i++) {
        h.src[i] = readU32(srcBuf, srcOff + i * 4);
        h.dst[i] = readU32(dstBuf, dstOff + i * 4);
      }
      writeIpv6(h, b, ETH_HEADER_LEN);
      l4 = ETH_HEADER_LEN + IPV6_HEADER_LEN;
      pseudo = pseudoSumV6Bytes(b, ETH_HEADER_LEN + 8, ETH_HEADER_LEN + 24, IPPROTO_TCP, tcpLen);
    }
    const t = this.tcp;
    t.srcPort = sport;
    t.dstPort = dport;
    t.seq = seq >>> 0;
    t.ack = ack >>> 0;
    t.flags = flags;
    t.window = (flags & TCP_RST) !== 0 ? 0 : PROBE_WINDOW;
    t.checksum = 0;
    t.urgent = 0;
    writeTcp(t, b, l4);
    if (payload !== null) b.set(payload, l4 + TCP_HEADER_LEN);
    writeU16(b, l4 + 16, l4Checksum(b, l4, tcpLen, 16, pseudo));
    const len = l4 + tcpLen;
    c[C.segments_sent]!++;
    if ((flags & TCP_RST) !== 0) c[C.rst_sent]!++;
    const ok = this.io.send(nic, b, len);
    if (!ok) c[C.send_errors]!++;
    return ok;
  }
}

function sameAddr(a: IpAddr, words: Uint32Array): boolean {
  if (a.family === 4) return a.words[0] === words[0];
  return ipv6Equal(a.words, words);
}
