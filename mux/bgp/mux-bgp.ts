// The MUX's BGP: one speaker per configured peer (config.bgp.peers), all announcing the same routes: the
// VIPs the MUX can serve, each as a /32 or /128 with the MUX's own provider address as next hop, ORIGIN
// IGP, AS_PATH [bgp.asn] (the router merges only routes with equal ORIGIN and AS-path length into one
// multipath route). The plan is recomputed when the tables change (config or health) and every second
// (a next-hop address that disappeared, a data plane that became ready). shutdown() is the first step of
// a graceful stop: withdraw everything, Cease, close, then keep forwarding for shutdownGraceMs so the
// router moves the traffic before the capture closes. Without a `bgp` section it does nothing.
import { networkInterfaces } from 'node:os';
import { parseIpAddr } from '../../shared/addr.js';
import type { BgpConfig, MuxConfig, SlbxConfig } from '../../shared/config.js';
import { BGP_IPV4_UNICAST, BGP_IPV6_UNICAST } from '../../shared/bgp-open.js';
import { log as writeLog, type LogLevel } from '../../runtime/log.js';
import type { MuxTables } from '../tables.js';
import { BgpSpeaker } from './speaker.js';
import { BfdPeer } from './bfd.js';
import { isOnLink, underlayRoutesOf } from '../../shared/next-hop.js';
import { planVipRoutes, type RoutePlan, type VipHoldReason } from './routes.js';

/** Re-plan this often (next-hop addresses, readiness). */
export const BGP_REPLAN_MS = 1000;
/** Announce even if some host's MAC is still unknown this long after start (one dead host must not hide every VIP). */
export const BGP_READY_WAIT_MS = 5000;
/**
 * With a controller: announce with the bootstrap config's tables if the controller's first policy has not
 * come this long after start (a MUX restarted while the controller is down must still serve).
 */
export const BGP_POLICY_WAIT_MS = 5000;
/** While the data plane is not ready, re-plan this often. */
export const BGP_READY_POLL_MS = 50;

/**
 * The two readiness facts of the route plan (routes.ts) at `sinceStartMs` after the speakers started:
 * the data plane can forward (every host's MAC known) and the tables hold the controller's policy; each
 * is taken as true once its wait is over.
 */
export function readinessFacts(o: { dataPlaneReady: boolean; policyApplied: boolean; sinceStartMs: number }): {
  ready: boolean;
  policyKnown: boolean;
} {
  return {
    ready: o.dataPlaneReady || o.sinceStartMs >= BGP_READY_WAIT_MS,
    policyKnown: o.policyApplied || o.sinceStartMs >= BGP_POLICY_WAIT_MS,
  };
}

export interface MuxBgpOptions {
  readonly name: string;
  readonly config: SlbxConfig;
  /** The tables in use right now. */
  readonly tables: () => MuxTables;
  /** The data plane can forward (every host's MAC is known). */
  readonly ready: () => boolean;
  /**
   * The tables hold the controller's policy (false from a start with --controller until its first policy
   * is applied: the bootstrap config knows no health). Absent: always true (no controller).
   */
  readonly policyKnown?: () => boolean;
  readonly log?: (level: LogLevel, event: string, fields: Record<string, unknown>) => void;
  /** Looks up whether an address is on an interface (default: os.networkInterfaces()); for tests. */
  readonly hasAddress?: (canonical: string) => boolean;
}

function localAddresses(): Set<string> {
  const out = new Set<string>();
  try {
    for (const list of Object.values(networkInterfaces())) {
      for (const a of list ?? []) {
        const p = parseIpAddr(a.address.split('%')[0]!);
        if (p !== null) out.add(p.text);
      }
    }
  } catch {
    /* none */
  }
  return out;
}

