// One BGP session from the MUX to one peer (the router), over node:net. The session logic is the pure
// FSM of shared/bgp-fsm.ts: this runtime turns socket events, received messages and timers into FSM
// events and carries out the FSM's actions (connect, send, start a timer, drop). It keeps the routes it
// was asked to announce (setRoutes) and, once Established, sends only the difference from what the peer
// already has. Logs JSON lines on state changes (runtime/log.ts), never per message.
//
// The MUX is the active side: it connects from its provider address to the peer's port 179 and never
// listens. Routes received from the peer are parsed (and their errors handled as RFC 7606 says) but not
// used: a MUX takes no routes.
import { connect, type Socket } from 'node:net';
import { formatIpv4, type IpAddr } from '../../shared/addr.js';
import { ERR_TRUNCATED } from '../../shared/codec-error.js';
import {
  BGP_TYPE_KEEPALIVE,
  BGP_TYPE_NOTIFICATION,
  BGP_TYPE_OPEN,
  BGP_TYPE_UPDATE,
  bgpErrorName,
  bgpErrorNotification,
  bgpHeaderErrorData,
  bgpNotificationName,
  encodeBgpKeepalive,
  encodeBgpNotification,
  newBgpHeader,
  newBgpNotification,
  parseBgpHeader,
  parseBgpNotification,
  parseBgpShutdownData,
} from '../../shared/bgp-message.js';
import {
  BGP_IPV4_UNICAST,
  BGP_IPV6_UNICAST,
  bgpOpenErrorData,
  bgpOpenPeerAs,
  checkBgpOpen,
  commonFamilies,
  encodeBgpOpen,
  hasFamily,
  newBgpOpen,
  newBgpOpenRecord,
  parseBgpOpen,
  type BgpFamily,
  type BgpOpen,
} from '../../shared/bgp-open.js';
import {
  BGP_ORIGIN_IGP,
  buildBgpAnnouncements,
  buildBgpEndOfRib,
  buildBgpWithdrawals,
  formatBgpPrefix,
  isBgpEndOfRib,
  newBgpUpdate,
  parseBgpUpdate,
  type BgpPrefix,
} from '../../shared/bgp-update.js';
import { newBgpFsm, stepBgpFsm, type BgpAction, type BgpEvent, type BgpFsm, type BgpState, type BgpTimer } from '../../shared/bgp-fsm.js';
import { log as writeLog, type LogLevel } from '../../runtime/log.js';

/** How long one TCP connect may take before a new attempt (the ConnectRetryTimer in Connect). */
export const BGP_CONNECT_TIMEOUT_MS = 2000;
/** stop(): how long to wait for the NOTIFICATION to leave before the socket is destroyed. */
export const BGP_CLOSE_WAIT_MS = 500;

export interface BgpRoute {
  readonly prefix: BgpPrefix;
  readonly nextHop: IpAddr;
}

export interface BgpSpeakerOptions {
  /** For logs and status: which MUX and which peer. */
  readonly peerAddress: string;
  readonly peerPort: number;
  readonly peerAs: number;
  /** Our address toward the peer (the MUX's provider address of the peer's family); the socket binds to it. */
  readonly localAddress: string;
  readonly asn: number;
  /** Our BGP Identifier (the MUX's IPv4 provider address). */
  readonly bgpId: number;
  readonly holdTimeS: number;
  readonly keepaliveS: number;
  readonly reconnectMinMs: number;
  readonly reconnectMaxMs: number;
  readonly connectTimeoutMs?: number;
  /** The address families we announce in our OPEN. */
  readonly families: readonly BgpFamily[];
  readonly shutdownMessage?: string;
  /** Default: runtime/log.ts. */
  readonly log?: (level: LogLevel, event: string, fields: Record<string, unknown>) => void;
}

interface Negotiated {
  families: BgpFamily[];
  as4: boolean;
  peerId: string;
  holdTimeS: number;
}

const key = (p: BgpPrefix) => formatBgpPrefix(p);

