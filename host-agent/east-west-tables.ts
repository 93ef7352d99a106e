// The host agent's east-west tables (docs/east-west.md), compiled from policy with the host tables: the
// internal VIPs and their rules' pool members, every nic of a network that has an internal VIP (the
// return path and the redirect's target are looked up here: the policy says where each VM lives), and
// the MUXes a VM's first packets go to.
import type { IpAddr } from '../shared/addr.js';
import type { SlbxConfig } from '../shared/config.js';
import type { FabricPeer, HostNic } from './tables.js';

/** A nic of an internal network anywhere in policy: the target of a return or of a Fastpath entry. */
export interface EwTarget {
  readonly index: number;
  readonly name: string;
  readonly vni: number;
  readonly mac: Uint8Array;
  readonly addr4: number; // -1 when none
  readonly addr6: Uint32Array | null;
  readonly host: string;
  /** The nic on this host, or null (on another host). */
  readonly local: HostNic | null;
  /** The index in HostTables.peers of the nic's host's IPv4 provider address; -1 when local. */
  readonly peer: number;
  /** The nic's host's IPv4 provider address. */
  readonly pa4: number;
}

export interface EwRule {
  readonly backendPort: number;
  /** Target indices of the rule's pool members (the only nics a redirect may name). */
  readonly members: ReadonlySet<number>;
}

export interface EwVip {
  readonly addr: IpAddr;
  readonly vni: number;
  /** (protocol << 16 | frontendPort) -> rule. */
  readonly rules: ReadonlyMap<number, EwRule>;
}

export interface EwTables {
  /** Internal VIPs by IPv4 address (unique in the config). */
  readonly vips4: ReadonlyMap<number, EwVip>;
  readonly vips6: readonly EwVip[];
  readonly targets: readonly EwTarget[];
  /** vni -> IPv4 address -> target; vni -> targets with an IPv6 address. */
  readonly byAddr4: ReadonlyMap<number, ReadonlyMap<number, EwTarget>>;
  readonly byAddr6: ReadonlyMap<number, readonly EwTarget[]>;
  /** vni -> macKey -> target. */
  readonly byMac: ReadonlyMap<number, ReadonlyMap<number, EwTarget>>;
  /** The MUXes, in config order, as indices into HostTables.peers (their IPv4 provider addresses). */
  readonly muxPeers: readonly number[];
  readonly muxPa4: readonly number[];
}

export function macKeyOf(m: Uint8Array): number {
  return ((m[0]! << 8) | m[1]!) * 0x100000000 + (((m[2]! << 24) | (m[3]! << 16) | (m[4]! << 8) | m[5]!) >>> 0);
}

export function compileEwTables(
  config: SlbxConfig,
  hostName: string,
  peers: readonly FabricPeer[],
  peerIndex4: ReadonlyMap<number, number>,
  localNics: ReadonlyMap<string, HostNic>,
): EwTables {
  const internal = config.vips.filter((v) => v.scope === 'internal');
  const vniOf = new Map(config.networks.map((n) => [n.name, n.vni]));
  const nets = new Set(internal.map((v) => v.network!));
  const hostPa4 = new Map(config.hosts.map((h) => [h.name, h.address.words[0]!]));
  const targets: EwTarget[] = [];
  const byName = new Map<string, EwTarget>();
  const byAddr4 = new Map<number, Map<number, EwTarget>>();
  const byAddr6 = new Map<number, EwTarget[]>();
  const byMac = new Map<number, Map<number, EwTarget>>();
  for (const n of config.nics) {
    if (!nets.has(n.network)) continue;
    const vni = vniOf.get(n.network)!;
    const pa4 = hostPa4.get(n.host)!;
    const local = n.host === hostName ? (localNics.get(n.name) ?? null) : null;
    const t: EwTarget = {
      index: targets.length,
      name: n.name,
      vni,
      mac: n.mac,
      addr4: n.address4 ? n.address4.words[0]! : -1,
      addr6: n.address6 ? n.address6.words : null,
      host: n.host,
      local,
      peer: local !== null ? -1 : (peerIndex4.get(pa4) ?? -1),
      pa4,
    };
    targets.push(t);
    byName.set(n.name, t);
    if (t.addr4 >= 0) {
      const m = byAddr4.get(vni) ?? new Map<number, EwTarget>();
      m.set(t.addr4, t);
      byAddr4.set(vni, m);
    }
    if (t.addr6 !== null) byAddr6.set(vni, [...(byAddr6.get(vni) ?? []), t]);
    const mm = byMac.get(vni) ?? new Map<number, EwTarget>();
    mm.set(macKeyOf(n.mac), t);
    byMac.set(vni, mm);
  }
  const vips4 = new Map<number, EwVip>();
  const vips6: EwVip[] = [];
  for (const v of internal) {
    const rules = new Map<number, EwRule>();
    for (const r of v.rules) {
      const pool = config.pools.find((p) => p.name === r.pool)!;
      const members = new Set(pool.backends.map((b) => byName.get(b.nic)!.index));
      for (const proto of r.protocols) rules.set((proto << 16) | r.frontendPort, { backendPort: r.backendPort, members });
    }
    const ev: EwVip = { addr: v.address, vni: vniOf.get(v.network!)!, rules };
    if (v.address.family === 4) vips4.set(v.address.words[0]!, ev);
    else vips6.push(ev);
  }
  const muxPeers: number[] = [];
  const muxPa4: number[] = [];
  for (const m of config.muxes) {
    const pi = peerIndex4.get(m.address.words[0]!);
    if (pi === undefined || peers[pi]!.kind !== 'mux') continue;
    muxPeers.push(pi);
    muxPa4.push(m.address.words[0]!);
  }
  return { vips4, vips6, targets, byAddr4, byAddr6, byMac, muxPeers, muxPa4 };
}
