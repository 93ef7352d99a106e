// A mux's or host's underlay subnet: prefixLength and gateway (IPv4), prefixLength6 and gateway6 (IPv6).
// Absent: every provider address is on-link (one L2 segment, as before). With a gateway, provider
// addresses outside address/prefixLength are reached through it (docs/lab.md, routed underlay).
import { inPrefix, type IpAddr } from '../addr.js';
import { has, intField, type Checker, type Obj, type Path } from './check.js';
import { optAddressField } from './addresses.js';

export const UNDERLAY_ROUTE_KEYS = ['prefixLength', 'gateway', 'prefixLength6', 'gateway6'] as const;

export interface UnderlayRouteP {
  prefixLength?: number | null;
  gateway?: IpAddr | null;
  prefixLength6?: number | null;
  gateway6?: IpAddr | null;
}

/** Reads and checks the four fields of one node (`address`/`address6` already read; undefined when invalid). */
export function readUnderlayRoute(
  c: Checker,
  o: Obj,
  at: Path,
  address: IpAddr | undefined,
  address6: IpAddr | null | undefined,
): UnderlayRouteP {
  const one = (plKey: string, gwKey: string, otherGw: string, family: 4 | 6, addr: IpAddr | null | undefined) => {
    const max = family === 4 ? 31 : 127;
    const prefixLength = has(o, plKey) && o[plKey] !== null ? intField(c, o, at, plKey, [1, max], undefined) : null;
    const gateway = optAddressField(c, o, at, gwKey, family, otherGw);
    const addrKey = family === 4 ? 'address' : 'address6';
    if (gateway !== null && gateway !== undefined) {
      if (prefixLength === null) {
        c.add(
          [...at, plKey],
          undefined,
          `required with ${gwKey}: the length of the subnet of ${addrKey} (for example 24), so that provider addresses outside it go through ${gateway.text}`,
        );
      } else if (addr === null) {
        c.add(
          [...at, gwKey],
          gateway.text,
          `needs ${addrKey}: a gateway is for this node's own provider address; set ${addrKey} or remove ${gwKey}`,
        );
      } else if (addr !== undefined && prefixLength !== undefined) {
        if (!inPrefix(gateway, addr, prefixLength)) {
          c.add(
            [...at, gwKey],
            gateway.text,
            `is outside this node's subnet ${addr.text}/${prefixLength}: a gateway must be on-link; use an address in that subnet or widen ${plKey}`,
          );
        } else if (gateway.text === addr.text) {
          c.add([...at, gwKey], gateway.text, `is this node's own provider address; the gateway is the router's address on its subnet`);
        }
      }
    } else if (gateway === null && prefixLength !== null && prefixLength !== undefined) {
      c.add(
        [...at, gwKey],
        undefined,
        `required with ${plKey}: the router on this node's subnet that reaches the other subnets (or remove ${plKey}: every provider address on-link)`,
      );
    }
    return { prefixLength, gateway };
  };
  const v4 = one('prefixLength', 'gateway', 'gateway6', 4, address);
  const v6 = one('prefixLength6', 'gateway6', 'gateway', 6, address6);
  return { prefixLength: v4.prefixLength, gateway: v4.gateway, prefixLength6: v6.prefixLength, gateway6: v6.gateway };
}
