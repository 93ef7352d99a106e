// The vips section and their rules: protocol, ports, pool, distribution, probe; the addresses a VIP
// must not take; stateless direct server return (one (VIP, frontendPort) per backend port).
import {
  formatPath,
  has,
  isList,
  itemObj,
  listItems,
  listNames,
  enumField,
  intField,
  nameField,
  refField,
  type Checker,
  type Claim,
  type NameTable,
  type Path,
} from './check.js';
import { ipKey, reqAddressField } from './addresses.js';
import { CONFIG_DEFAULTS, CONFIG_LIMITS } from './defaults.js';
import type { NetP } from './networks.js';
import type { NicP } from './nics.js';
import type { NodeP } from './nodes.js';
import type { PoolP } from './pools.js';
import type { AllDown, Distribution, IpProtocolNumber, RuleProtocol } from './types.js';
import type { IpAddr } from '../addr.js';
import { checkInternalRule, readVipScope, type VipScopeP } from './internal-vips.js';

const VIP_KEYS = ['address', 'scope', 'network', 'rules'] as const;
const RULE_KEYS = ['name', 'protocol', 'frontendPort', 'backendPort', 'pool', 'distribution', 'probe', 'allDown'] as const;

export const DISTRIBUTIONS: Readonly<Record<string, Distribution>> = { '5-tuple': 5, '3-tuple': 3, '2-tuple': 2 };
export const RULE_PROTOCOLS: Readonly<Record<RuleProtocol, readonly IpProtocolNumber[]>> = { tcp: [6], udp: [17], all: [6, 17] };
export const PROTO_NAME: Readonly<Record<IpProtocolNumber, string>> = { 6: 'tcp', 17: 'udp' };

export interface RuleP {
  name?: string;
  nameDefaulted: boolean;
  protocol?: RuleProtocol;
  frontendPort?: number;
  backendPort?: number;
  pool?: string;
  poolIndex?: number;
  distribution?: Distribution;
  probe?: string | null;
  allDown?: AllDown;
}
export interface VipP extends VipScopeP {
  address?: IpAddr;
  rules?: (RuleP | undefined)[];
}

/** The addresses a VIP must not take: provider addresses, nic addresses and gateways. */
export function takenAddresses(
  muxes: readonly (NodeP | undefined)[],
  hosts: readonly (NodeP | undefined)[],
  nics: readonly (NicP | undefined)[],
  nets: readonly (NetP | undefined)[],
): Map<string, Claim> {
  const taken = new Map<string, Claim>();
  for (const [section, list] of [
    ['muxes', muxes],
    ['hosts', hosts],
  ] as const) {
    list.forEach((n, i) => {
      if (n === undefined) return;
      const label = `the provider address of ${section === 'muxes' ? 'mux' : 'host'} ${n.name ?? `${section}[${i}]`}`;
      if (n.address !== undefined && !taken.has(ipKey(n.address)))
        taken.set(ipKey(n.address), { what: label, path: formatPath([section, i, 'address']) });
      if (n.address6 != null && !taken.has(ipKey(n.address6)))
        taken.set(ipKey(n.address6), { what: label, path: formatPath([section, i, 'address6']) });
    });
  }
  nics.forEach((n, i) => {
    if (n?.addrs === undefined) return;
    for (const { addr, index } of n.addrs) {
      if (!taken.has(ipKey(addr))) {
        taken.set(ipKey(addr), {
          what: `the address of nic ${n.name ?? `nics[${i}]`}${n.network !== undefined ? ` in network ${n.network}` : ''}`,
          path: formatPath(['nics', i, 'addresses', index]),
        });
      }
    }
  });
  nets.forEach((n, i) => {
    if (n === undefined) return;
    for (const [key, gw] of [
      ['gateway', n.gateway],
      ['gateway6', n.gateway6],
    ] as const) {
      if (gw != null && !taken.has(ipKey(gw)))
        taken.set(ipKey(gw), { what: `the gateway of network ${n.name ?? `networks[${i}]`}`, path: formatPath(['networks', i, key]) });
    }
  });
  return taken;
}

