// BFD (RFC 5880 asynchronous mode, RFC 5881 single hop) beside a BGP session: the MUX sends control
// packets to the peer's UDP port 3784 from one source port in 49152-65535 with TTL 255, and receives the
// peer's on its own port 3784 (one receiving socket per local address, shared by its sessions and
// demultiplexed by the peer's address). Toward a peer that is not on the MUX's subnet (a routed underlay,
// peering with a router's loopback) the session is multihop (RFC 5883): the same packets, to and from UDP
// port 4784, still sent with TTL 255 (RFC 5883 5 leaves the TTL to the sender; 255 lets a receiver that
// checks a minimum TTL count the hops). The session logic is the pure stepBfdSession
// (shared/bgp-bfd.ts); this file owns the sockets and the timers. The router detects a hung MUX when
// these packets stop (interval x multiplier); the MUX drops its BGP session when the router's stop.
//
// Not done: checking that received packets have TTL 255 (node's dgram cannot read the TTL), echo mode,
// demand mode, authentication.
import { createSocket, type Socket } from 'node:dgram';
import { randomInt } from 'node:crypto';
import {
  BFD_MULTIHOP_PORT,
  BFD_PORT,
  BFD_SOURCE_PORT_MAX,
  BFD_SOURCE_PORT_MIN,
  BFD_STATE_ADMIN_DOWN,
  BFD_STATE_NAMES,
  BFD_STATE_UP,
  BFD_TTL,
  bfdDetectionTimeUs,
  bfdErrorName,
  bfdPacket,
  bfdTxIntervalUs,
  newBfdControl,
  newBfdSession,
  parseBfdControl,
  stepBfdSession,
  writeBfdControl,
  type BfdEvent,
  type BfdSession,
} from '../../shared/bgp-bfd.js';
import { parseIpAddr } from '../../shared/addr.js';
import type { LogLevel } from '../../runtime/log.js';

type Log = (level: LogLevel, event: string, fields: Record<string, unknown>) => void;

/** One receiving socket per local address, shared by the sessions from that address. */
class BfdReceiver {
  private static readonly all = new Map<string, BfdReceiver>();
  private readonly sessions = new Map<string, BfdPeer>();
  private readonly sock: Socket;
  private refs = 0;

  private constructor(
    readonly local: string,
    readonly port: number,
    log: Log,
  ) {
    const family = parseIpAddr(local)?.family === 6 ? 'udp6' : 'udp4';
    this.sock = createSocket({ type: family, reuseAddr: true });
    this.sock.on('error', (e) => log('warn', 'bfd_socket_error', { local, port, error: e.message }));
    this.sock.on('message', (msg, rinfo) => {
      const peer = parseIpAddr(rinfo.address.split('%')[0]!)?.text ?? rinfo.address;
      this.sessions.get(peer)?.onPacket(msg);
    });
    this.sock.bind(port, local);
  }

  static attach(local: string, port: number, peer: BfdPeer, log: Log): BfdReceiver {
    const key = `${local} ${port}`;
    let r = BfdReceiver.all.get(key);
    if (r === undefined) {
      r = new BfdReceiver(local, port, log);
      BfdReceiver.all.set(key, r);
    }
    r.sessions.set(peer.o.peer, peer);
    r.refs++;
    return r;
  }

  detach(peer: BfdPeer): void {
    this.sessions.delete(peer.o.peer);
    if (--this.refs > 0) return;
    BfdReceiver.all.delete(`${this.local} ${this.port}`);
    try {
      this.sock.close();
    } catch {
      /* closed */
    }
  }
}

export interface BfdPeerOptions {
  readonly local: string;
  readonly peer: string;
  readonly intervalMs: number;
  readonly multiplier: number;
  /** RFC 5883 (UDP 4784) instead of RFC 5881 (3784): the peer is not on our subnet. */
  readonly multihop?: boolean;
  readonly log: Log;
  /** Called when the session leaves Up (detection time expired, or the peer said Down). */
  readonly onDown: (reason: string) => void;
}

export class BfdPeer {
  readonly o: BfdPeerOptions;
  private s: BfdSession;
  private tx: Socket | null = null;
  private rx: BfdReceiver | null = null;
  private txTimer: NodeJS.Timeout | null = null;
  private detectTimer: NodeJS.Timeout | null = null;
  private readonly pkt = newBfdControl();
  private started = false;
  readonly counters = { sent: 0, received: 0, discarded: 0, up: 0, down: 0 };
  lastDiscard: string | null = null;
  private since = Date.now();

  constructor(o: BfdPeerOptions) {
    this.o = o;
    this.s = newBfdSession({ intervalUs: o.intervalMs * 1000, detectMult: o.multiplier, myDiscriminator: randomInt(1, 0xffffffff) });
  }

  /** The peer's (and our receiving) UDP port: 3784 single hop, 4784 multihop. */
  get port(): number {
    return this.o.multihop === true ? BFD_MULTIHOP_PORT : BFD_PORT;
  }

