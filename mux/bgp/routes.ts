// Which VIPs a MUX announces, and why it holds back the others: a pure function of the MUX's tables,
// its own config entry and two facts the runtime looks up (is the data plane ready, do its next-hop
// addresses exist on an interface). docs/bgp.md explains the rules.
import type { IpAddr } from '../../shared/addr.js';
import type { MuxConfig } from '../../shared/config.js';
import { hostPrefix } from '../../shared/bgp-update.js';
import type { MuxTables, MuxVip } from '../tables.js';
import type { BgpRoute } from './speaker.js';

export type VipHoldReason =
  /** Every rule of the VIP has no backend to send new flows to (each pool table's level is null). */
  | 'no_healthy_backend'
  /** An IPv6 VIP, and the MUX has no IPv6 provider address (address6) to be its next hop. */
  | 'no_address6'
  /** The next-hop address is not on any interface of the MUX's namespace (Linux drops a static IPv6 address on a link that goes down unless keep_addr_on_down). */
  | 'next_hop_missing'
  /**
   * The MUX takes its policy from a controller and has not applied the first one yet: its tables come
   * from the bootstrap config, which knows no health, so they may send new flows to backends that are down
   * (and send flows the router moves to it elsewhere than the other MUXes do).
   */
  | 'awaiting_policy'
  /** The MUX does not know the MAC of every host yet: it would drop what the router sends. */
  | 'data_plane_not_ready';

export interface VipPlan {
  readonly vip: IpAddr;
  /** null: announced. */
  readonly held: VipHoldReason | null;
  /** An outbound NAT frontend IP that is no VIP (docs/outbound.md): announced like one, never for want of a backend. */
  readonly frontend?: true;
}

export interface RoutePlan {
  readonly routes: BgpRoute[];
  readonly vips: VipPlan[];
}

export interface RoutePlanFacts {
  readonly ready: boolean;
  /** The tables hold the controller's policy (and its health), or the MUX runs without a controller. Default true. */
  readonly policyKnown?: boolean;
  /** The MUX's IPv4 / IPv6 provider address is on an interface. */
  readonly hasAddress4: boolean;
  readonly hasAddress6: boolean;
}

/** True when at least one of the VIP's rules has a pool table with backends for new flows. */
export function vipServable(v: MuxVip): boolean {
  for (const r of v.rules.values()) if (r.table.level !== null) return true;
  return false;
}

/** Every VIP of the tables, in a stable order (IPv4 first, then IPv6, each by address). */
export function tableVips(t: MuxTables): MuxVip[] {
  const v4 = [...t.vips4.values()];
  const v6 = [...t.vips6.values()].flat();
  const cmp = (a: MuxVip, b: MuxVip) => {
    for (let i = 0; i < a.addr.words.length; i++)
      if (a.addr.words[i] !== b.addr.words[i]) return a.addr.words[i]! < b.addr.words[i]! ? -1 : 1;
    return 0;
  };
  return [...v4.sort(cmp), ...v6.sort(cmp)];
}

/** The outbound NAT frontend IPs that are no VIP of the tables, in the order of tableVips (IPv4 first, each by address). */
export function tableFrontends(t: MuxTables): IpAddr[] {
  const out = t.snat.frontends.filter((f) =>
    f.family === 4 ? !t.vips4.has(f.words[0]!) : ![...t.vips6.values()].flat().some((v) => v.addr.words.every((w, i) => w === f.words[i])),
  );
  return out.sort((a, b) => {
    if (a.family !== b.family) return a.family - b.family;
    for (let i = 0; i < a.words.length; i++) if (a.words[i] !== b.words[i]) return a.words[i]! < b.words[i]! ? -1 : 1;
    return 0;
  });
}

export function planVipRoutes(tables: MuxTables, me: MuxConfig, facts: RoutePlanFacts): RoutePlan {
  const routes: BgpRoute[] = [];
  const vips: VipPlan[] = [];
  for (const v of tableVips(tables)) {
    const v6 = v.addr.family === 6;
    let held: VipHoldReason | null = null;
    if (!vipServable(v)) held = 'no_healthy_backend';
    else if (v6 && me.address6 === null) held = 'no_address6';
    else if (v6 ? !facts.hasAddress6 : !facts.hasAddress4) held = 'next_hop_missing';
    else if (facts.policyKnown === false) held = 'awaiting_policy';
    else if (!facts.ready) held = 'data_plane_not_ready';
    vips.push({ vip: v.addr, held });
    if (held === null) routes.push({ prefix: hostPrefix(v.addr), nextHop: v6 ? me.address6! : me.address });
  }
  // outbound NAT's frontend IPs: replies to the backends' own connections come back to them through a MUX;
  // one that is also a VIP is announced as the VIP above
  for (const f of tableFrontends(tables)) {
    const v6 = f.family === 6;
    let held: VipHoldReason | null = null;
    if (v6 && me.address6 === null) held = 'no_address6';
    else if (v6 ? !facts.hasAddress6 : !facts.hasAddress4) held = 'next_hop_missing';
    else if (facts.policyKnown === false) held = 'awaiting_policy';
    else if (!facts.ready) held = 'data_plane_not_ready';
    vips.push({ vip: f, held, frontend: true });
    if (held === null) routes.push({ prefix: hostPrefix(f), nextHop: v6 ? me.address6! : me.address });
  }
  return { routes, vips };
}