export function validateVips(
  c: Checker,
  vipItems: readonly unknown[],
  taken: ReadonlyMap<string, Claim>,
  names: { readonly pools: NameTable; readonly probes: NameTable; readonly networks: NameTable },
  pools: readonly (PoolP | undefined)[],
  nics: readonly (NicP | undefined)[],
  nets: readonly (NetP | undefined)[],
): { vips: (VipP | undefined)[]; vipSeen: Map<string, number> } {
  const D = CONFIG_DEFAULTS;
  const L = CONFIG_LIMITS;
  const poolNames = names.pools;
  const probeNames = names.probes;
  const netNames = names.networks;
  // vips and rules
  const vipSeen = new Map<string, number>();
  // stateless DSR: (nic, family, protocol, backendPort) -> the one (vip, frontendPort)
  const dsrClaims = new Map<string, { vi: number; ri: number; frontend: string }>();
  const mixedReported = new Set<string>(); // vip|pool|nic: one report per VIP and pool
  const dsrConflicts = new Map<
    string,
    { vi: number; ri: number; ovi: number; ori: number; protos: Set<string>; nics: Set<string>; backendPort: number }
  >();
  const vips: (VipP | undefined)[] = vipItems.map((it, vi) => {
    const at: Path = ['vips', vi];
    const o = itemObj(c, it, at, VIP_KEYS);
    if (o === undefined) return undefined;
    const vip: VipP = { address: reqAddressField(c, o, at, 'address', 'any'), ...readVipScope(c, o, at, netNames) };
    const addr = vip.address;
    if (addr !== undefined) {
      const prev = vipSeen.get(ipKey(addr));
      if (prev !== undefined)
        c.add([...at, 'address'], o['address'], `VIP ${addr.text} is already vips[${prev}]; list each VIP once with all its rules`);
      else vipSeen.set(ipKey(addr), vi);
      const t = taken.get(ipKey(addr));
      if (t !== undefined)
        c.add([...at, 'address'], o['address'], `VIP ${addr.text} is ${t.what} (${t.path}); a VIP must be an address of its own`);
    }
    const rAt: Path = [...at, 'rules'];
    if (!has(o, 'rules')) {
      c.add(rAt, undefined, 'required: a list of rules, at least one');
      return vip;
    }
    if (!isList(o['rules'])) {
      c.add(rAt, o['rules'], 'must be a list of rules, at least one');
      return vip;
    }
    const list = listItems(o['rules'] as unknown[]);
    if (list.length === 0) c.add(rAt, list, 'must list at least one rule');
    const ruleNames = new Map<string, { ri: number; defaulted: boolean }>();
    const frontends = new Map<string, number>(); // proto|port -> rule index
    vip.rules = list.map((rv, ri) => {
      const at2: Path = [...rAt, ri];
      const r = itemObj(c, rv, at2, RULE_KEYS);
      if (r === undefined) return undefined;
      const rule: RuleP = {
        nameDefaulted: !has(r, 'name'),
        protocol: enumField(c, r, at2, 'protocol', ['tcp', 'udp', 'all'] as const, undefined),
        frontendPort: intField(c, r, at2, 'frontendPort', L.port, undefined),
      };
      rule.backendPort = has(r, 'backendPort') ? intField(c, r, at2, 'backendPort', L.port, undefined) : rule.frontendPort;
      if (!has(r, 'distribution')) rule.distribution = DISTRIBUTIONS[D.rule.distribution];
      else {
        const dv = r['distribution'];
        if (typeof dv === 'string' && has(DISTRIBUTIONS, dv)) rule.distribution = DISTRIBUTIONS[dv];
        else {
          const hint = typeof dv === 'number' && [2, 3, 5].includes(dv) ? ` (write '${dv}-tuple')` : '';
          c.add([...at2, 'distribution'], dv, `must be one of 5-tuple, 3-tuple, 2-tuple${hint}`);
        }
      }
      if (rule.nameDefaulted) {
        if (rule.protocol !== undefined && rule.frontendPort !== undefined) rule.name = `${rule.protocol}-${rule.frontendPort}`;
      } else rule.name = nameField(c, r, at2);
      if (rule.name !== undefined) {
        const prev = ruleNames.get(rule.name);
        if (prev === undefined) ruleNames.set(rule.name, { ri, defaulted: rule.nameDefaulted });
        else if (!(prev.defaulted && rule.nameDefaulted)) {
          // two defaulted names collide only when (protocol, frontendPort) does, which is reported below
          c.add(
            [...at2, 'name'],
            rule.name,
            `rule name '${rule.name}' is already rules[${prev.ri}] of this VIP${rule.nameDefaulted ? ' (this name is the default protocol-frontendPort)' : ''}; give each rule of a VIP its own name`,
          );
        }
      }
      const pi = refField(c, r, at2, 'pool', 'pool', 'pools', poolNames);
      if (pi !== undefined) {
        rule.pool = r['pool'] as string;
        rule.poolIndex = pi;
      }
      if (!has(r, 'probe') || r['probe'] === null) rule.probe = null;
      else {
        const qi = refField(c, r, at2, 'probe', 'probe', 'probes', probeNames);
        if (qi !== undefined) rule.probe = r['probe'] as string;
      }
      rule.allDown = enumField(c, r, at2, 'allDown', ['drop', 'spread'] as const, D.rule.allDown);

      // (protocol, frontendPort) unique per VIP, after expanding 'all'
      if (rule.protocol !== undefined && rule.frontendPort !== undefined) {
        for (const proto of RULE_PROTOCOLS[rule.protocol]) {
          const key = `${proto}|${rule.frontendPort}`;
          const prev = frontends.get(key);
          if (prev !== undefined) {
            c.add(
              [...at2, 'frontendPort'],
              rule.frontendPort,
              `${PROTO_NAME[proto]} port ${rule.frontendPort} of this VIP is already taken by rules[${prev}]${rule.protocol === 'all' ? " ('all' is both tcp and udp)" : ''}; one rule per (protocol, frontendPort) on a VIP`,
            );
            break;
          }
          frontends.set(key, ri);
        }
      }

      // every backend nic needs an address of the VIP's family; stateless DSR claims
      const pool = pi !== undefined ? pools[pi] : undefined;
      checkInternalRule(c, at2, vip, pool, r['pool'], nics, nets, netNames, mixedReported);
      if (addr !== undefined && pool?.backends !== undefined) {
        const fam = addr.family;
        const frontend = `${ipKey(addr)}|${rule.frontendPort}`;
        for (const be of pool.backends) {
          if (be?.nicIndex === undefined) continue;
          const nic = nics[be.nicIndex];
          if (nic?.addrs === undefined) continue;
          const nicName = nic.name ?? `nics[${be.nicIndex}]`;
          const a = nic.addrs.find((x) => x.addr.family === fam);
          if (a === undefined) {
            const once = `${vi}|${pi}|${be.nicIndex}`;
            if (!mixedReported.has(once)) {
              mixedReported.add(once);
              c.add(
                [...at2, 'pool'],
                r['pool'],
                `mixed families: IPv${fam} VIP ${addr.text} over nic ${nicName} that has no IPv${fam} address; slbx does not translate between IPv4 and IPv6 (add an IPv${fam} address to the nic or use an IPv${fam === 4 ? 6 : 4} VIP)`,
              );
            }
            continue;
          }
          // a probe is sent from the network's gateway address of the VIP's family (host agents play the
          // gateway): without one the backend could never be probed, and would stay "unknown" (healthy) forever
          if (typeof rule.probe === 'string' && nic.network !== undefined) {
            const net = nets[netNames.names.get(nic.network) ?? -1];
            const once = `probe|${vi}|${ri}|${nic.network}`;
            if (net !== undefined && (fam === 4 ? net.gateway : net.gateway6) === null && !mixedReported.has(once)) {
              mixedReported.add(once);
              c.add(
                [...at2, 'probe'],
                r['probe'],
                `probe ${rule.probe} of an IPv${fam} VIP cannot reach nic ${nicName}: network ${nic.network} has no ${fam === 4 ? 'gateway' : 'gateway6'}, the address probes are sent from (add ${fam === 4 ? 'gateway' : 'gateway6'} to network ${nic.network}, or drop the rule's probe)`,
              );
            }
          }
          if (rule.protocol === undefined || rule.backendPort === undefined || rule.frontendPort === undefined) continue;
          for (const proto of RULE_PROTOCOLS[rule.protocol]) {
            const key = `${be.nicIndex}|${fam}|${proto}|${rule.backendPort}`;
            const prev = dsrClaims.get(key);
            if (prev === undefined) {
              dsrClaims.set(key, { vi, ri, frontend });
              continue;
            }
            // the same (VIP, frontendPort): the nic twice in a pool, or a duplicate frontend, both reported elsewhere
            if (prev.frontend === frontend) continue;
            const ck = `${prev.vi}|${prev.ri}|${vi}|${ri}`;
            let conflict = dsrConflicts.get(ck);
            if (conflict === undefined) {
              conflict = { vi, ri, ovi: prev.vi, ori: prev.ri, protos: new Set(), nics: new Set(), backendPort: rule.backendPort };
              dsrConflicts.set(ck, conflict);
            }
            conflict.protos.add(PROTO_NAME[proto]);
            conflict.nics.add(`${nicName} ${a.addr.text}`);
          }
        }
      }
      return rule;
    });
    return vip;
  });

  for (const k of dsrConflicts.values()) {
    const other = vips[k.ovi];
    const otherRule = other?.rules?.[k.ori];
    const me = vips[k.vi];
    const myRule = me?.rules?.[k.ri];
    const fmtVip = (v: VipP | undefined, r: RuleP | undefined): string => {
      const a = v?.address;
      const text = a === undefined ? '?' : a.family === 6 ? `[${a.text}]` : a.text;
      return `${text}:${r?.frontendPort ?? '?'}`;
    };
    c.add(
      ['vips', k.vi, 'rules', k.ri, 'backendPort'],
      k.backendPort,
      `direct server return is stateless: ${[...k.protos].join('/')} port ${k.backendPort} on ${listNames([...k.nics], 4)} already serves ${fmtVip(other, otherRule)} (vips[${k.ovi}].rules[${k.ori}]), and the host agent could not tell whether a reply from that port belongs to ${fmtVip(other, otherRule)} or ${fmtVip(me, myRule)}; each (nic address, protocol, backendPort) may serve one (VIP, frontendPort), as in Azure without floating IP: use another backendPort`,
    );
  }
  return { vips, vipSeen };
}