  get state(): string {
    return BFD_STATE_NAMES[this.s.state]!;
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    this.rx = BfdReceiver.attach(this.o.local, this.port, this, this.o.log);
    const family = parseIpAddr(this.o.local)?.family === 6 ? 'udp6' : 'udp4';
    const tx = createSocket(family);
    this.tx = tx;
    tx.on('error', (e) => {
      this.lastDiscard = `send: ${e.message}`;
    });
    // RFC 5881 4: one source port in 49152-65535 for the whole session
    tx.bind(randomInt(BFD_SOURCE_PORT_MIN, BFD_SOURCE_PORT_MAX + 1), this.o.local, () => {
      try {
        tx.setTTL(BFD_TTL);
      } catch {
        /* kept at the default */
      }
      tx.connect(this.port, this.o.peer, () => this.send());
    });
    this.o.log('info', 'bfd_started', {
      peer: this.o.peer,
      local: this.o.local,
      intervalMs: this.o.intervalMs,
      multiplier: this.o.multiplier,
      multihop: this.o.multihop === true,
    });
  }

  /** AdminDown to the peer (so it does not report a failure), then close. */
  stop(): void {
    if (!this.started) return;
    this.started = false;
    this.apply({ type: 'adminDown' });
    this.send();
    if (this.txTimer !== null) clearTimeout(this.txTimer);
    if (this.detectTimer !== null) clearTimeout(this.detectTimer);
    this.txTimer = this.detectTimer = null;
    const tx = this.tx;
    this.tx = null;
    setTimeout(() => {
      try {
        tx?.close();
      } catch {
        /* closed */
      }
    }, 50);
    this.rx?.detach(this);
    this.rx = null;
  }

  onPacket(msg: Buffer): void {
    if (!this.started) return;
    const r = parseBfdControl(msg, 0, this.pkt, msg.length);
    if (r < 0) {
      this.counters.discarded++;
      this.lastDiscard = bfdErrorName(r);
      return;
    }
    this.counters.received++;
    const discarded = this.apply({ type: 'rx', packet: { ...this.pkt } });
    if (discarded !== null) {
      this.counters.discarded++;
      this.lastDiscard = discarded;
      return;
    }
    // a valid packet restarts the detection timer (RFC 5880 6.8.4)
    if (this.detectTimer !== null) clearTimeout(this.detectTimer);
    this.detectTimer = setTimeout(
      () => {
        this.detectTimer = null;
        this.apply({ type: 'detectionTimeout' });
      },
      Math.ceil(bfdDetectionTimeUs(this.s) / 1000),
    );
    if (this.s.sendFinal) this.send(true);
  }

  private apply(e: BfdEvent): string | null {
    const from = this.s.state;
    const step = stepBfdSession(this.s, e);
    this.s = step.next;
    if (step.discarded !== null) return step.discarded;
    if (this.s.state !== from) {
      this.since = Date.now();
      const reason =
        e.type === 'detectionTimeout'
          ? 'detection_time_expired'
          : e.type === 'adminDown'
            ? 'admin_down'
            : `peer_${BFD_STATE_NAMES[(e as { packet: { state: number } }).packet.state]!.toLowerCase()}`;
      this.o.log(this.s.state === BFD_STATE_UP || from === BFD_STATE_UP ? 'info' : 'debug', 'bfd_state', {
        peer: this.o.peer,
        from: BFD_STATE_NAMES[from],
        to: BFD_STATE_NAMES[this.s.state],
        reason,
        ...(this.s.state === BFD_STATE_UP ? { txMs: bfdTxIntervalUs(this.s) / 1000, detectMs: bfdDetectionTimeUs(this.s) / 1000 } : {}),
      });
      if (step.up === true) {
        this.counters.up++;
        this.send();
      }
      // RFC 5882 3.2: a session the peer took down administratively is no failure: the client keeps its session
      const adminDown = e.type === 'adminDown' || (e.type === 'rx' && e.packet.state === BFD_STATE_ADMIN_DOWN);
      if (step.up === false) {
        this.counters.down++;
        if (!adminDown) this.o.onDown(reason);
      }
    }
    return null;
  }

  private send(final = false): void {
    if (this.tx === null) return;
    const buf = Buffer.alloc(24); // a socket owns what it sends until it is sent: a new one each time (a few a second)
    writeBfdControl(bfdPacket(this.s, final), buf, 0);
    try {
      this.tx.send(buf);
      this.counters.sent++;
    } catch (e) {
      this.lastDiscard = `send: ${(e as Error).message}`;
    }
    if (final || !this.started) return;
    // RFC 5880 6.8.7: the next one after 75-100 % of the interval (jitter)
    if (this.txTimer !== null) clearTimeout(this.txTimer);
    const us = bfdTxIntervalUs(this.s);
    this.txTimer = setTimeout(
      () => {
        this.txTimer = null;
        this.send();
      },
      Math.max(1, Math.round((us / 1000) * (0.75 + Math.random() * 0.25))),
    );
  }

  status(): Record<string, unknown> {
    return {
      peer: this.o.peer,
      multihop: this.o.multihop === true,
      port: this.port,
      state: this.state,
      sinceS: Math.round((Date.now() - this.since) / 100) / 10,
      txMs: bfdTxIntervalUs(this.s) / 1000,
      detectMs: bfdDetectionTimeUs(this.s) / 1000,
      remoteState: BFD_STATE_NAMES[this.s.remoteState],
      counters: { ...this.counters },
      lastDiscard: this.lastDiscard,
    };
  }
}
