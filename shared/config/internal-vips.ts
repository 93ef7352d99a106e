// Internal VIPs (docs/east-west.md): `scope: internal` and the tenant network the VIP lives in. Such a VIP
// is reached only from that network's VMs (through their host agents, never from the router), so it
// must not be announced (not inside vipRanges), its pools' backends must all be in its network, and the
// network needs a gateway of its family (the VMs reach the VIP through the gateway the host agent plays).
import { enumField, formatPath, has, listNames, refField, type Checker, type NameTable, type Obj, type Path } from './check.js';
import { inVipRange } from './vip-ranges.js';
import type { NetP } from './networks.js';
import type { NicP } from './nics.js';
import type { PoolP } from './pools.js';
import type { VipRange } from './types.js';
import type { IpAddr } from '../addr.js';

export type VipScope = 'public' | 'internal';
export const VIP_SCOPES: readonly VipScope[] = ['public', 'internal'];

/** What the vips validator keeps of a VIP's scope. */
export interface VipScopeP {
  scope?: VipScope;
  /** The network's name for an internal VIP; null for a public one. */
  network?: string | null;
}

/** Reads `scope` and `network` of vips[vi]. */
export function readVipScope(c: Checker, o: Obj, at: Path, networks: NameTable): VipScopeP {
  const scope = enumField(c, o, at, 'scope', VIP_SCOPES, 'public');
  if (scope === 'public') {
    if (has(o, 'network'))
      c.add(
        [...at, 'network'],
        o['network'],
        "only an internal VIP lives in a network: add 'scope: internal', or drop 'network' (a public VIP is reached from the router)",
      );
    return { scope, network: null };
  }
  if (scope === undefined) return {};
  if (!has(o, 'network')) {
    c.add(
      [...at, 'network'],
      undefined,
      `required for 'scope: internal': the tenant network whose VMs reach this VIP${networks.names.size > 0 ? ` (defined networks: ${listNames([...networks.names.keys()])})` : ''}`,
    );
    return { scope };
  }
  const ni = refField(c, o, at, 'network', 'network', 'networks', networks);
  return ni === undefined ? { scope } : { scope, network: o['network'] as string };
}

/**
 * The checks of one rule of an internal VIP against its pool: every backend's nic is in the VIP's
 * network, and that network has a gateway of the VIP's family. Reported once per (VIP, pool).
 */
export function checkInternalRule(
  c: Checker,
  at: Path,
  vip: VipScopeP & { address?: IpAddr },
  pool: PoolP | undefined,
  poolName: unknown,
  nics: readonly (NicP | undefined)[],
  nets: readonly (NetP | undefined)[],
  networks: NameTable,
  reported: Set<string>,
): void {
  if (vip.scope !== 'internal' || typeof vip.network !== 'string' || pool?.backends === undefined) return;
  const once = `${formatPath(at.slice(0, 2))}|${String(poolName)}`;
  if (reported.has(once)) return;
  const others: string[] = [];
  for (const be of pool.backends) {
    if (be?.nicIndex === undefined) continue;
    const nic = nics[be.nicIndex];
    if (nic?.network !== undefined && nic.network !== vip.network) others.push(`${nic.name ?? `nics[${be.nicIndex}]`} (${nic.network})`);
  }
  if (others.length > 0) {
    reported.add(once);
    c.add(
      [...at, 'pool'],
      poolName,
      `internal VIP of network ${vip.network} over pool ${String(poolName)} whose backends ${listNames(others, 4)} are in another network; an internal VIP's traffic never leaves its tenant's VNI: use a pool of ${vip.network}'s nics`,
    );
    return;
  }
  const net = nets[networks.names.get(vip.network) ?? -1];
  const fam = vip.address?.family;
  if (net === undefined || fam === undefined) return;
  if ((fam === 4 ? net.gateway : net.gateway6) == null) {
    reported.add(once);
    c.add(
      [...at.slice(0, 2), 'network'],
      vip.network,
      `network ${vip.network} has no ${fam === 4 ? 'gateway' : 'gateway6'}: its VMs reach an IPv${fam} internal VIP through that gateway, which the host agent plays; add ${fam === 4 ? 'gateway' : 'gateway6'} to network ${vip.network}`,
    );
  }
}

/** An internal VIP is never announced: it must not lie inside a prefix the router accepts from the MUXes. */
export function checkInternalOutsideRanges(
  c: Checker,
  vips: readonly ((VipScopeP & { address?: IpAddr }) | undefined)[],
  ranges: readonly VipRange[] | null | undefined,
): void {
  if (ranges == null) return;
  vips.forEach((v, vi) => {
    const a = v?.address;
    if (v?.scope !== 'internal' || a === undefined) return;
    const r = ranges.find((x) => inVipRange(a, x));
    if (r !== undefined)
      c.add(
        ['vips', vi, 'address'],
        a.text,
        `internal VIP ${a.text} is inside vipRanges (${r.text}), the prefixes the router accepts from the MUXes; an internal VIP is never announced: take an address outside vipRanges (e.g. from the tenant's own space)`,
      );
  });
}
