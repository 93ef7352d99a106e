// The networks section: names, types (vxlan, vlan), unique VNIs and VLAN ids, the gateways the host
// agents answer for.
import type { IpAddr } from '../addr.js';
import { enumField, has, intField, itemObj, nameField, type Checker, type Claim, type NameTable, type Path } from './check.js';
import { ipKey, optAddressField } from './addresses.js';
import { CONFIG_LIMITS } from './defaults.js';
import type { NetworkType } from './types.js';

const NETWORK_KEYS = ['name', 'type', 'vni', 'vlan', 'gateway', 'gateway6'] as const;
export const NETWORK_TYPES: readonly NetworkType[] = ['vxlan', 'vlan'];

export interface NetP {
  name?: string;
  type?: NetworkType;
  vni?: number;
  /** The 802.1Q VLAN id of a vlan network; null for vxlan. */
  vlan?: number | null;
  gateway?: IpAddr | null;
  gateway6?: IpAddr | null;
}

export function validateNetworks(c: Checker, netItems: readonly unknown[]): (NetP | undefined)[] {
  const L = CONFIG_LIMITS;
  const nets: (NetP | undefined)[] = [];
  const vnis = new Map<number, number>();
  const vlans = new Map<number, number>();
  netItems.forEach((it, i) => {
    const at: Path = ['networks', i];
    const o = itemObj(c, it, at, NETWORK_KEYS);
    if (o === undefined) return nets.push(undefined);
    const type = enumField(c, o, at, 'type', NETWORK_TYPES, 'vxlan');
    const n: NetP = {
      name: nameField(c, o, at),
      type,
      vni: intField(
        c,
        o,
        at,
        'vni',
        L.vni,
        undefined,
        type === 'vlan'
          ? ' (the 24-bit VXLAN network identifier the MUXes use toward the hosts; the VMs see the VLAN tag, never the VNI)'
          : ' (the 24-bit VXLAN network identifier)',
      ),
      vlan: null,
      gateway: optAddressField(c, o, at, 'gateway', 4, 'gateway6'),
      gateway6: optAddressField(c, o, at, 'gateway6', 6, 'gateway'),
    };
    if (type === 'vlan') {
      n.vlan = intField(c, o, at, 'vlan', L.vlanId, undefined, ' (the 802.1Q VLAN id of the network; 0 and 4095 are reserved by 802.1Q)');
      // the host agent answers ARP/ND for the gateway on the tagged port and sends the probes from it
      if (n.gateway === null && n.gateway6 === null)
        c.add(
          [...at, 'gateway'],
          undefined,
          "a vlan network needs a gateway (or gateway6): the backends route their replies to it on the VLAN, the host agent answers ARP/ND for it and probes from it; add 'gateway: <an address of the VLAN's subnet that no nic uses>'",
        );
      if (n.vlan !== undefined) {
        const prev = vlans.get(n.vlan);
        if (prev !== undefined)
          c.add(
            [...at, 'vlan'],
            n.vlan,
            `VLAN ${n.vlan} is already networks[${prev}]'s; a VLAN id is one L2 segment, so one network per VLAN id: pick another id`,
          );
        else vlans.set(n.vlan, i);
      }
    } else if (type === 'vxlan' && has(o, 'vlan')) {
      c.add([...at, 'vlan'], o['vlan'], "only a network of 'type: vlan' has a VLAN id: add 'type: vlan' or remove 'vlan'");
    }
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
