// The muxes and hosts sections: provider addresses, unique across both, of the underlay's family.
import type { IpAddr } from '../addr.js';
import { formatPath, itemObj, nameField, type Checker, type Claim, type Path } from './check.js';
import { ipKey, optAddressField, reqAddressField } from './addresses.js';
import { MAX_MUXES_PER_CONTROLLER } from './defaults.js';
import type { Underlay } from './types.js';
import { readUnderlayRoute, UNDERLAY_ROUTE_KEYS, type UnderlayRouteP } from './underlay-routes.js';

const NODE_KEYS = ['name', 'address', 'address6', ...UNDERLAY_ROUTE_KEYS] as const;

export interface NodeP extends UnderlayRouteP {
  name?: string;
  address?: IpAddr;
  address6?: IpAddr | null;
}

export function validateNodes(
  c: Checker,
  muxItems: readonly unknown[],
  hostItems: readonly unknown[],
  underlay: Underlay | undefined,
): { muxes: (NodeP | undefined)[]; hosts: (NodeP | undefined)[] } {
  const providers = new Map<string, Claim>();
  const claimProvider = (a: IpAddr | null | undefined, at: Path, what: string): void => {
    if (a === null || a === undefined) return;
    const prev = providers.get(ipKey(a));
    if (prev !== undefined) {
      c.add(
        at,
        a.text,
        `provider address ${a.text} is already used by ${prev.what} (${prev.path}); every mux and host needs its own provider address`,
      );
    } else {
      providers.set(ipKey(a), { what, path: formatPath(at) });
    }
  };
  const readNodes = (items: readonly unknown[], section: 'muxes' | 'hosts', kind: string): (NodeP | undefined)[] =>
    items.map((it, i) => {
      const at: Path = [section, i];
      const o = itemObj(c, it, at, NODE_KEYS);
      if (o === undefined) return undefined;
      const n: NodeP = {
        name: nameField(c, o, at),
        address: reqAddressField(c, o, at, 'address', 4, 'address6'),
        address6: optAddressField(c, o, at, 'address6', 6, 'address'),
      };
      Object.assign(n, readUnderlayRoute(c, o, at, n.address, n.address6));
      const label = `${kind} ${n.name ?? `${section}[${i}]`}`;
      claimProvider(n.address, [...at, 'address'], label);
      claimProvider(n.address6, [...at, 'address6'], label);
      return n;
    });
  const muxes = readNodes(muxItems, 'muxes', 'mux');
  if (muxItems.length > MAX_MUXES_PER_CONTROLLER) {
    const extra = muxes.slice(MAX_MUXES_PER_CONTROLLER).map((n, j) => n?.name ?? `muxes[${MAX_MUXES_PER_CONTROLLER + j}]`);
    c.add(
      ['muxes', MAX_MUXES_PER_CONTROLLER],
      undefined,
      `one controller supports at most ${MAX_MUXES_PER_CONTROLLER} MUXes (the SLB manager's limit); this config lists ${muxItems.length}: ` +
        `remove ${extra.join(', ')} from muxes, or run ${extra.length === 1 ? 'it' : 'them'} under a second controller with a config of its own`,
    );
  }
  const hosts = readNodes(hostItems, 'hosts', 'host');
  if (underlay === 'ipv6') {
    // the outer header is IPv6 from the MUX's address6 to the host's address6
    for (const [section, list] of [
      ['muxes', muxes],
      ['hosts', hosts],
    ] as const) {
      list.forEach((n, i) => {
        if (n !== undefined && n.address6 === null) {
          c.add(
            [section, i, 'address6'],
            undefined,
            `fabric.underlay is ipv6, so ${section === 'muxes' ? 'mux' : 'host'} ${n.name ?? i} needs an IPv6 provider address (address6), or set fabric.underlay: ipv4`,
          );
        }
      });
    }
  }
  return { muxes, hosts };
}
