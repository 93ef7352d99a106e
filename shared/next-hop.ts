// The next hop of a provider address on the underlay: the address itself when it is on the node's own
// subnet (or when the node has no gateway: one L2 segment, every provider address on-link), else the
// node's gateway. Pure: the MUX and the host agent resolve the MAC of what this returns (ARP, ND).
import { inPrefix, type IpAddr } from './addr.js';

/** A node's view of its underlay subnet, per family: prefix length and gateway, or null for "all on-link". */
export interface UnderlayRoute {
  readonly address: IpAddr;
  readonly prefixLength: number | null;
  readonly gateway: IpAddr | null;
}

/** True when `dst` is reached directly (on the node's subnet, or the node has no gateway). */
export function isOnLink(route: UnderlayRoute, dst: IpAddr): boolean {
  if (route.gateway === null || route.prefixLength === null) return true;
  return inPrefix(dst, route.address, route.prefixLength);
}

/** The address whose MAC frames to `dst` carry: `dst` itself on-link, else the gateway (RFC 1122 3.3.1.1). */
export function nextHopOf(route: UnderlayRoute, dst: IpAddr): IpAddr {
  return isOnLink(route, dst) ? dst : route.gateway!;
}

/** The per-family routes of a mux or host from its config entry (absent fields: all on-link, as on one segment). */
export function underlayRoutesOf(node: {
  readonly address: IpAddr;
  readonly address6: IpAddr | null;
  readonly prefixLength?: number | null;
  readonly gateway?: IpAddr | null;
  readonly prefixLength6?: number | null;
  readonly gateway6?: IpAddr | null;
}): { v4: UnderlayRoute; v6: UnderlayRoute | null } {
  return {
    v4: { address: node.address, prefixLength: node.prefixLength ?? null, gateway: node.gateway ?? null },
    v6:
      node.address6 === null ? null : { address: node.address6, prefixLength: node.prefixLength6 ?? null, gateway: node.gateway6 ?? null },
  };
}