/** What makes the speakers: a change here restarts them (with a withdrawal and a Cease first). */
function sessionKey(bgp: BgpConfig | null, me: MuxConfig | undefined): string {
  if (bgp === null || me === undefined) return 'none';
  return JSON.stringify({
    asn: bgp.asn,
    hold: bgp.holdTimeS,
    ka: bgp.keepaliveS,
    rmin: bgp.reconnectMinMs,
    rmax: bgp.reconnectMaxMs,
    peers: bgp.peers.map((p) => [p.address.text, p.asn, p.port]),
    a4: me.address.text,
    a6: me.address6?.text ?? null,
    bfd: bgp.bfd,
  });
}

export class MuxBgp {
  private readonly o: MuxBgpOptions;
  private config: SlbxConfig;
  private speakers: BgpSpeaker[] = [];
  private bfds: BfdPeer[] = [];
  private key = 'none';
  private timer: NodeJS.Timeout | null = null;
  private soon: NodeJS.Timeout | null = null;
  private started = false;
  private startedAt = 0;
  private held = new Map<string, VipHoldReason | null>();
  private plan: RoutePlan | null = null;
  private shuttingDown = false;
  private readonly logFn: (level: LogLevel, event: string, fields: Record<string, unknown>) => void;

  constructor(o: MuxBgpOptions) {
    this.o = o;
    this.config = o.config;
    this.logFn = o.log ?? writeLog;
  }

  private me(): MuxConfig | undefined {
    return this.config.muxes.find((m) => m.name === this.o.name);
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    this.startedAt = Date.now();
    this.rebuild();
    this.timer = setInterval(() => this.replan(), BGP_REPLAN_MS);
  }

  /** A new config (or new tables from a health change): restart sessions if their settings changed, re-plan. */
  update(config: SlbxConfig): void {
    this.config = config;
    if (!this.started || this.shuttingDown) return;
    if (sessionKey(config.bgp, this.me()) !== this.key) this.rebuild();
    else this.replan();
  }

  private rebuild(): void {
    const old = this.speakers;
    this.speakers = [];
    for (const s of old) void s.stop();
    for (const b of this.bfds) b.stop();
    this.bfds = [];
    const bgp = this.config.bgp;
    const me = this.me();
    this.key = sessionKey(bgp, me);
    if (bgp === null || me === undefined) {
      if (old.length > 0) this.logFn('info', 'bgp_disabled', { reason: 'the config has no bgp section' });
      return;
    }
    const families = me.address6 !== null ? [BGP_IPV4_UNICAST, BGP_IPV6_UNICAST] : [BGP_IPV4_UNICAST];
    const routes = underlayRoutesOf(me);
    for (const p of bgp.peers) {
      const local = p.address.family === 4 ? me.address.text : me.address6!.text; // validated: v6 peers need address6
      const speaker = new BgpSpeaker({
        peerAddress: p.address.text,
        peerPort: p.port,
        peerAs: p.asn,
        localAddress: local,
        asn: bgp.asn,
        bgpId: me.address.words[0]!,
        holdTimeS: bgp.holdTimeS,
        keepaliveS: bgp.keepaliveS,
        reconnectMinMs: bgp.reconnectMinMs,
        reconnectMaxMs: bgp.reconnectMaxMs,
        families,
        shutdownMessage: `slbx ${this.o.name} stopping`,
        log: this.logFn,
      });
      this.speakers.push(speaker);
      if (bgp.bfd.enabled) {
        this.bfds.push(
          new BfdPeer({
            local,
            peer: p.address.text,
            intervalMs: bgp.bfd.intervalMs,
            multiplier: bgp.bfd.multiplier,
            // a peer off our subnet (through the gateway: a routed underlay) is multihop, RFC 5883
            multihop: !isOnLink(p.address.family === 4 ? routes.v4 : routes.v6!, p.address),
            log: this.logFn,
            onDown: () => speaker.bfdDown(),
          }),
        );
      }
    }
    this.logFn('info', 'bgp_started', {
      asn: bgp.asn,
      routerId: me.address.text,
      peers: bgp.peers.map((p) => `${p.address.text} AS${p.asn}`),
      holdTimeS: bgp.holdTimeS,
      keepaliveS: bgp.keepaliveS,
      families: families.map((f) => (f.afi === 1 ? 'ipv4-unicast' : 'ipv6-unicast')),
    });
    this.replan();
    for (const s of this.speakers) s.start();
    for (const b of this.bfds) b.start();
  }