export class BgpSpeaker {
  readonly o: BgpSpeakerOptions;
  private fsm: BgpFsm;
  private sock: Socket | null = null;
  private sockId = 0;
  private rx: Buffer = Buffer.alloc(0);
  private readonly timers = new Map<BgpTimer, NodeJS.Timeout>();
  private desired = new Map<string, BgpRoute>();
  private advertised = new Map<string, BgpRoute>();
  private negotiated: Negotiated | null = null;
  private peerOpen: BgpOpen | null = null;
  private since = Date.now();
  private closing: Promise<void> | null = null;
  private warnedNoV6 = false;
  private readonly logFn: (level: LogLevel, event: string, fields: Record<string, unknown>) => void;
  readonly counters = {
    connects: 0,
    connectFailures: 0,
    established: 0,
    messagesIn: 0,
    messagesOut: 0,
    updatesIn: 0,
    updatesOut: 0,
    keepalivesIn: 0,
    keepalivesOut: 0,
    notificationsIn: 0,
    notificationsOut: 0,
    updateErrorsIgnored: 0,
    prefixesAnnounced: 0,
    prefixesWithdrawn: 0,
    prefixesReceived: 0,
  };
  lastNotificationIn: string | null = null;
  lastNotificationOut: string | null = null;
  lastError: string | null = null;

  constructor(o: BgpSpeakerOptions) {
    this.o = o;
    this.logFn = o.log ?? writeLog;
    this.fsm = newBgpFsm({
      holdTimeS: o.holdTimeS,
      keepaliveS: o.keepaliveS,
      connectRetryMs: o.connectTimeoutMs ?? BGP_CONNECT_TIMEOUT_MS,
      backoffMinMs: o.reconnectMinMs,
      backoffMaxMs: o.reconnectMaxMs,
      shutdownMessage: o.shutdownMessage ?? 'slbx mux stopping',
    });
  }

  get state(): BgpState {
    return this.fsm.state;
  }

  private log(level: LogLevel, event: string, fields: Record<string, unknown> = {}): void {
    this.logFn(level, event, { peer: this.o.peerAddress, ...fields });
  }

  start(): void {
    if (!this.fsm.stopped) return;
    this.dispatch({ type: 'ManualStart' });
  }

  /**
   * Graceful stop: withdraw every route (when Established), send Cease / Administrative Shutdown, close.
   * Resolves once the socket is closed (or after BGP_CLOSE_WAIT_MS). Idempotent.
   */
  stop(): Promise<void> {
    if (this.closing !== null) return this.closing;
    if (this.fsm.state === 'Established') this.setRoutes([]);
    const sock = this.sock;
    this.dispatch({ type: 'ManualStop' });
    this.closing = new Promise<void>((resolve) => {
      if (sock === null || sock.destroyed) {
        resolve();
        return;
      }
      const t = setTimeout(() => {
        sock.destroy();
        resolve();
      }, BGP_CLOSE_WAIT_MS);
      sock.once('close', () => {
        clearTimeout(t);
        resolve();
      });
    }).then(() => {
      this.closing = null;
    });
    return this.closing;
  }

  /** The BFD session to the peer went down: the BGP session follows (RFC 5882), with Cease / BFD Down. */
  bfdDown(): void {
    this.dispatch({ type: 'BfdDown' });
  }

  /** The routes to announce (replacing the previous set); sent as a difference when Established. */
  setRoutes(routes: readonly BgpRoute[]): void {
    this.desired = new Map(routes.map((r) => [key(r.prefix), r]));
    if (this.fsm.state === 'Established') this.sync();
  }

  // ------------------------------------------------------------------------------------------
  // FSM

  private dispatch(e: BgpEvent): void {
    const from = this.fsm.state;
    const step = stepBgpFsm(this.fsm, e);
    this.fsm = step.next;
    if (step.next.state !== from) {
      this.since = Date.now();
      const extra: Record<string, unknown> = {};
      if (step.next.state === 'Established' && this.negotiated !== null) {
        extra.holdTimeS = this.negotiated.holdTimeS;
        extra.keepaliveMs = this.fsm.keepaliveMs;
        extra.families = this.negotiated.families.map(familyName);
        extra.peerId = this.negotiated.peerId;
      }
      if (step.next.state === 'Idle' || step.next.state === 'Active') extra.retryInMs = this.retryDelay(step.actions);
      this.log('info', 'bgp_state', { from, to: step.next.state, reason: step.reason, ...extra });
    }
    for (const a of step.actions) this.act(a);
  }

