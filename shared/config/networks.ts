// The networks section: names, unique VNIs, the gateways the host agents answer for.
import type { IpAddr } from '../addr.js';
import { intField, itemObj, nameField, type Checker, type Claim, type NameTable, type Path } from './check.js';
import { ipKey, optAddressField } from './addresses.js';
import { CONFIG_LIMITS } from './defaults.js';

const NETWORK_KEYS = ['name', 'vni', 'gateway', 'gateway6'] as const;

export interface NetP {
  name?: string;
  vni?: number;
  gateway?: IpAddr | null;
  gateway6?: IpAddr | null;
}

export function validateNetworks(c: Checker, netItems: readonly unknown[]): (NetP | undefined)[] {
  const L = CONFIG_LIMITS;
  const nets: (NetP | undefined)[] = [];
  const vnis = new Map<number, number>();
  netItems.forEach((it, i) => {
    const at: Path = ['networks', i];
    const o = itemObj(c, it, at, NETWORK_KEYS);
    if (o === undefined) return nets.push(undefined);
    const n: NetP = {
      name: nameField(c, o, at),
      vni: intField(c, o, at, 'vni', L.vni, undefined, ' (the 24-bit VXLAN network identifier)'),
      gateway: optAddressField(c, o, at, 'gateway', 4, 'gateway6'),
      gateway6: optAddressField(c, o, at, 'gateway6', 6, 'gateway'),
    };
    if (n.vni !== undefined) {
      const prev = vnis.get(n.vni);
      if (prev !== undefined)
        c.add([...at, 'vni'], n.vni, `VNI ${n.vni} is already used by networks[${prev}]; every network needs its own VNI`);
      else vnis.set(n.vni, i);
    }
    nets.push(n);
  });
  return nets;
}

export function checkGateways(
  c: Checker,
  nets: readonly (NetP | undefined)[],
  netNames: NameTable,
  nicAddrClaims: ReadonlyMap<string, Claim>,
): void {
  // a gateway is answered by the host agents, so no nic in its network may hold that address
  nets.forEach((net, i) => {
    if (net === undefined || net.name === undefined || netNames.names.get(net.name) !== i) return;
    for (const [key, gw] of [
      ['gateway', net.gateway],
      ['gateway6', net.gateway6],
    ] as const) {
      if (gw === null || gw === undefined) continue;
      const prev = nicAddrClaims.get(`${net.name}|${ipKey(gw)}`);
      if (prev !== undefined) {
        c.add(
          ['networks', i, key],
          gw.text,
          `the gateway ${gw.text} is also the address of ${prev.what} (${prev.path}); host agents answer ARP/ND for the gateway, so no nic of the network may use it`,
        );
      }
    }
  });
}