  /** Recomputes what to announce and hands it to every speaker (they send only differences). */
  replan(): void {
    if (!this.started || this.shuttingDown || this.speakers.length === 0) return;
    const me = this.me();
    if (me === undefined) return;
    const has = this.o.hasAddress ?? ((a: string) => localAddresses().has(a));
    const facts = readinessFacts({
      dataPlaneReady: this.o.ready(),
      policyApplied: this.o.policyKnown?.() ?? true,
      sinceStartMs: Date.now() - this.startedAt,
    });
    const plan = planVipRoutes(this.o.tables(), me, {
      ...facts,
      hasAddress4: has(me.address.text),
      hasAddress6: me.address6 !== null && has(me.address6.text),
    });
    this.plan = plan;
    for (const v of plan.vips) {
      const before = this.held.get(v.vip.text);
      if (before === v.held) continue;
      this.held.set(v.vip.text, v.held);
      if (v.held === null)
        this.logFn('info', 'bgp_vip_announce', {
          vip: v.vip.text,
          ...(v.frontend ? { frontend: true } : {}),
          ...(before !== undefined ? { was: before } : {}),
        });
      else
        this.logFn(v.held === 'data_plane_not_ready' ? 'debug' : v.held === 'awaiting_policy' ? 'info' : 'warn', 'bgp_vip_held', {
          vip: v.vip.text,
          reason: v.held,
        });
    }
    for (const k of [...this.held.keys()]) if (!plan.vips.some((v) => v.vip.text === k)) this.held.delete(k);
    for (const s of this.speakers) s.setRoutes(plan.routes);
    // waiting for the hosts' MACs (or the first policy, in case nobody calls replan when it comes): look
    // again soon rather than at the next tick
    if (this.soon === null && plan.vips.some((v) => v.held === 'data_plane_not_ready' || v.held === 'awaiting_policy')) {
      this.soon = setTimeout(() => {
        this.soon = null;
        this.replan();
      }, BGP_READY_POLL_MS);
    }
  }

  /**
   * Graceful stop, step one: withdraw everything, Cease / Administrative Shutdown, close the sessions,
   * then wait shutdownGraceMs (the MUX keeps forwarding meanwhile). Resolves when done.
   */
  async shutdown(): Promise<void> {
    if (this.shuttingDown || !this.started) return;
    this.shuttingDown = true;
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    if (this.soon !== null) clearTimeout(this.soon);
    this.soon = null;
    if (this.speakers.length === 0) return;
    const grace = this.config.bgp?.shutdownGraceMs ?? 0;
    const t0 = Date.now();
    await Promise.all(this.speakers.map((s) => s.stop()));
    for (const b of this.bfds) b.stop();
    this.bfds = [];
    this.logFn('info', 'bgp_shutdown', { withdrawnAndClosedMs: Date.now() - t0, graceMs: grace });
    if (grace > 0) await new Promise((r) => setTimeout(r, grace));
  }

  /** Immediate stop (after shutdown, or without one): no more timers or sockets. */
  stop(): void {
    if (!this.started) return;
    this.started = false;
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    if (this.soon !== null) clearTimeout(this.soon);
    this.soon = null;
    for (const s of this.speakers) void s.stop();
    this.speakers = [];
    for (const b of this.bfds) b.stop();
    this.bfds = [];
  }

  status(): Record<string, unknown> | null {
    const bgp = this.config.bgp;
    if (bgp === null) return null;
    return {
      asn: bgp.asn,
      vips: (this.plan?.vips ?? []).map((v) => ({
        vip: v.vip.text,
        announced: v.held === null,
        reason: v.held,
        ...(v.frontend ? { frontend: true } : {}),
      })),
      peers: this.speakers.map((s) => s.status()),
      bfd: this.bfds.map((b) => b.status()),
    };
  }
}