  private retryDelay(actions: readonly BgpAction[]): number | undefined {
    for (const a of actions) if (a.type === 'startTimer' && (a.timer === 'idleHold' || a.timer === 'connectRetry')) return a.ms;
    return undefined;
  }

  private act(a: BgpAction): void {
    switch (a.type) {
      case 'connect':
        this.openSocket();
        break;
      case 'drop':
        this.dropSocket();
        break;
      case 'sendOpen':
        this.write(
          encodeBgpOpen(newBgpOpen({ asn: this.o.asn, holdTimeS: this.o.holdTimeS, bgpId: this.o.bgpId, families: this.o.families })),
        );
        break;
      case 'sendKeepalive':
        this.counters.keepalivesOut++;
        this.write(encodeBgpKeepalive());
        break;
      case 'sendNotification': {
        const name = bgpNotificationName(a.code, a.subcode);
        const msg = a.code === 6 ? parseBgpShutdownData(a.data) : null;
        this.counters.notificationsOut++;
        this.lastNotificationOut = name;
        this.log(a.code === 6 ? 'info' : 'warn', 'bgp_notification_sent', {
          code: a.code,
          subcode: a.subcode,
          name,
          ...(msg !== null ? { message: msg } : {}),
        });
        this.write(encodeBgpNotification({ code: a.code, subcode: a.subcode, data: a.data }));
        break;
      }
      case 'startTimer': {
        this.clearTimer(a.timer);
        const ev: BgpEvent['type'] =
          a.timer === 'connectRetry'
            ? 'ConnectRetryTimerExpires'
            : a.timer === 'hold'
              ? 'HoldTimerExpires'
              : a.timer === 'keepalive'
                ? 'KeepaliveTimerExpires'
                : 'IdleHoldTimerExpires';
        const t = setTimeout(() => {
          if (this.timers.get(a.timer) !== t) return;
          this.timers.delete(a.timer);
          this.dispatch({ type: ev } as BgpEvent);
        }, a.ms);
        this.timers.set(a.timer, t);
        break;
      }
      case 'stopTimer':
        this.clearTimer(a.timer);
        break;
      case 'established':
        this.counters.established++;
        this.advertised.clear();
        this.sync();
        for (const f of this.negotiated?.families ?? []) this.write(buildBgpEndOfRib(f.afi === 2 ? 6 : 4));
        break;
      case 'down':
        this.advertised.clear();
        this.negotiated = null;
        break;
    }
  }

  private clearTimer(t: BgpTimer): void {
    const h = this.timers.get(t);
    if (h !== undefined) clearTimeout(h);
    this.timers.delete(t);
  }

  // ------------------------------------------------------------------------------------------
  // Socket

  private openSocket(): void {
    this.dropSocket();
    const id = ++this.sockId;
    this.rx = Buffer.alloc(0);
    this.counters.connects++;
    const s = connect({ host: this.o.peerAddress, port: this.o.peerPort, localAddress: this.o.localAddress });
    s.setNoDelay(true);
    this.sock = s;
    s.on('connect', () => {
      if (id === this.sockId) this.dispatch({ type: 'TcpConnectionAcked' });
    });
    s.on('data', (d: Buffer) => {
      if (id === this.sockId) this.onData(d);
    });
    s.on('error', (e) => {
      if (id !== this.sockId) return;
      const msg = (e as NodeJS.ErrnoException).code ?? e.message;
      if (msg !== this.lastError) this.log('debug', 'bgp_socket_error', { error: msg });
      this.lastError = msg;
    });
    s.on('close', () => {
      if (id !== this.sockId) return;
      this.sock = null;
      this.counters.connectFailures++;
      this.dispatch({ type: 'TcpConnectionFails' });
    });
  }

  /** Closes the current socket after what was written (a NOTIFICATION) has left; its events are ignored from now on. */
  private dropSocket(): void {
    const s = this.sock;
    if (s === null) return;
    this.sock = null;
    this.sockId++;
    s.end();
    const t = setTimeout(() => s.destroy(), BGP_CLOSE_WAIT_MS);
    s.once('close', () => clearTimeout(t));
  }

  private write(b: Uint8Array): void {
    const s = this.sock;
    if (s === null || s.destroyed) return;
    this.counters.messagesOut++;
    s.write(b);
  }

  // ------------------------------------------------------------------------------------------
  // Receive

  private onData(d: Buffer): void {
    this.rx = this.rx.length === 0 ? d : Buffer.concat([this.rx, d]);
    const h = newBgpHeader();
    const id = this.sockId;
    while (id === this.sockId) {
      const r = parseBgpHeader(this.rx, 0, h);
      if (r === ERR_TRUNCATED) return;
      if (r < 0) {
        this.log('warn', 'bgp_message_error', { error: bgpErrorName(r), length: h.length, type: h.type });
        this.dispatch({ type: 'BgpHeaderErr', error: r, data: bgpHeaderErrorData(r, this.rx, 0) });
        return;
      }
      if (this.rx.length < h.length) return;
      const msg = this.rx.subarray(0, h.length);
      this.rx = this.rx.subarray(h.length);
      this.counters.messagesIn++;
      this.onMessage(h.type, msg);
    }
  }

  private onMessage(type: number, msg: Buffer): void {
    switch (type) {
      case BGP_TYPE_OPEN: {
        const open = newBgpOpenRecord();
        let r = parseBgpOpen(msg, 0, open);
        if (r >= 0) r = checkBgpOpen(open, { peerAs: this.o.peerAs });
        if (r < 0) {
          this.log('warn', 'bgp_open_error', {
            error: bgpErrorName(r),
            peerAs: bgpOpenPeerAs(open),
            expectedAs: this.o.peerAs,
            holdTimeS: open.holdTimeS,
            version: open.version,
          });
          this.dispatch({ type: 'BgpOpenMsgErr', error: r, data: bgpOpenErrorData(r) });
          return;
        }
        this.peerOpen = open;
        this.negotiated = {
          families: commonFamilies(this.o.families, open),
          as4: open.as4 !== null,
          peerId: formatIpv4(open.bgpId),
          holdTimeS: Math.min(this.o.holdTimeS, open.holdTimeS),
        };
        this.dispatch({ type: 'BgpOpen', peerHoldTimeS: open.holdTimeS });
        return;
      }
      case BGP_TYPE_KEEPALIVE:
        this.counters.keepalivesIn++;
        this.dispatch({ type: 'KeepAliveMsg' });
        return;
      case BGP_TYPE_UPDATE: {
        this.counters.updatesIn++;
        const u = newBgpUpdate();
        const r = parseBgpUpdate(msg, 0, u, msg.length, { as4: this.negotiated?.as4 ?? true });
        if (r < 0) {
          this.log('warn', 'bgp_update_error', { error: bgpErrorName(r), handling: 'session-reset', attrType: u.error?.attrType ?? null });
          this.dispatch({ type: 'UpdateMsgErr', error: r, data: u.error?.data ?? new Uint8Array(0) });
          return;
        }
        if (u.error !== null) {
          // RFC 7606: treat-as-withdraw or attribute discard; the session stays up (we take no routes anyway)
          this.counters.updateErrorsIgnored++;
          const n = bgpErrorNotification(u.error.error);
          this.log('warn', 'bgp_update_error', {
            error: bgpErrorName(u.error.error),
            handling: u.error.handling,
            attrType: u.error.attrType,
            rfc4271: n === null ? null : bgpNotificationName(n.code, n.subcode),
          });
        }
        if (!isBgpEndOfRib(u)) this.counters.prefixesReceived += u.nlri.length + (u.mpReach?.nlri?.length ?? 0);
        this.dispatch({ type: 'UpdateMsg' });
        return;
      }
      case BGP_TYPE_NOTIFICATION: {
        const n = newBgpNotification();
        parseBgpNotification(msg, 0, n);
        this.counters.notificationsIn++;
        const name = bgpNotificationName(n.code, n.subcode);
        const text = n.code === 6 ? parseBgpShutdownData(n.data) : null;
        this.lastNotificationIn = name;
        this.log('warn', 'bgp_notification_received', {
          code: n.code,
          subcode: n.subcode,
          name,
          ...(text !== null ? { message: text } : {}),
        });
        this.dispatch({ type: 'NotifMsg', code: n.code, subcode: n.subcode });
        return;
      }
    }
  }

  // ------------------------------------------------------------------------------------------
  // Routes

  /** Sends the difference between what we want announced and what the peer has. */
  private sync(): void {
    const fams = this.negotiated?.families ?? [];
    const v6ok = hasFamily(fams, BGP_IPV6_UNICAST);
    const v4ok = hasFamily(fams, BGP_IPV4_UNICAST);
    const want = new Map<string, BgpRoute>();
    let v6dropped = 0;
    for (const [k, r] of this.desired) {
      if (r.prefix.addr.family === 6 ? v6ok : v4ok) want.set(k, r);
      else v6dropped++;
    }
    if (v6dropped > 0 && !this.warnedNoV6) {
      this.warnedNoV6 = true;
      this.log('warn', 'bgp_family_not_negotiated', {
        family: 'ipv6-unicast',
        routes: v6dropped,
        why: 'the peer did not announce the multiprotocol capability for IPv6 unicast',
      });
    }
    const withdraw: { 4: BgpPrefix[]; 6: BgpPrefix[] } = { 4: [], 6: [] };
    for (const [k, r] of this.advertised) if (!want.has(k)) withdraw[r.prefix.addr.family].push(r.prefix);
    const announce = new Map<string, BgpRoute[]>(); // by family and next hop
    for (const [k, r] of want) {
      const old = this.advertised.get(k);
      if (old !== undefined && old.nextHop.text === r.nextHop.text) continue;
      const g = `${r.prefix.addr.family}|${r.nextHop.text}`;
      const list = announce.get(g) ?? [];
      list.push(r);
      announce.set(g, list);
    }
    const as4 = this.negotiated?.as4 ?? true;
    const attrs = { origin: BGP_ORIGIN_IGP, asPath: [this.o.asn], as4 };
    for (const fam of [4, 6] as const) {
      if (withdraw[fam].length === 0) continue;
      for (const m of buildBgpWithdrawals(fam, withdraw[fam])) {
        this.counters.updatesOut++;
        this.write(m);
      }
      this.counters.prefixesWithdrawn += withdraw[fam].length;
      for (const p of withdraw[fam]) this.advertised.delete(key(p));
      this.log('info', 'bgp_withdrawn', { prefixes: withdraw[fam].map(key) });
    }
    for (const list of announce.values()) {
      const fam = list[0]!.prefix.addr.family;
      const nh = list[0]!.nextHop;
      for (const m of buildBgpAnnouncements(
        fam,
        list.map((r) => r.prefix),
        [nh],
        attrs,
      )) {
        this.counters.updatesOut++;
        this.write(m);
      }
      this.counters.prefixesAnnounced += list.length;
      for (const r of list) this.advertised.set(key(r.prefix), r);
      this.log('info', 'bgp_announced', {
        prefixes: list.map((r) => key(r.prefix)),
        nextHop: nh.text,
        asPath: [this.o.asn],
        origin: 'igp',
      });
    }
  }

  status(): Record<string, unknown> {
    return {
      peer: this.o.peerAddress,
      port: this.o.peerPort,
      peerAs: this.o.peerAs,
      localAddress: this.o.localAddress,
      state: this.fsm.state,
      sinceS: Math.round((Date.now() - this.since) / 100) / 10,
      peerId: this.negotiated?.peerId ?? null,
      holdTimeS: this.negotiated?.holdTimeS ?? null,
      keepaliveMs: this.fsm.keepaliveMs || null,
      families: (this.negotiated?.families ?? []).map(familyName),
      peerCapabilities: this.peerOpen?.capabilities.map((c) => c.code) ?? null,
      connectRetryCounter: this.fsm.connectRetryCounter,
      nextBackoffMs: this.fsm.backoffMs,
      announced: [...this.advertised.keys()],
      wanted: [...this.desired.keys()],
      lastNotificationIn: this.lastNotificationIn,
      lastNotificationOut: this.lastNotificationOut,
      lastSocketError: this.lastError,
      counters: { ...this.counters },
    };
  }
}

function familyName(f: BgpFamily): string {
  return f.afi === 1 && f.safi === 1 ? 'ipv4-unicast' : f.afi === 2 && f.safi === 1 ? 'ipv6-unicast' : `afi${f.afi}-safi${f.safi}`;
}
